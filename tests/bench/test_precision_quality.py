"""`benchmarks/probes/precision_quality.py`: bf16 units against the fp32 units of the same name, on hand-built unit files,
checked against sacrebleu computed directly; pairs that differ in more than the precision are refused."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.probes import precision_quality as pq  # noqa: E402

REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat"]
WRONG = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
HALF = REFS[:2] + WRONG[2:]
RECIPE = {"d_model": 8, "max_steps": 10}


def write_unit(results: Path, method: str, seed: int, hyps: list[str], recipe: dict, tokens: int = 100) -> None:
    name = f"{method}-seed{seed}"
    (results / "runs").mkdir(parents=True, exist_ok=True)
    text = "".join(h + "\n" for h in hyps)
    record = {"hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest(), "unit": name, "method": method, "seed": seed, "recipe": recipe, "steps": 10, "tokens_seen": tokens,
              "train_minutes": 1.0, "tokens_per_second": 5.0,
              "buckets": [{"bucket": "1-10", "count": len(hyps), "bleu": 0.0}],
              "test": {"bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score}}  # fmt: skip
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))
    (results / "runs" / f"{name}.test.txt").write_text(text)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.de").write_text("".join(r + "\n" for r in REFS))
    monkeypatch.setattr(pq.round_one, "files", lambda d, name: {"tgt": Path(d) / "test.de"})
    base, system = tmp_path / "fp32", tmp_path / "bf16"
    write_unit(base, "vanilla_xavier", 0, WRONG, RECIPE)
    write_unit(base, "vanilla_xavier", 1, HALF, RECIPE)
    write_unit(base, "pascal", 0, REFS, RECIPE)  # another method: not in the yardstick
    write_unit(system, "vanilla_xavier", 0, HALF, RECIPE | {"bf16": True})
    write_unit(system, "vanilla_xavier", 1, HALF, RECIPE | {"bf16": True})
    args = SimpleNamespace(base=str(base), system=str(system), data=str(data), bootstrap_samples=20)
    return args, base, system


def bleu(h):
    return sacrebleu.corpus_bleu(h, [REFS]).score


def test_each_bf16_unit_is_tested_against_its_fp32_unit_and_the_pairs_are_pooled(setup):
    args, _, _ = setup
    result = pq.compare(args)
    rows = {r["unit"]: r for r in result["pairs"]}
    assert set(rows) == {"vanilla_xavier-seed0", "vanilla_xavier-seed1"}
    assert rows["vanilla_xavier-seed0"]["bleu_bf16"] - rows["vanilla_xavier-seed0"]["bleu_fp32"] == pytest.approx(
        bleu(HALF) - bleu(WRONG)
    )
    assert rows["vanilla_xavier-seed0"]["identical_lines"] == 0.5  # HALF and WRONG share their last two lines
    assert rows["vanilla_xavier-seed1"]["identical_lines"] == 1.0
    assert rows["vanilla_xavier-seed1"]["p_bleu"] == 1.0  # identical outputs
    pooled = (
        sacrebleu.corpus_bleu(HALF + HALF, [REFS + REFS]).score
        - sacrebleu.corpus_bleu(WRONG + HALF, [REFS + REFS]).score
    )
    assert result["pooled"]["bleu"] == pytest.approx(pooled)
    assert result["pooled"]["sentences"] == 8
    assert result["fp32_seeds"] == ["vanilla_xavier-seed0", "vanilla_xavier-seed1"]
    assert result["fp32_seed_std"] == pytest.approx(abs(bleu(HALF) - bleu(WRONG)) / 2**0.5)
    text = pq.markdown(result)
    assert f"{bleu(HALF) - bleu(WRONG):+.2f} (" in text and "50.0%" in text


def test_a_pair_that_differs_in_more_than_the_precision_is_refused(setup):
    args, _, system = setup
    write_unit(system, "vanilla_xavier", 1, HALF, RECIPE | {"bf16": True, "d_model": 16})
    with pytest.raises(SystemExit, match=r"vanilla_xavier-seed1.*d_model"):
        pq.compare(args)
    write_unit(system, "vanilla_xavier", 1, HALF, RECIPE | {"bf16": True}, tokens=99)
    with pytest.raises(SystemExit, match="tokens seen 100/99"):
        pq.compare(args)
    write_unit(system, "vanilla_xavier", 1, HALF, RECIPE)  # not bf16 at all
    with pytest.raises(SystemExit, match="expected an fp32 unit"):
        pq.compare(args)


def test_no_pair_at_all_says_what_to_run(setup, tmp_path):
    args, _, _ = setup
    args.system = str(tmp_path / "empty")
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    with pytest.raises(SystemExit, match="--bf16"):
        pq.compare(args)
