"""`benchmarks/studies/seed_stats.py`: the tests over seeds against scipy.stats (paired t, its interval, the exact
Wilcoxon signed-rank test, Student's two-sample t), a hand-computed Wilcoxon with ties, and the sentence-cluster
bootstrap against a direct implementation that scores every resample with sacrebleu's corpus BLEU."""

from __future__ import annotations

import sys
from pathlib import Path

import needs
import numpy as np
import pytest
import sacrebleu

stats = needs.package("scipy").stats  # the dev extra's; the study scripts themselves do not need scipy

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import seed_stats  # noqa: E402

#: round three's per-seed ΔBLEU (every test set pooled) as issue 66 gives them, and other shapes
DELTAS = [
    [1.94, 1.26, 0.91],  # all3 - vanilla
    [0.79, 0.60, 0.35],  # all3 - DBSA + sync
    [0.16, 0.66, -0.13],  # dbsa_sync_align - DBSA + sync
    [0.3, -0.2, 0.5, 0.1, 0.9, 0.4],  # six seeds
    [-1.5, -0.25, -2.0, -0.75, 0.125],
]


@pytest.mark.parametrize("deltas", DELTAS)
def test_paired_t_and_its_interval_are_scipys(deltas):
    got = seed_stats.paired_t(deltas)
    base = np.linspace(20, 21, len(deltas))  # any base: the paired test reads only the differences
    want = stats.ttest_rel(base + np.array(deltas), base)
    assert got["t"] == pytest.approx(want.statistic, rel=1e-9)
    assert got["p"] == pytest.approx(want.pvalue, rel=1e-9)
    low, high = stats.t.interval(0.95, len(deltas) - 1, loc=np.mean(deltas), scale=stats.sem(deltas))
    assert got["ci"] == pytest.approx((low, high), rel=1e-9)
    assert got["mean"] == pytest.approx(np.mean(deltas)) and got["sd"] == pytest.approx(np.std(deltas, ddof=1))


def test_round_threes_seed_level_p_values_are_the_issues():
    # issue 66: all3 vs vanilla p = 0.046 and all3 vs DBSA + sync p = 0.043 from the unrounded deltas; from the
    # two-decimal deltas given in the issue, p = 0.045 each
    assert seed_stats.paired_t(DELTAS[0])["p"] == pytest.approx(0.0454, abs=5e-4)
    assert seed_stats.paired_t(DELTAS[1])["p"] == pytest.approx(0.0450, abs=5e-4)
    assert seed_stats.paired_t(DELTAS[2])["p"] == pytest.approx(0.424, abs=5e-3)
    assert seed_stats.excludes_zero(seed_stats.paired_t(DELTAS[1])) is True
    assert seed_stats.excludes_zero(seed_stats.paired_t(DELTAS[2])) is False


@pytest.mark.parametrize("df", [1, 2, 5, 7.3, 30])
@pytest.mark.parametrize("t", [-4.2, -1.0, 0.0, 0.3, 2.5, 12.0])
def test_the_t_distribution_is_scipys(t, df):
    assert seed_stats.t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), rel=1e-10, abs=1e-14)
    assert seed_stats.t_sf2(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("df", [1, 2, 5, 10])
@pytest.mark.parametrize("q", [0.025, 0.5, 0.9, 0.975])
def test_t_quantile_is_scipys(q, df):
    assert seed_stats.t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("deltas", DELTAS)
def test_exact_wilcoxon_is_scipys_without_ties(deltas):
    assert seed_stats.wilcoxon_exact(deltas) == pytest.approx(stats.wilcoxon(deltas, method="exact").pvalue)


def test_exact_wilcoxon_with_ties_and_a_zero_by_hand():
    # zero dropped -> [1, -1, 2]: magnitudes 1, 1, 2 get ranks 1.5, 1.5, 3; W+ = 1.5 + 3 = 4.5, centre 3, |4.5 - 3| = 1.5.
    # The 8 sign patterns give W+ in {0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6}: |W+ - 3| >= 1.5 for 6 of them -> p = 6/8
    assert seed_stats.wilcoxon_exact([1.0, -1.0, 0.0, 2.0]) == 0.75
    assert seed_stats.wilcoxon_exact([0.0, 0.0]) == 1.0
    assert seed_stats.wilcoxon_exact([0.5, 1.0, 2.0]) == 0.25  # 3 seeds all ahead: the floor, 2/8


def test_unpaired_t_is_scipys_student_test():
    a, b = [20.9, 20.4, 20.5, 21.0], [20.1, 20.0, 20.6, 19.8]
    assert seed_stats.unpaired_t(a, b) == pytest.approx(stats.ttest_ind(a, b).pvalue, rel=1e-9)
    assert seed_stats.unpaired_t([1.0], b) is None


def test_seed_level_joins_the_tests_and_a_single_seed_has_no_test():
    s = seed_stats.seed_level([0.5, -0.1, 0.7], [21.0, 20.0, 21.5], [20.5, 20.1, 20.8])
    assert (s["better"], s["worse"], s["sign"]) == (2, 1, 1.0)
    assert s["unpaired"] == pytest.approx(stats.ttest_ind([21.0, 20.0, 21.5], [20.5, 20.1, 20.8]).pvalue)
    one = seed_stats.seed_level([0.4])
    assert one["p"] is None and one["ci"] is None and seed_stats.excludes_zero(one) is None
    assert "| 0 | +0.40 | +0.40 (no interval) | - |" in seed_stats.seed_row(
        "a - b", [0], [0.4], one, None, None, "same"
    )
    assert seed_stats.format_interval([-0.125, 1.5]) == "[-0.12, +1.50]"


REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat",
        "people walk down a busy street"]  # fmt: skip
