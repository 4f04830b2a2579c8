"""Issue 56: one decoding for a model, named next to every score, and checkpoint averaging that cannot silently
lose. A run whose average is made worse than its last step (deterministically: the running sum is shifted after its
first step) saves the last step's own weights and says so in the run file, the card and the model signature;
``--keep_average`` keeps the average. Every recorded score (run file, card, results JSON, `evaluate` report) names
its decoding, and the pipeline's default decoding is the one the run's test scores used."""

import json
import logging
import re

import pytest
import torch
from safetensors.torch import load_file
from transformers import pipeline

from hf_syntax_mt.evaluation import RUN_INFO, corpus_scores, evaluate_files, format_evaluation
from hf_syntax_mt.training import callbacks
from hf_syntax_mt.training.script import main as train_main

SHIFT = 3.0  # added to every weight of the first averaged step's contribution to the running sum


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 6)) for n in range(48)]
    (root / "pairs.tsv").write_text("".join(f"{s}\t{s}\n" for s in rows), encoding="utf-8")  # a copy task: learnt fast
    return root / "pairs.tsv"


def argv(out, data, *extra):
    return ["--output_dir", str(out), "--train_file", str(data), "--validation_file", str(data), "--test_file",
            str(data), "--d_model", "64", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
            "--ffn_dim", "128", "--vocab_size", "100", "--tokenizer_min_frequency", "1", "--max_steps", "40",
            "--per_device_train_batch_size", "16", "--learning_rate", "1e-2", "--warmup_steps", "5",
            "--average_checkpoints", "2", "--average_every", "5", "--save_strategy", "steps", "--save_steps", "40",
            "--max_eval_samples", "12", "--max_predict_samples", "12", "--max_target_length", "16",
            "--report_to", "none", "--use_cpu", "--disable_tqdm", "true", *extra]  # fmt: skip


def shifted_first_average_step(monkeypatch):
    """The averaged window is steps 35 and 40; after step 35 is added, every weight of the sum is shifted by SHIFT,
    so the average is (w35 + SHIFT + w40) / 2: the training itself (the last step) is untouched."""
    original = callbacks.CheckpointAverageCallback.on_step_end

    def shifted(self, args, state, control, model=None, **kwargs):
        original(self, args, state, control, model=model, **kwargs)
        if self.steps == [state.global_step]:  # the first averaged step was just added
            self.sum = {k: v + SHIFT for k, v in self.sum.items()}
        return control

    monkeypatch.setattr(callbacks.CheckpointAverageCallback, "on_step_end", shifted)


