"""Data-preparation defaults that the CLI needs at import time (for option defaults).

Kept in a module of its own with no imports, so `rlab --help` does not load the preparation
pipeline (`rlab.data.prepare` re-exports these).
"""

# 4096 tokens: the demo trains tiny models (n_embd 64-128) on 2 CPU cores, where the
# embedding and lm_head (2 x vocab x n_embd parameters) would dominate the model at
# nanochat's 65536; 4096 still compresses English to ~4 chars/token, so sequences stay short.
DEFAULT_VOCAB_SIZE = 4096
