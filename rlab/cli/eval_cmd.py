"""`rlab eval`: not built yet."""

from rlab.cli.not_built import not_built


def eval_tag() -> None:
    """Not built yet (issue #6)."""
    raise not_built("eval", 6)
