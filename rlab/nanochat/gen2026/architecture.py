"""nanochat-2026: on top of 2025, the parts nanochat added between a825e63 and 92d63d4 (`nanochat/gpt.py`).

Value embeddings on alternating layers (the last always) mixed into v by a per-head gate; per-layer
`resid_lambdas` / `x0_lambdas` mixing the residual stream with the first (normed) embedding; a smear gate
mixing the previous token's embedding in; a backout term subtracting the residual after layer n_layer // 2
before the final norm; sliding-window attention by `window_pattern` (stored in meta's model_config); q and k
scaled by 1.2 after the QK-norm; rotary base 100000.
"""

from __future__ import annotations

from rlab.core.architecture import Architecture

NANOCHAT_2026 = Architecture(
    name="nanochat-2026",
    nanochat_commits="a825e63 (2026-03-14) .. 92d63d4 (2026-07-03)",
    rotary_base=100000.0,
    qk_scale=1.2,
    value_embeds=True,
    residual_scalars=True,
    smear=True,
    backout=True,
    sliding_windows=True,
)
