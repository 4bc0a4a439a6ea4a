"""How the report decides, said once: the Methods section and every caption phrase that names a method.

The procedure lives in `rlab.report.stats.inference` (intervals, tests, families, MDE) and `rlab.report.stats.uncertainty`
(units); the words for it live here, built from the constants they quote, so a change of procedure is an edit
here and no caption keeps naming a method the code no longer uses (`tests/report/test_methods.py` checks the
rendered report for stale names).
"""

from __future__ import annotations

from rlab.report.render import document as doc
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd

TITLE = "Methods"
"""The section's title; table headers link to it (`ANCHOR`)."""
ANCHOR = "#methods"

INTERVAL = f"studentized (t) {inf.LEVEL:.0%} interval"
"""Every interval the tables print (levels and paired differences; passkey levels excepted: `WILSON`)."""
WILSON = f"Wilson {inf.LEVEL:.0%} interval"
TEST = "skew-corrected sign-flip test"
"""The test of one seed per arm (`rlab.report.stats.skew_test`)."""
CORRECTION = "Holm"
PLUS_MINUS = f"`x ± h`: the estimate and the half-width of its {INTERVAL}"


def paired_interval(units: str) -> str:
    """``paired studentized (t) 95% interval over documents``: a caption's interval, named once."""
    return f"paired {INTERVAL} over {units}"


def in_family() -> str:
    """What a verdict in a table rests on, in a caption: the family it is adjusted in, with a pointer here."""
    return f"verdicts {CORRECTION}-adjusted within their family, see {TITLE}"


def bpb_units(clustered: bool) -> str:
    return (
        "documents (the blocks of one document summed into one unit)"
        if clustered
        else "eval units (taken as independent: they do not name their documents)"
    )


def families_line(families: list[vd.Family]) -> str:
    """``primary 4, secondary 56, copy 59 comparisons, Holm within each, familywise error 5%``."""
    sized = [f for f in families if f.size]
    if not sized:
        return "no family of verdicts (nothing testable)"
    names = ", ".join(f"{f.name} {f.size}" for f in sized)
    return f"families {names} comparisons, {CORRECTION} within each, familywise error {inf.ALPHA:.0%}"


def section(
    *,
    clustered: bool,
    seed: int,
    draws: int,
    families: list[vd.Family],
    baseline: str,
    bases_note: str,
    columns: list[tuple[str, str]],
) -> doc.Section:
    """The Methods section: units, intervals, tests, when there is no verdict, the families, MDE, and what each
    column of the Answer table is (`columns`: (header, definition))."""
    described = {
        "primary": f"each continued variant vs `{baseline}` on the primary endpoint",
        "secondary": "every other comparison in the tables (other lengths, val/train BPB, CORE, passkey, "
        "zero-shot arms)",
        "copy": "the copy section's paired differences of gain and of retention beyond L0",
        "key-token": "the key-token BPB section's paired comparisons",
    }
    items = [
        f"**Units.** Every comparison is paired on the independent units both arms scored: BPB by "
        f"{bpb_units(clustered)}, CORE by examples stratified by task, passkey by keys, copy by records.",
        f"**Intervals.** {PLUS_MINUS} over those units ([low, high] where printed as a range); passkey levels: "
        f"{WILSON}s. Intervals are unadjusted.",
        f"**Tests.** A comparison's {inf.test_description(draws, seed)}."
        + (f" {bases_note}" if bases_note else ""),
        f"**No verdict** with fewer than {inf.MIN_UNITS} units, with no variation between the arms, or between "
        "arms evaluated differently (not comparable); such comparisons enter no family.",
        f"**Families.** A verdict is better/worse only when its {CORRECTION}-adjusted p is at most "
        f"{inf.ALPHA:g} within its family and its interval excludes 0; each family's familywise error is "
        f"{inf.ALPHA:.0%}. "
        + "; ".join(
            f"{f.name} ({f.size} comparisons): {described.get(f.name, f.name)}" for f in families if f.size
        )
        + ".",
        f'**MDE.** Every "within noise" gives its minimum detectable effect: the smallest true difference its '
        f"test would find with {inf.POWER:.0%} power at its family's alpha / m.",
    ]
    column_items = [f"**{head}**: {what}" for head, what in columns]
    return doc.Section(
        TITLE,
        [
            doc.Bullets([doc.Item(_md(i)) for i in items]),
            doc.Paragraph(doc.text(doc.strong("The Answer table's columns"))),
            doc.Bullets([doc.Item(_md(i)) for i in column_items]),
        ],
    )


def _md(value: str) -> doc.Text:
    """`**strong**` lead-ins and `code` spans of the fixed sentences above (nothing else is read)."""
    out: list[doc.Part] = []
    for i, part in enumerate(value.split("**")):
        out.append(doc.strong(part) if i % 2 and part else doc.prose(part))
    return doc.text(*out)
