"""Where each layer's positions come from: its rotary tables and its attention mask or sliding window.

Per layer, because a RoPE variant may leave the short-window layers plain (`layers: global`) and windowed
layers (nanochat-2026) see only the last `window` tokens. The tables and FlexAttention block masks are built
lazily and cached on the model, never saved; `precompute_tables` builds them before torch.compile traces the
model. `LayerPositions` is a part of `rlab.core.gpt.GPT` and adds no parameters, so state-dict keys are the
model's alone.
"""

from __future__ import annotations

import logging

import torch
from torch.nn.attention.flex_attention import BlockMask

from rlab.core import rope as rope_lib
from rlab.core.architecture import Architecture, eval_window_sizes, full_context_layers
from rlab.core.attention import SlidingWindow, WindowKernel, use_flex, window_block_mask
from rlab.core.gpt_config import GPTConfig
from rlab.core.precision import autocast_dtype
from rlab.spec.eval import AttentionWindows
from rlab.spec.rope import RopeSpec

log = logging.getLogger("rlab.core.gpt")  # the model's log lines keep the model's name


class LayerPositions:
    """Rotary tables and attention masks per layer, as a part of `rlab.core.gpt.GPT` (which sets these)."""

    config: GPTConfig
    arch: Architecture
    rope: RopeSpec
    window_kernel: WindowKernel  # how sliding-window layers attend (rlab.core.attention)
    window_sizes: list[int | None]  # per layer, as trained (at config.sequence_len)
    eval_windows: AttentionWindows
    _block_masks: dict[tuple[int, int, int, str], BlockMask]  # FlexAttention's, by shape
    _rotary: rope_lib.RotaryTables
    _plain_rotary: rope_lib.RotaryTables | None
    _plain_layers: list[bool]
    _softmax_scales: list[float]

    @property
    def native_rotary_base(self) -> float:
        """The base this model was trained with: a variant that leaves its base to the checkpoint gets it."""
        return float(self.config.rotary_base or self.arch.rotary_base)

    def set_rope(self, rope: RopeSpec) -> None:
        """Swap the RoPE variant (weights untouched); tables are rebuilt lazily at the next forward.

        Fills the spec's L0 (the config's sequence_len) and base (the config's, else the architecture's)
        when left to the checkpoint, and sets each layer's attention window (None = unlimited): windows follow
        `config.sequence_len` (rope.windows == "scale") or stay at the sizes for L0 ("fixed").
        """
        self.rope = rope.with_original_len(self.config.sequence_len).with_base(self.native_rotary_base)
        head_dim = self.config.head_dim
        self._rotary = rope_lib.RotaryTables(self.rope, head_dim)
        # `layers: global` leaves the short-window layers plain rope (they get their own tables and scale)
        self._plain_layers = [not self.rope.scales_layer(g) for g in self.global_layers()]
        plain = self.rope.plain()
        self._plain_rotary = rope_lib.RotaryTables(plain, head_dim) if any(self._plain_layers) else None
        self._softmax_scales = [
            rope_lib.softmax_scale(plain if p else self.rope, head_dim) for p in self._plain_layers
        ]
        self.window_sizes = self.windows_at(self.config.sequence_len)  # as trained
        if self.rope.variant.value != "rope":
            log.info("RoPE variant %s", self.rope.describe())

    def set_eval_windows(self, rule: AttentionWindows) -> None:
        """How windowed layers meet inputs longer than sequence_len (`eval.attention_windows`); the model
        starts "capped" (nanochat's behaviour), evals choose (`rlab.core.architecture.eval_window_sizes`)."""
        self.eval_windows = rule

    def windows_at(self, length: int) -> list[int | None]:
        """Per layer, the attention window for an input of `length` tokens (None = unlimited: no windows)."""
        if not self.arch.sliding_windows:
            return [None] * self.config.n_layer
        c = self.config
        trained = (
            c.sequence_len if self.rope.windows == "scale" else rope_lib.required_original_len(self.rope)
        )
        return list(
            eval_window_sizes(c.window_pattern, c.n_layer, c.sequence_len, trained, length, self.eval_windows)
        )

    def global_layers(self) -> list[bool]:
        """Per layer, whether it attends over the full context (an L layer; every layer without windows)."""
        if not self.arch.sliding_windows:
            return [True] * self.config.n_layer
        return full_context_layers(self.config.window_pattern, self.config.n_layer)

    def _rotations(
        self, start: int, T: int, device, freq_len: int | None, positions: torch.Tensor | None = None
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, cos and sin for positions start .. start+T-1 ((1, T, 1, d/2) each), or at
        `positions` (B, T) ((B, T, 1, d/2) each): the variant's, or plain rope's where it leaves a layer.

        fp32, or under autocast in its dtype (what q and k come in): cast once here, every layer shares the
        cast (cast in each layer, each would keep its own copy for the backward, 256 bytes/token/layer at
        head_dim 128). The tables themselves stay fp32."""
        low = autocast_dtype(torch.device(device).type)

        def rotation(tables: rope_lib.RotaryTables) -> tuple[torch.Tensor, torch.Tensor]:
            if positions is None:
                cos, sin = tables.get(start, T, device, freq_len)
            else:
                cos, sin = tables.get(0, int(positions.max()) + 1, device, freq_len)  # (1, P, 1, d/2)
                cos, sin = cos[0, positions], sin[0, positions]
            return (cos.to(low), sin.to(low)) if low is not None else (cos, sin)

        scaled = rotation(self._rotary)
        if self._plain_rotary is None:
            return [scaled] * self.config.n_layer
        plain = rotation(self._plain_rotary)
        return [plain if p else scaled for p in self._plain_layers]

    def _layer_masks(
        self,
        T: int,
        start: int,
        device,
        attn_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        length: int | None = None,
    ) -> list[torch.Tensor | SlidingWindow | None]:
        """Per layer, the attention mask: packed rows' bool (B, 1, T, T) (True = may attend), a
        `SlidingWindow` for a windowed layer, or None for the plain causal rule. A window w lets query
        position p see key positions p-w .. p (nanochat's `0 <= i - j <= w`); it is dropped where no query
        could reach past it. `length` is the input length the windows are sized for (`windows_at`; default
        start + T, a KV cache passes its planned length)."""
        banded: dict[int | None, torch.Tensor | SlidingWindow | None] = {None: attn_mask}
        masks = []
        for w in self.windows_at(length if length is not None else start + T):
            if w is not None and w not in banded:  # None (no window) is always there
                if attn_mask is not None:  # packed rows: distances are between rotary positions
                    pos = (
                        positions
                        if positions is not None
                        else torch.arange(T, device=device)[None].expand(attn_mask.size(0), -1)
                    )
                    near = (pos[:, :, None] - pos[:, None, :]) <= w  # (B, T, T)
                    banded[w] = attn_mask & near[:, None]
                elif start + T - 1 <= w:
                    banded[w] = None
                else:
                    banded[w] = self._window(w, T, start, torch.device(device))
            masks.append(banded[w])
        return masks

    def _window(self, window: int, T: int, start: int, device: torch.device) -> SlidingWindow:
        """The `SlidingWindow` of a layer; on the FlexAttention path its block mask comes from the cache
        (`precompute_tables` fills it before torch.compile traces the model)."""
        if not use_flex(self.window_kernel, device):
            return SlidingWindow(window, T, start, device)
        block_mask = None
        if T > 1:  # one decoding step reads the window's keys instead
            key = (window, T, start, str(device))
            block_mask = self._block_masks.get(key)
            if block_mask is None:
                if len(self._block_masks) >= 64:  # evals at many lengths, chunked prefill: keep it bounded
                    self._block_masks.clear()
                block_mask = self._block_masks[key] = window_block_mask(window, T, start, device)
        return SlidingWindow(window, T, start, device, flex=True, block_mask=block_mask)

    def precompute_tables(self, seq_len: int, device: torch.device | str) -> None:
        """Build the rotary tables and FlexAttention block masks rows of `seq_len` tokens use, before
        torch.compile traces the model: built inside the compiled forward they would be a mutation of the
        model there, and step 2 would recompile."""
        self._rotations(0, seq_len, device, seq_len)
        if use_flex(self.window_kernel, torch.device(device)):
            self._layer_masks(seq_len, 0, device)
