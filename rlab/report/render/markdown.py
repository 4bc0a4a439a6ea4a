"""A `Document` as GitHub markdown: pipe tables, `**strong**`, `_em_`, images by relative path."""

from __future__ import annotations

from rlab.report.render import document as doc


def md_text(value: doc.Text) -> str:
    return "".join(_md_span(s) for s in value)


def _md_span(span: doc.Span) -> str:
    text = f"`{span.text}`" if span.code else span.text
    if span.strong or span.verdict is not None:
        return f"**{text}**"
    return f"_{text}_" if span.em else text


def _md_escape(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _md_cell(cell: doc.Cell) -> str:
    t = _md_escape(cell.text)
    if cell.best and t:
        t = f"**{t}**"
    elif cell.em and t:
        t = f"_{t}_"
    badge = f"**{_md_escape(cell.badge)}**" if cell.badge else ""
    detail = f"({_md_escape(cell.detail)})" if cell.detail else ""
    return " ".join(p for p in (t, badge, detail) if p)


def md_table(table: doc.TableBlock) -> list[str]:
    if not table.rows:
        return [f"_{table.empty}_"]
    heads = [
        f"[{_md_escape(c)}]({table.links[c]})" if c in table.links else _md_escape(c) for c in table.columns
    ]
    marks = [":---"] + ["---:"] * (len(heads) - 1) if table.align == "report" else ["---"] * len(heads)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join(marks) + "|"]
    for i, row in enumerate(table.rows):
        if i in table.groups:
            lines.append(f"| _{_md_escape(table.groups[i])}_ |" + " |" * (len(heads) - 1))
        lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    return lines


def _md_block(block: doc.Block) -> list[str]:
    if isinstance(block, doc.Paragraph):
        body = md_text(block.text)
        return [f"_{body}_" if block.role == "caption" else body, ""]
    if isinstance(block, doc.Bullets):
        return [f"- {md_text(i.text)}" for i in block.items] + [""]
    if isinstance(block, doc.Numbered):
        return [f"{i}. {t}" for i, t in enumerate(block.items, start=1)] + [""]
    if isinstance(block, doc.TableBlock):
        return md_table(block) + [""]
    if isinstance(block, doc.Image):
        return [f"![{block.alt}]({block.href})", ""]
    if isinstance(block, doc.Marked):
        inner = [line for b in block.blocks for line in _md_block(b)]
        after = _md_block(block.beside) if block.beside is not None else []
        return [f"<!-- {block.name} -->", *inner[:-1], f"<!-- /{block.name} -->", "", *after]
    return [f"## {block.title}", ""] + [line for b in block.blocks for line in _md_block(b)]


def to_markdown(document: doc.Document) -> str:
    lines = [f"# {md_text(document.title)}", ""] + [line for b in document.blocks for line in _md_block(b)]
    return "\n".join(lines)
