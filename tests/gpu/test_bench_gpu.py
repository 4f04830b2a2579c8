"""`benchmarks/gpu/bench_gpu.py` at its tiny CPU size (plumbing; the GPU check runs it on CUDA): the JSON holds every
phase for every model, its tokens/s and ratios follow from the recorded times (recomputed here), the targets are
judged from those ratios; its synthetic batch carries every method's columns, consistent with one tree. The
variable-shape phase's plan is Multi30k's lengths in `--max_tokens` buckets with evaluation steps between, and its
compile counter counts what dynamo compiles (checked on a function whose recompiles are known). Numeric flags have
ranges."""

import importlib.util
import json
import statistics
import warnings
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "gpu" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_gpu") / "bench.json"
    assert (
        bench.main(["--device", "cpu", "--quick", "--only", "none", "pascal", "synchronous", "--output", str(out)])
        == 0
    )
    return json.loads(out.read_text()), out


def test_the_json_has_every_phase_for_every_model(result):
    data, out = result
    models = ["marian", "none", "pascal", "synchronous"]
    assert data["complete"] and data["environment"]["device"] == "cpu" and data["size"]["name"] == "tiny"
    assert data["environment"]["torch"] == torch.__version__
    assert len(data["train"]) == 2 and len(data["generate"]) == 1  # two token batches; --quick: one generation size
    for phase, unit in ((data["train"], "tokens"), (data["generate"], "sentences")):
        for rows in phase.values():
            assert list(rows) == models
            for row in rows.values():
                assert len(row["seconds"]) == data["rounds"] and all(s > 0 for s in row["seconds"])
                assert row["peak_memory_bytes"] is None  # not measured on the CPU
                assert row[f"{unit}_per_second"] > 0
    assert data["compile"] == {}  # off on the CPU by default
    variable = data["variable"]
    assert list(variable["models"]) == ["marian", "none", "pascal", "synchronous"]  # the phase's models that ran
    plan = variable["plan"]
    assert plan["train_steps"] == 6 and plan["eval_steps"] == 2 and plan["distinct_shapes"] > 3
    for row in variable["models"].values():
        assert row["tokens_per_second"] == pytest.approx(plan["train_tokens"] / row["train_seconds"])
        assert row["ratio_to_marian"] == pytest.approx(
            variable["models"]["marian"]["train_seconds"] / row["train_seconds"]
        )
        assert row["peak_step_memory_bytes"] is None and row["recompiles"] == len(row["recompile_reasons"])
        assert {"graphs", "compiled_frames", "fallback", "warnings", "first_pass_ratio_to_marian"} <= set(row)
    assert "## Training on batches of changing shapes" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".md").read_text().count("| marian |") == 3  # training, variable shapes, generation


def test_throughput_and_ratios_follow_from_the_recorded_times(result):
    data, _ = result
    for label, rows in data["train"].items():
        tokens = data["batches"][label]["tokens"]
        marian = statistics.median(rows["marian"]["seconds"])
        for row in rows.values():
            median = statistics.median(row["seconds"])
            assert row["median_seconds"] == pytest.approx(median)
            assert row["tokens_per_second"] == pytest.approx(tokens / median)
            assert row["ratio_to_marian"] == pytest.approx(marian / median)
    for label, rows in data["generate"].items():
        sentences = int(label.split()[0])
        marian = statistics.median(rows["marian"]["seconds"])
        for row in rows.values():
            assert row["sentences_per_second"] == pytest.approx(sentences / statistics.median(row["seconds"]))
            assert row["ratio_to_marian"] == pytest.approx(marian / statistics.median(row["seconds"]))


