"""Count tensor memory while real code runs: every storage's bytes over time, and what autograd saves.

`LiveTensors` is a TorchDispatchMode. It sees every tensor an op creates (real or fake: under
`FakeTensorMode` nothing is allocated, so a d20 step at 8 x 8192 tokens is traced in seconds on a
CPU), keeps a running total of the bytes of storages that are alive (a weakref finalizer notices
when one dies), and remembers the moment of the peak and which storages were alive then. Storages
are the unit: views share their base's storage and are counted once.

`SavedTensors` is a `saved_tensors_hooks` pair over the same bookkeeping: each storage autograd
saves for the backward is counted once, in the region (embedding, blocks, head) where it was first
saved. Parameters and the bf16 copies autocast makes of them are kept apart from activations: they
do not grow with the number of tokens.

Nothing here knows about the GPT; `rlab.memory.trace` drives a training step through it.
"""

from __future__ import annotations

import itertools
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# The storage of a freshly made tensor may not be readable (e.g. a sparse or nested tensor): such
# outputs are skipped, which undercounts only for layouts this model does not use.
_UNREADABLE = (RuntimeError, NotImplementedError, AttributeError)

# Ops whose output is a cast copy: a copy of a parameter is a weight copy (autocast caches one per step).
_CASTS = {torch.ops.aten._to_copy.default}


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    try:
        return t.untyped_storage()
    except _UNREADABLE:
        return None


@dataclass
class Peak:
    """The largest total seen, when, and what was alive then (storage token -> bytes)."""

    bytes: int = 0
    phase: str = ""
    alive: dict[int, int] = field(default_factory=dict)


class LiveTensors(TorchDispatchMode):
    """Running total of live storage bytes of tensors created inside it; `peak` is the maximum.

    `round_to` rounds each storage up as an allocator would (the CUDA caching allocator hands out
    multiples of 512 bytes); `phase` is a free-form label of the current stage, recorded with the peak.
    Tensors made before entering are not seen: build the model inside it to count its parameters.
    """

    def __init__(self, round_to: int = 1) -> None:
        super().__init__()
        self.round_to = round_to
        self.phase = ""
        self.live_bytes = 0
        self.peak = Peak()
        self._tokens = itertools.count(1)
        self._by_cdata: dict[int, int] = {}  # live storage (its C++ address) -> token
        self._bytes: dict[int, int] = {}  # token -> bytes, for live storages
        self.weight_copies: set[int] = set()  # tokens of casts of registered parameters
        self.parameters: set[int] = set()
        self._phase_peaks: dict[str, int] = {}

    # --- bookkeeping ---

    def _rounded(self, nbytes: int) -> int:
        return -(-nbytes // self.round_to) * self.round_to

    def token(self, t: torch.Tensor) -> int | None:
        """The token of `t`'s storage if this tracker saw it being made, else None."""
        st = _storage(t)
        return None if st is None else self._by_cdata.get(st._cdata)

    def _add(self, t: torch.Tensor) -> int | None:
        if t.device.type == "meta":  # no memory (a model built on the meta device before it gets storage)
            return None
        st = _storage(t)
        if st is None:
            return None
        key = st._cdata
        if key in self._by_cdata:
            return self._by_cdata[key]
        token = next(self._tokens)
        size = self._rounded(st.nbytes())
        self._by_cdata[key], self._bytes[token] = token, size
        self.live_bytes += size
        weakref.finalize(st, self._free, key, token)
        if self.live_bytes > self.peak.bytes:
            self.peak = Peak(self.live_bytes, self.phase, dict(self._bytes))
        if self.live_bytes > self._phase_peaks.get(self.phase, 0):
            self._phase_peaks[self.phase] = self.live_bytes
        return token

    def _free(self, key: int, token: int) -> None:
        self.live_bytes -= self._bytes.pop(token, 0)
        if self._by_cdata.get(key) == token:
            del self._by_cdata[key]

    def set_phase(self, phase: str) -> None:
        """Label what runs from now on; the phase's peak starts at what is alive now."""
        self.phase = phase
        self._phase_peaks[phase] = max(self._phase_peaks.get(phase, 0), self.live_bytes)

    def phase_peak(self, phase: str) -> int:
        """The largest total reached while `phase` was the label (0 if never)."""
        return self._phase_peaks.get(phase, 0)

    def register_parameters(self, params: Iterator[torch.Tensor]) -> None:
        """Mark these tensors' storages as parameters (static memory, never activations)."""
        for p in params:
            token = self._add(p)
            if token is not None:
                self.parameters.add(token)

    def tokens_of(self, tensors) -> set[int]:
        """Tokens of the live storages of `tensors` (None entries skipped)."""
        return {tok for t in tensors if t is not None and (tok := self.token(t)) is not None}

    # --- the dispatch hook ---

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat, _ = tree_flatten(out)
        for t in flat:
            if isinstance(t, torch.Tensor):
                token = self._add(t)
                if func in _CASTS and token is not None and self.token(args[0]) in self.parameters:
                    self.weight_copies.add(token)
        return out


class SavedTensors:
    """What autograd saves for the backward, by region, each storage counted once (where first saved).

    Use `with saved.hooks(count=...):` around a forward; set `region` as the forward moves through the
    model. Storages the tracker marks as parameters or weight copies go to `weights`, the rest to
    `by_region`. `tokens` collects every saved activation storage of every hooked forward (for the
    peak's breakdown), counted or not.
    """

    def __init__(self, tracker: LiveTensors) -> None:
        self.tracker = tracker
        self.region = "embed"
        self.by_region: Counter[str] = Counter()
        self.weights = 0
        self.tokens: set[int] = set()
        self._counting = False
        self._seen: set[int] = set()

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        token = self.tracker.token(t)
        if token is None:
            token = self.tracker._add(t)  # made outside the tracker's view (e.g. an input): count it now
        if token is None or token in self._seen:
            return t
        self._seen.add(token)
        weight = token in self.tracker.parameters or token in self.tracker.weight_copies
        if not weight:
            self.tokens.add(token)
        if self._counting:
            size = self.tracker._bytes.get(token, 0)
            if weight:
                self.weights += size
            else:
                self.by_region[self.region] += size
        return t

    @contextmanager
    def hooks(self, count: bool = True) -> Iterator[None]:
        """Hook the forward inside; `count` adds what it saves to the totals (the first forward only)."""
        self._counting, self._seen = count, set()
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            yield
        self._counting = False

    @property
    def activations(self) -> int:
        return sum(self.by_region.values())
