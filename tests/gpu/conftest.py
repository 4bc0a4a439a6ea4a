"""The GPU tests reuse the eval tests' tokenizer and bundle (and `train_base` from tests/conftest.py).

The CORE tests need a CORE bundle (the tests' subset in tests/fixtures/eval_bundle): where it is absent
they skip, saying so, instead of failing at load time.
"""

import pytest

from rlab.evals.core.bundle import load_bundle
from tests.conftest import EVAL_BUNDLE_DIR
from tests.evals.conftest import tokenizer  # noqa: F401  (fixture, used by name)


@pytest.fixture(scope="session")
def bundle():
    if not (EVAL_BUNDLE_DIR / "core.yaml").is_file():
        pytest.skip(f"no CORE bundle at {EVAL_BUNDLE_DIR} (core.yaml): the CORE GPU tests need one")

    return load_bundle(EVAL_BUNDLE_DIR)
