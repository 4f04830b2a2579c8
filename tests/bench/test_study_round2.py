"""`benchmarks/studies/study_round2.py`: unit names, the low-resource subset (the same pairs in every file, fixed by its seed),
the sign test, the precision choice, and the aggregate's paired tests on hand-built units against sacrebleu computed
directly."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import study_round2 as r2  # noqa: E402


def test_every_planned_unit_name_round_trips_and_bad_names_are_refused():
    # 4 methods x 3 seeds in the two Multi30k settings, vanilla, PASCAL and DBSA+sync x 3 seeds on long sentences
    assert len(r2.PLAN) == len(set(r2.PLAN)) == 33
    assert {m for s, m, _ in r2.PLAN if s == "long"} == {"vanilla", "pascal", "dbsa_sync_full"}
    for unit in r2.PLAN:
        assert r2.parse_unit(r2.unit_name(*unit)) == unit
    for bad in ("full-vanilla", "huge-vanilla-seed0", "full-lisa-seed0", "full-vanilla-seedX"):
        with pytest.raises(SystemExit, match="SETTING-METHOD-seedK"):
            r2.parse_unit(bad)
    with pytest.raises(SystemExit, match="the long setting runs"):
        r2.parse_unit("long-alignment-seed0")
    # vanilla comes before every other method of its (setting, seed), so each paired test can be made when it finishes
    for k, (setting, method, seed) in enumerate(r2.PLAN):
        assert ("vanilla" if method == "vanilla" else (setting, "vanilla", seed)) in ("vanilla", *r2.PLAN[:k])
    assert all("attention_init=xavier" in overrides for overrides, _, _ in r2.METHODS.values())


@pytest.mark.parametrize("positive, negative", [(0, 0), (3, 3), (5, 0), (7, 1), (2, 9), (12, 0)])
def test_sign_test_is_the_two_sided_binomial_tail(positive, negative):
    n, k = positive + negative, max(positive, negative)
    # P(X >= k) + P(X <= n - k) for X ~ Binomial(n, 1/2), counted directly over all 2^n outcomes
    tails = sum(1 for outcome in range(2**n) if (c := bin(outcome).count("1")) >= k or c <= n - k) if n else 1
    expected = tails / 2**n if n else 1.0  # at a tie the two tails cover every outcome: 1
    assert math.isclose(r2.sign_test(positive, negative), expected)
    assert math.isclose(r2.sign_test(5, 0), 2 / 32)


def test_format_p_keeps_small_p_values_nonzero():
    assert r2.format_p(r2.sign_test(12, 0)) == "0.00049"  # 2 / 4096
    assert r2.format_p(2 / 32) == "0.062" and r2.format_p(1.0) == "1.000"


def test_precision_is_bf16_only_where_the_hardware_computes_it(monkeypatch):
    from benchmarks import common

    assert common.choose_precision("fp32", "cpu") == "fp32" and common.choose_precision("bf16", "cpu") == "bf16"

    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: False)
    assert common.choose_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: True)
    assert common.choose_precision("auto", "cpu") == "bf16"


def test_a_seed_trains_in_the_precision_of_its_first_unit(tmp_path, monkeypatch):
    from benchmarks import common

    runs = tmp_path / "runs"
    runs.mkdir()

    def write(name, precision):
        (runs / f"{name}.json").write_text(json.dumps({"unit": name, "precision": precision}))

    def precision(requested="auto", seed=1, native=True):
        monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: native)
        return r2.unit_precision(SimpleNamespace(results=str(tmp_path), precision=requested), "low", seed, "cpu")

    assert precision(native=True) == "bf16" and precision(native=False) == "fp32"  # no unit yet: the hardware's
    write("low-vanilla-seed1", "bf16")
    write("low-vanilla-seed11", "fp32")  # another seed: not seed 1's
    write("full-vanilla-seed1", "fp32")  # another setting
    assert precision() == "bf16"
    with pytest.raises(SystemExit, match=r"ran in bf16, which this CPU would emulate"):
        precision(native=False)  # auto follows the seed, but not into emulated bf16
    with pytest.raises(SystemExit, match=r"ran in bf16, and --precision fp32 would train this one in fp32: pass "
                                         r"--precision bf16"):  # fmt: skip
        precision("fp32")
    write("low-vanilla-seed2", "fp32")
    assert precision(seed=2, native=True) == "fp32"  # the seed's fp32, although this CPU computes bf16
    write("low-pascal-seed2", "bf16")
    with pytest.raises(SystemExit, match="several precisions"):
        precision(seed=2)


def fake_data(root: Path, n: int = 12) -> Path:
    """A Multi30k-shaped directory: train.{en,de} and their CoNLL-U, sentence i = "word<i> ..."."""
    (root / "multi30k").mkdir(parents=True)
    (root / "multi30k-parsed").mkdir()
    for lang in ("en", "de"):
        lines = [f"{lang}{i} satz{i}" for i in range(n)]
        (root / "multi30k" / f"train.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        blocks = [f"# text = {x}\n1\t{x.split()[0]}\t_\tX\t_\t_\t0\troot\t_\t_\n2\t{x.split()[1]}\t_\tX\t_\t_\t1\tdep\t_\t_\n"
                  for x in lines]  # fmt: skip
        with gzip.open(root / "multi30k-parsed" / f"train.{lang}.conllu.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(blocks) + "\n")
    return root


def test_the_low_resource_subset_keeps_the_same_pairs_in_every_file_and_is_fixed_by_its_seed(tmp_path, monkeypatch):
    data = fake_data(tmp_path / "data")
    monkeypatch.setattr(r2, "LOW_PAIRS", 5)
    args = SimpleNamespace(data=str(data), output_dir=str(tmp_path / "out"), quick=False, recipe={"max_train": None})
    files, info = r2.low_resource_files(args)
    src = files["src"].read_text().splitlines()
    assert len(src) == 5 and info["pairs"] == 5 and info["of"] == 12 and info["subset_seed"] == r2.SUBSET_SEED
    indices = [int(line.split()[0][2:]) for line in src]
    assert indices == sorted(indices) and len(set(indices)) == 5  # line order kept, no repeats
    assert files["tgt"].read_text().splitlines() == [f"de{i} satz{i}" for i in indices]
    for key, lang in (("src_conllu", "en"), ("tgt_conllu", "de")):
        texts = [line[len("# text = ") :] for line in files[key].read_text().splitlines() if line.startswith("# text")]
        assert texts == [f"{lang}{i} satz{i}" for i in indices]
    stamp = files["src"].stat().st_mtime_ns
    assert r2.low_resource_files(args) == (files, info) and files["src"].stat().st_mtime_ns == stamp  # not rewritten
    monkeypatch.setattr(r2, "SUBSET_SEED", r2.SUBSET_SEED + 1)
    args.output_dir = str(tmp_path / "other")
    assert r2.low_resource_files(args)[1]["line_numbers_sha256"] != info["line_numbers_sha256"]


def test_the_aggregate_tests_each_seed_against_vanilla_and_pools_the_seeds(tmp_path, monkeypatch):
    refs = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat"]
    wrong = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
    half = refs[:2] + wrong[2:]
    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        (data / "multi30k" / f"{t}.de").write_text("".join(r + "\n" for r in refs))
        (data / "multi30k" / f"{t}.en").write_text("".join(r + "\n" for r in refs))
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    # seed 2's pair ran in two precisions: named, and left out of the per-seed, pooled and sign tests
    systems = {("vanilla", 0): wrong, ("vanilla", 1): half, ("pascal", 0): half, ("pascal", 1): refs,
               ("vanilla", 2): refs, ("pascal", 2): wrong}  # fmt: skip
    for (method, seed), hyps in systems.items():
        name = r2.unit_name("full", method, seed)
        precision = "bf16" if (method, seed) == ("pascal", 2) else "fp32"
        record = {"unit": name, "setting": "full", "method": method, "seed": seed, "precision": precision,
                  "device": "cpu", "steps": 10, "train_minutes": 1.0, "trainer_test_agrees": True,
                  "tests": {t: {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
                                "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
                                "hypotheses_sha256": hashlib.sha256("".join(h + "\n" for h in hyps).encode()).hexdigest()}
                            for t in r2.MULTI30K_TESTS}}  # fmt: skip
        (results / "runs" / f"{name}.json").write_text(json.dumps(record))
        for t in r2.MULTI30K_TESTS:
            (results / "runs" / f"{name}.{t}.txt").write_text("".join(h + "\n" for h in hyps))
    drawn = []
    real_plot = r2.plot
    monkeypatch.setattr(
        r2, "plot", lambda summary, path, *rest: (drawn.append(summary), real_plot(summary, path, *rest))
    )
    text = r2.aggregate(SimpleNamespace(results=str(results), data=str(data), bootstrap_samples=20))

    def bleu(h):
        return sacrebleu.corpus_bleu(h, [refs]).score

    row = next(line for line in text.splitlines() if line.startswith("| pascal | test_2016_flickr |"))
    d0, d1 = bleu(half) - bleu(wrong), bleu(refs) - bleu(half)
    assert f"{d0:+.2f} (" in row and f"{d1:+.2f} (" in row
    pooled = sacrebleu.corpus_bleu(half + refs, [refs + refs]).score - sacrebleu.corpus_bleu(wrong + half,
                                                                                            [refs + refs]).score  # fmt: skip
    assert row.rstrip(" |").split("| ")[-1].startswith(f"{pooled:+.2f} (")
    assert "- pascal: 8 better, 0 worse" in text  # 2 seeds x 4 test sets, all better
    # each run as one observation: the same Δ on every test set here, so each seed's mean is that Δ; seed 2 left out
    assert f"- pascal: seed 0 {d0:+.2f}, seed 1 {d1:+.2f} (2 of 2 seeds ahead)" in text
    assert "not compared (vanilla fp32 on cpu, pascal bf16 on cpu)" in row
    assert "Precision by seed: 0: fp32; 1: fp32; 2: bf16/fp32;" in text
    # by source length: every source here has 4-6 words, so one bucket holds the fair pairs' 2 seeds x 4 test sets
    by_length = (
        sacrebleu.corpus_bleu((half + refs) * 4, [(refs + refs) * 4]).score
        - sacrebleu.corpus_bleu((wrong + half) * 4, [(refs + refs) * 4]).score
    )
    bucket_row = text.split("ΔBLEU against vanilla by source length")[1].split("| pascal | ")[1].splitlines()[0]
    assert bucket_row.startswith(f"{by_length:+.2f} (") and "n=32)" in bucket_row
    assert "- pascal: not measurable (no long sources (>= 31 words) among the 32 sentences)" in text
    # statistics that count seeds: each seed's ΔBLEU over the four test sets concatenated, tested over the two fair
    # seeds as scipy tests them
    from scipy import stats

    def bleu4(h):
        return sacrebleu.corpus_bleu(h * 4, [refs * 4]).score

    seed_row = next(line for line in text.splitlines() if line.startswith("| `full` pascal - vanilla |"))
    cells = [c.strip() for c in seed_row.strip("|").split("|")]
    system, base = [bleu4(half), bleu4(refs)], [bleu4(wrong), bleu4(half)]
    assert cells[1] == "0,1" and cells[2] == " / ".join(f"{a - b:+.2f}" for a, b in zip(system, base, strict=True))
    assert cells[4] == r2.format_p(stats.ttest_rel(system, base).pvalue)
    assert cells[7] == r2.format_p(stats.ttest_ind(system, base).pvalue)
    assert cells[10] == "0,1: unknown"  # the hand-built units record no machine
    # the plot draws the same per-seed deltas (seed 2's unfair pair left out) and the by-length row, as a PNG
    (summary,) = drawn
    assert set(summary) == {"full"} and list(summary["full"]["runs"]) == ["pascal"]
    points = summary["full"]["runs"]["pascal"]
    assert sorted((seed, t) for seed, t, _ in points) == sorted((s, t) for s in (0, 1) for t in r2.MULTI30K_TESTS)
    assert [d for _, _, d in points] == pytest.approx([d0 if seed == 0 else d1 for seed, _, _ in points])
    assert [(b["bucket"], b["count"]) for b in summary["full"]["buckets"]["pascal"]] == [("1-10", 32)]
    assert summary["full"]["buckets"]["pascal"][0]["delta"] == pytest.approx(by_length)
    assert (results / "deltas.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "`deltas.png` beside this file" in text
    # units of one seed that record different machine kinds are not compared (unless --mixed-machines), and said so
    for name, threads in (("full-vanilla-seed1", 1), ("full-pascal-seed1", 2)):
        path = results / "runs" / f"{name}.json"
        machine = {"device": "cpu", "cpu": "AMD EPYC", "flags": ["avx2"], "torch_cpu_capability": "AVX2",
                   "threads": threads, "torch": "2.13.0+cpu"}  # fmt: skip
        path.write_text(json.dumps({**json.loads(path.read_text()), "machine": machine}))
    text = r2.aggregate(SimpleNamespace(results=str(results), data=str(data), bootstrap_samples=20))
    row = next(line for line in text.splitlines() if line.startswith("| pascal | test_2016_flickr |"))
    assert (
        f"{d0:+.2f} (" in row and "not compared (different machines: vanilla AMD EPYC [avx2] AVX2, 1 thread(s)" in row
    )
    assert "- pascal: 4 better, 0 worse" in text  # seed 0's four test sets only
    assert "1 on different kinds (left out)" in text
    assert "- full-pascal-seed1 / full-vanilla-seed1: different machine kinds: threads 2 vs 1" in text
    # a truncated unit file stops the aggregate with its name
    (results / "runs" / "full-pascal-seed1.json").write_text('{"unit": "full-pascal-seed1", "tests"')
    with pytest.raises(SystemExit, match="full-pascal-seed1.json"):
        r2.aggregate(SimpleNamespace(results=str(results), data=str(data), bootstrap_samples=20))


def test_bucket_deltas_pool_seeds_and_test_sets_per_source_length():
    """Two seeds x one test set; the method equals vanilla on short sources (1-10 words) and beats it on long ones
    (31-40): Δ 0 with p 1 on the short bucket, on the long one the BLEU difference of the pooled sentences."""
    short_refs = ["a man rides a red bike", "two dogs play in the snow"]
    long_refs = [" ".join(f"w{i}" for i in range(35)), " ".join(f"v{i}" for i in range(33))]
    long_wrong = [" ".join(f"w{i}" for i in range(20)), " ".join(f"x{i}" for i in range(33))]
    refs = short_refs + long_refs
    lengths = [6, 6, 35, 33]
    base = short_refs + long_wrong
    system = short_refs + long_refs
    pairs = [r2.FairPair("t", base, system, refs, lengths)] * 2
    out = r2.bucket_deltas(pairs, samples=20)
    assert [b["bucket"] for b in out] == ["1-10", "31-40"]
    assert out[0]["count"] == 4 and out[0]["delta"] == 0 and out[0]["p"] == 1.0
    expected = (sacrebleu.corpus_bleu(long_refs * 2, [long_refs * 2]).score
                - sacrebleu.corpus_bleu(long_wrong * 2, [long_refs * 2]).score)  # fmt: skip
    assert out[1]["count"] == 4 and out[1]["delta"] == pytest.approx(expected)
    # the gain-grows-with-length line: long minus short over the same pooled pairs (short: Δ 0)
    line = r2.length_gap(pairs, samples=20)
    assert line.startswith(f"{expected:+.2f} [")
    assert f"31+: {expected:+.2f}, 2 sentences, n=4; 1-10: +0.00, 2 sentences, n=4" in line


def test_the_long_setting_has_no_trainer_test_pass_and_the_others_keep_it(tmp_path):
    from benchmarks.studies import multi30k_study as round_one

    args = SimpleNamespace(recipe={**round_one.RECIPE, "bf16": False}, data=str(tmp_path))
    f = {k: tmp_path / f"{k}.txt" for k in ("src", "tgt", "src_conllu", "tgt_conllu")}
    splits = {"train": f, "validation": f}
    argv = round_one.train_argv(args, "vanilla", 0, tmp_path, tmp_path, "cpu", split_files=splits, predict=False)
    assert "--do_predict" not in argv and not any(a.startswith("--test_") for a in argv)
    argv = round_one.train_argv(args, "vanilla", 0, tmp_path, tmp_path, "cpu", split_files={**splits, "test": f})
    assert "--do_predict" in argv and "--test_source_conllu" in argv


def test_the_long_setting_gives_dbsa_the_german_trees_of_training_and_validation(tmp_path, monkeypatch):
    from benchmarks.data import ende_sentence_data as ende

    calls = []
    monkeypatch.setattr(ende, "build", lambda data, cache, **k: calls.append("en"))
    monkeypatch.setattr(ende, "build_german", lambda data, cache, **k: calls.append("de"))
    args = SimpleNamespace(ende_cache=str(tmp_path), data=str(tmp_path))
    plain = r2.long_files(args)
    assert calls == ["en"] and all("tgt_conllu" not in f for f in plain.values())
    trees = r2.long_files(args, target_trees=True)
    assert calls == ["en", "en", "de"]
    assert trees["train"]["tgt_conllu"] == tmp_path / "train.de.conllu.gz"
    assert trees["validation"]["tgt_conllu"] == tmp_path / "newstest2015.de.conllu.gz"
    assert "tgt_conllu" not in trees["iwslt17.test"]  # test sets are translated from the source alone
    from benchmarks.studies import multi30k_study as round_one

    recipe = SimpleNamespace(recipe={**round_one.RECIPE, "bf16": False}, data=str(tmp_path))
    splits = {k: trees[k] for k in ("train", "validation")}
    argv = round_one.train_argv(recipe, "dbsa_sync_full", 0, tmp_path, tmp_path, "cpu", spec=r2.METHODS["dbsa_sync_full"],
                                split_files=splits, predict=False)  # fmt: skip
    assert argv[argv.index("--train_target_conllu") + 1] == str(tmp_path / "train.de.conllu.gz")
    assert argv[argv.index("--validation_target_conllu") + 1] == str(tmp_path / "newstest2015.de.conllu.gz")


def test_the_plot_gives_a_method_one_colour_in_every_setting(tmp_path, monkeypatch):
    """The long setting has no `alignment`: DBSA + sync must keep the colour it has where alignment is drawn."""
    import matplotlib.figure

    figures = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, path, **kw: figures.append(fig))
    rows = [
        {"bucket": "1-10", "count": 3, "delta": 0.5, "p": 0.1},
        {"bucket": "11-20", "count": 2, "delta": -0.2, "p": 0.3},
    ]
    summary = {
        setting: {
            "runs": {m: [(0, tests[0], 0.3), (1, tests[-1], -0.1)] for m in methods},
            "buckets": {m: rows for m in methods},
        }  # fmt: skip
        for setting, tests, methods in (
            ("full", r2.MULTI30K_TESTS, ["pascal", "alignment", "dbsa_sync_full"]),
            ("long", r2.TEST_SETS["long"], ["pascal", "dbsa_sync_full"]),
        )  # fmt: skip
    }
    r2.plot(summary, tmp_path / "deltas.png", r2.TEST_SETS, list(r2.METHODS))
    (fig,) = figures
    bottom_full, bottom_long = fig.axes[2], fig.axes[3]  # row-major: top full, top long, bottom full, bottom long
    colours = [{line.get_label(): line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")}
               for ax in (bottom_full, bottom_long)]  # fmt: skip
    assert set(colours[0]) == {"pascal", "alignment", "dbsa_sync_full"} and set(colours[1]) == {
        "pascal",
        "dbsa_sync_full",
    }
    assert colours[0]["dbsa_sync_full"] == colours[1]["dbsa_sync_full"] != colours[0]["alignment"]
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["pascal", "dbsa_sync_full"]
    assert [line.get_ydata().tolist() for line in bottom_long.get_lines() if line.get_label() == "pascal"] == [
        [0.5, -0.2]
    ]


def test_a_unit_file_records_its_machine(tmp_path, monkeypatch):
    import torch

    from benchmarks import machine
    from hf_syntax_mt.training import script

    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        for lang in ("en", "de"):
            (data / "multi30k" / f"{t}.{lang}").write_text("a man rides a red bike\ntwo dogs play\n")
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    args = r2.parse_args(["--data", str(data), "--results", str(tmp_path / "results"), "--output-dir",
                          str(tmp_path / "out")])  # fmt: skip
    monkeypatch.setattr(r2, "tokenizer_for", lambda *a: tmp_path / "tokenizer")
    monkeypatch.setattr(r2, "unit_precision", lambda *a: "fp32")
    monkeypatch.setattr(r2.round_one, "train_argv", lambda *a, **k: ["--model_card_title", "x"])
    monkeypatch.setattr(r2.common, "resume_or_clear", lambda out, argv: None)
    monkeypatch.setattr(script, "parse_args", lambda argv: ())
    info = {"train_seconds": 60.0, "train_runtime": 60.0, "global_step": 3, "num_input_tokens_seen": 600,
            "curve": [], "averaged_steps": [], "scores": {}, "model_signature": "tiny"}  # fmt: skip
    out = Path(args.output_dir) / "models" / "full-vanilla-seed0"
    monkeypatch.setattr(script, "run", lambda *a: (out.mkdir(parents=True), (out / "hf_syntax_mt_run.json").write_text(json.dumps(info))))  # fmt: skip
    refs = {
        t: r2.round_one.files(data, t)["tgt"].read_text(encoding="utf-8").split("\n")[:-1] for t in r2.MULTI30K_TESTS
    }
    monkeypatch.setattr(r2, "translate_test_sets", lambda *a: refs)
    record = json.loads(r2.run_unit(args, "full", "vanilla", 0, "cpu").read_text())
    assert record["machine"] == machine.machine_record("cpu")
    assert record["machine"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["machine"]["threads"] == torch.get_num_threads() == record["threads"]
