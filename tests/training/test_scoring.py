"""Issue 64, item 6: scoring that does not dwarf training. A run with checkpoint averaging passes over each split once
per weights (the validation decode of the weights `choose_weights` keeps is the run's validation score), every pass's
progress bar says what it decodes, splits are decoded sorted by source length and come back in dataset order with the
hypotheses of unsorted decoding, and the run file splits the time between training and each decode."""

import copy
import json

import numpy as np
import pytest
import torch
import tqdm.auto
import transformers.trainer_callback
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_syntax_mt.data import SyntaxMTPreprocessor
from hf_syntax_mt.demo.synthetic_corpus import gold_source_parses, load_synthetic_dataset
from hf_syntax_mt.evaluation import RUN_INFO, corpus_scores
from hf_syntax_mt.training import build_model, callbacks, model_config, train_tokenizer
from hf_syntax_mt.training.scoring import DECODE_BATCH_SIZE, Decodes, _check_order, by_length, decode_batch_size
from hf_syntax_mt.training.script import SyntaxMTTrainingArguments
from hf_syntax_mt.training.script import main as train_main
from hf_syntax_mt.training.trainer import SyntaxMTTrainer, build_trainer

N_VALIDATION, N_TEST = 6, 10  # different sizes: the spy tells the splits apart by their length


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n * 7 + k) % 12] for k in range(1 + n % 6)) for n in range(48)]
    (root / "pairs.tsv").write_text("".join(f"{s}\t{s}\n" for s in rows), encoding="utf-8")
    return root / "pairs.tsv"


def argv(out, data):
    return ["--output_dir", str(out), "--train_file", str(data), "--validation_file", str(data), "--test_file",
            str(data), "--d_model", "32", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
            "--ffn_dim", "64", "--vocab_size", "100", "--tokenizer_min_frequency", "1", "--max_steps", "10",
            "--per_device_train_batch_size", "16", "--learning_rate", "1e-2", "--warmup_steps", "5",
            "--average_checkpoints", "2", "--average_every", "5", "--save_strategy", "no",
            "--max_eval_samples", str(N_VALIDATION), "--max_predict_samples", str(N_TEST), "--max_target_length", "12",
            "--report_to", "none", "--use_cpu", "--disable_tqdm", "false"]  # fmt: skip


@pytest.fixture(scope="module")
def spied_run(pairs, tmp_path_factory):
    """One run with averaging, validation and test; a spy on `SyntaxMTTrainer.predict` records every pass (split by
    its length, weights by a fingerprint of the model's parameters, the predictions in the order decoded) and a
    recording tqdm every progress bar's description."""
    out = tmp_path_factory.mktemp("run") / "run"
    passes, bars = [], []
    original = SyntaxMTTrainer.predict

    def spy(self, dataset, *args, **kwargs):
        prediction = original(self, dataset, *args, **kwargs)
        weights = fingerprint(self.model)
        split = {N_VALIDATION: "validation", N_TEST: "test"}[len(dataset)]
        passes.append({"split": split, "weights": weights, "predictions": prediction.predictions})
        return prediction

    class RecordingBar(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            bars.append(kwargs.get("desc"))
            super().__init__(*args, **{**kwargs, "disable": True})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SyntaxMTTrainer, "predict", spy)
        patch.setattr(callbacks, "tqdm", RecordingBar)
        patch.setattr(transformers.trainer_callback, "tqdm", RecordingBar)
        assert train_main(argv(out, pairs)) == 0
    return out, passes, bars


def fingerprint(model) -> float:
    with torch.no_grad():
        return round(sum(float(p.double().sum()) for p in model.parameters()), 6)


def test_each_split_is_decoded_once_per_weights(spied_run, pairs):
    out, passes, _ = spied_run
    counted = {}
    for p in passes:
        counted[(p["split"], p["weights"])] = counted.get((p["split"], p["weights"]), 0) + 1
    # validation: the average and the last step (choose_weights); test: the saved weights and the other ones
    assert sorted(p["split"] for p in passes) == ["test", "test", "validation", "validation"]
    assert all(n == 1 for n in counted.values()), counted
    saved = fingerprint(AutoModelForSeq2SeqLM.from_pretrained(str(out)))
    assert {w for s, w in counted if s == "validation"} == {w for s, w in counted if s == "test"} and \
        ("validation", saved) in counted  # fmt: skip
    # the run's validation score is that one pass of the saved weights, not a third decode
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    kept = next(p["predictions"] for p in passes if (p["split"], p["weights"]) == ("validation", saved))
    hypotheses = [t.strip() for t in tokenizer.batch_decode(np.where(kept < 0, tokenizer.pad_token_id, kept),
                                                              skip_special_tokens=True)]  # fmt: skip
    generations = (out / "validation_generations.txt").read_text(encoding="utf-8").splitlines()
    assert sorted(hypotheses) == sorted(generations)  # the pass decoded sorted by length, the file is in order
    references = [line.split("\t")[1] for line in pairs.read_text(encoding="utf-8").splitlines()][:N_VALIDATION]
    info = json.loads((out / RUN_INFO).read_text())
    assert info["scores"]["validation"]["bleu"] == pytest.approx(corpus_scores(generations, references)["bleu"])


