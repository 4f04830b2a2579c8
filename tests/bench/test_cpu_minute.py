"""`benchmarks/studies/cpu_minute.py` (quality per CPU-minute): the anchor's BLEU scale against sacrebleu computed directly,
the step budget from the speed probe, and the aggregate on a hand-built unit file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import needs
import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import cpu_minute as cm  # noqa: E402

needs.package("sacremoses")


def test_the_anchor_scale_lowercases_and_splits_punctuation_as_moses_does():
    hyps = ["Ein Mann, der läuft.", "Zwei Hunde spielen im Schnee."]
    refs = ["ein Mann , der läuft .", "Zwei Hunde spielen auf dem Schnee ."]
    # cased sacreBLEU sees "Ein" against "ein": not a perfect first sentence
    assert sacrebleu.corpus_bleu(hyps[:1], [refs[:1]]).score < 100
    # lowercased and Moses-tokenized, the first pair is identical token for token
    assert cm.anchor_bleu(hyps[:1], refs[:1]) == pytest.approx(100.0)
    # words and full stops only: Moses and sacrebleu's 13a split them alike, so the anchor's scale is 13a lowercased
    expected = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score
    assert cm.anchor_bleu(hyps, refs) == pytest.approx(expected)
    # Moses keeps "z.B." and splits the German quotes off the word; 13a splits "z.B." into pieces
    moses_hyp, moses_ref = ["Er sagt „Hallo“ z.B. heute."], ["er sagt „ hallo “ z.B. heute ."]
    assert cm.anchor_bleu(moses_hyp, moses_ref) == pytest.approx(100.0)


@pytest.mark.parametrize(
    "steps_per_second, minutes, grid, expected",
    [(0.5, 60, 50, 1800), (0.4567, 60, 50, 1600), (0.001, 60, 50, 50 * cm.CURVE_POINTS), (2.0, 1.5, 10, 180)],
)
def test_max_steps_fit_the_budget_on_the_checkpoint_grid(steps_per_second, minutes, grid, expected):
    steps = cm.choose_max_steps(steps_per_second, minutes, grid)
    assert steps == expected and steps % grid == 0
    if expected > grid * cm.CURVE_POINTS:  # within the budget at the probed speed, and one grid step from it
        assert steps / steps_per_second <= minutes * 60 < (steps + grid) / steps_per_second


def test_the_aggregate_reports_both_scales_and_the_curve(tmp_path):
    unit = {
        "unit": "tiny-seed0", "seed": 0, "method": "tiny", "threads": 1, "steps": 1600, "train_minutes": 59.2,
        "test": {"bleu": 38.5, "chrf": 64.0, "bleu_anchor": 39.25}, "device": "cpu", "cpu": "x", "precision": "fp32",
        "probe": {"steps_per_second": 0.45}, "commit": "abc",
        "curve": [{"step": 800, "train_minutes": 29.0, "validation_bleu": 30.1, "bleu": 31.0, "bleu_anchor": 32.0},
                  {"step": 1600, "train_minutes": 59.2, "validation_bleu": None, "bleu": 38.5, "bleu_anchor": 39.25,
                   "averaged_steps": [1150, 1600]}],
    }  # fmt: skip
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny-seed0.json").write_text(json.dumps(unit))
    (tmp_path / "runs" / "tiny-seed1.json").write_text(json.dumps({**unit, "unit": "tiny-seed1", "seed": 1,
                                                                  "test": {"bleu": 39.5, "chrf": 65.0, "bleu_anchor": 40.25}}))  # fmt: skip
    # one unit of the second model: its own row, no mean of its own, never in the tiny model's mean
    (tmp_path / "runs" / "study-seed0.json").write_text(json.dumps({**unit, "unit": "study-seed0", "method": "study",
                                                                   "test": {"bleu": 45.0, "chrf": 70.0, "bleu_anchor": 46.0}}))  # fmt: skip
    text = cm.aggregate(SimpleNamespace(results=str(tmp_path)))
    assert "| tiny-seed0 | 1 | 1600 | 59.2 | 38.50 | 39.25 | 64.00 |" in text
    assert "| tiny, mean | | | | 39.00 ± 0.71 | 39.75 ± 0.71 | 64.50 ± 0.71 |" in text
    assert "| study-seed0 | 1 | 1600 | 59.2 | 45.00 | 46.00 | 70.00 |" in text and "study, mean" not in text
    assert f"`tiny`: {cm.METHODS['tiny']}; `study`: {cm.METHODS['study']}." in text
    assert "| tiny-seed0 | 800 | 29.0 | 30.10 | 31.00 | 32.00 |" in text
    assert "| tiny-seed0 | 1600 (avg) | 59.2 | - | 38.50 | 39.25 |" in text
    assert (tmp_path / "results.md").read_text() == text and (tmp_path / "curve.png").stat().st_size > 0