def test_targets_are_judged_from_the_ratios(result, bench):
    data, _ = result
    expected = {("none", "train"): 0.98, ("pascal", "train"): 0.95, ("synchronous", "train"): 0.90}
    train = [t for t in data["targets"] if t["measure"] == "train"]
    assert {(t["model"], t["batch"]) for t in train} == {(m, b) for m, _ in expected for b in data["train"]}
    for t in data["targets"]:
        phase = data["train" if t["measure"] == "train" else "generate"][t["batch"]]
        want = expected.get((t["model"], t["measure"]), 0.95)
        assert t["target"] == want and t["ratio"] == phase[t["model"]]["ratio_to_marian"]
        assert t["met"] == (t["ratio"] >= want)
    assert {t["model"] for t in data["targets"] if t["measure"] == "generate"} == {"none", "pascal", "synchronous"}


def test_the_synthetic_batch_is_one_consistent_tree_per_sentence(bench):
    batch = bench.synthetic_batch(6, vocab_size=50, max_len=12, seed=3)
    mask, parents = batch["attention_mask"].bool(), batch["parent_positions"]
    for b in range(6):
        n = int(mask[b].sum())  # real tokens, the last is </s>
        assert batch["input_ids"][b, n - 1] == 0 and (batch["input_ids"][b, n:] == 1).all()
        assert parents[b, 0] == 0  # the root word points to itself
        for t in range(n - 1):  # token t is word t + 1; its parent token is its head word's token
            head_word = int(batch["word_heads"][b, t])
            assert batch["word_index"][b, t] == t + 1
            assert parents[b, t] == (t if head_word == 0 else head_word - 1)
            assert parents[b, t] < max(t, 1)  # heads point left: a tree, no cycle
            assert batch["lisa_parents"][b, t] == parents[b, t] == batch["dbsa_heads"][b, t]
        assert (batch["lisa_parents"][b, n - 1 :] == -100).all() and (batch["word_index"][b, n - 1 :] == 0).all()
        assert (parents[b, n - 1 :] == torch.arange(n - 1, parents.shape[1])).all()  # </s>, padding: themselves
    # the context of row b is row b - 1's sentence
    assert torch.equal(batch["context_input_ids"][1:], batch["input_ids"][:-1])
    assert torch.equal(batch["context_attention_mask"][1:], batch["attention_mask"][:-1])


def test_every_registered_method_has_a_setting(bench):
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.methods import active_methods, registered

    configs = bench.method_configs(6, 8)
    assert {m.name for m in registered()} <= set(configs), "give the method a tester_config"
    for name, config in configs.items():  # every setting builds at the benchmark's size, with its method switched on
        active = {m.name for m in active_methods(SyntaxMTConfig(encoder_layers=6, decoder_layers=6, d_model=64,
                                                                 encoder_attention_heads=8, decoder_attention_heads=8,
                                                                 **config))}  # fmt: skip
        assert name in active or name == "none", name


