"""`rlab sample`: not built yet."""

from rlab.cli.not_built import not_built


def sample() -> None:
    """Not built yet (issue #5)."""
    raise not_built("sample", 5)