@pytest.fixture(scope="module")
def runs(pairs, tmp_path_factory):
    """The same run twice, its average made worse: by default (the last step is saved) and with --keep_average."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        shifted_first_average_step(patch)
        assert train_main(argv(root / "better", pairs)) == 0
        assert train_main(argv(root / "kept", pairs, "--keep_average")) == 0
    return root


def test_the_last_step_is_saved_where_the_average_is_worse_on_validation(runs):
    out = runs / "better"
    info = json.loads((out / RUN_INFO).read_text())
    record = info["averaging"]
    assert (record["saved"], record["other"], record["chosen_by"]) == ("last_step", "average", "validation-bleu")
    assert record["averaged_steps"] == [35, 40] and info["weights"] == "last(40)"
    average, last = record["validation"]["average"], record["validation"]["last_step"]
    assert (last["bleu"], -last["loss"]) > (average["bleu"], -average["loss"]) and average["loss"] > last["loss"]
    # the saved weights are the last step's: checkpoint-40 was written before training ended (and averaged)
    saved, step_40 = (
        load_file(str(out / "model.safetensors")),
        load_file(str(out / "checkpoint-40" / "model.safetensors")),
    )
    assert saved.keys() == step_40.keys() and all(torch.equal(saved[k], step_40[k]) for k in saved)
    # the card and the model signature say which weights were saved and why, with both validation scores
    card = (out / "README.md").read_text(encoding="utf-8")
    assert (
        "Saved weights: the last step's own weights (step 40), the better of the two on the validation set "
        f"BLEU {last['bleu']:.2f}"
    ) in card and "for the average of the weights of steps 35, 40" in card
    assert "|weights:last(40)|weights_chosen_by:validation-bleu" in info["model_signature"]
    assert info["model_signature"] in card
    # the test set is scored with both; each score names its weights
    assert info["scores"]["test"]["decoding"].endswith("|weights:last(40)")
    assert info["scores"]["test_average"]["decoding"].endswith("|weights:average(35+40)")
    assert info["scores"]["test"]["bleu"] > info["scores"]["test_average"]["bleu"]


def test_keep_average_saves_the_average_and_says_so(runs):
    out = runs / "kept"
    info = json.loads((out / RUN_INFO).read_text())
    record = info["averaging"]
    assert (record["saved"], record["chosen_by"]) == ("average", "keep_average")
    assert record["validation"] == json.loads((runs / "better" / RUN_INFO).read_text())["averaging"]["validation"]
    # the saved weights are (w35 + SHIFT + w40) / 2; w35 is not on disk, so check the shift on a weight that moves
    # little in 5 steps (a layer norm's bias): saved - w40 = (w35 - w40) / 2 + SHIFT / 2
    saved, step_40 = (
        load_file(str(out / "model.safetensors")),
        load_file(str(out / "checkpoint-40" / "model.safetensors")),
    )
    key = "model.encoder.layers.0.self_attn_layer_norm.bias"
    assert ((saved[key] - step_40[key]) - SHIFT / 2).abs().max() < 0.2
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Saved weights: the average of the weights of steps 35, 40, kept by --keep_average" in card
    assert "|weights:average(35+40)|weights_chosen_by:keep_average" in info["model_signature"]
    assert info["scores"]["test_last_step"]["decoding"].endswith("|weights:last(40)")


def test_every_recorded_score_names_its_decoding(runs, pairs):
    out = runs / "better"
    info = json.loads((out / RUN_INFO).read_text())
    generation = json.loads((out / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["max_length"]) == (4, 16)  # written by the run: the defaults
    expected = "beams:4|max_length:16"
    # the run file
    assert set(info["scores"]) == {"validation", "test", "test_average"}
    for split, scores in info["scores"].items():
        assert scores["decoding"].startswith(expected + "|weights:"), split
    # the card: every score line, and the metadata's EvalResults
    card = (out / "README.md").read_text(encoding="utf-8")
    lines = [line for line in card.splitlines() if re.match(r"- \w+: BLEU", line)]
    assert len(lines) == 3 and all(f"decoded with `{expected}|weights:" in line for line in lines)
    assert card.count("decoding: " + expected) == 4  # validation and test, BLEU and chrF
    # the Trainer's results files
    for split in ("validation", "test"):
        assert json.loads((out / f"{split}_results.json").read_text())[f"{split}_decoding"] == \
            info["scores"][split]["decoding"]  # fmt: skip
    everything = json.loads((out / "all_results.json").read_text())
    assert everything["test_decoding"] == info["scores"]["test"]["decoding"]
    # the evaluate report of the run's own test generations with --model
    references = [line.split("\t")[1] for line in pairs.read_text(encoding="utf-8").splitlines()][:12]
    (out / "ref.txt").write_text("".join(r + "\n" for r in references), encoding="utf-8")
    result = evaluate_files(out / "test_generations.txt", out / "ref.txt", model=out)
    assert result["systems"]["system"]["decoding"] == info["scores"]["test"]["decoding"]
    assert result["systems"]["system"]["bleu"] == pytest.approx(info["scores"]["test"]["bleu"])
    assert f"decoding (system): {info['scores']['test']['decoding']} (the model's generation config" in \
        format_evaluation(result)  # fmt: skip


def test_the_pipelines_default_decoding_is_the_runs(runs, pairs):
    """One model, one BLEU: the pipeline without decoding arguments reproduces the run's test generations."""
    out = runs / "better"
    sources = [line.split("\t")[0] for line in pairs.read_text(encoding="utf-8").splitlines()][:12]
    translate = pipeline("translation", model=str(out), trust_remote_code=True, device="cpu")
    outputs = [o["translation_text"].strip() for o in translate(sources, batch_size=4)]
    hypotheses = (out / "test_generations.txt").read_text(encoding="utf-8").splitlines()
    assert outputs == hypotheses
    references = [line.split("\t")[1] for line in pairs.read_text(encoding="utf-8").splitlines()][:12]
    info = json.loads((out / RUN_INFO).read_text())
    assert corpus_scores(outputs, references)["bleu"] == pytest.approx(info["scores"]["test"]["bleu"])


def test_a_run_without_validation_keeps_the_average_and_says_why(pairs, tmp_path, caplog):
    args = argv(tmp_path / "run", pairs, "--max_steps", "10", "--save_strategy", "no")
    args = args[:4] + args[6:]  # no --validation_file
    with caplog.at_level(logging.INFO, logger="hf_syntax_mt.training.averaging"):
        assert train_main(args) == 0
    info = json.loads((tmp_path / "run" / RUN_INFO).read_text())
    assert (info["averaging"]["saved"], info["averaging"]["chosen_by"]) == ("average", "no-validation-set")
    assert "there was no validation set to compare them with the last step's own weights" in caplog.text
