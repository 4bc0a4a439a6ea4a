"""The GPU tests reuse the training tests' tiny base dir and the eval tests' tokenizer and bundle."""

from tests.evals.conftest import bundle, tokenizer  # noqa: F401  (fixtures, used by name)
from tests.train.conftest import train_base  # noqa: F401
