"""An interrupted `scripts/train.py` run resumed from its checkpoint ends with the same weights as the uninterrupted
run: token batches, optimizer, schedule, dropout RNG, the running checkpoint average and the curve's training minutes
all carry over; a resume with other averaging flags averages its own window (rebuilt from the checkpoints) or is
refused naming the missing checkpoint, and a broken running-sum file is named."""

import json
import logging
import shutil
from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hf_syntax_mt import training
from hf_syntax_mt.training.script import main as train_main


@pytest.fixture
def pairs(tmp_path):
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 9)) for n in range(60)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{s.upper()}\n" for s in rows), encoding="utf-8")
    return tmp_path / "pairs.tsv"


def argv(out, data, *extra):
    """The run's flags; --keep_average: the saved weights are the average, whatever validation says (issue 56)."""
    return ["--output_dir", str(out), "--train_file", str(data), "--validation_file", str(data), "--vanilla_marian",
            "--d_model", "32", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
            "--ffn_dim", "64", "--vocab_size", "100", "--tokenizer_min_frequency", "1", "--max_steps", "20",
            "--max_tokens", "120", "--learning_rate", "3e-3", "--warmup_steps", "5", "--dropout", "0.2",
            "--average_checkpoints", "3", "--average_every", "5", "--save_strategy", "steps", "--save_steps", "5",
            "--eval_strategy", "steps", "--eval_steps", "10", "--max_eval_samples", "8", "--do_train", "--do_eval",
            "--generation_max_length", "8", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
            "--keep_average", *extra]  # fmt: skip


def test_resumed_run_equals_the_uninterrupted_one(pairs, tmp_path, monkeypatch):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train_main(argv(whole, pairs)) == 0

    original = training.CurveCallback.on_step_end

    def stop_at_12(self, args, state, control, **kwargs):
        original(self, args, state, control, **kwargs)
        if state.global_step == 12:
            control.should_training_stop = True  # the "session ends" after step 12
        return control

    monkeypatch.setattr(training.CurveCallback, "on_step_end", stop_at_12)
    assert train_main(argv(parts, pairs)) == 0
    monkeypatch.setattr(training.CurveCallback, "on_step_end", original)
    assert (parts / "checkpoint-10" / "averaged_sum.safetensors").is_file()  # step 10 is in the averaging window
    tokenizer = ["--tokenizer_name", str(parts / "tokenizer")]
    assert train_main(argv(parts, pairs, "--resume_from_checkpoint", str(parts / "checkpoint-10"), *tokenizer)) == 0

    a, b = load_file(str(whole / "model.safetensors")), load_file(str(parts / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] - b[key]).abs().max() < 1e-5, key
    run_a = json.loads((whole / "hf_syntax_mt_run.json").read_text())
    run_b = json.loads((parts / "hf_syntax_mt_run.json").read_text())
    assert run_a["averaged_steps"] == run_b["averaged_steps"] == [10, 15, 20]
    assert [p["step"] for p in run_b["curve"]] == [p["step"] for p in run_a["curve"]] == [10, 20]
    assert run_b["curve"][-1]["eval_loss"] == pytest.approx(run_a["curve"][-1]["eval_loss"], abs=1e-4)
    assert run_b["num_input_tokens_seen"] == run_a["num_input_tokens_seen"]
    assert run_b["train_seconds"] > 0


# ------------------------------------------------------------------------------------------------------------------
# Averaging across a resume with other flags (issue 44): the window of the resumed run's flags, or a clear refusal
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A run (average 3 checkpoints 5 apart of 20 steps, checkpoints every 5) stopped after step 17: its
    checkpoint-15 holds the running sum of steps [10, 15]."""
    root = tmp_path_factory.mktemp("interrupted")
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 9)) for n in range(60)]
    (root / "pairs.tsv").write_text("".join(f"{s}\t{s.upper()}\n" for s in rows), encoding="utf-8")
    original = training.CurveCallback.on_step_end

    def stop_at_17(self, args, state, control, **kwargs):
        original(self, args, state, control, **kwargs)
        if state.global_step == 17:
            control.should_training_stop = True
        return control

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training.CurveCallback, "on_step_end", stop_at_17)
        assert train_main(argv(root / "run", root / "pairs.tsv")) == 0
    with safe_open(str(root / "run" / "checkpoint-15" / "averaged_sum.safetensors"), "pt") as f:
        assert json.loads(f.metadata()["steps"]) == [10, 15]
    return root


def resumed(interrupted, tmp_path, *flags):
    """A copy of the interrupted run, resumed from its checkpoint-15 with `flags` (later flags win)."""
    run = tmp_path / "run"
    shutil.copytree(interrupted / "run", run)
    args = argv(run, interrupted / "pairs.tsv", "--resume_from_checkpoint", str(run / "checkpoint-15"), *flags)
    return run, args


def independent_average(run, steps):
    """The mean of the checkpoints' saved weights, computed here from their files."""
    weights = [load_file(str(run / f"checkpoint-{s}" / "model.safetensors")) for s in steps]
    return {k: sum(w[k].double() for w in weights) / len(weights) for k in weights[0]}


