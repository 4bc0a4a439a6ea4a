"""`rlab continue`: not built yet."""

from rlab.cli.not_built import not_built


def continue_training() -> None:
    """Not built yet (issue #6)."""
    raise not_built("continue", 6)
