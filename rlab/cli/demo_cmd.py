"""`rlab demo`: not built yet."""

from rlab.cli.not_built import not_built


def run_demo() -> None:
    """Not built yet (issue #7)."""
    raise not_built("demo", 7)
