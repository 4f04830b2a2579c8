"""Statistics that count seeds (issue 66; STYLE item 12): a study's headline compares methods over training runs.

The paired bootstrap the rounds reported (`hf_syntax_mt.evaluation.paired_bootstrap` over the seeds' lines
concatenated) resamples test sentences only: it measures how the test set could have come out, not how another
training run would. Here each seed is one observation:

- `seed_level`: per-seed ΔBLEU (one number a seed: corpus BLEU of the system minus the baseline's, every test set of
  the comparison pooled) with a paired t-test over seeds, the 95% t interval of the mean, the exact Wilcoxon
  signed-rank test and the exact sign test, and beside them an unpaired (Student) t-test of the two methods' per-seed
  BLEU, for pairs whose "pairing" is weak (units of one seed on different machines);
- `cluster_bootstrap`: the pooled ΔBLEU (the seeds' lines concatenated, today's statistic) resampled by source
  sentence, each drawn sentence carrying every seed's lines of both systems (a sentence counts once, not once a seed).

The t distribution is computed here (the regularised incomplete beta function), so that the study scripts need no
scipy; the tests check every figure against scipy.stats.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from benchmarks.studies.round2_stats import sign_test


# ------------------------------------------------------------------------------------------------------------------
# Student's t distribution
# ------------------------------------------------------------------------------------------------------------------
def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes' ``betacf``)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # fmt: skip
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            return h
    raise ArithmeticError(f"incomplete beta: no convergence for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if not (a > 0 and b > 0 and 0 <= x <= 1):
        raise ValueError(f"betainc needs a, b > 0 and 0 <= x <= 1, got a={a}, b={b}, x={x}")
    if x in (0, 1):
        return float(x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail of Student's t: P(|T| >= |t|) with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    if (
        t * t < df
    ):  # df / (df + t^2) would round to 1 near t = 0: use P(|T| < |t|) = I_y(1/2, df/2), y = t^2 / (df + t^2)
        return 1 - betainc(0.5, df / 2, t * t / (df + t * t))
    return betainc(df / 2, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    half = t_sf2(t, df) / 2
    return 1 - half if t > 0 else half


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (bisection on `t_cdf`, to 1e-12)."""
    if not 0 < q < 1:
        raise ValueError(f"a quantile needs 0 < q < 1, got {q}")
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > q:
        lo *= 2
    while t_cdf(hi, df) < q:
        hi *= 2
    while hi - lo > 1e-12 * max(1.0, abs(hi)):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


# ------------------------------------------------------------------------------------------------------------------
# Tests over seeds
# ------------------------------------------------------------------------------------------------------------------
def paired_t(deltas: Sequence[float], confidence: float = 0.95) -> dict:
    """The paired t-test of per-seed differences (a one-sample t-test of ``deltas`` against 0, which is what
    ``scipy.stats.ttest_rel(system, base)`` computes) and the ``confidence`` t interval of their mean.

    Returns:
        ``{"n", "mean", "sd", "t", "df", "p", "ci": (low, high)}``; with fewer than two seeds, or no spread, ``t``,
        ``p`` and ``ci`` are None (no test of one observation; equal deltas have no spread to scale by).
    """
    n = len(deltas)
    mean = statistics.fmean(deltas) if n else float("nan")
    out = {"n": n, "mean": mean, "sd": None, "t": None, "df": n - 1, "p": None, "ci": None}
    if n < 2:
        return out
    sd = statistics.stdev(deltas)
    out["sd"] = sd
    if sd == 0:
        return out
    se = sd / math.sqrt(n)
    t = mean / se
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * se
    return {**out, "t": t, "p": t_sf2(t, n - 1), "ci": (mean - half, mean + half)}


