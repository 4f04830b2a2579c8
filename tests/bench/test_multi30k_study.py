"""`benchmarks/multi30k_study.paired_tests`: which units the study tests against which control (vanilla of the same
seed, and the one-setting control of `CONTROLS`), checked on hand-built units against sacrebleu computed directly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import multi30k_study as study  # noqa: E402


def test_each_unit_is_tested_against_vanilla_and_its_control_of_the_same_seed():
    refs = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps"]
    wrong = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
    half = refs[:2] + wrong[2:]

    def unit(method, seed, hypotheses):
        return {"unit": f"{method}-seed{seed}", "method": method, "seed": seed, "hypotheses": hypotheses}

    # no vanilla seed 1: the seed-1 units are tested against their CONTROLS entry only
    units = [unit("vanilla", 0, wrong), unit("vanilla_xavier", 0, half), unit("pascal_xavier", 0, refs),
             unit("vanilla_xavier", 1, half), unit("pascal_xavier", 1, refs)]  # fmt: skip
    assert study.CONTROLS["pascal_xavier"] == "vanilla_xavier"
    tests = study.paired_tests(units, refs + ["an unused fifth reference"], samples=20)
    assert set(tests) == {
        ("vanilla_xavier-seed0", "vanilla"),
        ("pascal_xavier-seed0", "vanilla"),
        ("pascal_xavier-seed0", "vanilla_xavier"),
        ("pascal_xavier-seed1", "vanilla_xavier"),
    }

    def bleu(hypotheses):
        return sacrebleu.corpus_bleu(hypotheses, [refs]).score

    for (name, control), (base, test) in tests.items():
        system = next(u for u in units if u["unit"] == name)
        assert base["method"] == control and base["seed"] == system["seed"]
        assert test["bleu"]["system"] == pytest.approx(bleu(system["hypotheses"]))
        assert test["bleu"]["baseline"] == pytest.approx(bleu(base["hypotheses"]))
    assert tests["pascal_xavier-seed0", "vanilla_xavier"][1]["bleu"]["system"] == pytest.approx(100.0)
