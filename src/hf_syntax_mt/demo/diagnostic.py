"""The attachment diagnostic: test items whose reference depends only on the gold tree.

Each item is one source sentence of the demo language ending in an ambiguous PP ("the dog saw the cat with a
telescope"), built twice: once with the PP attached to the verb, once to the object noun. The two items have the same
source string and different references (``... tamu o rezo to mita`` vs ``... rezo to no tamu o mita``), so

* a model that reads only the string gives one output for both items of a pair, and is right on at most one of them:
  at most 50% (the chance level of the binary choice, and what always picking the majority attachment scores, since
  the diagnostic is balanced);
* a model that is given the gold tree (PASCAL's ``parent_positions``) can be right on both: up to 100%.

A hypothesis *marks* an attachment when it is closer (word-level edit distance) to that attachment's reference than
to the other one; a tie marks neither and counts as wrong.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import UserError
from .language import ATTACHMENTS, draw_sentence, make_pair
from .synthetic import SyntheticPair


@dataclass
class DiagnosticItem:
    """One source string with one of its two trees: ``pair`` = the gold tree's pair, ``other_reference`` = the
    reference under the other attachment."""

    pair_id: int
    attachment: str  # "verb" or "noun": what the gold tree says
    pair: SyntheticPair
    other_reference: str


def build_diagnostic(n_sources: int, seed: int = 1, exclude: Iterable[str] = ()) -> list[DiagnosticItem]:
    """``2 * n_sources`` items: ``n_sources`` distinct sources with an ambiguous PP (none of them in ``exclude``,
    e.g. the training sources), each with the verb and the noun attachment, in that order."""
    if n_sources <= 0:
        raise UserError(f"n_sources must be positive, got {n_sources}")
    rng, seen, items = random.Random(seed), set(exclude), []
    for _ in range(200 * n_sources):
        if len(items) == 2 * n_sources:
            break
        sentence = draw_sentence(rng, ambiguous=True)
        source = " ".join(sentence.words)
        if source in seen:
            continue
        seen.add(source)
        pairs = {a: make_pair(sentence, a) for a in ATTACHMENTS}
        for a, b in (ATTACHMENTS, ATTACHMENTS[::-1]):
            items.append(DiagnosticItem(len(items) // 2, a, pairs[a], pairs[b].target))
    else:  # pragma: no cover
        raise RuntimeError(f"found only {len(items) // 2} distinct ambiguous sources outside `exclude`")
    return items


def _edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two word sequences."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def marked_attachment(hypothesis: str, item: DiagnosticItem) -> str | None:
    """The attachment ``hypothesis`` marks (the one whose reference is nearer), None on a tie."""
    words = hypothesis.split()
    own = _edit_distance(words, item.pair.target.split())
    other = _edit_distance(words, item.other_reference.split())
    if own == other:
        return None
    return item.attachment if own < other else next(a for a in ATTACHMENTS if a != item.attachment)


def score_diagnostic(hypotheses: Sequence[str], items: Sequence[DiagnosticItem]) -> dict:
    """Accuracy of the marked attachment against the gold tree's.

    Returns ``{"accuracy", "n", "correct", "undecided", "both_right", "pairs", "exact", "chance"}``: ``both_right``
    = pairs whose two items are both right (0 for any model that ignores the tree), ``exact`` = outputs identical to
    the reference, ``chance`` = 0.5 (also the majority baseline: the items are balanced)."""
    if len(hypotheses) != len(items):
        raise UserError(f"{len(hypotheses)} hypotheses for {len(items)} diagnostic items")
    if not items:
        raise UserError("no diagnostic items")
    marked = [marked_attachment(h, item) for h, item in zip(hypotheses, items, strict=True)]
    right = [m == item.attachment for m, item in zip(marked, items, strict=True)]
    by_pair: dict[int, list[bool]] = {}
    for ok, item in zip(right, items, strict=True):
        by_pair.setdefault(item.pair_id, []).append(ok)
    return {
        "accuracy": sum(right) / len(items),
        "n": len(items),
        "correct": sum(right),
        "undecided": sum(m is None for m in marked),
        "both_right": sum(all(v) for v in by_pair.values()),
        "pairs": len(by_pair),
        "exact": sum(h.strip() == item.pair.target for h, item in zip(hypotheses, items, strict=True)),
        "chance": 0.5,
    }


__all__ = ["DiagnosticItem", "build_diagnostic", "marked_attachment", "score_diagnostic"]
