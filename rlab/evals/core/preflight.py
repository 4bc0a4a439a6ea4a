"""CORE's checks before `rlab eval` starts a worker: the task selection and the bundle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlab.errors import RlabError
from rlab.evals.core.bundle import check_task_selection, no_bundle_error
from rlab.evals.core.settings import CoreSettings
from rlab.paths import BaseLayout, find_eval_bundle

if TYPE_CHECKING:
    from rlab.spec.eval import EvalSpec


def preflight(settings: EvalSpec, base: BaseLayout) -> RlabError | None:
    """A typo in `eval.core_tasks` is raised here, not in the worker. No bundle is returned: a dry run says how to
    get one, a run refuses before it starts."""
    check_task_selection(settings, base.root)
    if find_eval_bundle(base.root, CoreSettings.of(settings).core_bundle) is not None:
        return None
    return no_bundle_error(base.root)