def unpaired_t(system: Sequence[float], base: Sequence[float]) -> float | None:
    """Two-sided p of Student's two-sample t-test with pooled variance (``scipy.stats.ttest_ind``'s default): the
    seeds of the two methods as independent samples. None with fewer than two of either or no spread."""
    n1, n2 = len(system), len(base)
    if n1 < 2 or n2 < 2:
        return None
    pooled = ((n1 - 1) * statistics.variance(system) + (n2 - 1) * statistics.variance(base)) / (n1 + n2 - 2)
    if pooled == 0:
        return None
    t = (statistics.fmean(system) - statistics.fmean(base)) / math.sqrt(pooled * (1 / n1 + 1 / n2))
    return t_sf2(t, n1 + n2 - 2)


def wilcoxon_exact(deltas: Sequence[float]) -> float:
    """Two-sided exact Wilcoxon signed-rank test: zeros dropped (``zero_method="wilcox"``), tied magnitudes given
    their average rank, and the p-value from every one of the 2^n sign patterns of those ranks (the exact
    permutation distribution, also with ties; n <= 20). 1.0 when no non-zero difference is left."""
    d = [x for x in deltas if x != 0]
    n = len(d)
    if n == 0:
        return 1.0
    if n > 20:
        raise ValueError(f"exact Wilcoxon over {n} non-zero differences: enumerate at most 20")
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    i = 0
    while i < n:  # average ranks over runs of equal magnitudes
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    w_plus = sum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    centre = sum(ranks) / 2
    observed = abs(w_plus - centre)
    extreme = sum(
        abs(sum(r for r, s in zip(ranks, signs, strict=True) if s) - centre) >= observed - 1e-9
        for signs in itertools.product((False, True), repeat=n)
    )
    return min(1.0, extreme / 2**n)


def seed_level(deltas: Sequence[float], system: Sequence[float] = (), base: Sequence[float] = ()) -> dict:
    """Every test over seeds of one comparison: `paired_t` of ``deltas`` (one per seed), `wilcoxon_exact`, the
    sign test (`round2_stats.sign_test`, ties left out) and, given each seed's BLEU of ``system`` and ``base``,
    `unpaired_t`.

    Returns:
        `paired_t`'s dict plus ``"wilcoxon"`` (p), ``"better"``, ``"worse"``, ``"sign"`` (p) and ``"unpaired"``
        (p or None).
    """
    better, worse = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
    return {**paired_t(deltas), "wilcoxon": wilcoxon_exact(deltas), "better": better, "worse": worse,
            "sign": sign_test(better, worse), "unpaired": unpaired_t(system, base) if system and base else None}  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# The sentence-cluster bootstrap
