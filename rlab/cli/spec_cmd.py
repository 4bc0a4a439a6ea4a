"""`rlab validate` and `rlab schema`: not built yet."""

from rlab.cli.not_built import not_built


def validate() -> None:
    """Not built yet (issue #6)."""
    raise not_built("validate", 6)


def schema() -> None:
    """Not built yet (issue #6)."""
    raise not_built("schema", 6)
