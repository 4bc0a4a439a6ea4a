"""The lm_head + logit soft-cap + cross-entropy as one chunked computation.

Why hand-written: the plain chain `lm_head -> .float() -> cap*tanh(x/cap) -> cross_entropy`
materialises several (tokens x vocab) fp32 tensors and walks each of them in the forward and
again in the backward; on a CPU that memory traffic, not the matmul, was the largest single cost
of a training step (about 150 ms of a 260 ms step at the benchmark config, `make bench`). Here the
rows are processed in chunks small enough to stay in cache, and the gradients of the hidden states
and of the lm_head weight are formed in the same pass (the loss of a training step is always
back-propagated, so nothing is wasted): the backward only scales them by the incoming gradient.
Without grad (evaluation) nothing is kept, so per-token losses at a long context never hold the
full logits tensor either.

Under torch.compile it stays outside the compiled graph (`torch.compiler.disable`: the graph breaks
at the head and this runs eagerly). Traced, the chain would be fused, but the compiled backward would
keep the whole (tokens x vocab) fp32 logits, 136 KiB per token at vocab 65,536 (8 x 8192 tokens: 68
GiB); here the backward keeps only the hidden states' gradient (2 or 4 x width bytes per token) and
the lm_head's (vocab x width, once per step), which becomes that parameter's gradient.

The result equals `GPT.forward`'s plain definition (same matmul dtype under autocast, soft-cap and
softmax in fp32) up to float rounding; `tests/core/test_head_loss.py` checks values and gradients.
"""

from __future__ import annotations

import weakref

import torch
from torch._guards import detect_fake_mode

from rlab.core.precision import autocast_dtype
from rlab.core.target_device import device_type

# Elements of one chunk's (rows x vocab) fp32 block: 8 MiB stays in a CPU's cache; a GPU wants big kernels.
_CHUNK_ELEMENTS = {"cpu": 1 << 21}
_DEFAULT_CHUNK_ELEMENTS = 1 << 27
# The lm_head weight gradient is one matmul per group of chunks (whole batches at small vocabularies): few,
# large matmuls and few fp32 accumulations of the (vocab x width) gradient.
_GROUP_ELEMENTS = 1 << 25