# ------------------------------------------------------------------------------------------------------------------
def cluster_bootstrap(
    base: Sequence[Sequence[str]],
    system: Sequence[Sequence[str]],
    references: Sequence[str],
    n_samples: int = 1000,
    seed: int = 12345,
) -> dict:
    """The pooled ΔBLEU of ``system`` over ``base`` (every seed's lines concatenated, against the same references
    repeated), resampled by source sentence: each resample draws ``len(references)`` sentence numbers with
    replacement (``numpy.random.default_rng(seed).integers``, one row of draws a resample) and each drawn sentence
    brings every seed's line of both systems. Each side is scored by summing sacrebleu's per-sentence BLEU
    statistics over the draw (as sacrebleu's own paired bootstrap scores a resample).

    Args:
        base, system: one list of hypotheses per seed, in the same seed order, each aligned with ``references``.
        references: one reference per source sentence (the same for every seed).

    Returns:
        ``{"delta", "ci": [low, high]`` (2.5th and 97.5th percentiles of the resampled ΔBLEU) ``, "p",
        "sentences", "seeds"}``; ``p`` is two-sided and centred as `length_gain_gap`'s,
        ``(#{|d_i - mean d| >= |d_obs|} + 1) / (n_samples + 1)``; identical outputs get 1.0.
    """
    import numpy as np
    from sacrebleu.metrics import BLEU

    if len(base) != len(system) or not base:
        raise ValueError(f"need one hypothesis list per seed for both systems, got {len(base)} and {len(system)}")
    n = len(references)
    for name, seeds in (("base", base), ("system", system)):
        for k, hyps in enumerate(seeds):
            if len(hyps) != n:
                raise ValueError(f"{name} seed #{k}: {len(hyps)} lines for {n} references")
    bleu, refs = BLEU(), [list(references)]
    stats = {}  # side -> (N, K): sacrebleu's sentence statistics, every seed's line of a sentence summed
    for name, seeds in (("base", base), ("system", system)):
        stats[name] = sum(np.asarray(bleu._extract_corpus_statistics(list(h), refs), dtype=np.int64) for h in seeds)

    def delta(weights: np.ndarray) -> np.ndarray:  # (R, N) draws of each sentence -> (R,) system BLEU - base BLEU
        sums = {side: weights @ s for side, s in stats.items()}  # (R, K)
        return np.array([bleu._compute_score_from_stats(s.tolist()).score
                         - bleu._compute_score_from_stats(b.tolist()).score
                         for s, b in zip(sums["system"], sums["base"], strict=True)])  # fmt: skip

    observed = float(delta(np.ones((1, n), dtype=np.int64))[0])
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, (n_samples, n))  # (R, N) sentence numbers
    resampled = np.concatenate([
        delta(np.stack([np.bincount(row, minlength=n) for row in draws[i : i + 200]]))
        for i in range(0, n_samples, 200)
    ])  # fmt: skip
    p = (np.sum(np.abs(resampled - resampled.mean()) >= abs(observed)) + 1) / (n_samples + 1)
    if all(list(b) == list(s) for b, s in zip(base, system, strict=True)):
        p = 1.0  # identical outputs are no evidence of a difference
    return {"delta": observed, "ci": [float(np.percentile(resampled, 2.5)), float(np.percentile(resampled, 97.5))],
            "p": float(p), "sentences": n, "seeds": len(base)}  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# The results' lines
# ------------------------------------------------------------------------------------------------------------------
SEED_TABLE_HEADER = [
    "| comparison | seeds | ΔBLEU per seed | mean [95% interval over seeds] | paired t p | Wilcoxon p | sign "
    "| unpaired t p | cluster bootstrap ΔBLEU [95%] p | line bootstrap p (as reported before) | machines |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]


def _p(p: float | None) -> str:
    from benchmarks.studies.round2_stats import format_p

    return "-" if p is None else format_p(p)


def format_interval(ci: Sequence[float] | None) -> str:
    """The 95% interval over seeds as ``[lo, hi]``; with fewer than two seeds (or no spread) it says so in words."""
    return "(no interval)" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def seed_row(name: str, seeds: Sequence[int], deltas: Sequence[float], s: dict, cluster: dict | None,
             line_p: float | None, machines: str) -> str:  # fmt: skip
    """One row of `SEED_TABLE_HEADER`: ``s`` from `seed_level`, ``cluster`` from `cluster_bootstrap` (or None)."""
    interval = format_interval(s["ci"])
    boot = "-" if cluster is None else (f"{cluster['delta']:+.2f} {format_interval(cluster['ci'])} "
                                        f"{_p(cluster['p'])}")  # fmt: skip
    return (f"| {name} | {','.join(map(str, seeds))} | {' / '.join(f'{d:+.2f}' for d in deltas)} | "
            f"{s['mean']:+.2f} {interval} | {_p(s['p'])} | {_p(s['wilcoxon'])} | {s['better']}+ {s['worse']}- "
            f"p {_p(s['sign'])} | {_p(s['unpaired'])} | {boot} | {_p(line_p)} | {machines} |")  # fmt: skip


def excludes_zero(s: dict) -> bool | None:
    """The decision rule of rounds three and four: the 95% interval over seeds excludes 0 (None: no interval)."""
    return None if s["ci"] is None else s["ci"][0] > 0 or s["ci"][1] < 0
