"""A `Document` as one self-contained HTML page: CSS inline, images embedded as base64 PNGs, verdicts coloured by
their enum."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable

from rlab.report.render.document import (
    Block,
    Bullets,
    Cell,
    Document,
    Image,
    Marked,
    Numbered,
    Paragraph,
    Section,
    TableBlock,
    Text,
)
from rlab.report.stats.verdicts import Family, Verdict

VERDICT_CLASS = {
    Verdict.BETTER: "better",
    Verdict.WORSE: "worse",
    Verdict.WITHIN_NOISE: "noise",
    Verdict.TOO_FEW_UNITS: "few",
    Verdict.UNTESTABLE: "untestable",
    Verdict.NOT_COMPARABLE: "mismatch",
}
"""CSS class of each verdict (a cell or a span)."""
HTML_BADGE = {Verdict.WITHIN_NOISE: "≈ noise"}
"""A badge's shorter form where colour carries the rest (the words stay in its title and in the markdown)."""

CSS = (
    # colours as variables: one light and one dark palette (prefers-color-scheme), both with readable contrast
    ":root{--fg:#1d1d1d;--muted:#555;--bg:#fff;--line:#ccc;--head:#f3f3f3;--chip:#fafafa;--link:#0b57d0;"
    "--good:#17692a;--good-bg:#e3f4e6;--bad:#9b1c1c;--bad-bg:#fbe4e4;--warn:#8a5a00;--warn-bg:#fff4d6;"
    "--noise-bg:#ececec}"
    "@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--muted:#aaa;--bg:#161718;--line:#444;--head:#26282a;"
    "--chip:#202224;--link:#8ab4f8;--good:#8fd19e;--good-bg:#1e3a25;--bad:#f3a6a6;--bad-bg:#4a2020;"
    "--warn:#f0c674;--warn-bg:#3d3215;--noise-bg:#2e3033}img{background:#fff}}"
    "body{font-family:system-ui,sans-serif;max-width:1400px;margin:1em auto;padding:0 1em;line-height:1.4;"
    "color:var(--fg);background:var(--bg)}a{color:var(--link)}h1{font-size:1.35em;margin:.3em 0}"
    "h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid var(--line)}"
    ".scroll{overflow-x:auto;max-width:100%}"
    "table{border-collapse:collapse;margin:.5em 0;font-size:14px}td,th{border:1px solid var(--line);"
    "padding:3px 8px;text-align:right;white-space:nowrap}td:first-child,th:first-child{text-align:left}"
    "th{background:var(--head)}th a{color:inherit}tr.group th{text-align:left;font-weight:normal;"
    "font-style:italic}table.plain td,table.plain th{text-align:left}.best{font-weight:bold}"
    ".better{color:var(--good);background:var(--good-bg)}.worse{color:var(--bad);background:var(--bad-bg)}"
    ".noise{color:var(--muted)}.few,.untestable,.mismatch{color:var(--warn);background:var(--warn-bg)}"
    "strong.better,strong.worse,strong.few,strong.untestable,strong.mismatch{padding:0 3px;border-radius:3px}"
    ".badge{display:inline-block;font-size:12px;font-weight:600;padding:0 5px;border-radius:8px;"
    "border:1px solid currentColor}.verdict-line{display:block}small{color:var(--muted)}.badge.noise{background:var(--noise-bg)}img{max-width:100%}"
    ".with-figure{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}.with-figure>.answer{flex:0 1 auto;"
    "width:min-content;max-width:100%}.with-figure>.beside{flex:1 1 300px;max-width:560px;margin:0}"
    ".answer th{white-space:normal;vertical-align:bottom}"
    ".answer table{font-size:13px}.answer td,.answer th{padding:2px 6px;vertical-align:top}.answer p{margin:.25em 0}"
    ".answer li{margin:.3em 0}.about{margin:.2em 0 .4em}.caption{color:var(--muted);font-style:italic}"
    ".warning{color:var(--warn)}.note{color:var(--muted)}.families{display:flex;gap:.6em;flex-wrap:wrap;"
    "margin:.6em 0}.families span{border:1px solid var(--line);border-radius:4px;padding:2px 8px;"
    "background:var(--chip);font-size:14px}nav{font-size:14px;margin:.4em 0 1em}nav a{margin-right:.8em}"
    # print: black on white, no scroll boxes (tables wrap instead), figures kept whole
    "@media print{:root{--fg:#000;--bg:#fff;--link:#000}body{max-width:none;margin:0}nav{display:none}"
    ".scroll{overflow:visible}td,th{white-space:normal}table,figure,img{page-break-inside:avoid}"
    ".badge{border-width:2px}}"
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
    classes = [c for c in ("best" if cell.best and cell.text else "", "" if cell.badge else kind) if c]
    attr = f' class="{" ".join(classes)}"' if classes else ""
    body = html.escape(cell.text)
    body = f"<em>{body}</em>" if cell.em and body else body
    if cell.badge or cell.detail:
        short = HTML_BADGE.get(cell.verdict, cell.badge) if cell.verdict is not None else cell.badge
        title = f' title="{html.escape(cell.badge)}"' if short != cell.badge else ""
        badge = f'<span class="badge {kind}"{title}>{html.escape(short)}</span>' if cell.badge else ""
        detail = f"<small>{html.escape(cell.detail)}</small>" if cell.detail else ""
        body += f'<span class="verdict-line">{" ".join(p for p in (badge, detail) if p)}</span>'
    return f"<td{attr}>{body}</td>"


def _html_head(table: TableBlock, column: str) -> str:
    text = html.escape(column)
    href = table.links.get(column)
    return f'<th><a href="{html.escape(href)}">{text}</a></th>' if href else f"<th>{text}</th>"


def html_table(table: TableBlock) -> str:
    """The table in its own horizontally scrolling box, so a wide one never widens the page."""
    if not table.rows:
        return f"<p><em>{html.escape(table.empty)}</em></p>"
    head = "".join(_html_head(table, c) for c in table.columns)
    rows = []
    for i, row in enumerate(table.rows):
        if i in table.groups:
            group = html.escape(table.groups[i])
            rows.append(f'<tr class="group"><th colspan="{len(table.columns)}">{group}</th></tr>')
        rows.append("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>")
    body = "\n".join(rows)
    cls = ' class="plain"' if table.align == "plain" else ""
    return (
        f'<div class="scroll"><table{cls}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n'
        "</table></div>"
    )


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
        if block.beside is None:
            return [f'<div class="{html.escape(block.name)}">', *inner, "</div>"]
        figure = f'<figure class="beside">{_img(block.beside)}</figure>'
        return [
            f'<div class="with-figure"><div class="{html.escape(block.name)}">',
            *inner,
            "</div>",
            figure,
            "</div>",
        ]
    return [f'<h2 id="{_anchor(block.title)}">{html.escape(block.title)}</h2>'] + [
        line for b in block.blocks for line in _html_block(b)
    ]


def _families(families: Iterable[Family]) -> str:
    chips = "".join(f"<span>{html.escape(f.describe())}</span>" for f in families if f.size)
    return f'<div class="families">{chips}</div>' if chips else ""


def to_html(doc: Document) -> str:
    """One self-contained page; the section links sit under the opening blocks (the answer comes first)."""
    sections = [b for b in doc.blocks if isinstance(b, Section)]
    nav = " ".join(f'<a href="#{_anchor(s.title)}">{html.escape(s.title)}</a>' for s in sections)
    parts = [
        '<!doctype html>\n<html><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<title>{html.escape(doc.html_title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{html_text(doc.title)}</h1>",
        _families(doc.families),
    ]
    for b in doc.blocks:
        if nav and b is (sections[0] if sections else None):
            parts.append(f"<nav>{nav}</nav>")
        parts += _html_block(b)
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)
