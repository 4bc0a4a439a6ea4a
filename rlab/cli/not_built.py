"""Placeholder behaviour for commands whose issue is still open: say so, exit non-zero."""

from rlab.errors import RlabError


def not_built(command: str, issue: int) -> RlabError:
    return RlabError(f"`rlab {command}` is not built yet (issue #{issue}).", "Track progress with `issues show "
                     f"{issue}`.")
