"""One document model for every report (`rlab report`, `rlab compare`), rendered to markdown and to HTML.

A `Document` is a title, blocks (paragraphs, lists, tables, images) and sections of blocks, plus the families of
verdicts it declares. Text is a sequence of `Span`s: plain, `code`, strong, emphasised, or a **verdict**, which
carries its `Verdict` enum; a table `Cell` carries its verdict and whether it is the significant best. Builders
(`rlab.report.build`, `rlab.report.assemble.compare`, `rlab.report.copy_distance.section`) fill the model from the
report's data; `rlab.report.render.markdown` and `rlab.report.render.html_page` only lay it out, so HTML colours a
verdict by its enum and never by reading text back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

from rlab.report.stats.verdicts import Family, Verdict


@dataclass(frozen=True)
class Span:
    """A run of text with one style. A verdict span is shown strong and, in HTML, coloured by `verdict`."""

    text: str
    code: bool = False
    strong: bool = False
    em: bool = False
    verdict: Verdict | None = None


Text = tuple[Span, ...]
Part = Union[str, Span, "tuple[Span, ...]"]


def text(*parts: Part) -> Text:
    """Text from strings (plain), spans and other texts, in order; empty strings dropped."""
    out: list[Span] = []
    for part in parts:
        if isinstance(part, str):
            if part:
                out.append(Span(part))
        elif isinstance(part, Span):
            out.append(part)
        else:
            out.extend(part)
    return tuple(out)


def code(value: str) -> Span:
    return Span(value, code=True)


def strong(value: str) -> Span:
    return Span(value, strong=True)


def verdict(value: Verdict, label: str | None = None) -> Span:
    """A verdict as prose shows it (``better``, ``within noise``, ``no verdict: too few units``)."""
    return Span(value.value if label is None else label, strong=True, verdict=value)


def prose(value: str) -> Text:
    """Prose whose `backticked` words are code (the notation the report's fixed sentences are written in);
    nothing else is read from it."""
    pieces = value.split("`")
    if len(pieces) % 2 == 0:  # an unmatched backtick is a literal one
        return (Span(value),)
    return text(*(code(p) if i % 2 else p for i, p in enumerate(pieces)))


def plain(value: Text) -> str:
    """The words alone (terminal, JSON)."""
    return "".join(s.text for s in value)


@dataclass(frozen=True)
class Cell:
    text: str
    verdict: Verdict | None = None
    """The verdict the cell states (HTML and the terminal colour it)."""
    best: bool = False
    """The significant best of its column (bold)."""
    em: bool = False
    badge: str = ""
    """The verdict's words, shown after the text as a badge (HTML: coloured by `verdict`, on a line of its own;
    markdown: bold)."""
    detail: str = ""
    """A short aside after the badge (``MDE 0.0062``)."""


@dataclass
class Paragraph:
    text: Text
    role: Literal["body", "about", "caption"] = "body"
    """about: what a table measures; caption: the note under a table (markdown italic)."""


@dataclass
class Item:
    text: Text
    tone: Literal["", "warning", "note"] = ""


@dataclass
class Bullets:
    items: list[Item]
    role: Literal["body", "answer"] = "body"


@dataclass
class Numbered:
    items: list[str]


@dataclass
class TableBlock:
    columns: list[str]
    rows: list[list[Cell]]
    align: Literal["report", "plain"] = "report"
    """report: first column left, the others right (``:---`` / ``---:``); plain: no alignment markers."""
    empty: str = "(no data yet)"
    groups: dict[int, str] = field(default_factory=dict)
    """Row index -> the heading of the block of rows that starts there (a full-width row)."""
    links: dict[str, str] = field(default_factory=dict)
    """Column header -> where it links (``#methods``)."""


@dataclass
class Image:
    path: Path
    """The PNG on disk (HTML embeds it)."""
    href: str
    """Where the markdown points, relative to the document (``plots/x.png``)."""
    alt: str
    heading: str | None = None
    """An HTML heading above the figure (markdown shows the alt text only)."""


Block = Union[Paragraph, Bullets, Numbered, TableBlock, Image, "Section", "Marked"]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Marked:
    """Blocks found by name: markdown wraps them in `<!-- name -->` comments (the README quotes the demo's answer
    through them), HTML in a `<div class="name">`."""

    name: str
    blocks: list[Block] = field(default_factory=list)
    beside: Image | None = None
    """A figure HTML shows beside the blocks (wrapping below on a narrow screen); markdown puts it after the
    end marker, so a quote of the marked passage never carries a relative image path."""


@dataclass
class Document:
    title: Text
    blocks: list[Block]
    html_title: str
    """The browser tab's title."""
    families: list[Family] = field(default_factory=list)
    """The declared families of verdicts (shown at a glance in HTML; markdown states them in its text)."""
