"""The model's shape, `GPTConfig`: nanochat's `model_config` plus the architecture generation and rotary base.

Its own module so that the parts the model is built from (`rlab.core.layer_positions`) read the shape without
importing the model, and torch-free, so that reading a checkpoint's shape (a dry run, `rlab ls`) imports no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from rlab.core.architecture import DEFAULT_WINDOW_PATTERN, NANOCHAT_CONFIG_KEYS, window_sizes
from rlab.core.rope_frequencies import check_head_dim
from rlab.errors import SpecError
from rlab.nanochat.generations import DEFAULT_ARCHITECTURE, get_architecture

VOCAB_PAD_MULTIPLE = 64  # nanochat pads the vocab so the lm_head matmul tiles well on GPUs


@dataclass
class GPTConfig:
    """Model shape; mirrors nanochat's meta["model_config"], so a nanochat meta JSON builds the right model."""

    sequence_len: int = 1024  # training context length; the default original length L0 for RoPE scaling
    vocab_size: int = 50304  # real vocab size (wte/lm_head are padded up to a multiple of 64)
    n_layer: int = 12  # transformer blocks
    n_head: int = 6  # query heads
    n_kv_head: int = 6  # key/value heads (GQA: n_head must be a multiple of it)
    n_embd: int = 768  # residual width; head_dim = n_embd // n_head
    window_pattern: str = DEFAULT_WINDOW_PATTERN  # nanochat-2026: S/L per layer, tiled, the last layer L
    architecture: str = DEFAULT_ARCHITECTURE  # which optional parts exist (`rlab.nanochat.generations`)
    rotary_base: float | None = (
        None  # the model's own RoPE base (from its checkpoint); None = the architecture's
    )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPTConfig:
        """Build from a dict such as nanochat's `model_config`; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def nanochat_dict(self) -> dict[str, Any]:
        """meta["model_config"] exactly as nanochat of this generation writes it (its GPTConfig takes no other key)."""
        d = {k: getattr(self, k) for k in NANOCHAT_CONFIG_KEYS}
        if get_architecture(self.architecture).sliding_windows:
            d["window_pattern"] = self.window_pattern
        return d

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def padded_vocab_size(self) -> int:
        return -(-self.vocab_size // VOCAB_PAD_MULTIPLE) * VOCAB_PAD_MULTIPLE

    def validate(self) -> None:
        """One-line errors naming the field; `assert` is not for user input."""
        for name in NANOCHAT_CONFIG_KEYS:
            if getattr(self, name) <= 0:
                raise SpecError(f"model_config.{name}: must be > 0 (got {getattr(self, name)})")
        if self.n_embd % self.n_head:
            raise SpecError(
                f"model_config.n_embd: must be divisible by n_head={self.n_head} (got {self.n_embd})"
            )
        if self.n_head % self.n_kv_head:
            raise SpecError(
                f"model_config.n_kv_head: must divide n_head={self.n_head} (got {self.n_kv_head})"
            )
        get_architecture(self.architecture)
        window_sizes(self.window_pattern, self.n_layer, self.sequence_len)  # checks the pattern's letters
        check_head_dim(self.head_dim)
