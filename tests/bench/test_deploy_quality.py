"""`benchmarks/studies/deploy_quality.py`'s `--run-file`: the unit's own scores are copied beside the engines' only when
the run file is the model's own run (the same `model_signature` as the model's `hf_syntax_mt_run.json`), and the
mismatch is refused before anything is translated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
from benchmarks.studies import deploy_quality  # noqa: E402

SIGNATURE = "hf-syntax-mt:0.1.0|variant:syntax_mt(sync_loss_weight=0.5)|seed:0|data:train:5000,validation:400"
TESTS = {"test_2016_flickr": {"bleu": 26.9, "chrf": 52.8, "count": 1000}, "test_2018_flickr": {"bleu": 16.3}}


def files(tmp_path: Path, model_signature: str | None, run_signature: str) -> tuple[str, Path]:
    model = tmp_path / "model"
    model.mkdir()
    if model_signature is not None:
        (model / "hf_syntax_mt_run.json").write_text(json.dumps({"model_signature": model_signature}))
    run = tmp_path / "unit.json"
    run.write_text(json.dumps({"model_signature": run_signature, "tests": TESTS}))
    return str(run), model


def test_the_models_own_run_file_gives_its_scores(tmp_path):
    run, model = files(tmp_path, SIGNATURE, SIGNATURE)
    assert deploy_quality.unit_scores(run, model) == {
        "test_2016_flickr": {"bleu": 26.9, "chrf": 52.8},
        "test_2018_flickr": {"bleu": 16.3, "chrf": None},
    }


@pytest.mark.parametrize("model_signature", [SIGNATURE.replace("seed:0", "seed:1"), SIGNATURE + ",test:1000", None])
def test_another_runs_file_is_refused_naming_both_signatures(tmp_path, model_signature):
    run, model = files(tmp_path, model_signature, SIGNATURE)
    with pytest.raises(SystemExit) as refused:
        deploy_quality.unit_scores(run, model)
    message = str(refused.value)
    assert run in message and SIGNATURE in message and str(model_signature) in message and "--run-file" in message


def test_the_check_runs_before_any_model_is_loaded(tmp_path):
    run, model = files(tmp_path, SIGNATURE + "|steps:2000", SIGNATURE)  # the model directory has no weights at all
    with pytest.raises(SystemExit, match="not the model's"):
        deploy_quality.main(["--model", str(model), "--data", str(tmp_path), "--run-file", run])
