"""What every eval.json section is, and the pieces several evals' sections share.

Each eval's own section model lives in its package (`rlab/evals/<eval>/records.py`) and is named by its
definition; eval.json's `metrics` is built from them (`rlab.records.eval_doc.EvalMetrics`).
"""

from __future__ import annotations

from rlab.records.base import Record


class Section(Record):
    """One eval's section of eval.json. Its two one-line views are what rlab shows of it outside the report:
    `headline` after `rlab eval`, `card_lines` in an exported model's README."""

    def headline(self) -> str | None:
        """The section's headline number, as `rlab eval` prints it when a tag is done (None: nothing to say)."""
        return None

    def card_lines(self) -> list[str]:
        """Bullets for an exported model's README (`rlab.export.card`)."""
        return []


class Skipped(Record):
    length: int
    reason: str


class LongDocsSummary(Record):
    """Which long-document set an eval used (`rlab.data.long_docs`): equal sha256 = the same documents."""

    sha256: str
    docs: int
    tokens: int
    min_tokens: int
    tokenizer_sha256: str
