"""Count what autograd keeps for the backward of a training step, with saved-tensor hooks.

`saved_bytes(model, run)` runs `run()` (a forward that returns the loss) under
`torch.autograd.graph.saved_tensors_hooks` and adds up the bytes of every distinct storage packed for the
backward, parameters excluded (they exist anyway). Compiled graphs save through the same hooks, so the
count covers eager and torch.compile alike.

Per-token figures are slopes: the bytes at two token counts, differenced, divided by the token
difference, so that what does not grow with the batch (cast weight copies, the lm_head's gradient)
drops out. `python -m tests.core.saved_bytes` prints the before/after table of the memory work at a
d20-like width (see `main`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from rlab.core.gpt import GPT, GPTConfig

KIB = 1024


def saved_bytes(model: torch.nn.Module, run: Callable[[], torch.Tensor]) -> int:
    """Bytes of the distinct non-parameter storages autograd saves while `run()` builds its graph."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params and ptr != 0:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    loss.backward()  # the graph is consumed, as in training
    model.zero_grad(set_to_none=True)
    return sum(seen.values())


def per_token(model: torch.nn.Module, step: Callable[[int], torch.Tensor], t1: int, t2: int) -> float:
    """Saved bytes per token: (bytes at t2 tokens - bytes at t1 tokens) / (t2 - t1); `step(T)` returns a loss."""
    b1 = saved_bytes(model, lambda: step(t1))
    b2 = saved_bytes(model, lambda: step(t2))
    return (b2 - b1) / (t2 - t1)


def head_and_layer_bytes(
    make_model: Callable[[int], torch.nn.Module],
    vocab: int,
    t1: int,
    t2: int,
    compile_backend: str | None = None,
    amp: bool = False,
    per_layer: bool = True,
) -> tuple[float, float | None]:
    """(head bytes/token, bytes/token/layer or None without `per_layer`) of a training step of
    `make_model(n_layer)`.

    Head: a 1-layer model's loss step minus its trunk-only step (`hidden_states`). Per layer: the
    2-layer trunk minus the 1-layer trunk. Each figure is a slope over t1 -> t2 tokens (batch 1).
    """
    gen = torch.Generator().manual_seed(0)
    figures = {}
    for n_layer in (1, 2) if per_layer else (1,):
        model = make_model(n_layer)
        # as the trainer does: tables made mid-trace would be saved once (code before precompute_tables:
        # an eager forward at t2 builds them)
        if hasattr(model, "precompute_tables"):
            model.precompute_tables(t2, "cpu")
        else:
            with torch.no_grad():
                model(torch.zeros(1, t2, dtype=torch.long))
        loss_fn: Callable = model
        trunk_fn: Callable = model.hidden_states
        if compile_backend is not None:
            torch._dynamo.reset()
            loss_fn = torch.compile(model, backend=compile_backend, dynamic=False)
            trunk_fn = torch.compile(model.hidden_states, backend=compile_backend, dynamic=False)

        def ctx() -> torch.autocast:
            return torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)

        def loss_step(T: int, loss_fn: Callable = loss_fn) -> torch.Tensor:
            x = torch.randint(0, vocab, (1, T), generator=gen)
            with ctx():
                return loss_fn(x, x)

        def trunk_step(T: int, trunk_fn: Callable = trunk_fn) -> torch.Tensor:
            x = torch.randint(0, vocab, (1, T), generator=gen)
            with ctx():
                return trunk_fn(x).float().sum()  # a sum keeps nothing per token

        figures[("trunk", n_layer)] = per_token(model, trunk_step, t1, t2)
        if n_layer == 1:
            figures["loss"] = per_token(model, loss_step, t1, t2)
    head = figures["loss"] - figures[("trunk", 1)]
    layer = figures[("trunk", 2)] - figures[("trunk", 1)] if per_layer else None
    return head, layer


def main() -> None:
    """Head and per-layer saved KiB/token of a d20-wide model (1280 = 10 heads of 128, vocab 65,536) at a
    short sequence under CPU bf16 autocast; `--stream bf16` forces the GPU's bf16 stream. Run it against
    another checkout (PYTHONPATH) for a before/after table."""

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--backend", default="none", help="torch.compile backend (none = eager)")
    parser.add_argument("--stream", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--architecture", default="nanochat-2025")
    parser.add_argument("--t1", type=int, default=64)
    parser.add_argument("--t2", type=int, default=128)
    parser.add_argument("--per-layer", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    vocab = 65536

    def make(n_layer: int) -> torch.nn.Module:
        torch.manual_seed(0)
        config = GPTConfig(
            sequence_len=2048,
            vocab_size=vocab,
            n_layer=n_layer,
            n_head=10,
            n_kv_head=10,
            n_embd=1280,
            architecture=args.architecture,
        )
        model = GPT(config)
        model.init_weights()
        if args.stream == "bf16":
            model.set_stream_dtype(torch.bfloat16)
        return model

    backend = None if args.backend == "none" else args.backend
    head, layer = head_and_layer_bytes(
        make, vocab, args.t1, args.t2, backend, amp=True, per_layer=args.per_layer
    )
    print(
        f"backend {args.backend}, stream {args.stream}: head {head / KIB:.2f} KiB/token"
        + (f", {layer / KIB:.2f} KiB/token/layer" if layer is not None else "")
    )


if __name__ == "__main__":
    main()
