"""Alignment error rate (`hf-syntax-mt aer`): predicted links scored against gold sure and possible links.

AER (Och & Ney 2000): ``1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)``, with A the predicted links, S the sure gold links
and P the possible ones (sure links are possible too), summed over the corpus; precision is measured against P,
recall against S. Gold files are Pharaoh lines with sure ``i-j`` and possible ``ipj`` links
(`hf_syntax_mt.data.readers.read_pharaoh`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from ..data.readers import GoldAlignment, Link
from ..errors import UserError

__all__ = ["alignment_error_rate", "index_base_hint", "no_sure_link_warning"]

logger = logging.getLogger(__name__)


def alignment_error_rate(predicted: Sequence[Iterable[Link] | GoldAlignment], gold: Sequence[GoldAlignment]) -> dict:
    """Corpus AER, precision (against P) and recall (against S), with the link counts. ``predicted[k]`` is a set of
    links or a `GoldAlignment` (its sure links count). Logs a warning when the gold has possible links but no sure
    one (`no_sure_link_warning`): recall is then undefined and AER only 1 - precision."""
    if len(predicted) != len(gold):
        raise UserError(
            f"{len(predicted)} predicted alignments but {len(gold)} gold ones: the files must be line aligned"
        )
    a = s = a_s = a_p = 0
    for pred, g in zip(predicted, gold, strict=True):
        links = set(pred.sure if isinstance(pred, GoldAlignment) else pred)
        a, s = a + len(links), s + len(g.sure)
        a_s, a_p = a_s + len(links & g.sure), a_p + len(links & g.possible)
    if warning := no_sure_link_warning(gold):
        logger.warning(warning)
    return {
        "aer": 1.0 - (a_s + a_p) / (a + s) if a + s else 0.0,
        "precision": a_p / a if a else 0.0,
        "recall": a_s / s if s else 0.0,
        "predicted_links": a, "sure_links": s, "predicted_sure": a_s, "predicted_possible": a_p, "pairs": len(gold),
    }  # fmt: skip


def index_base_hint(predicted: Sequence[GoldAlignment], gold: Sequence[GoldAlignment]) -> str | None:
    """A warning when the two files look counted from different first indices (one has a word 0 on neither side,
    the other has it on both): a perfect hypothesis read with the wrong base scores an AER near 50. None otherwise."""

    def lowest(alignments) -> tuple[int, int] | None:
        links = [link for a in alignments for link in a.possible]
        return (min(i for i, _ in links), min(j for _, j in links)) if links else None

    low_hyp, low_gold = lowest(predicted), lowest(gold)
    if low_hyp is None or low_gold is None:
        return None
    if min(low_hyp) >= 1 and max(low_gold) == 0:
        return ("no predicted link uses word 0 while the gold links do: if --hyp counts words from 1, give "
                "--hyp-one-indexed (or, if the gold counts from 1, --gold-one-indexed)")  # fmt: skip
    if min(low_gold) >= 1 and max(low_hyp) == 0:
        return ("no gold link uses word 0 while the predicted links do: if --gold counts words from 1 (e.g. the "
                "Hansards set), give --gold-one-indexed")  # fmt: skip
    return None


def no_sure_link_warning(gold: Sequence[GoldAlignment]) -> str | None:
    """A one-line warning when the gold alignments have possible links (``ipj``) but not one sure link (``i-j``):
    recall (against S) is 0/0, reported as 0, and AER = 1 - |A ∩ P| / |A| is only 1 - precision, so a perfect score
    means nothing. None otherwise (a gold set with no link at all is the caller's 0/0 error)."""
    sure = sum(len(g.sure) for g in gold)
    possible = sum(len(g.possible) for g in gold)
    if sure or not possible:
        return None
    return (f"the gold alignments have {possible} possible links ('ipj') but no sure link ('i-j') in {len(gold)} "
            "pairs: recall is undefined (shown as 0) and AER is only 1 - precision. Score against a gold file with "
            "sure links, or, if its links are all certain, write them as 'i-j'.")  # fmt: skip
