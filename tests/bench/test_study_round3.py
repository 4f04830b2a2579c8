"""`benchmarks/studies/study_round3.py`: the combinations are round two's options joined, their heads do not overlap,
a seed trains in the precision of round two's units of that seed, and the aggregate's comparisons (against vanilla,
against round two's best single method, and what each part of all3 adds) on hand-built units against sacrebleu
computed directly."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import study_round2 as r2  # noqa: E402
from benchmarks.studies import study_round3 as r3  # noqa: E402


def _options(overrides: str) -> dict:
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.training.script_args import parse_config_overrides

    return parse_config_overrides(overrides, SyntaxMTConfig)


def test_the_plan_runs_every_combination_at_every_seed_and_names_round_trip():
    assert r3.PLAN == [("low", m, s) for s in (0, 1, 2) for m in ("pascal_dbsa_sync", "all3", "dbsa_sync_align")]
    for unit in r3.PLAN:
        assert r3.parse_unit(r2.unit_name(*unit)) == unit
    for bad in ("low-pascal-seed0", "full-all3-seed0", "low-all3-seedX", "low-all3"):
        with pytest.raises(SystemExit, match="low-METHOD-seedK"):
            r3.parse_unit(bad)


@pytest.mark.parametrize(
    ("combination", "singles"),
    [("pascal_dbsa_sync", ("pascal", "dbsa_sync_full")), ("all3", ("pascal", "dbsa_sync_full", "alignment")),
     ("dbsa_sync_align", ("dbsa_sync_full", "alignment"))],
)  # fmt: skip
def test_a_combination_is_round_twos_options_of_its_methods_joined(combination, singles):
    joined = {}
    for method in singles:
        joined.update(_options(r2.METHODS[method][0]))
    assert _options(r3.METHODS[combination][0]) == joined
    assert r3.METHODS[combination][1]  # DBSA's decoder heads need the German trees


@pytest.mark.parametrize("combination", ["pascal_dbsa_sync", "all3", "dbsa_sync_align"])
def test_pascal_and_dbsa_take_different_heads(combination):
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.methods.registry import head_kinds

    recipe = r2.round_one.RECIPE
    config = SyntaxMTConfig(
        d_model=recipe["d_model"], encoder_layers=recipe["layers"], decoder_layers=recipe["layers"],
        encoder_attention_heads=recipe["heads"], decoder_attention_heads=recipe["heads"], vocab_size=4000,
        pad_token_id=0, decoder_start_token_id=0, **_options(r3.METHODS[combination][0]),
    )  # fmt: skip
    layout = {}
    for site in ("encoder", "decoder"):
        for layer in range(recipe["layers"]):
            kinds = {kind: (start, stop) for kind, start, stop in head_kinds(config, site, layer, recipe["heads"])}
            if kinds:
                layout[(site, layer)] = kinds
    assert layout == r3.HEAD_LAYOUTS[combination]
    pascal, dbsa = (set(range(*layout[("encoder", 0)].get(k, (0, 0)))) for k in ("pascal", "dbsa"))
    assert len(pascal) == (0 if combination == "dbsa_sync_align" else 2) and len(dbsa) == 1 and not pascal & dbsa


def test_a_seed_trains_in_the_precision_of_round_twos_units(tmp_path, monkeypatch):
    from benchmarks import common

    two, three = tmp_path / "two", tmp_path / "three"
    (two / "runs").mkdir(parents=True)
    (two / "runs" / "low-vanilla-seed0.json").write_text(
        json.dumps({"unit": "low-vanilla-seed0", "precision": "fp32"})
    )
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: True)
    args = r3.parse_args(["--results", str(three), "--output-dir", str(tmp_path / "o")])
    args.seed_results = [two, three]  # round two's folder of this test in place of the committed one
    assert r2.unit_precision(args, "low", 0, "cpu") == "fp32"  # the hardware would choose bf16
    assert r2.unit_precision(args, "low", 1, "cpu") == "bf16"  # no unit of seed 1 in either round
    assert args.methods is r3.METHODS and args.label == "round three"


REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat"]
WRONG = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]


def _write_unit(results: Path, method: str, seed: int, hyps: list[str]) -> None:
    name = r2.unit_name("low", method, seed)
    tests = {t: {"bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score, "chrf": 0.0,
                 "hypotheses_sha256": hashlib.sha256("".join(h + "\n" for h in hyps).encode()).hexdigest()}
             for t in r2.MULTI30K_TESTS}  # fmt: skip
    record = {"unit": name, "setting": "low", "method": method, "seed": seed, "precision": "fp32", "device": "cpu",
              "steps": 10, "train_minutes": 2.0, "tokens_per_second": 100.0, "tests": tests,
              "curve": [{"step": 5, "eval_bleu": 1.0}], "validation": {"bleu": 2.0}}  # fmt: skip
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))
    for t in r2.MULTI30K_TESTS:
        (results / "runs" / f"{name}.{t}.txt").write_text("".join(h + "\n" for h in hyps))


def test_the_aggregate_compares_with_vanilla_and_with_round_twos_best_single_method(tmp_path, monkeypatch):
    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        (data / f"{t}.de").write_text("".join(r + "\n" for r in REFS))
        (data / f"{t}.en").write_text("".join(r + "\n" for r in REFS))
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    two, three = tmp_path / "two", tmp_path / "three"
    for results in (two, three):
        (results / "runs").mkdir(parents=True)
    one_right, two_right, three_right = REFS[:1] + WRONG[1:], REFS[:2] + WRONG[2:], REFS[:3] + WRONG[3:]
    # round two: the alignment biases are the best single method (two sentences right against vanilla's none)
    for seed in (0, 1):
        _write_unit(two, "vanilla", seed, WRONG)
        _write_unit(two, "pascal", seed, one_right)
        _write_unit(two, "dbsa_sync_full", seed, one_right)
        _write_unit(two, "alignment", seed, two_right)
    _write_unit(three, "pascal_dbsa_sync", 0, three_right)
    _write_unit(three, "dbsa_sync_align", 0, two_right)
    _write_unit(three, "all3", 0, REFS)
    monkeypatch.setattr(r3, "ROUND_TWO", two)
    text = r3.aggregate(SimpleNamespace(results=str(three), data=str(tmp_path / "data"), bootstrap_samples=20))

    def bleu(h, n=1):
        return sacrebleu.corpus_bleu(h * n, [REFS * n]).score

    best = bleu(two_right, 2) - bleu(WRONG, 2)  # round two's two seeds concatenated
    assert f"test_2016_flickr: alignment {best:+.2f}" in text
    row = next(line for line in text.splitlines() if line.startswith("| pascal_dbsa_sync | test_2016_flickr |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "0" and cells[3] == f"{bleu(three_right):.2f}"
    assert cells[4].startswith(f"{bleu(three_right) - bleu(WRONG):+.2f} (")  # against vanilla of seed 0
    assert cells[6] == f"alignment ({best:+.2f})"
    assert cells[7].startswith(f"{bleu(three_right) - bleu(two_right):+.2f} (")  # against alignment of seed 0
    every = next(line for line in text.splitlines() if line.startswith("| pascal_dbsa_sync | every test set |"))
    assert f"{bleu(three_right, 4) - bleu(WRONG, 4):+.2f} (" in every
    assert "- pascal_dbsa_sync against vanilla: 4 better, 0 worse" in text
    assert "- pascal_dbsa_sync against best single: 4 better, 0 worse" in text
    assert "| low-pascal_dbsa_sync-seed0 | fp32 | 2.0 | 100.0 | 2.0 | 100.0 | 1.00 |" in text
    # what each part adds: a combination against the one without that part (round two's unit where round three has
    # none), per test set and the four pooled
    parts = {line.split("|")[2].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in text.splitlines() if line.startswith("| + ")}  # fmt: skip
    expected = {"all3 vs pascal_dbsa_sync": (REFS, three_right), "dbsa_sync_align vs dbsa_sync_full": (two_right, one_right),
                "all3 vs dbsa_sync_align": (REFS, two_right), "pascal_dbsa_sync vs dbsa_sync_full": (three_right, one_right)}  # fmt: skip
    assert set(parts) == set(expected)
    for pair, (system, base) in expected.items():
        cells = parts[pair]
        assert cells[2] == "0"
        assert all(c.startswith(f"{bleu(system) - bleu(base):+.2f} (") for c in cells[3:7])
        assert cells[7].startswith(f"{bleu(system, 4) - bleu(base, 4):+.2f} (")
    assert parts["all3 vs dbsa_sync_align"][0] == "+ PASCAL"
    assert (three / "results.md").read_text(encoding="utf-8") == text
    # a hypothesis file that is not the one the unit scored stops the aggregate, naming it
    (three / "runs" / "low-pascal_dbsa_sync-seed0.test_2017_flickr.txt").write_text("".join(h + "\n" for h in REFS))
    with pytest.raises(SystemExit, match="low-pascal_dbsa_sync-seed0"):
        r3.aggregate(SimpleNamespace(results=str(three), data=str(tmp_path / "data"), bootstrap_samples=20))


def _machine(flags: list[str]) -> dict:
    return {"device": "cpu", "cpu": "AMD EPYC", "flags": flags, "torch_cpu_capability": "AVX2", "threads": 1,
            "torch": "2.13.0+cpu"}  # fmt: skip


def test_the_seed_level_statistics_count_seeds_and_pair_only_one_machine_kind(tmp_path, monkeypatch):
    from scipy import stats

    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        (data / f"{t}.de").write_text("".join(r + "\n" for r in REFS))
        (data / f"{t}.en").write_text("".join(r + "\n" for r in REFS))
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    two, three = tmp_path / "two", tmp_path / "three"
    for results in (two, three):
        (results / "runs").mkdir(parents=True)
    right = [REFS[:k] + WRONG[k:] for k in range(5)]  # k sentences right
    # seed -> (vanilla, DBSA + sync, all3): all3 ahead of DBSA + sync by 2, 1 and 2 sentences
    plan = {0: (right[0], right[1], right[3]), 1: (right[0], right[2], right[3]), 2: (right[1], right[1], right[3])}
    for seed, (vanilla, dbsa, all3) in plan.items():
        _write_unit(two, "vanilla", seed, vanilla)
        _write_unit(two, "dbsa_sync_full", seed, dbsa)
        _write_unit(three, "all3", seed, all3)
    # seed 2's all3 records a machine of another kind than round two's units (their record says no native bf16)
    path = three / "runs" / "low-all3-seed2.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "machine": _machine(["avx2", "avx512f", "avx512_bf16"])}))
    monkeypatch.setattr(r3, "ROUND_TWO", two)
    for unit in (two / "runs").glob("*.json"):
        unit.write_text(json.dumps({**json.loads(unit.read_text()), "cpu_native_bf16": False, "threads": 1}))

    def args(mixed):
        return SimpleNamespace(results=str(three), data=str(tmp_path / "data"), bootstrap_samples=20,
                               mixed_machines=mixed)  # fmt: skip

    def bleu(h):
        return sacrebleu.corpus_bleu(h * 4, [REFS * 4]).score  # every test set concatenated

    def row(text, name):
        line = next(x for x in text.splitlines() if x.startswith(f"| {name} |"))
        return [c.strip() for c in line.strip("|").split("|")]

    text = r3.aggregate(args(False))
    deltas = [bleu(plan[s][2]) - bleu(plan[s][1]) for s in (0, 1)]  # seed 2 left out: another machine kind
    cells = row(text, "all3 - dbsa_sync_full")
    assert cells[1] == "0,1" and cells[2] == " / ".join(f"{d:+.2f}" for d in deltas)
    p = stats.ttest_rel([bleu(plan[s][2]) for s in (0, 1)], [bleu(plan[s][1]) for s in (0, 1)]).pvalue
    assert cells[4] == r2.format_p(p)
    assert cells[10] == "0,1: unknown"  # round two's units record no machine; what they do record agrees
    assert "2 on different kinds (left out)" in text  # all3 seed 2 against vanilla and against DBSA + sync
    assert "- low-all3-seed2 / low-vanilla-seed2: different machine kinds: native bf16 True vs False" in text
    assert "seed 2: no vanilla of its precision, device and machine kind" in text

    text = r3.aggregate(args(True))
    deltas = [bleu(plan[s][2]) - bleu(plan[s][1]) for s in (0, 1, 2)]
    cells = row(text, "all3 - dbsa_sync_full")
    assert cells[1] == "0,1,2" and cells[2] == " / ".join(f"{d:+.2f}" for d in deltas)
    test = stats.ttest_rel([bleu(plan[s][2]) for s in plan], [bleu(plan[s][1]) for s in plan])
    low, high = stats.t.interval(0.95, 2, loc=sum(deltas) / 3, scale=stats.sem(deltas))
    assert cells[3] == f"{sum(deltas) / 3:+.2f} [{low:+.2f}, {high:+.2f}]" and cells[4] == r2.format_p(test.pvalue)
    assert cells[5] == r2.format_p(stats.wilcoxon(deltas, method="exact").pvalue) and cells[6] == "3+ 0- p 0.250"
    pooled = (sacrebleu.corpus_bleu([h for s in plan for h in plan[s][2] * 4], [REFS * 12]).score
              - sacrebleu.corpus_bleu([h for s in plan for h in plan[s][1] * 4], [REFS * 12]).score)  # fmt: skip
    assert cells[8].startswith(f"{pooled:+.2f} [")  # the cluster bootstrap's observed pooled ΔBLEU
    assert cells[10] == "0,1: unknown; 2: different"
    assert "mixed machines allowed" in text
    verdict = "**stacks**" if low > 0 else "**not shown to stack** (the interval includes 0)"
    assert (
        f"excludes 0), over 3 seeds: mean {sum(deltas) / 3:+.2f}, interval [{low:+.2f}, {high:+.2f}]: {verdict}"
        in text
    )
