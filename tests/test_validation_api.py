"""Issue 49, the Python API side: each example of the issue at the public boundaries (`translate_lines`, the pipeline's
sentence / document / context arguments, `translate_document`, `score_pronoun_items`, the study loaders, the averaging
sum, a model directory's files) gives a `UserError` naming the argument, index or file and the fix, or the right
result; a paragraph passed as one sentence of a document warns; `translate_document` returns the pipeline's shape;
transformers' `src_lang` / `tgt_lang` are accepted and checked against the languages the model records."""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.errors import UserError, UserTypeError
from hf_syntax_mt.inference import translate_lines
from hf_syntax_mt.training import CheckpointAverageCallback, build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `import benchmarks.*`

SENTENCES = ["Le chat dort .", "Un chien aboie .", "Il pleut .", "La femme lit un livre ."]


def echo_pipe(context_sentences: int = 0):
    """A stand-in for the pipeline that echoes its sentences and records every call (what reached it)."""
    calls = []

    def pipe(sentences, batch_size, **kwargs):
        calls.append((list(sentences), kwargs))
        return [{"translation_text": f"<{s}>"} for s in sentences]

    pipe.model = SimpleNamespace(config=SyntaxMTConfig(context_sentences=context_sentences))  # the config's methods
    pipe.calls = calls
    return pipe


# ------------------------------------------------------------------------------------------------------------------
# translate_lines (no model: what reaches the pipeline is what is checked)
# ------------------------------------------------------------------------------------------------------------------
def test_translate_lines_refuses_a_string_instead_of_reading_it_by_character():
    """Failed before: the text was iterated by character, 25 translations of 25 characters."""
    pipe = echo_pipe()
    with pytest.raises(UserTypeError, match=r"lines must be a list of strings .* not a str .*character by character"):
        translate_lines(pipe, "Le chat dort .\nUn chien .", progress=False)
    assert pipe.calls == []
    assert translate_lines(pipe, "Le chat dort .\nUn chien .".splitlines(), progress=False) == [
        "<Le chat dort .>", "<Un chien .>"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "contexts, error, message",
    [
        (["Le chat ."], UserTypeError, r"contexts\[0\] must be a list of strings, got the string 'Le chat \.'"),
        ([None], UserTypeError, r"contexts\[0\] must be a list of strings, got NoneType"),
        ([[None]], UserTypeError, r"contexts\[0\]\[0\] must be a string, got NoneType"),
        ("Le chat .", UserTypeError, r"contexts must be a list of lists of strings .* not a str"),
    ],
    ids=["flat-list", "none-entry", "none-sentence", "string"],
)
def test_translate_lines_contexts_are_one_list_of_strings_per_line(contexts, error, message):
    """Failed before: ['Le chat .'] reached the pipeline as the characters of the string; [None] gave a bare
    TypeError ('NoneType' object is not iterable)."""
    pipe = echo_pipe(context_sentences=1)
    with pytest.raises(error, match=message):
        translate_lines(pipe, ["Il dort ."], contexts=contexts, progress=False)
    assert pipe.calls == []
    assert translate_lines(pipe, ["Il dort ."], contexts=[["Le chat ."]], progress=False) == ["<Il dort .>"]
    assert pipe.calls[0][1] == {"contexts": [["Le chat ."]]}


