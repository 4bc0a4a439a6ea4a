"""nanochat-2025: token embedding, blocks (q/k/v/proj, MLP), lm_head; rotary base 10000; every layer fully causal.

Read from nanochat d314e96's `nanochat/gpt.py`. rlab's from-scratch models are this generation unless a spec asks
for the other (`pretrain.model.architecture`).
"""

from __future__ import annotations

from rlab.core.architecture import Architecture

NANOCHAT_2025 = Architecture(
    name="nanochat-2025",
    nanochat_commits="d314e96 (2025-12-09)",
    rotary_base=10000.0,
)  # none of the optional parts: the plain GPT the others add to
