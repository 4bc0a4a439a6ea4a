"""`rlab pretrain`: not built yet."""

from rlab.cli.not_built import not_built


def pretrain() -> None:
    """Not built yet (issue #6)."""
    raise not_built("pretrain", 6)
