"""The README and the demo's page (docs/demo.md) quote only what the committed demo shows.

The README's `<!-- demo-answer -->` passage is the committed `comparison.md`'s `<!-- answer -->` passage, verbatim.
In docs/demo.md, between `<!-- demo-numbers -->` and `<!-- /demo-numbers -->` every decimal number and every percentage (signs and
interval brackets included) must appear in `results/demo/comparison.md`; between `<!-- demo-timings -->` and
`<!-- /demo-timings -->` every decimal must be a stage time of `results/demo/demo_timings.csv` (rounded as
quoted). Plain integers are lengths, distances, counts and settings (the spec's), not results, and are not checked;
neither is a number glued to a unit or factor (2.9M, 4x, 2×L0).

After regenerating the demo (`make demo`), run it on its own to list what the README and docs/demo.md must update:

    .venv/bin/python -m tests.test_readme_demo
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DEMO_PAGE = REPO / "docs" / "demo.md"
DEMO = REPO / "results" / "demo"
NUMBER = re.compile(r"(?<![\w.])([+\-−]?)(\d+(?:\.\d+)?)(%?)(?![\w×]|\.\d)")


def marked(text: str, name: str) -> list[str]:
    """The passages between `<!-- name -->` and `<!-- /name -->`."""
    return re.findall(rf"<!-- {name} -->(.*?)<!-- /{name} -->", text, flags=re.S)


def quoted_numbers(passage: str) -> list[str]:
    """Decimals and percentages as quoted (sign normalised to ASCII), code spans left out."""
    passage = re.sub(r"`[^`]*`", " ", passage)
    out = []
    for sign, digits, pct in NUMBER.findall(passage):
        if "." in digits or pct:
            out.append(f"{'-' if sign == '−' else sign}{digits}{pct}")
    return out


def missing_from(numbers: list[str], report: str) -> list[str]:
    """The quoted numbers `report` does not print (a signed number must appear with its sign)."""
    report = report.replace("−", "-")
    gone = []
    for number in numbers:
        if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", report):
            gone.append(number)
    return gone


def timing_mismatches(numbers: list[str], timings: Path) -> list[str]:
    """Quoted stage times that no stage (or the total) of demo_timings.csv rounds to."""
    with timings.open() as f:
        seconds = [float(row["seconds"]) for row in csv.DictReader(f)]
    bad = []
    for number in numbers:
        decimals = len(number.split(".")[1]) if "." in number else 0
        if not any(round(s, decimals) == float(number) for s in seconds):
            bad.append(number)
    return bad


def answer_problems() -> list[str]:
    """The README's quoted answer differs from the committed report's."""
    quoted = [p.strip() for p in marked(README.read_text(), "demo-answer")]
    answer = [p.strip() for p in marked((DEMO / "comparison.md").read_text(), "answer")]
    if len(answer) != 1:
        return ["comparison.md has no single <!-- answer --> passage"]
    if quoted != answer:
        return ["README's <!-- demo-answer --> passage is not comparison.md's <!-- answer --> passage"]
    return []


def problems() -> list[str]:
    text = DEMO_PAGE.read_text()
    report = (DEMO / "comparison.md").read_text()
    out = answer_problems()
    passages = marked(text, "demo-numbers")
    if not passages:
        out.append("docs/demo.md has no <!-- demo-numbers --> passage")
    for passage in passages:
        out += [f"not in comparison.md: {n}" for n in missing_from(quoted_numbers(passage), report)]
    for passage in marked(text, "demo-timings"):
        times = [n for n in quoted_numbers(passage) if not n.endswith("%")]
        out += [
            f"not a stage time in demo_timings.csv: {n}"
            for n in timing_mismatches(times, DEMO / "demo_timings.csv")
        ]
    return out


def test_every_number_of_the_demo_page_is_in_the_committed_report():
    assert problems() == []


def test_the_readme_quotes_the_committed_answer():
    assert answer_problems() == []


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    pages = [README, *(REPO / "docs").glob("*.md")]
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in pages
        for target in re.findall(r"\]\(([^)#\s]+)", page.read_text())
        if not target.startswith("http") and not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_check_finds_what_it_should():
    report = "gain +1.15 [+1.04, +1.26]; pi +6.98% worse; MDE 0.68%"
    assert quoted_numbers("gain +1.15 [+1.04, +1.26] at 216, 2.9M params, 4× L0, `x 0.5`") == [
        "+1.15",
        "+1.04",
        "+1.26",
    ]
    assert missing_from(["+1.15", "1.26", "6.98%", "0.68%"], report) == []
    assert missing_from(["-1.15", "0.7%", "1.1", "+6.9"], report) == ["-1.15", "0.7%", "1.1", "+6.9"]


if __name__ == "__main__":
    found = problems()
    print("\n".join(found) if found else "README and docs/demo.md: every number is in results/demo")
    sys.exit(1 if found else 0)
