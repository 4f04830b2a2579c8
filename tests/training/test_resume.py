"""An interrupted `scripts/train.py` run resumed from its checkpoint ends with the same weights as the uninterrupted
run: token batches, optimizer, schedule, dropout RNG, the running checkpoint average and the curve's training minutes
all carry over."""

import json

import pytest
from safetensors.torch import load_file

from hf_syntax_mt import training
from hf_syntax_mt.training.script import main as train_main


@pytest.fixture
def pairs(tmp_path):
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 9)) for n in range(60)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{s.upper()}\n" for s in rows), encoding="utf-8")
    return tmp_path / "pairs.tsv"


def argv(out, data, *extra):
    return ["--output_dir", str(out), "--train_file", str(data), "--validation_file", str(data), "--vanilla_marian",
            "--d_model", "32", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
            "--ffn_dim", "64", "--vocab_size", "100", "--tokenizer_min_frequency", "1", "--max_steps", "20",
            "--max_tokens", "120", "--learning_rate", "3e-3", "--warmup_steps", "5", "--dropout", "0.2",
            "--average_checkpoints", "3", "--average_every", "5", "--save_strategy", "steps", "--save_steps", "5",
            "--eval_strategy", "steps", "--eval_steps", "10", "--max_eval_samples", "8", "--do_train", "--do_eval",
            "--generation_max_length", "8", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
            *extra]  # fmt: skip


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
