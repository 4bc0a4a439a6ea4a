"""Before two tags are compared: were they measured, and trained, the same way?

Per eval section both tags have, their `SectionRun`s must agree on the settings (hash of the settings
that section depends on), the data scored (hash of document ids and text hashes, task files, ...) and
the code version. Across the whole tag, the training budget must agree: checkpoint step, tokens trained,
skipped steps, and the code that trained it. A mismatch blocks every better/worse verdict it touches
(a section's mismatch blocks that section's metrics, a training mismatch all of them), is listed at the
top of the report and in the terminal, and `--allow-mismatch` lifts the block (which the report records).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlab.records.eval_doc import EvalDoc

TRAINING = "training"
"""`Mismatch.section` of a difference in how the checkpoints were trained (blocks every metric)."""


@dataclass(frozen=True)
class Mismatch:
    tag: str
    other: str
    section: str
    """The eval section it concerns, or TRAINING."""
    what: str
    """eval settings | eval data | code version | training budget | training code."""
    detail: str

    def sentence(self) -> str:
        what = self.what if self.section == TRAINING else f"`{self.section}` {self.what}"
        return f"{self.tag} and {self.other} differ in {what} ({self.detail})"


def _settings_detail(a: dict, b: dict) -> str:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return "; ".join(f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys[:4]) or "hashes differ"


def mismatches(a: EvalDoc, b: EvalDoc, *, check_training: bool = True) -> list[Mismatch]:
    """Every way in which tags `a` and `b` were not measured (or trained) alike; empty = comparable."""
    out: list[Mismatch] = []

    def add(section: str, what: str, detail: str) -> None:
        out.append(Mismatch(a.tag, b.tag, section, what, detail))

    for section in sorted(set(a.measured) & set(b.measured)):
        ra, rb = a.measured[section], b.measured[section]
        if ra.settings_hash != rb.settings_hash:
            add(section, "eval settings", _settings_detail(ra.settings, rb.settings))
        if ra.data_hash != rb.data_hash:
            add(section, "eval data", f"{ra.data_hash} vs {rb.data_hash}")
        if ra.code_version.label != rb.code_version.label:
            add(section, "code version", f"{ra.code_version.label} vs {rb.code_version.label}")
    if check_training:
        ca, cb = a.checkpoint, b.checkpoint
        budget = [
            (name, getattr(ca, name), getattr(cb, name))
            for name in ("step", "tokens_trained", "skipped_steps")
        ]
        diff = [f"{name} {x} vs {y}" for name, x, y in budget if x != y]
        if diff:
            add(TRAINING, "training budget", ", ".join(diff))
        if ca.train_code_version != cb.train_code_version:
            add(TRAINING, "training code", f"{ca.train_code_version} vs {cb.train_code_version}")
    return out


def metric_section(metric: str) -> str:
    """The eval section a report metric comes from (train_bpb -> bpb, bpb_len_512 -> bpb_length, ...)."""
    if metric in ("train_bpb", "val_bpb"):
        return "bpb"
    if metric.startswith("bpb_len_") or metric in ("primary_bpb", "extension_bpb"):  # primary: BPB at length
        return "bpb_length"
    if metric.startswith("passkey"):
        return "passkey"
    return metric


def blocks(found: list[Mismatch], metric: str) -> bool:
    """True when a mismatch in `found` concerns `metric` (its section, or training)."""
    section = metric_section(metric)
    return any(m.section in (TRAINING, section) for m in found)
