"""One document model for every report (`rlab report`, `rlab compare`), rendered to markdown and to HTML.

A `Document` is a title, blocks (paragraphs, lists, tables, images) and sections of blocks, plus the families of
verdicts it declares. Text is a sequence of `Span`s: plain, `code`, strong, emphasised, or a **verdict**, which
carries its `Verdict` enum; a table `Cell` carries its verdict and whether it is the significant best. Builders
(`rlab.report.build`, `rlab.report.compare`, `rlab.report.copy_distance`) fill the model from the report's data;
`to_markdown` and `to_html` only lay it out, so HTML colours a verdict by its enum and never by reading text back.
The markdown is GitHub's: pipe tables, `**strong**`, `_em_`, images by relative path. The HTML is one
self-contained file: CSS inline, images embedded as base64 PNGs.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Union

from rlab.report.inference import Family, Verdict


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


@dataclass
class Document:
    title: Text
    blocks: list[Block]
    html_title: str
    """The browser tab's title."""
    families: list[Family] = field(default_factory=list)
    """The declared families of verdicts (shown at a glance in HTML; markdown states them in its text)."""


# ---------------------------------------------------------------- markdown


def md_text(value: Text) -> str:
    out = []
    for s in value:
        t = f"`{s.text}`" if s.code else s.text
        if s.strong or s.verdict is not None:
            t = f"**{t}**"
        elif s.em:
            t = f"_{t}_"
        out.append(t)
    return "".join(out)


def _md_cell(cell: Cell) -> str:
    t = cell.text.replace("|", "\\|").replace("\n", " ")
    if cell.best and t:
        return f"**{t}**"
    return f"_{t}_" if cell.em and t else t


def md_table(table: TableBlock) -> list[str]:
    if not table.rows:
        return [f"_{table.empty}_"]
    heads = [c.replace("|", "\\|").replace("\n", " ") for c in table.columns]
    marks = [":---"] + ["---:"] * (len(heads) - 1) if table.align == "report" else ["---"] * len(heads)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return lines


def _md_block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        body = md_text(block.text)
        return [f"_{body}_" if block.role == "caption" else body, ""]
    if isinstance(block, Bullets):
        return [f"- {md_text(i.text)}" for i in block.items] + [""]
    if isinstance(block, Numbered):
        return [f"{i}. {t}" for i, t in enumerate(block.items, start=1)] + [""]
    if isinstance(block, TableBlock):
        return md_table(block) + [""]
    if isinstance(block, Image):
        return [f"![{block.alt}]({block.href})", ""]
    if isinstance(block, Marked):
        inner = [line for b in block.blocks for line in _md_block(b)]
        return [f"<!-- {block.name} -->", *inner[:-1], f"<!-- /{block.name} -->", ""]
    return [f"## {block.title}", ""] + [line for b in block.blocks for line in _md_block(b)]


def to_markdown(doc: Document) -> str:
    lines = [f"# {md_text(doc.title)}", ""] + [line for b in doc.blocks for line in _md_block(b)]
    return "\n".join(lines)


# ---------------------------------------------------------------- HTML

VERDICT_CLASS = {
    Verdict.BETTER: "better",
    Verdict.WORSE: "worse",
    Verdict.WITHIN_NOISE: "noise",
    Verdict.TOO_FEW_UNITS: "few",
    Verdict.UNTESTABLE: "untestable",
    Verdict.NOT_COMPARABLE: "mismatch",
}
"""CSS class of each verdict (a cell or a span)."""

CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1400px;margin:1.5em auto;padding:0 1em;line-height:1.4;"
    "color:#1d1d1d}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;margin:.5em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right;white-space:nowrap}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}"
    "table.plain td,table.plain th{text-align:left}.best{font-weight:bold}"
    ".better{color:#17692a;background:#e3f4e6}.worse{color:#9b1c1c;background:#fbe4e4}.noise{color:#555}"
    ".few,.untestable,.mismatch{color:#8a5a00;background:#fff4d6}strong.better,strong.worse,strong.few,"
    "strong.untestable,strong.mismatch{padding:0 3px;border-radius:3px}img{max-width:100%}"
    ".answer li{margin:.3em 0}.about{color:#333;margin:.2em 0 .4em}.caption{color:#555;font-style:italic}"
    ".warning{color:#8a5a00}.note{color:#444}.families{display:flex;gap:.6em;flex-wrap:wrap;margin:.6em 0}"
    ".families span{border:1px solid #ccc;border-radius:4px;padding:2px 8px;background:#fafafa;font-size:14px}"
    "nav{font-size:14px;margin:.4em 0 1em}nav a{margin-right:.8em}"
)


def html_text(value: Text) -> str:
    out = []
    for s in value:
        t = html.escape(s.text)
        if s.code:
            t = f"<code>{t}</code>"
        if s.verdict is not None:
            cls = VERDICT_CLASS.get(s.verdict, "")
            t = f'<strong class="{cls}">{t}</strong>' if cls else f"<strong>{t}</strong>"
        elif s.strong:
            t = f"<strong>{t}</strong>"
        elif s.em:
            t = f"<em>{t}</em>"
        out.append(t)
    return "".join(out)


def _html_cell(cell: Cell) -> str:
    kind = VERDICT_CLASS.get(cell.verdict, "") if cell.verdict is not None else ""
    classes = [c for c in ("best" if cell.best and cell.text else "", kind) if c]
    attr = f' class="{" ".join(classes)}"' if classes else ""
    body = html.escape(cell.text)
    return f"<td{attr}>{f'<em>{body}</em>' if cell.em else body}</td>"


def html_table(table: TableBlock) -> str:
    if not table.rows:
        return f"<p><em>{html.escape(table.empty)}</em></p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "\n".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in table.rows)
    cls = ' class="plain"' if table.align == "plain" else ""
    return f"<table{cls}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _img(image: Image) -> str:
    """The PNG embedded as base64: the HTML needs no file beside it."""
    encoded = base64.b64encode(image.path.read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(image.alt)}">'


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _html_block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        cls = {"about": ' class="about"', "caption": ' class="caption"'}.get(block.role, "")
        return [f"<p{cls}>{html_text(block.text)}</p>"]
    if isinstance(block, Bullets):
        cls = ' class="answer"' if block.role == "answer" else ""
        items = "".join(
            f'<li class="{i.tone}">{html_text(i.text)}</li>' if i.tone else f"<li>{html_text(i.text)}</li>"
            for i in block.items
        )
        return [f"<ul{cls}>{items}</ul>"]
    if isinstance(block, Numbered):
        return ["<ol>" + "".join(f"<li>{html.escape(t)}</li>" for t in block.items) + "</ol>"]
    if isinstance(block, TableBlock):
        return [html_table(block)]
    if isinstance(block, Image):
        head = f"<h3>{html.escape(block.heading)}</h3>" if block.heading else ""
        return [head + _img(block)]
    if isinstance(block, Marked):
        inner = [line for b in block.blocks for line in _html_block(b)]
        return [f'<div class="{html.escape(block.name)}">', *inner, "</div>"]
    return [f'<h2 id="{_anchor(block.title)}">{html.escape(block.title)}</h2>'] + [
        line for b in block.blocks for line in _html_block(b)
    ]


def _families(families: Iterable[Family]) -> str:
    chips = "".join(f"<span>{html.escape(f.describe())}</span>" for f in families if f.size)
    return f'<div class="families">{chips}</div>' if chips else ""


def to_html(doc: Document) -> str:
    sections = [b for b in doc.blocks if isinstance(b, Section)]
    nav = " ".join(f'<a href="#{_anchor(s.title)}">{html.escape(s.title)}</a>' for s in sections)
    parts = [
        '<!doctype html>\n<html><head><meta charset="utf-8">',
        f"<title>{html.escape(doc.html_title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html_text(doc.title)}</h1>",
        _families(doc.families),
        f"<nav>{nav}</nav>" if nav else "",
    ]
    parts += [line for b in doc.blocks for line in _html_block(b)]
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)
