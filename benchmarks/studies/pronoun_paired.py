"""Paired tests of the document study's pronoun outcomes (issue 51 item 4): on the same items, does the document model
with its own context pass items that step 1, the control or the same model with another document's context fail?

Per seed, McNemar's exact test on the items where the two outcomes differ (two-sided binomial, p = 1/2); pooled over
the seeds, a paired bootstrap over items (the same resampled items for every seed, the mean over seeds of the
difference in accuracy; two-sided p and a 95% percentile interval). Groups: all items scored, the referential items,
and these by the antecedent's distance (``0``, ``1``, ``2+``; ``unknown``: referential, antecedent not found with
confidence). `benchmarks/data/pronoun_items.py --rescore` calls :func:`paired_tests` and stores the result in
``pronoun_items.rescored.json``; `docnmt_stats.py` prints it in ``results.md``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

#: (label, system, baseline): unit keys ``runs/<unit>`` with a context; ``{k}``: the seed
COMPARISONS = (
    ("own context vs step 1", ("runs/document-seed{k}", "document"), ("runs/step1-seed0", "none")),
    ("own context vs control", ("runs/document-seed{k}", "document"), ("runs/control-seed{k}", "none")),
    ("own context vs another document's", ("runs/document-seed{k}", "document"), ("runs/document-seed{k}", "random")),
)
SEEDS = (0, 1, 2)


def group_of(item: Mapping) -> str | None:
    """The distance group of a referential item (``0``, ``1``, ``2+``, ``unknown``); None for the other kinds."""
    if item.get("kind") != "referential":
        return None
    d = item.get("antecedent_distance")
    return "unknown" if d is None else ("2+" if d >= 2 else str(d))


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """McNemar's exact test: ``b01`` items right under ``a`` only, ``b10`` under ``b`` only, two-sided p of the
    binomial (n = b01 + b10, p = 1/2)."""
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return {"only_system": only_a, "only_baseline": only_b, "p": min(1.0, 2 * tail)}


def pooled_bootstrap(pairs: Sequence[tuple[Sequence[bool], Sequence[bool]]], samples: int, seed: int) -> dict:
    """Mean over ``pairs`` (one per seed, same items) of accuracy(system) - accuracy(baseline), with a paired bootstrap
    over items: ``{"difference", "low", "high", "p"}`` (points, 95% percentile interval, two-sided p)."""
    n = len(pairs[0][0])
    rng = random.Random(seed)
    per_item = [sum(int(a[i]) - int(b[i]) for a, b in pairs) for i in range(n)]  # summed over seeds
    boot = sorted(sum(per_item[rng.randrange(n)] for _ in range(n)) / (len(pairs) * n) for _ in range(samples))
    observed = sum(per_item) / (len(pairs) * n)
    below = sum(x <= 0 for x in boot) / samples
    above = sum(x >= 0 for x in boot) / samples
    return {"difference": 100 * observed, "low": 100 * boot[int(0.025 * samples)],
            "high": 100 * boot[min(samples - 1, int(0.975 * samples))], "p": min(1.0, 2 * min(below, above))}  # fmt: skip


def paired_tests(items: Sequence[Mapping], outcomes: Mapping[str, Mapping[str, Sequence[bool]]], samples: int = 1000,
                 seed: int = 0) -> dict:  # fmt: skip
    """``outcomes[unit][context]``: per-item outcomes on ``items``. Returns ``{group: {comparison: {"seeds": {k:
    {"n", "system", "baseline", "only_system", "only_baseline", "p"}}, "pooled": {...}}}}`` for the groups ``all``,
    ``referential`` and the distance groups (:func:`group_of`), for each comparison of :data:`COMPARISONS` whose units
    exist (pooled where more than one seed has both)."""
    groups: dict[str, list[int]] = {"all": list(range(len(items))), "referential": []}
    for i, item in enumerate(items):
        if (g := group_of(item)) is not None:
            groups["referential"].append(i)
            groups.setdefault(g, []).append(i)
    out: dict = {}
    for name, index in groups.items():
        if not index:
            continue
        for label, (system, sys_ctx), (baseline, base_ctx) in COMPARISONS:
            per_seed, pairs = {}, []
            for k in SEEDS:
                a = outcomes.get(system.format(k=k), {}).get(sys_ctx)
                b = outcomes.get(baseline.format(k=k), {}).get(base_ctx)
                if a is None or b is None:
                    continue
                a, b = [a[i] for i in index], [b[i] for i in index]
                per_seed[str(k)] = {"n": len(index), "system": 100 * sum(a) / len(a), "baseline": 100 * sum(b) / len(b),
                                    **mcnemar(a, b)}  # fmt: skip
                pairs.append((a, b))
            if per_seed:
                entry = {"seeds": per_seed}
                if len(pairs) > 1:
                    entry["pooled"] = pooled_bootstrap(pairs, samples, seed)
                out.setdefault(name, {})[label] = entry
    return out