@pytest.mark.parametrize(
    "documents, message",
    [
        ([(0, 5)], r"documents\[0\] = \(0, 5\) is outside the 2 lines"),
        ([(-1, 1)], r"documents\[0\] = \(-1, 1\) is outside the 2 lines"),
        ([(0, 2), (1, 2)], r"documents\[1\] = \(1, 2\) overlaps documents\[0\]"),
        ((0, 2), r"documents must be a list of \(start, end\) spans, got one pair"),
        ([(0, "2")], r"documents\[0\] must be a \(start, end\) pair of ints"),
    ],
    ids=["past-end", "negative", "overlap", "bare-pair", "string-end"],
)
def test_translate_lines_documents_are_spans_inside_the_lines(documents, message):
    """Failed before: a span past the end or negative stopped in a bare zip() error (or translated the wrong lines)."""
    pipe = echo_pipe(context_sentences=1)
    with pytest.raises(UserError, match=message):
        translate_lines(pipe, ["a .", "b ."], documents, progress=False)
    assert pipe.calls == []


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True])
def test_translate_lines_batch_size_is_a_positive_int(batch_size):
    """Failed before for 0 and -1: range() arg 3 must not be zero, or nothing translated."""
    with pytest.raises(UserError, match=rf"batch_size must be an int >= 1, got {re.escape(repr(batch_size))}"):
        translate_lines(echo_pipe(), ["a ."], batch_size=batch_size, progress=False)


# ------------------------------------------------------------------------------------------------------------------
# The pipeline on a tiny document model (one context sentence) that records its languages, fr -> en
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def document_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doc")
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=80, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=16, context_sentences=1, init_std=1.0)
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 4
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    run = {"data_args": {"source_lang": "fr", "target_lang": "en"}}  # what the train script records
    (directory / "hf_syntax_mt_run.json").write_text(json.dumps(run), encoding="utf-8")
    pipe = pipeline("syntax-translation", model=str(directory), device="cpu")
    return directory, pipe


def test_translate_document_refuses_a_list_of_documents(document_model):
    """Failed before: 'list indices must be integers or slices, not str'."""
    _, pipe = document_model
    with pytest.raises(UserTypeError, match=r"translate_document takes one document .* a list of 2 documents: "
                                            r"translate several with pipe\(documents\)"):  # fmt: skip
        pipe.translate_document([SENTENCES[:2], SENTENCES[2:]])


def test_translate_document_returns_what_the_pipeline_returns_for_a_document(document_model):
    """Failed before: translate_document returned strings where pipe(..., document=True) returned dicts."""
    _, pipe = document_model
    got = pipe.translate_document(SENTENCES, num_beams=1)
    assert got == pipe(SENTENCES, document=True, num_beams=1)
    assert [sorted(r) for r in got] == [["translation_text"]] * len(SENTENCES)
    # the same as the documents of a list of documents, one list per document
    assert pipe([SENTENCES[:2], SENTENCES[2:]], num_beams=1) == [got[:2], pipe.translate_document(SENTENCES[2:],
                                                                                                  num_beams=1)]  # fmt: skip


@pytest.mark.parametrize(
    "contexts, message",
    [
        ([None, ["a ."]], r"contexts\[0\] must be a list of strings, got NoneType"),
        ([["a ."], [None]], r"contexts\[1\]\[0\] must be a string, got NoneType"),
        ({"a": 1}, r"contexts must be a list of lists of strings .*got dict"),
    ],
)
def test_pipeline_contexts_name_the_entry(document_model, contexts, message):
    """Failed before for None entries: a bare TypeError ('NoneType' object is not iterable)."""
    _, pipe = document_model
    with pytest.raises(UserTypeError, match=message):
        pipe(SENTENCES[:2], contexts=contexts)


def test_pipeline_names_the_input_that_is_not_a_string(document_model):
    _, pipe = document_model
    with pytest.raises(UserTypeError, match=r"got inputs\[1\], a NoneType: None"):
        pipe(["a .", None], no_context=True)
    with pytest.raises(UserTypeError, match=r"got inputs\[0\]\[1\], a int: 3"):
        pipe([["a .", 3], ["b ."]])
    with pytest.raises(UserTypeError, match=r"got inputs\[1\], a list: \['b \.'\] \(a list mixing strings and lists"):
        pipe(["a .", ["b ."]], no_context=True)


