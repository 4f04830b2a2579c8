"""Study round two's statistics and plot (`study_round2.aggregate` calls them): the exact sign test, ΔBLEU against
vanilla by source-length bucket over pooled same-seed pairs, the long-minus-short gain gap, and ``deltas.png``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple


def sign_test(positive: int, negative: int) -> float:
    """Two-sided exact sign test (ties left out): P(a split at least this uneven | p = 1/2)."""
    n = positive + negative
    if n == 0:
        return 1.0
    k = max(positive, negative)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n)


def format_p(p: float) -> str:
    """Three decimals, or two significant digits below 0.001 (12 of 12 gains is p = 0.00049, not 0.000)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.2g}"


class FairPair(NamedTuple):
    """One seed's vanilla and method translations of one test set, trained in the same precision on the same device."""

    test_set: str
    base: list[str]  # vanilla's hypotheses
    system: list[str]  # the method's
    refs: list[str]
    lengths: list[int]  # source words


def bucket_deltas(pairs: list[FairPair], samples: int) -> list[dict]:
    """ΔBLEU of a method against vanilla per source-length bucket, every same-seed pair and test set pooled.

    Args:
        pairs: one per seed and test set.
        samples: bootstrap samples.

    Returns:
        `[{"bucket", "count", "delta", "p"}]` in bucket order (empty buckets left out): the paired bootstrap of the
        pooled sentences of each bucket (what a long-sentence claim needs: the 31+ buckets of all seeds together).
    """
    from hf_syntax_mt.evaluation import bucket_labels, length_buckets, paired_bootstrap

    pooled = {label: ([], [], []) for label in bucket_labels()}  # bucket -> (baseline, system, references)
    for pair in pairs:
        for label, b, h, r in zip(length_buckets(pair.lengths), pair.base, pair.system, pair.refs, strict=True):
            for column, value in zip(pooled[label], (b, h, r), strict=True):
                column.append(value)
    out = []
    for label, (base, system, refs) in pooled.items():
        if refs:
            b = paired_bootstrap(base, system, refs, samples)
            out.append({"bucket": label, "count": len(refs), "delta": b["bleu"]["system"] - b["bleu"]["baseline"],
                        "p": b["bleu"]["p_value"]})  # fmt: skip
    return out


def length_gap(pairs: list[FairPair], samples: int) -> str:
    """`length_gain_gap` over the concatenated pairs of `bucket_deltas`, as one line of the results; a source sentence
    (test set, line) is one cluster however many seeds translated it."""
    from hf_syntax_mt.evaluation import length_gain_gap

    base, system, refs, lengths = ([x for pair in pairs for x in getattr(pair, k)] for k in FairPair._fields[1:])
    clusters = [(pair.test_set, i) for pair in pairs for i in range(len(pair.refs))]
    try:
        g = length_gain_gap(
            base, system, refs, lengths, short_max=10, long_min=31, clusters=clusters, n_samples=samples
        )
    except ValueError as error:  # no sentence of 31+ (or of 1-10) words in these test sets
        return f"not measurable ({error})"
    long, short = g["long"], g["short"]
    return (f"{g['gap']:+.2f} [{g['ci'][0]:+.2f}, {g['ci'][1]:+.2f}], p {g['p_value']:.3f} (31+: {long['delta']:+.2f}, "
            f"{long['clusters']} sentences, n={long['count']}; 1-10: {short['delta']:+.2f}, {short['clusters']} "
            f"sentences, n={short['count']})")  # fmt: skip


def plot(summary: dict, path: Path, test_sets: dict[str, tuple[str, ...]], methods: list[str]) -> None:
    """``deltas.png``: per setting (a column), ΔBLEU against vanilla of the same seed for each seed and test set (top:
    one point per run and test set, the mean per run as a bar) and by source length, every fair pair pooled
    (bottom).

    Args:
        summary: setting -> ``{"runs": {method: [(seed, test set, ΔBLEU)]}, "buckets": {method: `bucket_deltas`}}``,
            in the order of the columns.
        path: the PNG to write.
        test_sets: setting -> its test sets (each one's marker).
        methods: every method, in the order that gives each its colour.
    """
    from hf_syntax_mt.evaluation import _pyplot

    plt = _pyplot()
    settings = [s for s in summary if summary[s]["runs"]]
    fig, axes = plt.subplots(2, len(settings), figsize=(5.5 * len(settings), 8), squeeze=False)
    for column, setting in enumerate(settings):
        runs, buckets = summary[setting]["runs"], summary[setting]["buckets"]
        top, bottom = axes[0][column], axes[1][column]
        shown = list(runs)  # this setting's methods, left to right
        markers = {t: "osD^v"[k % 5] for k, t in enumerate(test_sets[setting])}
        for x, method in enumerate(shown):
            seeds = sorted({seed for seed, _, _ in runs[method]})
            for k, seed in enumerate(seeds):
                mine = [(t, d) for s, t, d in runs[method] if s == seed]
                offset = x + (k - (len(seeds) - 1) / 2) * 0.22
                top.bar(offset, sum(d for _, d in mine) / len(mine), width=0.2, color=f"C{seed}", alpha=0.35,
                        label=f"seed {seed} (bar: mean over test sets)" if x == 0 else None)  # fmt: skip
                for t, d in mine:
                    top.scatter(offset, d, color=f"C{seed}", marker=markers[t], s=22,
                                label=t if x == 0 and k == 0 else None)  # fmt: skip
        top.axhline(0, color="k", lw=0.8)
        top.set_xticks(range(len(shown)), shown)
        top.set_title(f"{setting}: ΔBLEU vs vanilla, per seed and test set")
        top.set_ylabel("ΔBLEU (same seed)")
        top.legend(fontsize=7)
        for method, rows in buckets.items():
            xs = range(len(rows))
            color = f"C{methods.index(method) + 2}"  # a method's colour is the same in every setting
            bottom.plot(xs, [b["delta"] for b in rows], marker="o", color=color, label=method)
            for x, b in zip(xs, rows, strict=True):
                bottom.annotate(f"n={b['count']}", (x, b["delta"]), fontsize=6, textcoords="offset points",
                                xytext=(0, 4), ha="center")  # fmt: skip
            bottom.set_xticks(list(xs), [b["bucket"] for b in rows])
        bottom.axhline(0, color="k", lw=0.8)
        bottom.set_xlabel("source length (words)")
        bottom.set_ylabel("ΔBLEU, seeds and test sets pooled")
        bottom.legend(fontsize=7)
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    fig.suptitle("Study round two: ΔBLEU against vanilla of the same seed (same precision and device)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
