"""`benchmarks/studies/units.py`, the unit files of rounds two to four in one place: every committed unit file of
rounds two, three and four loads back whole through its round's loader (each hypothesis file the lines of the file
itself, whose sha256 the unit records), and a round four fr->en record is round two's fields with the recipe's name
and the parsers after ``about``."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.common import RESULTS  # noqa: E402
from benchmarks.studies import study_round2 as r2  # noqa: E402
from benchmarks.studies import study_round3 as r3  # noqa: E402
from benchmarks.studies import study_round4 as r4  # noqa: E402
from benchmarks.studies import units  # noqa: E402

LOADERS = {
    "round2": r2.load_units,
    "round3": lambda results: r2.load_units(results, methods=r3.METHODS),
    "round4": r4.load_units,
}


@pytest.mark.parametrize("study", sorted(LOADERS))
def test_the_committed_unit_files_load_whole(study):
    results = RESULTS / study
    files = sorted((results / "runs").glob("*.json"))
    if not files:
        pytest.skip(f"no unit file under {results}/runs yet")
    loaded = LOADERS[study](results)
    assert [u["unit"] for u in loaded] == [p.stem for p in files]
    for unit in loaded:
        assert set(unit["hypotheses"]) == set(unit["tests"])
        for test_set, hypotheses in unit["hypotheses"].items():
            data = (results / "runs" / f"{unit['unit']}.{test_set}.txt").read_bytes()
            assert hashlib.sha256(data).hexdigest() == unit["tests"][test_set]["hypotheses_sha256"]
            assert hypotheses == data.decode("utf-8").split("\n")[:-1]
            assert len(hypotheses) == sum(b["count"] for b in unit["tests"][test_set]["buckets"])


def test_a_record_puts_the_extra_fields_after_about_and_compares_the_trainer_with_the_first_test_set(monkeypatch):
    monkeypatch.setattr(units.common, "git_commit", lambda: "abc")
    info = {"train_seconds": 120.0, "train_runtime": 130.0, "global_step": 5, "num_input_tokens_seen": 2400,
            "curve": [[5, 1.0]], "averaged_steps": [], "scores": {"validation": {"bleu": 3.0}},
            "model_signature": "sig"}  # fmt: skip
    hypotheses = {"t1": ["a b", "c d", "e"], "t2": ["x"]}
    args = SimpleNamespace(recipe={"bf16": False}, quick=False)
    common = dict(overrides="o", args=args, precision="fp32", subset=None, tokenizer="/tmp/tok", info=info,
                  wall_train=60.0, test_start=0.0, tests={"t1": {}, "t2": {}}, first_test="t1", hypotheses=hypotheses,
                  device="cpu", checkpoint=None, argv=["--output_dir", "/x"])  # fmt: skip
    extra = {"recipe_name": "all3", "parsers": {}}
    record = units.unit_record(unit=("fren-all3-seed3", "fren", "all3", 3), about="PASCAL + ...", extra=extra,
                               trainer_test=["a b", "c", "e"], **common)  # fmt: skip
    assert list(record)[:8] == ["unit", "setting", "method", "seed", "about", "recipe_name", "parsers", "overrides"]
    assert (record["train_minutes"], record["tokens_per_second"], record["tokenizer"]) == (2.0, 20.0, "tok")
    assert record["trainer_test_agrees"] is False
    assert record["trainer_test_identical_lines"] == round(2 / 3, 4)  # 2 of t1's 3 lines
    assert record["commit"] == "abc" and record["resumed_from"] is None
    without = units.unit_record(unit=("low-vanilla-seed0", "low", "vanilla", 0), about="", extra={}, trainer_test=None,
                                **common)  # fmt: skip
    assert without["trainer_test_agrees"] is None and without["trainer_test_identical_lines"] is None
    assert list(without)[4:6] == ["about", "overrides"]