def test_a_paragraph_as_one_document_sentence_warns(document_model, caplog):
    """Failed before: translated as one sentence without a word."""
    _, pipe = document_model
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.pipeline_syntax_mt"):
        pipe("A. B.", document=True, num_beams=1)
    assert "1 sentence(s) of the document(s) look like several sentences, e.g. document 0 sentence 0: 'A. B.'" in (
        caplog.text
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.pipeline_syntax_mt"):
        pipe(["Il a vu M. et e.g. le chat .", "Deux phrases ? Oui ."], document=True, num_beams=1)
    assert "1 sentence(s)" in caplog.text and "document 0 sentence 1" in caplog.text  # lower case after '.': no sign
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.pipeline_syntax_mt"):
        pipe(SENTENCES, document=True, num_beams=1)
    assert caplog.text == ""


def test_src_lang_and_tgt_lang_are_accepted_and_checked_against_the_model(document_model):
    """Failed before: generate() refused them (model_kwargs not used by the model: ['src_lang', 'tgt_lang'])."""
    directory, pipe = document_model
    plain = pipe(SENTENCES, document=True, num_beams=1)
    assert pipe(SENTENCES, document=True, num_beams=1, src_lang="fr", tgt_lang="en_XX") == plain
    with pytest.raises(UserError, match=r"src_lang='de', but this model translates fr -> en \(from "
                                        r"hf_syntax_mt_run.json \(--source_lang/--target_lang\)\)"):  # fmt: skip
        pipe(SENTENCES, document=True, src_lang="de")
    with pytest.raises(UserTypeError, match="tgt_lang must be a language code"):
        pipe(SENTENCES, document=True, tgt_lang=3)
    # at creation, as transformers' translation pipelines take them
    assert (
        pipeline("syntax-translation", model=str(directory), device="cpu", src_lang="fr")(
            SENTENCES, document=True, num_beams=1
        )
        == plain
    )
    with pytest.raises(UserError, match="tgt_lang='fr', but this model translates fr -> en"):
        pipeline("syntax-translation", model=str(directory), device="cpu", tgt_lang="fr")


def test_languages_from_the_model_card_when_no_run_file(document_model, tmp_path):
    directory, _ = document_model
    copy = tmp_path / "model"
    shutil.copytree(directory, copy)
    (copy / "hf_syntax_mt_run.json").unlink()
    (copy / "README.md").write_text("---\nlanguage:\n- fr\n- en\nlicense: mit\n---\n# A model\n", encoding="utf-8")
    pipe = pipeline("syntax-translation", model=str(copy), device="cpu")
    pipe(["Il pleut ."], no_context=True, num_beams=1, src_lang="fr", tgt_lang="en")
    with pytest.raises(UserError, match=r"src_lang='de', but this model's languages are \['fr', 'en'\]"):
        pipe(["Il pleut ."], no_context=True, src_lang="de")
    (copy / "README.md").unlink()  # nothing recorded: any pair is accepted
    pipeline("syntax-translation", model=str(copy), device="cpu")(["x"], no_context=True, src_lang="de", num_beams=1)


# ------------------------------------------------------------------------------------------------------------------
# A model directory: every file read
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, damage, message",
    [
        ("model.safetensors", lambda b: b[: len(b) // 2], "is not a readable safetensors file .*incomplete metadata"),
        ("model.safetensors", lambda b: bytes(range(256)) * 4, "is not a readable safetensors file"),
        ("tokenizer.json", lambda b: b[:100], "is not valid JSON"),
        ("config.json", lambda b: b"{not json", "is not valid JSON"),
        ("tokenizer_config.json", lambda b: b"\xff\xfe", "is not UTF-8 text"),
    ],
    ids=["truncated-weights", "garbage-weights", "tokenizer-json", "config-json", "tokenizer-config-bytes"],
)
def test_a_damaged_file_of_a_model_directory_is_named(document_model, tmp_path, name, damage, message):
    """Failed before (for the weights and tokenizer.json): the CLI's check only found the files, and loading them gave
    a traceback naming no file."""
    from hf_syntax_mt.cli import _model_directory
    from hf_syntax_mt.model_files import check_model_files

    directory, _ = document_model
    copy = tmp_path / "model"
    shutil.copytree(directory, copy)
    assert check_model_files(copy)["model_type"] == "syntax_mt"
    (copy / name).write_bytes(damage((copy / name).read_bytes()))
    with pytest.raises(UserError, match=rf"{re.escape(str(copy / name))} {message}"):
        check_model_files(copy)
    with pytest.raises(ValueError, match=rf"--model {re.escape(str(copy))}: .*{re.escape(name)}"):
        _model_directory(str(copy))


def test_a_model_directory_without_weights_is_named(document_model, tmp_path):
    from hf_syntax_mt.model_files import check_model_files

    directory, _ = document_model
    copy = tmp_path / "model"
    shutil.copytree(directory, copy)
    (copy / "model.safetensors").unlink()
    with pytest.raises(UserError, match=rf"{re.escape(str(copy))} has no weights \(no model.safetensors\)"):
        check_model_files(copy)


# ------------------------------------------------------------------------------------------------------------------
# The averaging sum, pronoun items, study units
# ------------------------------------------------------------------------------------------------------------------
def test_a_readable_averaging_sum_of_another_model_is_refused_naming_the_file(tmp_path):
    """Failed before: the sum was taken, and the first averaged step stopped in KeyError: 'weight'."""
    path = tmp_path / "checkpoint-15" / CheckpointAverageCallback.FILE
    path.parent.mkdir()
    model = torch.nn.Linear(3, 2)
    args = SimpleNamespace(output_dir=str(tmp_path))
    state = SimpleNamespace(max_steps=20, global_step=15)
    for other, message in [
        ({"model.shared.weight": torch.zeros(4, 3)}, r"does not hold this model's weights \(missing \['bias', 'weight'\], "
                                                     r"not in the model \['model.shared.weight'\]\)"),
        ({"weight": torch.zeros(3, 3), "bias": torch.zeros(2)}, r"holds weight of shape \[3, 3\], the model's is \[2, 3\] \(1 weight\(s\) differ\)"),
    ]:  # fmt: skip
        save_file(other, str(path), metadata={"steps": "[10, 15]"})
        callback = CheckpointAverageCallback(3, 5)
        callback.load_from(path.parent)
        with pytest.raises(UserError, match=rf"{re.escape(str(path))}: the running sum of checkpoint averaging "
                                            rf"{message}: the file belongs to another model"):  # fmt: skip
            callback.on_train_begin(args, state, None, model=model)
    save_file({k: v.detach() * 2 for k, v in model.state_dict().items()}, str(path), metadata={"steps": "[10, 15]"})
    callback = CheckpointAverageCallback(3, 5)
    callback.load_from(path.parent)
    callback.on_train_begin(args, state, None, model=model)  # this model's sum: taken as it is
    assert torch.equal(callback.sum["weight"], model.weight.detach() * 2)


def _item(**change):
    reference = "Er schläft."
    item = {"id": "t-1-0", "corpus": "t", "doc_id": "d1", "source": "It sleeps.", "reference": reference,
            "pronoun": "Er", "span": [0, 2], "variants": ["Sie", "Es"], "context": [], "case": "nom"}  # fmt: skip
    item.update(change)
    return {k: v for k, v in item.items() if v is not None}


@pytest.mark.parametrize("field", ["case", "doc_id"])
def test_pronoun_items_without_case_or_doc_id_are_refused_before_any_model_work(tmp_path, monkeypatch, field):
    """Failed before: the items loaded, and scoring stopped with a bare KeyError after all the model work."""
    from hf_syntax_mt.evaluation import pronouns

    calls = []
    monkeypatch.setattr("hf_syntax_mt.evaluation.contrastive.score_contrastive",
                        lambda *a, **k: calls.append(a) or {"results": []})  # fmt: skip
    path = pronouns.write_pronoun_items(tmp_path / "items.jsonl", [_item(), _item(**{field: None})])
    with pytest.raises(UserError, match=rf"{re.escape(str(path))}:2: item lacks the field\(s\) \['{field}'\]"):
        pronouns.load_pronoun_items(path)
    with pytest.raises(UserError, match=rf"item 1 \(t-1-0\): item lacks the field\(s\) \['{field}'\]"):
        pronouns.score_pronoun_items(None, None, [_item(), _item(**{field: None})], context="random")
    assert calls == []


@pytest.mark.parametrize(
    "change, message",
    [({"span": [-2, 11]}, r"field 'span' \[-2, 11\] is outside the reference \(11 characters\)"),
     ({"case": ["nom"]}, r"field 'case' must be a string, got \['nom'\]"),
     ({"kind": ["referential"]}, r"field 'kind' must be a string")],
)  # fmt: skip
def test_pronoun_item_neighbours(change, message):
    """A negative span that slices the right characters from the end, a list for a string field (unhashable: a bare
    TypeError in the kind check before)."""
    from hf_syntax_mt.evaluation import pronouns

    with pytest.raises(UserError, match=message):
        pronouns.check_pronoun_item(_item(**change), "here")
    with pytest.raises(UserTypeError, match="items must be a list of pronoun items .* not a str"):
        pronouns.score_pronoun_items(None, None, "items.jsonl")


def test_a_round2_unit_missing_a_test_set_is_refused_naming_it(tmp_path):
    """Failed before: the unit loaded, and the aggregate stopped in KeyError: 'test_2017_mscoco'."""
    import hashlib

    from benchmarks.studies import study_round2

    hyps = ["a man rides", "two dogs"]
    text = "".join(h + "\n" for h in hyps)
    tests = {t: {"bleu": 1.0, "chrf": 2.0, "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest(),
                 "buckets": [{"bucket": "1-10", "count": 2, "bleu": 1.0}]}
             for t in study_round2.MULTI30K_TESTS if t != "test_2017_mscoco"}  # fmt: skip
    runs = tmp_path / "runs"
    runs.mkdir()
    name = study_round2.unit_name("full", "vanilla", 0)
    for t in tests:
        (runs / f"{name}.{t}.txt").write_text(text, encoding="utf-8")
    record = {"unit": name, "setting": "full", "method": "vanilla", "seed": 0, "precision": "fp32", "device": "cpu",
              "tests": tests}  # fmt: skip
    (runs / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{name}.json: field 'tests' has no 'test_2017_mscoco' \(the setting's test "
                                         r"sets are .*\): the unit is incomplete"):  # fmt: skip
        study_round2.load_units(tmp_path)


@pytest.mark.parametrize("text", ["{not json", '{"points": []}', '{"points": 3, "train_seconds": 1.0}'])
def test_a_damaged_learning_curve_of_a_resumed_run_is_named(tmp_path, text):
    """A neighbour of the averaging sum: the curve saved with a checkpoint gave a bare JSONDecodeError / KeyError."""
    from hf_syntax_mt.training.callbacks import CurveCallback

    (tmp_path / "curve.json").write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=rf"{re.escape(str(tmp_path / 'curve.json'))}: the learning curve of the "
                                        r"resumed run cannot be read"):  # fmt: skip
        CurveCallback().load_from(tmp_path)


def test_damaged_checkpoint_weights_are_named_when_the_sum_is_rebuilt(tmp_path):
    from hf_syntax_mt.training.callbacks import _load_weights

    path = tmp_path / "model.safetensors"
    save_file({"w": torch.ones(4)}, str(path))
    assert torch.equal(_load_weights(path)["w"], torch.ones(4))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(UserError, match=rf"{re.escape(str(path))}: the checkpoint's weights cannot be read"):
        _load_weights(path)


def test_random_contexts_refuse_a_string_of_ids():
    """Failed before: a string of document ids was read character by character (each character a document)."""
    from hf_syntax_mt.evaluation.pronouns import random_contexts

    with pytest.raises(UserTypeError, match="doc_ids must be a list of document ids, one per sentence"):
        random_contexts("ab", ["x", "y"], 1)
