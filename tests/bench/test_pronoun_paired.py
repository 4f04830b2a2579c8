"""The document study's paired pronoun tests (`benchmarks/studies/pronoun_paired.py`) on hand-made outcomes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.studies.pronoun_paired import group_of, mcnemar, paired_tests, pooled_bootstrap  # noqa: E402


def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_items():
    # discordant: items 0 and 4 right only under a, item 2 only under b -> n = 3, P(X <= 1) = 4/8, two-sided 1.0
    assert mcnemar([True, True, False, False, True], [False, True, True, False, False]) == {
        "only_system": 2, "only_baseline": 1, "p": 1.0}  # fmt: skip
    # 6 to 0: two-sided 2 * (1/2)^6
    assert mcnemar([True] * 6 + [False], [False] * 7)["p"] == 2 / 64
    assert mcnemar([True, False], [True, False]) == {"only_system": 0, "only_baseline": 0, "p": 1.0}


def test_pooled_bootstrap_centres_on_the_mean_difference_over_seeds():
    a, b = [True, True, False, False], [False, True, False, False]  # seed 0: +25 points
    c, d = [True, False, True, False], [True, False, True, False]  # seed 1: 0 points
    pooled = pooled_bootstrap([(a, b), (c, d)], samples=200, seed=1)
    assert pooled["difference"] == 12.5 and pooled["low"] <= 12.5 <= pooled["high"]
    same = pooled_bootstrap([(c, d)], samples=50, seed=0)
    assert (same["difference"], same["low"], same["high"], same["p"]) == (0.0, 0.0, 0.0, 1.0)


def test_paired_tests_group_items_by_kind_and_distance_and_pool_seeds_with_both_units():
    items = [{"kind": "referential", "antecedent_distance": 0}, {"kind": "referential", "antecedent_distance": 1},
             {"kind": "referential", "antecedent_distance": None}, {"kind": "clausal"},
             {"kind": "referential", "antecedent_distance": 3}]  # fmt: skip
    assert [group_of(it) for it in items] == ["0", "1", "unknown", None, "2+"]
    outcomes = {"runs/document-seed0": {"document": [True, True, False, True, True], "random": [True, False, False, True, True]},
                "runs/document-seed1": {"document": [True, True, True, True, False]},
                "runs/step1-seed0": {"none": [False, False, False, True, True]}}  # fmt: skip
    out = paired_tests(items, outcomes, samples=50)
    vs_step1 = out["referential"]["own context vs step 1"]
    assert set(vs_step1["seeds"]) == {"0", "1"} and "pooled" in vs_step1  # step 1 is every seed's baseline
    assert vs_step1["seeds"]["0"] == {"n": 4, "system": 75.0, "baseline": 25.0, "only_system": 2, "only_baseline": 0,
                                      "p": 0.5}  # fmt: skip
    assert "pooled" not in out["all"]["own context vs another document's"]  # one seed has a random-context run
    assert out["1"]["own context vs another document's"]["seeds"]["0"]["only_system"] == 1
    assert "own context vs control" not in out["all"]  # no control units
    # results.md's rows (docnmt_stats.paired_lines): per seed "system / baseline (+only system -only baseline, p)"
    from benchmarks.studies.docnmt_stats import paired_lines

    rows = [line for line in paired_lines({"paired": out}) if line.startswith("| referential | own context vs step 1")]
    assert rows == [f"| referential | own context vs step 1 | 4 | 75.0 / 25.0 (+2 -0, p 0.50) | "
                    f"{vs_step1['seeds']['1']['system']:.1f} / 25.0 (+3 -1, p 0.62) | - | "
                    f"{vs_step1['pooled']['difference']:+.2f} [{vs_step1['pooled']['low']:+.2f}, "
                    f"{vs_step1['pooled']['high']:+.2f}], p {vs_step1['pooled']['p']:.3f} |"]  # fmt: skip
    assert paired_lines({}) == []