def test_every_decode_is_labelled_with_its_split_weights_and_place(spied_run):
    out, _, bars = spied_run
    record = json.loads((out / RUN_INFO).read_text())["averaging"]
    names = record["weights"]
    expected = [f"decoding validation: {names['average']} (1 of 4)", f"decoding validation: {names['last_step']} (2 of 4)",
                f"decoding test: {names[record['saved']]} (3 of 4)", f"decoding test: {names[record['other']]} (4 of 4)"]  # fmt: skip
    assert [b for b in bars if b is not None] == expected
    assert bars.count(None) == 1  # the training bar; no unlabelled bar for any prediction pass


def test_the_run_file_splits_training_and_decoding_time(spied_run):
    out, passes, _ = spied_run
    info = json.loads((out / RUN_INFO).read_text())
    time = info["time"]
    names = info["averaging"]["weights"]
    saved, other = names[info["averaging"]["saved"]], names[info["averaging"]["other"]]
    decodes = [(d["split"], d["weights"], d["sentences"]) for d in time["decodes"]]
    assert decodes == [("validation", names["average"], N_VALIDATION), ("validation", names["last_step"], N_VALIDATION),
                       ("test", saved, N_TEST), ("test", other, N_TEST)]  # fmt: skip
    assert len(time["decodes"]) == len(passes)  # one record per pass the spy saw
    assert all(d["seconds"] > 0 and d["generate"] for d in time["decodes"])
    assert time["decoding_seconds"] == pytest.approx(sum(d["seconds"] for d in time["decodes"]), abs=0.06)
    assert time["training_seconds"] == info["train_seconds"] > 0
    assert time["total_seconds"] >= time["training_seconds"] + time["decoding_seconds"] - 0.2


# ------------------------------------------------------------------------------------------------------------------
# Decoding sorted by length
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random PASCAL model (greedy) and 10 parsed pairs of 1 to 20 words, in an order that is not by length."""
    raw = load_synthetic_dataset(n_train=64, n_valid=10, n_test=2, seed=3, max_words=20)
    tokenizer = train_tokenizer(list(raw["train"]["source"]) + list(raw["train"]["target"]), vocab_size=200)
    data = raw["validation"].map(gold_source_parses, batched=True)
    prep = SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse", max_source_length=64,
                                max_target_length=64)  # fmt: skip
    data = data.map(prep, batched=True, remove_columns=data.column_names)
    config = model_config(tokenizer, d_model=32, layers=1, heads=4, ffn_dim=64, dropout=0.0, encoder_pascal_heads=[2])
    model = build_model(config, seed=0)
    model.generation_config.num_beams = 1
    args = SyntaxMTTrainingArguments(output_dir=str(tmp_path_factory.mktemp("tiny")), per_device_eval_batch_size=4,
                                     report_to=[], use_cpu=True, disable_tqdm=True, predict_with_generate=True,
                                     generation_max_length=12, generation_num_beams=1)  # fmt: skip
    trainer, _, _ = build_trainer(model, tokenizer, args)
    return trainer, data


def test_decoding_by_length_gives_the_hypotheses_of_unsorted_decoding(tiny, monkeypatch):
    trainer, data = tiny
    order = by_length(data)
    lengths = [len(r) for r in data["input_ids"]]
    assert order != list(range(len(data))) and [lengths[i] for i in order] == sorted(lengths, reverse=True)
    gen = dict(max_length=12, num_beams=1)
    unsorted = trainer.predict(data, metric_key_prefix="validation", **gen)
    seen = []  # the source lengths of each generate() batch
    generate = trainer.model.generate

    def spy(*args, **kwargs):
        seen.append(kwargs["attention_mask"].sum(-1).tolist())
        return generate(*args, **kwargs)

    monkeypatch.setattr(trainer.model, "generate", spy)
    prediction = Decodes(trainer, ["validation"], gen).predict("validation", data, "last(1)")
    _check_order(prediction.label_ids, data["labels"], "validation")  # back in dataset order
    assert [n for batch in seen for n in batch] == [lengths[i] for i in order]  # decoded longest first, 4 a batch
    assert [len(b) for b in seen] == [4, 4, 2]
    width = min(unsorted.predictions.shape[1], prediction.predictions.shape[1])
    assert np.array_equal(unsorted.predictions[:, :width], prediction.predictions[:, :width])
    assert (unsorted.predictions[:, width:] < 2).all() and (prediction.predictions[:, width:] < 2).all()


def test_the_decoding_batch_defaults_to_32_unless_given(tiny):
    args = copy.copy(tiny[0].args)  # no new TrainingArguments: that would reset the fixture trainer's accelerator
    args.per_device_eval_batch_size = 32  # SyntaxMTTrainingArguments' default: not given
    assert decode_batch_size(args) == DECODE_BATCH_SIZE == 32
    args.per_device_eval_batch_size = 8  # TrainingArguments' default, given to the train script: taken
    assert decode_batch_size(args) == 8


def test_a_second_request_for_the_same_split_and_weights_is_not_decoded_again(tiny, monkeypatch):
    trainer, data = tiny
    calls = []
    original = trainer.predict
    monkeypatch.setattr(trainer, "predict", lambda *a, **k: calls.append(1) or original(*a, **k))
    decodes = Decodes(trainer, ["validation"], dict(max_length=12, num_beams=1))
    data = data.select(range(3))
    first = decodes.predict("validation", data, "last(5)")
    assert decodes.predict("validation", data, "last(5)") is first and len(calls) == 1
    decodes.predict("validation", data, "average(3+5)")  # other weights: decoded
    assert len(calls) == 2 and [r["weights"] for r in decodes.records] == ["last(5)", "average(3+5)"]