def test_tiny_results_are_refused_under_benchmarks_results(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(["--device", "cpu", "--output", str(ROOT / "benchmarks" / "results" / "gpu" / "x.json")])


def test_the_variable_plan_is_multi30k_in_max_tokens_buckets_with_evaluations_between(bench):
    from benchmarks.gpu import variable_shapes

    table = json.loads(variable_shapes.LENGTHS.read_text())
    assert table["pairs"] == sum(n for *_, n in table["source_target_count"]) == 29000
    known = {(s, t) for s, t, _ in table["source_target_count"]}
    steps = variable_shapes.plan(max_tokens=300, train_steps=6, eval_every=3, max_length=250)
    assert [kind for kind, *_ in steps] == ["train"] * 3 + ["eval"] + ["train"] * 3 + ["eval"]
    for _, src, tgt in steps:
        assert len(src) * max(max(src), max(tgt)) <= 300  # fairseq's rule: rows x longest side
        assert set(zip(src, tgt, strict=True)) <= known
    assert len({(len(src), max(src), max(tgt)) for _, src, tgt in steps}) > 4  # the shape changes step to step
    batch = bench.synthetic_batch(3, 50, 12, lengths=([5, 9, 3], [4, 2, 7]))
    assert batch["attention_mask"].sum(1).tolist() == [5, 9, 3] and (batch["labels"] != -100).sum(1).tolist() == [
        4,
        2,
        7,
    ]


def test_the_compile_watch_counts_graphs_recompiles_and_fallback_warnings(bench):
    """A function compiled with an int argument: dynamo specialises on the int, so two values give two graphs and
    one recompile; a warning that says it falls back is flagged. A new watch starts from zero."""
    from benchmarks.gpu.variable_shapes import CompileWatch

    def scale(x, n):
        return x * n

    with CompileWatch() as watch:
        compiled = torch.compile(scale, backend="eager")
        for n in (2, 2, 3):
            assert torch.equal(compiled(torch.ones(3), n), torch.full((3,), float(n)))
        warnings.warn("flex_attention falls back to the uncompiled path", UserWarning, stacklevel=1)
    report = watch.report()
    assert (report["graphs"], report["compiled_frames"], report["recompiles"]) == (2, 2, 1)
    assert report["fallback"] and any("falls back" in w for w in report["warnings"])
    with CompileWatch() as again:
        torch.compile(scale, backend="eager")(torch.ones(2), 5)
    assert (again.report()["graphs"], again.report()["recompiles"], again.report()["fallback"]) == (1, 0, False)


@pytest.mark.parametrize(
    "flag, value, message",
    [("--beams", "0", "--beams: must be at least 1, got 0"), ("--rounds", "0", "--rounds: must be at least 1, got 0"),
     ("--steps", "0", "--steps: must be at least 1, got 0"),
     ("--variable-tokens", "10", "--variable-tokens: must be at least 64, got 10"),
     ("--budget", "nan", "--budget: must be a finite number, got nan"),
     ("--new-tokens", "two", "--new-tokens: 'two' is not an integer")],
)  # fmt: skip
def test_numeric_flags_are_refused_out_of_range(bench, capsys, flag, value, message):
    with pytest.raises(SystemExit) as stop:
        bench.parse_args(["--device", "cpu", flag, value])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_given_flags_are_kept_not_replaced(bench, tmp_path):
    out = ["--output", str(tmp_path / "b.json")]
    args = bench.parse_args(["--device", "cpu", "--rounds", "7", "--steps", "3", "--variable-steps", "0", *out])
    assert (args.rounds, args.steps, args.variable_steps) == (7, 3, 0)  # 0: the phase is skipped, as asked
    default = bench.parse_args(["--device", "cpu", *out])
    assert (default.rounds, default.steps, default.variable_steps, default.variable_tokens) == (2, 1, 6, 300)


def test_quick_at_transformer_base_runs_a_short_variable_phase(bench, tmp_path):
    """The first H200 run's quick mode (16 variable-shape steps after the training phases) ran past its 120 s; now 6."""
    args = bench.parse_args(["--device", "cpu", "--size", "base", "--quick", "--output", str(tmp_path / "b.json")])
    assert (args.variable_steps, args.rounds, args.steps, args.generate_rows) == (6, 3, 5, [64])


def test_the_budget_allows_work_that_ends_its_margin_before_the_end(bench):
    import time

    budget = bench.Budget(100.0, time.perf_counter() - 85.0)  # 85 s spent of 100: 10 s margin, 5 s left
    assert budget.allows(4.0) and not budget.allows(6.0)
    assert bench.Budget(None, time.perf_counter() - 1e6).allows(1e6)  # no --budget: never cut
    short = bench.Budget(5.0, time.perf_counter() - 4.0)  # a budget under 100 s keeps a tenth as its margin
    assert short.allows(0.4) and not short.allows(0.6)


def test_a_run_over_its_budget_is_cut_at_unit_boundaries_and_says_so(bench, tmp_path, monkeypatch):
    """A budget spent from the start: the first training batch runs one round (at least one is timed); the second
    batch, generation, the variable-shape phase and compile are cut, each named in `cut`, or skipped; the JSON is not
    `complete`."""
    monkeypatch.setattr(bench.Budget, "spent", lambda self: self.seconds)
    out = tmp_path / "b.json"
    argv = ["--device", "cpu", "--quick", "--only", "none", "--budget", "100", "--compile", "none"]
    assert bench.main([*argv, "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert not data["complete"] and data["budget_seconds"] == 100.0
    (label,) = data["train"]
    assert all(len(row["seconds"]) == 1 for row in data["train"][label].values())
    assert data["generate"] == {} and data["variable"] == {} and data["compile"] == {}
    cut = data["cut"]
    assert cut[0] == f"train {label}: 1 of {data['rounds']} rounds (budget 100 s)"
    assert cut[1].startswith("train ") and cut[1].endswith(" tokens: not run (budget 100 s)")
    assert cut[2:] == ["generate 4 sentences: not run (budget 100 s)", "variable shapes: not run (budget 100 s)"]
    assert data["skipped"]["compile"].startswith("about 60 s per compiled model did not fit in --budget 100 s")
    assert "## Cut (the run is incomplete)" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_time_limit_signal_stops_the_run_and_writes_what_it_measured(tmp_path, signum):
    """What `timeout` sends (the GPU check: SIGINT): the run stops where it is, writes the JSON with the training
    batch it finished, `complete` false and where it stopped, and exits 130."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "b.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu" / "bench_gpu.py"), "--device", "cpu", "--only", "none",
               "--rounds", "50", "--output", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = []
    for line in run.stderr:  # the first training batch is written: stop it in the second
        lines.append(line)
        if line.startswith("bench_gpu: train"):
            run.send_signal(getattr(signal, signum))
            break
    lines += run.stderr.readlines()
    assert run.wait(timeout=120) == 130, "".join(lines)
    data = json.loads(out.read_text())
    assert not data["complete"] and len(data["train"]) == 1
    assert (
        len(data["cut"]) == 1 and f"interrupted by {signum}" in data["cut"][0] and data["cut"][0].startswith("train")
    )
    assert "INCOMPLETE" in lines[-1]


def test_models_made_on_meta_and_initialised_once_equal_a_plain_build(bench):
    """`build_models` makes each model on `meta` and initialises it on the device once: every parameter and buffer
    of a plain build (made and initialised on the CPU) is there with its shape, finite; the buffers, Marian's
    sinusoidal positions and every weight a plain build initialises to a constant (biases 0, norms 1, bi-affine
    U = I, tree-bias weights) are equal; the output embedding stays tied to the input one."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

    size = bench.SIZES["tiny"]
    names = list(bench.method_configs(size["layers"], size["heads"]))
    built = bench.build_models(names, size, "cpu")
    base = dict(vocab_size=size["vocab_size"], d_model=size["d_model"], encoder_layers=size["layers"],
                decoder_layers=size["layers"], encoder_attention_heads=size["heads"],
                decoder_attention_heads=size["heads"], encoder_ffn_dim=size["ffn_dim"], decoder_ffn_dim=size["ffn_dim"],
                max_position_embeddings=256, pad_token_id=1, eos_token_id=0, decoder_start_token_id=1,
                forced_eos_token_id=None, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip
    configs = bench.method_configs(size["layers"], size["heads"])
    constants = 0
    for name, model in built.items():
        plain = MarianMTModel(MarianConfig(**base)) if name == "marian" else \
            SyntaxMTForConditionalGeneration(SyntaxMTConfig(**base, **configs[name]))  # fmt: skip
        ours, theirs = dict(model.named_parameters()), dict(plain.named_parameters())
        assert {n: p.shape for n, p in ours.items()} == {n: p.shape for n, p in theirs.items()}, name
        assert all(torch.isfinite(p).all() and p.device.type == "cpu" for p in ours.values()), name
        for n, b in plain.named_buffers():
            assert torch.equal(dict(model.named_buffers())[n], b), (name, n)
        for n, p in theirs.items():
            if "embed_positions" in n or (p.numel() > 1 and torch.all(p == p.flatten()[0])) or "biaffine_u" in n:
                assert torch.equal(ours[n], p), (name, n)
                constants += 1
        assert model.lm_head.weight.data_ptr() == model.model.shared.weight.data_ptr(), name
    assert constants > 100 and any("biaffine_u" in n for m in built.values() for n, _ in m.named_parameters())
