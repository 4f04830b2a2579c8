"""Comparisons over seeds shared by the study aggregates (rounds two, three and four, and the distillation study): the
hypotheses of units concatenated over test sets, their corpus BLEU, the line bootstrap of a pooled ΔBLEU (cached by
unit names, one aggregate at a time), and one hypothesis test over seeds (`compare`: `seed_stats` on each seed's
ΔBLEU). A module of its own so that the rounds' scripts import it rather than each other."""

from __future__ import annotations

from benchmarks.machine import RELATION, same_kind
from benchmarks.studies import seed_stats


def concat(units: list[dict], tests, like: list[dict] | None = None) -> list[str]:
    """The hypotheses of ``units`` over ``tests``, seeds concatenated; each test set cut to as many sentences as the
    unit of ``like`` at the same place has (a ``--quick`` unit translates the first few)."""
    like = like or units
    return [
        h
        for u, v in zip(units, like, strict=True)
        for t in tests
        for h in u["hypotheses"][t][: len(v["hypotheses"][t])]
    ]


def references(refs: dict, units: list[dict], tests) -> list[str]:
    return [x for u in units for t in tests for x in refs[t][: len(u["hypotheses"][t])]]


def corpus_bleu(hyps: list[str], refs: list[str]) -> float:
    from hf_syntax_mt.evaluation import corpus_scores

    return corpus_scores(hyps, refs)["bleu"]


POOLED: dict[tuple, tuple[float, float]] = {}  # (base units, system units, tests, samples) -> `pooled`'s answer


def pooled(base: list[dict], system: list[dict], refs: dict, tests, samples: int) -> tuple[float, float]:
    """Paired bootstrap of ``system`` against ``base`` (same seeds, in order) over ``tests``, seeds concatenated
    (each line resampled on its own: test-sentence noise only, see `seed_lines`); computed once an aggregate."""
    from hf_syntax_mt.evaluation import paired_bootstrap

    key = (tuple(u["unit"] for u in base), tuple(u["unit"] for u in system), tuple(tests), samples)
    if key not in POOLED:
        b = paired_bootstrap(concat(base, tests, system), concat(system, tests), references(refs, system, tests),
                             samples)  # fmt: skip
        POOLED[key] = b["bleu"]["system"] - b["bleu"]["baseline"], b["bleu"]["p_value"]
    return POOLED[key]


def seed_lines(sys_units: list[dict], base_units: list[dict], refs: dict, tests) -> tuple:
    """What a comparison over seeds reads, the i-th system unit paired with the i-th baseline: the references, each
    seed's system and baseline lines (the ``tests`` concatenated), their BLEU
    and each seed's ΔBLEU."""
    r = references(refs, sys_units[:1], tests)
    sys_lines = [concat([u], tests) for u in sys_units]
    base_lines = [concat([b], tests, [u]) for b, u in zip(base_units, sys_units, strict=True)]
    sys_bleu = [corpus_bleu(h, r) for h in sys_lines]
    base_bleu = [corpus_bleu(h, r) for h in base_lines]
    return r, sys_lines, base_lines, sys_bleu, base_bleu, [a - b for a, b in zip(sys_bleu, base_bleu, strict=True)]


def compare(
    units: dict, place: str, seeds: list[int], system: str, base: str, refs: dict, samples: int, tests
) -> dict:
    """One hypothesis test over ``seeds``: each seed's ΔBLEU (the ``tests`` concatenated), `seed_stats.seed_level`,
    the sentence-cluster bootstrap, the line bootstrap's p, and the machine relation of each seed's pair. ``units``:
    (place, method, seed) -> unit (round two's aggregate passes its settings as places)."""
    sys_units = [units[(place, system, s)] for s in seeds]
    base_units = [units[(place, base, s)] for s in seeds]
    r, sys_lines, base_lines, sys_bleu, base_bleu, deltas = seed_lines(sys_units, base_units, refs, tests)
    kinds = [RELATION[same_kind(b, u)[0]] for b, u in zip(base_units, sys_units, strict=True)]
    return {"seeds": seeds, "deltas": deltas, "stats": seed_stats.seed_level(deltas, sys_bleu, base_bleu),
            "cluster": seed_stats.cluster_bootstrap(base_lines, sys_lines, r, samples),
            "line_p": pooled(base_units, sys_units, refs, tests, samples)[1],
            "machines": "; ".join(f"{','.join(str(s) for s, k in zip(seeds, kinds, strict=True) if k == kind)}: {kind}"
                                  for kind in dict.fromkeys(kinds))}  # fmt: skip
