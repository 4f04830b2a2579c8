"""`benchmarks/studies/study_round4.py`: the blocks of the plan, the fr->en unit's train command (the en->de recipe
with raw files, ``--recipe`` and the parsers only where read), the decision rule and Holm's adjustment by hand, and
the aggregate's seed-level tests on hand-built units against scipy and sacrebleu computed directly."""

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
from benchmarks.studies import study_round4 as r4  # noqa: E402


def test_the_plan_is_blocks_of_three_units_a_seed_and_names_round_trip():
    methods = ("vanilla", "dbsa_sync_full", "all3")
    assert r4.PLAN == [("low", m, s) for s in (3, 4, 5) for m in methods] + [
        ("fren", m, s) for s in (0, 1, 2) for m in methods
    ]
    for unit in r4.PLAN:
        assert r4.parse_unit(r2.unit_name(*unit)) == unit
    for bad in ("low-pascal-seed3", "full-all3-seed3", "fren-all3-seedX", "fren-all3"):
        with pytest.raises(SystemExit, match="PLACE-METHOD-seedK"):
            r4.parse_unit(bad)
    # the en->de units are round two's and round three's own methods, unchanged
    assert r4.METHODS["all3"] == r3.METHODS["all3"] and r4.METHODS["vanilla"] == r2.METHODS["vanilla"]


@pytest.mark.parametrize("method", ["vanilla", "dbsa_sync_full", "all3"])
def test_a_fren_unit_trains_the_ende_schedule_from_raw_text_with_its_recipe(method, tmp_path):
    args = r2.parse_args(["--output-dir", str(tmp_path)], r4.RESULTS, tmp_path, "", r4.METHODS, "round four")
    files = {split: {"src": tmp_path / f"{split}.fr", "tgt": tmp_path / f"{split}.en"}
             for split in ("train", "validation", "test")}  # fmt: skip
    out = tmp_path / "models" / f"fren-{method}-seed1"
    fren = r4.fren_argv(args, method, 1, out, tmp_path / "tok", "cpu", files)
    ende = r2.round_one.train_argv(args, method, 1, out, tmp_path / "tok", "cpu", spec=r4.METHODS[method],
                                   split_files={k: {"src_conllu": v["src"], "tgt": v["tgt"], "tgt_conllu": "T"}
                                                for k, v in files.items()})  # fmt: skip

    def flags(argv):
        return {a: b for a, b in zip(argv, [*argv[1:], None], strict=True) if a.startswith("--")}

    f, e = flags(fren), flags(ende)
    assert f["--recipe"] == r4.RECIPE_OF[method] and "--config_overrides" not in f
    assert (f["--source_lang"], f["--target_lang"]) == ("fr", "en")
    for split in ("train", "validation", "test"):
        assert f[f"--{split}_source_file"] == str(files[split]["src"]) and f"--{split}_source_conllu" not in f
        assert f"--{split}_target_conllu" not in f
    schedule = {k for k in e if k not in ("--config_overrides", "--parser_description", "--data_description",
                                          "--model_card_title", "--source_lang", "--target_lang")
                and "conllu" not in k}  # fmt: skip
    assert {k: f[k] for k in schedule} == {k: e[k] for k in schedule}
    # parsers only where the recipe reads parses: vanilla none; DBSA + sync and all3 both sides
    parsed = method != "vanilla"
    assert (f.get("--parser_model"), f.get("--target_parser_model")) == (
        (r4.FREN_PARSERS["source"], r4.FREN_PARSERS["target"]) if parsed else (None, None)
    )
    assert ("--parser_cache_dir" in f) == parsed
    # the recipe builds the config the en->de unit's overrides build
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.recipes import STUDY_SHAPE, recipe_options
    from hf_syntax_mt.training.script_args import parse_config_overrides

    assert recipe_options(r4.RECIPE_OF[method], STUDY_SHAPE) == parse_config_overrides(
        r4.METHODS[method][0], SyntaxMTConfig
    )


def test_holm_and_the_decision_rule_by_hand():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> kept monotone: 0.06
    assert r4.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert r4.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert r4.verdict({"ci": (0.01, 0.9)}) == "holds"
    assert r4.verdict({"ci": (-0.5, 0.29)}) == "does not hold"
    assert r4.verdict({"ci": (-0.5, -0.1)}) == "does not hold (the system is worse)"
    assert r4.verdict({"ci": (-0.1, 0.31)}) == "inconclusive"
    assert r4.verdict({"ci": None}).startswith("no interval")


REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat"]
WRONG = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
RIGHT = [REFS[:k] + WRONG[k:] for k in range(5)]  # k sentences right


def _write_unit(results: Path, place: str, method: str, seed: int, hyps: list[str], machine=None) -> None:
    name = r2.unit_name(place, method, seed)
    tests = {t: {"bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score, "chrf": 0.0,
                 "hypotheses_sha256": hashlib.sha256("".join(h + "\n" for h in hyps).encode()).hexdigest()}
             for t in r2.MULTI30K_TESTS}  # fmt: skip
    record = {"unit": name, "setting": place, "method": method, "seed": seed, "precision": "fp32", "device": "cpu",
              "steps": 10, "train_minutes": 2.0, "tokens_per_second": 100.0, "tests": tests, "commit": "abc",
              **({"machine": machine} if machine else {})}  # fmt: skip
    (results / "runs").mkdir(parents=True, exist_ok=True)
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))
    for t in r2.MULTI30K_TESTS:
        (results / "runs" / f"{name}.{t}.txt").write_text("".join(h + "\n" for h in hyps))


def test_the_aggregate_tests_each_hypothesis_over_complete_blocks(tmp_path, monkeypatch):
    from scipy import stats

    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        for lang in ("de", "en"):
            (data / f"{t}.{lang}").write_text("".join(r + "\n" for r in REFS))
    two, three, four = tmp_path / "two", tmp_path / "three", tmp_path / "four"
    # seed -> (vanilla, DBSA + sync, all3) sentences right
    ende = {0: (0, 1, 3), 1: (0, 2, 3), 2: (1, 1, 4), 3: (0, 1, 2), 4: (1, 1, 3)}
    for seed, (v, d, a) in ende.items():
        where = two if seed < 3 else four
        _write_unit(where, "low", "vanilla", seed, RIGHT[v])
        _write_unit(where, "low", "dbsa_sync_full", seed, RIGHT[d])
        _write_unit(three if seed < 3 else four, "low", "all3", seed, RIGHT[a])
    _write_unit(four, "low", "vanilla", 5, RIGHT[0])  # block 5 incomplete: left out whole
    _write_unit(four, "low", "all3", 5, RIGHT[4])
    fren = {0: (1, 2, 2), 1: (0, 1, 2)}
    for seed, (v, d, a) in fren.items():
        for method, k in zip(r4.METHODS, (v, d, a), strict=True):
            _write_unit(four, "fren", method, seed, RIGHT[k])
    # fr->en seed 2: all three units, but its vanilla ran on another machine kind: not a block, left out and named
    avx2 = {"device": "cpu", "cpu": "AMD EPYC", "flags": ["avx2"], "torch_cpu_capability": "AVX2", "threads": 1,
            "torch": "2.13.0+cpu"}  # fmt: skip
    avx512 = {**avx2, "flags": ["avx2", "avx512f", "avx512_bf16"], "torch_cpu_capability": "AVX512"}
    for method, machine in zip(r4.METHODS, (avx2, avx512, avx512), strict=True):
        _write_unit(four, "fren", method, 2, RIGHT[4], machine=machine)
    monkeypatch.setattr(r2, "RESULTS", two)
    monkeypatch.setattr(r3, "RESULTS", three)
    text = r4.aggregate(SimpleNamespace(results=str(four), data=str(tmp_path / "data"), bootstrap_samples=20))

    def bleu(k):
        return sacrebleu.corpus_bleu(RIGHT[k] * 4, [REFS * 4]).score  # every test set concatenated

    def row(name):
        line = next(x for x in text.splitlines() if x.startswith(f"| {name} |"))
        return [c.strip() for c in line.strip("|").split("|")]

    assert "en->de, seeds 0-5: 0,1,2,3,4; en->de, blocks 3-5 alone: 3,4; fr->en, seeds 0-2: 0,1." in text
    # the shared machine rule (`machine.Pairing`) names the pairs it left out: seed 2's two pairs with its vanilla
    assert "only units of one machine kind are compared" in text and "2 on different kinds (left out)" in text
    named = [x for x in text.splitlines() if x.startswith("- fren-")]
    assert [x.split(":")[0] for x in named] == ["- fren-all3-seed2 / fren-vanilla-seed2",
                                                "- fren-dbsa_sync_full-seed2 / fren-vanilla-seed2"]  # fmt: skip
    assert all("torch_cpu_capability" in x and "'AVX2'" in x and "'AVX512'" in x for x in named)
    # --mixed-machines compares them: seed 2 becomes a block
    mixed = r4.aggregate(SimpleNamespace(results=str(four), data=str(tmp_path / "data"), bootstrap_samples=20,
                                         mixed_machines=True))  # fmt: skip
    assert "fr->en, seeds 0-2: 0,1,2." in mixed and "mixed machines allowed" in mixed
    cases = [("en->de, seeds 0-5", ende, (0, 1, 2, 3, 4)), ("en->de, blocks 3-5 alone", ende, (3, 4)),
             ("fr->en, seeds 0-2", fren, (0, 1))]  # fmt: skip
    for name, plan, seeds in cases:
        for h, base in (("H1", 0), ("H2", 1)):
            cells = row(f"{h} all3 - {r4.HYPOTHESES[h][1]}, {name}")
            system, other = [bleu(plan[s][2]) for s in seeds], [bleu(plan[s][base]) for s in seeds]
            deltas = [a - b for a, b in zip(system, other, strict=True)]
            assert cells[1] == ",".join(map(str, seeds))
            assert cells[2] == " / ".join(f"{d:+.2f}" for d in deltas)
            if len(set(deltas)) > 1:
                assert cells[4] == r2.format_p(stats.ttest_rel(system, other).pvalue)
    # the verdict rows: the H2 interval at en->de over 0-5, against the rule computed here
    deltas = [bleu(ende[s][2]) - bleu(ende[s][1]) for s in range(5)]
    mean = sum(deltas) / 5
    low, high = stats.t.interval(0.95, 4, loc=mean, scale=stats.sem(deltas))
    verdict = next(x for x in text.splitlines() if x.startswith("| en->de, seeds 0-5 | H2 "))
    assert f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]" in verdict
    expected = "holds" if low > 0 else "does not hold" if high < 0.3 else "inconclusive"
    assert f"| {expected}" in verdict
    # Holm over the four place x hypothesis tests (the blocks-alone rows not adjusted)
    tested = [("en->de, seeds 0-5", ende, range(5)), ("fr->en, seeds 0-2", fren, range(2))]
    ps = {(n, h): stats.ttest_rel([bleu(p[s][2]) for s in seeds], [bleu(p[s][b]) for s in seeds]).pvalue
          for n, p, seeds in tested for h, b in (("H1", 0), ("H2", 1))}  # fmt: skip
    adjusted = dict(zip(ps, r4.holm(list(ps.values())), strict=True))
    assert f"| {r2.format_p(adjusted[('en->de, seeds 0-5', 'H2')])} |" in verdict
    assert "| low-all3-seed0 (round three) |" in text and "| fren-all3-seed1 |" in text
    assert "low-vanilla-seed5" in text  # listed among the units, though its block is incomplete
    # the units table: en->de first, then fr->en; within a place by seed, then method in the plan's order
    rows = text.split("## Units")[1].splitlines()
    listed = [x.split("|")[1].split()[0] for x in rows if x.startswith(("| low-", "| fren-"))]
    expected = [r2.unit_name(place, m, s) for place, seeds in (("low", range(6)), ("fren", range(3)))
                for s in seeds for m in r4.METHODS if (place, m, s) != ("low", "dbsa_sync_full", 5)]  # fmt: skip
    assert listed == expected


def test_every_committed_unit_file_loads_and_names_its_machine_and_commit():
    """The committed round-four units (if any yet): every hypothesis file matches its recorded sha256 and sentence
    count (`load_units`), each unit records its machine kind and its commit, and the units of one seed share both
    (a block is one machine kind and one commit, docs/studies/round4.md)."""
    from benchmarks.machine import kind

    units = r4.load_units(r4.RESULTS)
    by_block = {}
    for u in units:
        assert u["machine"]["cpu"] and u["machine"]["torch_cpu_capability"] and len(u["commit"]) == 40
        assert r4.parse_unit(u["unit"]) == (u["setting"], u["method"], u["seed"])
        by_block.setdefault((u["setting"], u["seed"]), set()).add((kind(u["machine"]), u["commit"]))
    assert all(len(v) == 1 for v in by_block.values()), by_block
