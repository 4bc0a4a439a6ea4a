"""`rlab ls`: not built yet."""

from rlab.cli.not_built import not_built


def list_tags() -> None:
    """Not built yet (issue #6)."""
    raise not_built("ls", 6)
