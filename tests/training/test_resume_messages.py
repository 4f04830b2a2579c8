"""Issue 56: every resume warned `There were missing keys in the checkpoint model loaded: [...embed_tokens...,
lm_head.weight]` although it was exact (the tied weights are saved once), and Ctrl-C printed only `error:
interrupted`. Now the keys missing by design are not reported (any other still is), and a stopped run names the
checkpoint it can resume from and the command, which resumes it."""

import shlex

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import MarianConfig, MarianMTModel, Seq2SeqTrainingArguments
from transformers import trainer as hf_trainer

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration, training
from hf_syntax_mt.cli import main as cli_main
from hf_syntax_mt.training.trainer import SyntaxMTTrainer

DIMS = dict(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=40,
            pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)  # fmt: skip


@pytest.mark.parametrize("classes", [(SyntaxMTForConditionalGeneration, SyntaxMTConfig), (MarianMTModel, MarianConfig)],
                         ids=["syntax_mt", "marian"])  # fmt: skip
def test_a_resumed_checkpoint_reports_only_keys_missing_by_accident(tmp_path, monkeypatch, classes):
    model_class, config_class = classes
    torch.manual_seed(0)
    saved = model_class(config_class(**DIMS))
    saved.save_pretrained(tmp_path / "checkpoint-5")  # what a Trainer checkpoint holds: tied weights saved once
    stored = load_file(str(tmp_path / "checkpoint-5" / "model.safetensors"))
    assert "lm_head.weight" not in stored and "model.shared.weight" in stored
    warnings = []
    monkeypatch.setattr(hf_trainer.logger, "warning", lambda message, *a, **k: warnings.append(str(message)))
    torch.manual_seed(1)
    model = model_class(config_class(**DIMS))
    args = Seq2SeqTrainingArguments(str(tmp_path / "run"), report_to="none", use_cpu=True)
    trainer = SyntaxMTTrainer(model=model, args=args)
    trainer._load_from_checkpoint(str(tmp_path / "checkpoint-5"))
    assert not [w for w in warnings if "missing keys" in w]
    expected = saved.state_dict()
    for key, value in model.state_dict().items():  # the tied ones too: the resume is exact
        assert torch.equal(value, expected[key]), key
    assert model.lm_head.weight.data_ptr() == model.model.shared.weight.data_ptr()
    # a key missing by accident is still named, alone
    del stored["model.encoder.layers.0.fc1.weight"]
    save_file(stored, str(tmp_path / "checkpoint-5" / "model.safetensors"), metadata={"format": "pt"})
    trainer._load_from_checkpoint(str(tmp_path / "checkpoint-5"))
    assert [w for w in warnings if "missing keys" in w] == [
        "There were missing keys in the checkpoint model loaded: ['model.encoder.layers.0.fc1.weight']."
    ]


@pytest.fixture
def pairs(tmp_path):
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 6)) for n in range(32)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{s}\n" for s in rows), encoding="utf-8")
    return tmp_path / "pairs.tsv"


def train_argv(out, data):
    return ["train", "--output_dir", str(out), "--train_file", str(data), "--d_model", "16", "--encoder_layers", "1",
            "--decoder_layers", "1", "--attention_heads", "2", "--ffn_dim", "32", "--vocab_size", "60",
            "--tokenizer_min_frequency", "1", "--max_steps", "8", "--per_device_train_batch_size", "8",
            "--save_strategy", "steps", "--save_steps", "5", "--do_train", "--report_to", "none", "--use_cpu",
            "--disable_tqdm", "true"]  # fmt: skip


def interrupt_at(monkeypatch, step):
    original = training.CurveCallback.on_step_end

    def stopped(self, args, state, control, **kwargs):
        original(self, args, state, control, **kwargs)
        if state.global_step == step:
            raise KeyboardInterrupt  # Ctrl-C
        return control

    monkeypatch.setattr(training.CurveCallback, "on_step_end", stopped)


def test_ctrl_c_names_the_checkpoint_and_the_command_that_resumes(pairs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    argv = train_argv(out, pairs)
    with monkeypatch.context() as patch:
        interrupt_at(patch, 7)
        assert cli_main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    command = shlex.join(["hf-syntax-mt", *argv, "--resume_from_checkpoint", str(out / "checkpoint-5")])
    assert err[-2:] == [f"error: interrupted; the last checkpoint is {out / 'checkpoint-5'}: resume the run with",
                        f"  {command}"]  # fmt: skip
    # the printed command resumes the run, to its end
    assert cli_main(shlex.split(err[-1])[1:]) == 0
    assert (out / "model.safetensors").is_file() and (out / "checkpoint-8").is_dir()


def test_ctrl_c_before_the_first_checkpoint_says_there_is_nothing_to_resume(pairs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        interrupt_at(patch, 2)
        assert cli_main(train_argv(out, pairs)) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: interrupted before a checkpoint was saved in {out} (every 5 steps): there is nothing "
                       "to resume; run the command again (with --overwrite_output_dir if the directory is not empty)")  # fmt: skip


def test_the_resume_command_passes_over_a_checkpoint_being_written_and_replaces_an_old_resume_flag(tmp_path):
    from types import SimpleNamespace

    from hf_syntax_mt.training.script import interrupted_message

    for step, complete in ((5, True), (10, True), (15, False)):  # checkpoint-15 was being written at Ctrl-C
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"")
        if complete:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    args = SimpleNamespace(output_dir=str(tmp_path), save_strategy="steps", save_steps=5)
    argv = ["--output_dir", str(tmp_path), "--resume_from_checkpoint", str(tmp_path / "checkpoint-5"), "--max_steps",
            "20"]  # fmt: skip
    message = interrupted_message(args, argv, "python scripts/train.py")
    assert message.splitlines()[1] == "  " + shlex.join(["python", "scripts/train.py", "--output_dir", str(tmp_path),
                                                         "--max_steps", "20", "--resume_from_checkpoint",
                                                         str(tmp_path / "checkpoint-10")])  # fmt: skip
    assert interrupted_message(args, ["run.json"], "hf-syntax-mt train") == (
        f"interrupted; the last checkpoint is {tmp_path / 'checkpoint-10'}: resume the run by adding "
        f'"resume_from_checkpoint": "{tmp_path / "checkpoint-10"}" to run.json and running hf-syntax-mt train '
        "run.json again"
    )