def chunk_rows(device: torch.device, vocab_size: int) -> int:
    """Rows per chunk for this device and vocab size (at least 16)."""
    budget = _CHUNK_ELEMENTS.get(device_type(device), _DEFAULT_CHUNK_ELEMENTS)
    return max(16, budget // vocab_size)


_CPU_SCRATCH: dict[tuple[str, torch.dtype], torch.Tensor] = {}
# Under a FakeTensorMode (the memory planner's traces) each mode keeps its own, so no fake buffer reaches a real run.
_FAKE_SCRATCH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scratch_cache() -> dict[tuple[str, torch.dtype], torch.Tensor]:

    mode = detect_fake_mode()
    return _CPU_SCRATCH if mode is None else _FAKE_SCRATCH.setdefault(mode, {})


def _scratch(name: str, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A (rows x vocab) work buffer. On a CPU it is kept for the next call: freshly allocated multi-MiB
    blocks come back from the OS page by page, which cost about 6% of a training step at the benchmark
    config. GPUs have PyTorch's caching allocator for this."""
    if device_type(device) != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    rows, cols = shape
    cache = _scratch_cache()
    buf = cache.get((name, dtype))
    if buf is None or buf.shape[1] != cols or buf.shape[0] < rows:
        buf = cache[(name, dtype)] = torch.empty(shape, dtype=dtype)
    return buf[:rows]


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    """The dtype the lm_head matmul runs in: autocast's when it is on (as nn.Linear would), else the input's."""
    return autocast_dtype(hidden.device.type) or hidden.dtype


def _chunk_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    valid: torch.Tensor,
    softcap: float,
    sig: torch.Tensor,
    probs: torch.Tensor,
    grad_out: torch.Tensor | None,
) -> torch.Tensor:
    """Per-row losses (n,) of one chunk of raw logits (n, V); with `grad_out`, also d(loss_i)/d(logits) into it.

    The capped logit z = cap * tanh(l / cap) is formed as cap * (2 * sigmoid(2 l / cap) - 1): the same
    value, and a CPU's sigmoid kernel is several times faster than its tanh. `sig` and `probs` are fp32
    scratch of the chunk's shape; ignored rows (valid False) get loss 0 and gradient 0.
    """
    sig.copy_(logits).mul_(2.0 / softcap).sigmoid_()  # s = sigmoid(2 l / cap); z = cap * (2 s - 1)
    probs.copy_(sig).mul_(2.0 * softcap).sub_(softcap).exp_()  # exp(z); |z| <= cap, so no max subtraction
    total = probs.sum(dim=-1, keepdim=True)  # (n, 1)
    rows_t = targets[:, None]  # (n, 1)
    z_target = softcap * (2.0 * sig.gather(1, rows_t).squeeze(1) - 1.0)  # (n,)
    losses = (total.squeeze(1).log() - z_target) * valid
    if grad_out is not None:
        # d loss / d z = softmax - onehot; d z / d l = 1 - tanh^2 = 4 s (1 - s). Row factors first (one pass).
        row_scale = (4.0 * valid) / total.squeeze(1)  # (n,)
        probs.mul_(row_scale[:, None])
        probs.scatter_add_(1, rows_t, (-4.0 * valid)[:, None].to(probs.dtype))
        sig.addcmul_(sig, sig, value=-1.0)  # s (1 - s)
        grad_out.copy_(probs.mul_(sig))  # in the matmul dtype, as autocast's linear backward would see it
    return losses


class _SoftcapCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, hidden, weight, targets, vocab_size: int, softcap: float, reduction: str, need_grad: bool
    ):  # noqa: D102
        dtype = _compute_dtype(hidden)
        device = hidden.device
        n_rows = hidden.size(0)
        h = hidden.to(dtype)  # (N, C)
        w = weight[:vocab_size].to(dtype)  # (V, C), vocab padding rows dropped
        valid = targets != -1  # (N,)
        safe_targets = targets.clamp(min=0)
        losses = torch.empty(n_rows, dtype=torch.float32, device=device)

        step = min(n_rows, chunk_rows(device, vocab_size))
        group = min(n_rows, max(1, _GROUP_ELEMENTS // (vocab_size * step)) * step)
        # Scratch reused by every chunk (and, on a CPU, by the next call).
        logits_buf = _scratch("logits", (step, vocab_size), dtype, device)
        sig_buf = _scratch("sig", (step, vocab_size), torch.float32, device)
        probs_buf = _scratch("probs", (step, vocab_size), torch.float32, device)
        if need_grad:
            grad_h = torch.empty_like(h)  # (N, C)
            grad_w = torch.empty(weight.shape, dtype=torch.float32, device=weight.device)  # (V_pad, C)
            grad_w[vocab_size:].zero_()
            grad_logits_buf = _scratch("grad", (group, vocab_size), dtype, device)
        for g_start in range(0, n_rows, group):
            g_stop = min(n_rows, g_start + group)
            for start in range(g_start, g_stop, step):
                stop = min(g_stop, start + step)
                n = stop - start
                logits = torch.mm(h[start:stop], w.t(), out=logits_buf[:n])  # (n, V)
                grad_out = grad_logits_buf[start - g_start : stop - g_start] if need_grad else None
                losses[start:stop] = _chunk_loss(
                    logits,
                    safe_targets[start:stop],
                    valid[start:stop],
                    softcap,
                    sig_buf[:n],
                    probs_buf[:n],
                    grad_out,
                )
            if need_grad:
                grad_logits = grad_logits_buf[: g_stop - g_start]  # (g, V)
                torch.mm(grad_logits, w, out=grad_h[g_start:g_stop])
                part = grad_logits.t() @ h[g_start:g_stop]  # (V, C)
                if g_start == 0:
                    grad_w[:vocab_size].copy_(part)
                else:
                    grad_w[:vocab_size].add_(part)
        if reduction == "none":
            return losses
        loss = losses.sum()
        if reduction == "mean":
            scale = 1.0 / valid.sum().clamp(min=1)
            loss = loss * scale
            if need_grad:
                grad_h.mul_(scale)
                grad_w.mul_(scale)
        if need_grad:
            ctx.save_for_backward(grad_h, grad_w)
            ctx.hidden_dtype = hidden.dtype
            ctx.consumed = False
        return loss

    @staticmethod
    def backward(ctx, grad_loss):  # noqa: D102
        if ctx.consumed:  # the gradients below are scaled in place, so a second pass would be wrong
            raise RuntimeError("softcap_cross_entropy cannot be back-propagated twice (retain_graph)")
        ctx.consumed = True
        grad_h, grad_w = ctx.saved_tensors
        # In place: the (vocab x width) gradient is handed to the parameter without another allocation.
        return (
            grad_h.mul_(grad_loss).to(ctx.hidden_dtype),
            grad_w.mul_(grad_loss),
            None,
            None,
            None,
            None,
            None,
        )


def softcap_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
    softcap: float,
    reduction: str = "mean",
) -> torch.Tensor:
    """cross_entropy(cap * tanh((hidden @ weight[:vocab_size].T) / cap), targets), ignore_index -1.

    hidden (N, C), weight (V_pad, C), targets (N,) long. reduction "mean" | "sum" | "none"
    ("none" only without gradients: the per-token losses, 0 at ignored targets).
    Under torch.compile it runs eagerly, outside the graph (`_outside_compile`).
    """
    if torch.compiler.is_compiling():
        return _outside_compile()(hidden, weight, targets, vocab_size, softcap, reduction)
    return _head(hidden, weight, targets, vocab_size, softcap, reduction)


_DISABLED: list = []


def _outside_compile():
    """The head wrapped in `torch.compiler.disable`, made at the first compiled call rather than at import:
    that wrapper imports torch._dynamo, which takes about as long as importing torch, and only a compiled
    run needs it (`rlab sample`, the evals and the planners' dry runs do not)."""
    if not _DISABLED:
        _DISABLED.append(torch.compiler.disable(_head))
    return _DISABLED[0]


def prepare_for_compile() -> None:
    """Make the head's `torch.compiler.disable` wrapper before torch.compile traces a model: made during the
    first trace, it changes a global that trace guarded on, and the next step recompiles."""
    _outside_compile()


def _head(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
    softcap: float,
    reduction: str,
) -> torch.Tensor:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be mean, sum or none (got {reduction!r})")
    # Decided here: inside forward() grad mode is always off, and needs_input_grad ignores torch.no_grad().
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    if need_grad and reduction == "none":
        raise ValueError(
            "per-token losses with gradients are not supported; compute them under torch.no_grad()"
        )
    if reduction == "none":
        # Evals score few of the positions they run (BPB vs length: the last B of L; passkey, RULER and CORE:
        # the answer), so the head runs only on the scored rows: the same losses, a fraction of the work.
        scored = (targets != -1).nonzero().squeeze(1)  # (n,)
        if scored.numel() < targets.numel():
            losses = torch.zeros(targets.shape, dtype=torch.float32, device=hidden.device)
            if scored.numel():
                losses[scored] = _SoftcapCrossEntropy.apply(
                    hidden[scored], weight, targets[scored], vocab_size, softcap, reduction, False
                )
            return losses
    return _SoftcapCrossEntropy.apply(hidden, weight, targets, vocab_size, softcap, reduction, need_grad)
