"""The package's code says why, not where it was asked for: no "issue N" of this project's tracker under src/ (a reader
of the installed package has no tracker; the reason goes in the comment). Tests and docs may cite issues. Another
project's tracker is cited with its name and a ``#`` ("transformers issue #35032"), which the rule lets through."""

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "hf_syntax_mt"
#: "issue 5", "Issue 64", "(issues 57, 65)": this project's tracker by number
ISSUE_REFERENCE = re.compile(r"\bissues? \d+\b(?:, \d+\b)*", re.IGNORECASE)


def references(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE_REFERENCE.finditer(text)]


@pytest.mark.parametrize(
    "text, found",
    [
        ("# the global-fertility network (issue 4)", ["issue 4"]),
        ("or give a text another text's parse (issues 57, 65). Records", ["issues 57, 65"]),
        ('"""`parse` and `train-parser` (Issue 64; run by ...)', ["Issue 64"]),
        ("ignores the source's padding mask (transformers issue #35032)", []),
        ("an issue 2x larger than the tissue", []),
    ],
)
def test_the_rule_finds_a_reference_by_number_and_lets_another_trackers_through(text, found):
    assert references(text) == found


def test_src_names_no_issue_by_number():
    found = {}
    for path in sorted(SRC.rglob("*")):
        if not path.is_file() or path.suffix not in (".py", ".json", ".md", ".txt", ".jinja"):
            continue
        hits = references(path.read_text(encoding="utf-8"))
        if hits:
            found[path.relative_to(SRC).as_posix()] = hits
    assert not found, f"say the reason instead of the issue number: {found}"
