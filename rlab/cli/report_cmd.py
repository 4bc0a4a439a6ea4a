"""`rlab report`: not built yet."""

from rlab.cli.not_built import not_built


def build_report() -> None:
    """Not built yet (issue #7)."""
    raise not_built("report", 7)
