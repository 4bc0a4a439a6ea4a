"""Batched text generation with a KV cache (for `rlab sample` and the passkey eval, which also scores
candidate answers from the same cache).

One prompt is prefilled for `num_samples` rows at once, then tokens are decoded one step at a
time against the cache. Design points, each a lesson from reference implementations:

* every row samples its own next token, the first one included: rows are never given one
  shared sample (that would make "4 samples" four copies of the same text);
* temperature 0 is greedy argmax; `top_k` keeps the k largest logits before sampling;
* logits are checked on the host side every step: non-finite values, or a distribution that
  sums to zero after temperature/top-k, raise an `EvalError` naming the model (tag and step)
  and the step, instead of a CUDA device-side assert inside `torch.multinomial`;
* RoPE positions continue from the cache position (`KVCache.pos`), so decoding past the
  cached length (and past the training length) uses the same positions as one full forward.
  The tests check that cached decoding equals recomputing the full forward every step;
* memory: the prefill computes logits for its last position only (fp32 logits for every prompt
  position would take 4 GiB per row at 16k tokens), and the cache keeps keys and values in the
  dtype they come in (bf16 under a GPU's autocast).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from rlab.core.checkpoint import load_model
from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.core.gpt import KVCache
from rlab.core.tokenizer import Tokenizer
from rlab.errors import EvalError
from rlab.paths import BaseLayout

log = logging.getLogger(__name__)


def sample_next(
    logits: torch.Tensor,
    generator: torch.Generator | None,
    temperature: float,
    top_k: int | None,
    *,
    name: str = "model",
    step: int = 0,
) -> torch.Tensor:
    """Next token per row from logits (B, V) -> (B,) long; a clear error on a bad distribution."""
    if not bool(torch.isfinite(logits).all()):
        bad_rows = (~torch.isfinite(logits)).any(dim=-1).nonzero().flatten().tolist()
        raise EvalError(
            f"{name}: non-finite logits at generation step {step} (rows {bad_rows}).",
            "The checkpoint may hold NaN/inf weights or overflow in this dtype; evaluate an earlier step "
            "or run in float32.",
        )
    if temperature < 0:
        raise EvalError(f"temperature must be >= 0 (got {temperature}).")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k > 0 and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    sums = probs.sum(dim=-1)
    if not bool(torch.isfinite(probs).all()) or bool((sums <= 0).any()):
        raise EvalError(
            f"{name}: the sampling distribution at generation step {step} is all zero or not finite "
            f"(temperature {temperature}, top_k {top_k}).",
            "Use a larger temperature, or temperature 0 for greedy decoding.",
        )
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


class Engine:
    """Generate from a GPT with a KV cache. `name` (e.g. "d20-pi step 21400") labels errors."""

    def __init__(self, model, name: str = "model") -> None:
        self.model = model
        self.name = name

    def _device(self) -> torch.device:
        try:
            return next(self.model.parameters()).device
        except (StopIteration, AttributeError):
            return torch.device("cpu")

    def _new_cache(self, batch_size: int, total_len: int, device: torch.device) -> KVCache:
        """A cache in the dtype the keys come in (bf16 under a GPU's autocast, fp32 on a CPU)."""
        cfg = self.model.config
        return KVCache(
            batch_size=batch_size,
            num_kv_heads=cfg.n_kv_head,
            head_dim=cfg.n_embd // cfg.n_head,
            num_layers=cfg.n_layer,
            device=device,
            seq_len=total_len,
        )

    def prefill(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run the prompts ids (B, T0) into `cache`; the logits (B, V) of their last position (the only
        ones computed)."""
        return self.model(ids, kv_cache=cache, last_logits=True)[:, -1, :]  # (B, V)

    @torch.no_grad()
    def generate(
        self,
        prompt: Sequence[int],
        num_samples: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 42,
        stop_tokens: Sequence[int] = (),
    ) -> list[list[int]]:
        """New tokens of each of `num_samples` rows (prompt excluded); a row ends at a stop token
        (which is kept) or after `max_tokens`."""
        if not prompt:
            raise EvalError("Cannot generate from an empty prompt.", "Prepend BOS at least.")
        if num_samples < 1 or max_tokens < 0:
            raise EvalError(
                f"num_samples must be >= 1 and max_tokens >= 0 (got {num_samples}, {max_tokens})."
            )
        device = self._device()
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        stops = set(int(t) for t in stop_tokens)
        rows: list[list[int]] = [[] for _ in range(num_samples)]
        if max_tokens == 0:
            return rows
        cache = self._new_cache(num_samples, len(prompt) + max_tokens, device)
        ids = torch.tensor([list(prompt)] * num_samples, dtype=torch.long, device=device)  # (B, T0)
        logits = self.prefill(ids, cache)  # (B, V)
        done = [False] * num_samples
        for step in range(max_tokens):
            nxt = sample_next(logits, generator, temperature, top_k, name=self.name, step=step)  # (B,)
            for r, tok in enumerate(nxt.tolist()):
                if not done[r]:
                    rows[r].append(tok)
                    done[r] = tok in stops
            if all(done) or step == max_tokens - 1:
                break
            logits = self.model(nxt.view(num_samples, 1), kv_cache=cache)[:, -1, :]  # (B, V)
        return rows

    @torch.no_grad()
    def greedy(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> list[list[int]]:
        """Greedy continuations (`max_tokens` each) of several prompts of the SAME length, one batch.

        Evals with many prompts of one length (passkey, RULER-style tasks) prefill them together;
        each row decodes exactly as `generate(prompt, temperature=0)` would (same positions and
        frequencies: the cache plans prompt length + max_tokens for every row).
        """
        return self.greedy_and_choices(prompts, max_tokens)[0]

    @torch.no_grad()
    def greedy_and_choices(
        self,
        prompts: Sequence[Sequence[int]],
        max_tokens: int,
        choices: Sequence[Sequence[Sequence[int]]] = (),
        seq_len: int | None = None,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """`greedy`, and from the same prefill the mean log-probability per token of each candidate
        continuation `choices[b][j]` of prompt b (every row the same number of candidates).

        Likelihood-scored retrieval reads a few candidate tokens after a long prompt: run after the
        prompt's cached keys and values, they cost a few tokens each instead of another pass over the
        prompt. Each candidate restarts from the prompt's cache position (later tokens never reach
        earlier ones, so right-padding a shorter candidate changes nothing). `seq_len`: the length
        length-dependent RoPE variants are evaluated at (default prompt + max_tokens, as `greedy`).
        """
        if not prompts or not prompts[0]:
            raise EvalError("Cannot generate from an empty prompt.", "Prepend BOS at least.")
        if len({len(p) for p in prompts}) != 1:
            raise EvalError("Engine.greedy needs prompts of one length (pad or group them by length).")
        device = self._device()
        B, T0 = len(prompts), len(prompts[0])
        rows: list[list[int]] = [[] for _ in range(B)]
        if max_tokens <= 0 and not choices:
            return rows, []
        cache = self._new_cache(B, seq_len or T0 + max_tokens, device)
        ids = torch.tensor([list(p) for p in prompts], dtype=torch.long, device=device)  # (B, T0)
        logits = self.prefill(ids, cache)  # (B, V)
        scores = self._choice_scores(logits, cache, choices) if choices else []
        for step in range(max_tokens):
            nxt = sample_next(logits, None, 0.0, None, name=self.name, step=step)  # (B,)
            for r, tok in enumerate(nxt.tolist()):
                rows[r].append(tok)
            if step == max_tokens - 1:
                break
            logits = self.model(nxt.view(B, 1), kv_cache=cache)[:, -1, :]  # (B, V)
        return rows, scores

    def _choice_scores(
        self, last: torch.Tensor, cache: KVCache, choices: Sequence[Sequence[Sequence[int]]]
    ) -> list[list[float]]:
        """Mean log-probability per token of every candidate after the cached prompts (`last`: the prompts'
        last logits (B, V)); the cache is left as the prefill left it. One forward per candidate index, every
        prompt's candidate in one batch (measured on the demo's model: repeating the cache to score several
        candidates per forward costs more in copies than it saves in forwards)."""
        B, device = last.size(0), last.device
        pos, prev = cache.pos, cache.prev_embedding
        first = torch.log_softmax(last.float(), dim=-1)  # (B, V): each candidate's first token
        out = [[0.0] * len(choices[b]) for b in range(B)]
        for j in range(len(choices[0])):
            cands = [list(choices[b][j]) for b in range(B)]
            total = first.gather(1, torch.tensor([[c[0]] for c in cands], device=device))[:, 0]  # (B,)
            width = max(len(c) for c in cands)
            if (
                width > 1
            ):  # tokens 0..m-2 of each candidate predict tokens 1..m-1; right padding reaches nothing
                ids = torch.tensor([c[:-1] + [c[0]] * (width - len(c)) for c in cands], device=device)
                cache.pos, cache.prev_embedding = pos, prev
                logp = torch.log_softmax(self.model(ids, kv_cache=cache).float(), dim=-1)  # (B, width-1, V)
                targets = torch.tensor([c[1:] + [0] * (width - len(c)) for c in cands], device=device)
                picked = logp.gather(2, targets[..., None])[..., 0]  # (B, width-1)
                lens = torch.tensor([len(c) - 1 for c in cands], device=device)
                keep = torch.arange(width - 1, device=device)[None, :] < lens[:, None]
                total = total + (picked * keep).sum(dim=1)
            for b, (c, v) in enumerate(zip(cands, total.tolist())):
                out[b][j] = v / len(c)
        cache.pos, cache.prev_embedding = pos, prev
        return out


def sample_checkpoint(
    base_dir,
    tag: str,
    prompt: str,
    *,
    step: int | None = None,
    num_samples: int = 1,
    max_tokens: int = 64,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 42,
    device: str | None = None,
) -> tuple[list[str], CheckpointMeta]:
    """Load `tag` (newest complete step unless `step`) and continue `prompt` `num_samples` times.

    Returns the decoded continuations and the checkpoint meta. BOS is prepended to the prompt,
    and a row stops early at BOS (the start of a new document).
    """

    layout = BaseLayout(Path(base_dir))
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = Tokenizer.from_directory(layout.tokenizer_dir)
    model, meta = load_model(layout.checkpoint_dir(tag), step, dev)
    model.eval()
    engine = Engine(model, name=f"{tag} step {meta.step}")
    bos = tokenizer.bos_token_id
    rows = engine.generate(
        tokenizer.encode(prompt, prepend=bos),
        num_samples=num_samples,
        max_tokens=max_tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        stop_tokens=[bos],
    )
    texts = [tokenizer.decode([t for t in row if t != bos]) for row in rows]
    return texts, meta