BASE = [["a man rides a bike", "two dogs in snow", "a girl with a book", "a cat sleeps", "people on a street"],
        ["a man on a red bike", "two dogs play", "a girl reads", "the cat on a mat", "people walk down a street"]]  # fmt: skip
SYSTEM = [["a man rides a red bike", "two dogs in the snow", "a girl with a book", "the cat sleeps", "people walk"],
          ["a man rides a red bike", "two dogs play in snow", "a girl reads a book", "the cat on a mat",
           "people walk down a busy street"]]  # fmt: skip


def test_cluster_bootstrap_draws_each_sentence_with_every_seeds_lines():
    n, samples = len(REFS), 50
    got = seed_stats.cluster_bootstrap(BASE, SYSTEM, REFS, n_samples=samples, seed=7)

    def pooled(base, system, refs):  # corpus BLEU of the seeds' lines concatenated, scored directly
        seeds = len(base)
        return (sacrebleu.corpus_bleu([h for s in system for h in s], [refs * seeds]).score
                - sacrebleu.corpus_bleu([h for b in base for h in b], [refs * seeds]).score)  # fmt: skip

    observed = pooled(BASE, SYSTEM, REFS)
    assert got["delta"] == pytest.approx(observed)
    draws = np.random.default_rng(7).integers(0, n, (samples, n))  # the same draws: sentence numbers
    resampled = np.array([
        pooled([[b[i] for i in row] for b in BASE], [[s[i] for i in row] for s in SYSTEM], [REFS[i] for i in row])
        for row in draws
    ])  # fmt: skip
    assert got["ci"] == pytest.approx([np.percentile(resampled, 2.5), np.percentile(resampled, 97.5)])
    p = (np.sum(np.abs(resampled - resampled.mean()) >= abs(observed)) + 1) / (samples + 1)
    assert got["p"] == pytest.approx(p)
    assert (got["sentences"], got["seeds"]) == (5, 2)
    # a line bootstrap draws the ten lines on their own: a different distribution from the same seed
    lines = seed_stats.cluster_bootstrap([BASE[0] + BASE[1]], [SYSTEM[0] + SYSTEM[1]], REFS * 2, samples, seed=7)
    assert lines["delta"] == pytest.approx(observed) and lines["ci"] != got["ci"]


def test_cluster_bootstrap_of_identical_systems_is_no_evidence_and_misaligned_input_is_refused():
    same = seed_stats.cluster_bootstrap(BASE, BASE, REFS, n_samples=30)
    assert same["delta"] == 0 and same["p"] == 1.0 and same["ci"] == [0, 0]
    with pytest.raises(ValueError, match="seed #1: 4 lines for 5 references"):
        seed_stats.cluster_bootstrap(BASE, [SYSTEM[0], SYSTEM[1][:4]], REFS, n_samples=10)
    with pytest.raises(ValueError, match="one hypothesis list per seed"):
        seed_stats.cluster_bootstrap(BASE, SYSTEM[:1], REFS, n_samples=10)