@pytest.mark.parametrize(
    "flags, window",
    [(["--average_checkpoints", "2", "--average_every", "10"], [10, 20]),  # it averaged [10, 15, 20]
     (["--max_steps", "30"], [20, 25, 30])],  # it averaged 5: [10, 15] from before the window
    ids=["other-every", "longer-run"],
)  # fmt: skip
def test_a_resume_with_other_averaging_flags_averages_its_own_window(interrupted, tmp_path, flags, window):
    run, args = resumed(interrupted, tmp_path, *flags)
    assert train_main(args) == 0
    info = json.loads((run / "hf_syntax_mt_run.json").read_text())
    assert info["averaged_steps"] == window
    expected, saved = independent_average(run, window), load_file(str(run / "model.safetensors"))
    assert saved.keys() == expected.keys()
    for key in saved:
        assert (saved[key].double() - expected[key]).abs().max() < 1e-6, key


def test_a_resume_whose_window_needs_a_deleted_checkpoint_is_refused_with_the_fix(interrupted, tmp_path):
    run, args = resumed(interrupted, tmp_path, "--average_checkpoints", "2", "--average_every", "10")
    shutil.rmtree(run / "checkpoint-10")  # the window [10, 20] needs step 10's weights
    with pytest.raises(ValueError, match=r"averages steps \[10, 20\], of which \[10\] come before the resumed step 15; "
                                         r"the saved running sum holds steps \[10, 15\] \(made with "
                                         r"--average_checkpoints 3 --average_every 5 --max_steps 20\) and the weights "
                                         r"of checkpoint-10 are not in .*Resume with the flags the run started with"):  # fmt: skip
        train_main(args)


def test_a_truncated_running_sum_names_its_file(tmp_path):
    path = tmp_path / "checkpoint-15" / "averaged_sum.safetensors"
    path.parent.mkdir()
    save_file({"w": torch.arange(6.0).reshape(2, 3)}, str(path), metadata={"steps": "[10, 15]"})
    callback = training.CheckpointAverageCallback(3, 5)
    callback.load_from(path.parent)  # whole: read back
    assert callback.steps == [10, 15] and torch.equal(callback.sum["w"], torch.arange(6.0).reshape(2, 3))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match=rf"{path}: the running sum of checkpoint averaging cannot be read .*truncated "
                                         r"or corrupt\. Delete it and resume again"):  # fmt: skip
        training.CheckpointAverageCallback(3, 5).load_from(path.parent)


def test_the_sum_rebuilt_from_checkpoints_reads_a_tied_weight_under_its_saved_name(tmp_path):
    """Hand-built: a model whose output weight is its embedding, saved once (as safetensors drops shared tensors);
    the rebuilt sum holds both names, each the sum of the checkpoints' values."""

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(4, 3)
            self.out = torch.nn.Linear(3, 4, bias=True)
            self.out.weight = self.embed.weight

    model, values = Tied(), {}
    for step in (5, 10):
        values[step] = {"embed.weight": torch.full((4, 3), float(step)), "out.bias": torch.arange(4.0) * step}
        (tmp_path / f"checkpoint-{step}").mkdir()
        save_file(values[step], str(tmp_path / f"checkpoint-{step}" / "model.safetensors"))
    callback = training.CheckpointAverageCallback(2, 5)
    state = SimpleNamespace(max_steps=15, global_step=10)  # window [10, 15]: step 10 comes before the resume
    callback.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), state, None, model=model)
    assert callback.steps == [10]
    assert torch.equal(callback.sum["out.weight"], values[10]["embed.weight"])
    assert torch.equal(callback.sum["embed.weight"], values[10]["embed.weight"])
    assert torch.equal(callback.sum["out.bias"], values[10]["out.bias"])
    callback = training.CheckpointAverageCallback(3, 5)  # window [5, 10, 15]
    callback.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), state, None, model=model)
    assert callback.steps == [5, 10] and torch.equal(
        callback.sum["out.bias"], values[5]["out.bias"] + values[10]["out.bias"]
    )


def test_a_saved_sum_outside_the_resumed_window_is_dropped_and_said_so(tmp_path, caplog):
    """--max_steps 30 resumed at step 15 averages [20, 25, 30]: none of the saved sum's steps [10, 15] belongs to it,
    so the sum is dropped (not "rebuilt from" an empty list of checkpoints)."""
    from types import SimpleNamespace

    callback = training.CheckpointAverageCallback(3, 5)
    callback.steps, callback.sum = [10, 15], {"w": torch.ones(2)}
    state = SimpleNamespace(max_steps=30, global_step=15)
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt"):
        callback.on_train_begin(SimpleNamespace(output_dir=str(tmp_path)), state, None, model=torch.nn.Linear(2, 2))
    assert callback.sum is None and callback.steps == []
    assert "lies outside this run's window [20, 25, 30]: dropped" in caplog.text
