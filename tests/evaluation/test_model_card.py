"""The model card written beside a saved model: Hub metadata (built with huggingface_hub, read back with
`ModelCard.load`), the method actually configured, scores with their sacrebleu signatures."""

import pytest

from hf_syntax_mt.evaluation import corpus_scores
from hf_syntax_mt.evaluation.model_card import write_model_card
from hf_syntax_mt.training import build_model, model_config, train_tokenizer


def test_model_card_reflects_config_and_scores(tmp_path):
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[3, 0],
                          pascal_sigma=0.5, parent_ignoring=0.1)  # fmt: skip
    model = build_model(config)
    scores = corpus_scores(["a b c", "d e"], ["a b c", "d f"])
    path = write_model_card(tmp_path, model=model, title="T", data="D", parser="P", scores={"test": scores})
    card = path.read_text()
    assert card.startswith("---\n") and "\nlibrary_name: transformers\n" in card
    assert "\npipeline_tag: translation\n" in card
    assert "encoder layer 0: 3 heads; gaussian weighting, sigma=0.5, parent ignoring q=0.1" in card
    assert f"BLEU {scores['bleu']:.2f} (`{scores['bleu_signature']}`)" in card
    assert f"{model.num_parameters():,} parameters" in card
    # issue 56: a placeholder path with the folder's name (the bare name read as a Hub id), and the init the
    # signature names shown beside the options
    assert 'pipeline("translation", model="path/to/' + tmp_path.name + '", trust_remote_code=True)' in card
    assert "Configuration (options that differ from the defaults): " in card
    assert "; trained from the `attention_init=xavier` initialisation" in card and 'attention_init="xavier"' in card
    assert str(tmp_path) not in card  # the directory's name, never its local path
    # MarianMTModel.from_pretrained would drop the syntax options: the card says which, and what to load with
    assert "drops the method options (`encoder_pascal_heads`, `parent_ignoring`, `pascal_sigma`)" in card
    assert "AutoModelForSeq2SeqLM.from_pretrained(..., trust_remote_code=True)" in card


def test_model_cards_template_file_is_the_one_the_package_fills():
    from pathlib import Path

    from hf_syntax_mt.evaluation.model_card import TEMPLATE

    path = Path(__file__).resolve().parents[2] / "model_cards" / "TEMPLATE.md"
    assert path.read_text(encoding="utf-8") == TEMPLATE, "regenerate model_cards/TEMPLATE.md from model_card.TEMPLATE"


def test_model_card_records_ribes_training_and_model_signature(tmp_path):
    from hf_syntax_mt.evaluation import corpus_ribes, model_signature

    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    model = build_model(model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, marian=True))
    scores = {**corpus_scores(["a b c", "d e"], ["a b c", "d f"]), **corpus_ribes(["a b c", "d e"], ["a b c", "d f"])}
    card = write_model_card(tmp_path, model=model, title="T", data="D", parser="P", scores={"test": scores},
                            training="12 steps").read_text()  # fmt: skip
    assert f"RIBES {scores['ribes']:.4f} (`{scores['ribes_signature']}`)" in card
    assert "## Training\n12 steps" in card and "- none (vanilla Marian)" in card
    assert "MarianMTModel.from_pretrained" not in card  # nothing to drop
    assert f"Model signature: `{model_signature(model.config)}`" in card and "variant:marian" in card


def test_model_card_describes_document_context(tmp_path):
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, context_sentences=2,
                          decoder_context_layers=[1], context_gating=False)  # fmt: skip
    card = write_model_card(tmp_path, model=build_model(config), title="T", data="D", parser="P").read_text()
    assert (
        "the previous 2 source sentences, a 1-layer context encoder, context attention in encoder layers [0, 1] "
        "and decoder layers [1], residual connections (no gating)"
    ) in card
    assert "context_sentences=2" in card  # the model signature names the option


def test_a_document_model_card_describes_what_the_model_has_and_shows_the_document_call(tmp_path):
    """Issue 44: the card of a document model called it "syntax-aware", listed PASCAL options it does not have, and
    showed `translate(["..."])`, the flat-list call that loses the context. The card shows the document call, and
    that call (run on the saved model) translates each sentence with its context, as the card says."""
    import re

    import torch
    from transformers import pipeline

    sentences = ["a b c d", "b c d e", "c d e a"]
    tokenizer = train_tokenizer(sentences * 5, vocab_size=40, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, context_sentences=1)
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 4
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    card = write_model_card(tmp_path, model=model, title="T", data="D", parser="none").read_text()
    assert "A document-level Marian translation model trained with" in card
    assert "syntax-aware" not in card and "pascal" not in card.lower() and "parser recorded" not in card
    assert "- document-level-nmt\n" in card and "- syntax-aware-nmt\n" not in card
    assert 'Configuration (options that differ from the defaults): `{"context_sentences": 1}`' in card
    use = re.search(r"## Use\n```python\n(.*?)```", card, re.S).group(1)
    assert "translate(document, document=True)" in use and 'translate(["' not in use
    # the card's call, run: the document's sentences with the previous sentence as context (by hand)
    translate = pipeline("translation", model=str(tmp_path), trust_remote_code=True)
    got = [r["translation_text"] for r in translate(sentences, document=True)]
    expected = []
    for i, text in enumerate(sentences):
        kwargs = {}
        if i:
            context = tokenizer(sentences[i - 1])["input_ids"]
            kwargs = dict(
                context_input_ids=torch.tensor([context]), context_attention_mask=torch.ones(1, len(context))
            )
        ids = model.generate(input_ids=torch.tensor([tokenizer(text)["input_ids"]]), **kwargs)
        expected.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    assert got == expected
    with pytest.raises(ValueError, match="without documents"):  # the flat call the old card showed
        translate(sentences)


def test_a_syntax_model_card_keeps_the_parser_note_and_the_sentence_call(tmp_path):
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0])
    card = write_model_card(tmp_path, model=build_model(config), title="T", data="D", parser="P").read_text()
    assert "A syntax-aware Marian translation model trained with" in card and "document-level" not in card
    assert "- syntax-aware-nmt\n" in card and "parses raw input itself with the parser recorded" in card
    assert 'translate(["A first sentence.", "Another sentence."])' in card


def test_the_card_metadata_loads_back_with_the_hubs_own_reader(tmp_path):
    """Issue 49: the card was a hand-filled template without `language`, `datasets`, `metrics` or `model-index`. Read
    back with `huggingface_hub.ModelCard.load`, it now has them: the languages, the license and task, and one
    `EvalResult` per metric and scored dataset whose value is the score computed here and whose args carry its
    sacrebleu signature; a split without a dataset (here the last step before averaging) gets no result."""
    from huggingface_hub import ModelCard

    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0])
    model = build_model(config)
    test = corpus_scores(["a b c", "d e"], ["a b c", "d f"])
    validation = corpus_scores(["a b", "c d e"], ["a b", "c d e f"])
    scores = {"validation": validation, "test": test, "test_last_step": corpus_scores(["a"], ["b"])}
    evals = {
        "validation": {"type": "bentrevett/multi30k", "name": "Multi30k en-de (validation)", "split": "validation"},
        "test": {"type": "test_2016_flickr.de", "name": "test_2016_flickr.de (test)", "split": "test"},
    }
    path = write_model_card(tmp_path, model=model, title="Multi30k en->de: PASCAL", data="D", parser="P",
                            scores=scores, languages=["en", "de_DE"], datasets=["bentrevett/multi30k"],
                            eval_datasets=evals)  # fmt: skip
    data = ModelCard.load(path).data
    assert data.language == ["en", "de"] and data.license == "apache-2.0" and data.library_name == "transformers"
    assert data.pipeline_tag == "translation" and data.datasets == ["bentrevett/multi30k"]
    assert data.metrics == ["bleu", "chrf"] and {"hf-syntax-mt", "syntax-aware-nmt"} <= set(data.tags)
    assert data.model_name == "Multi30k en->de: PASCAL"
    got = {(r.dataset_split, r.metric_type): r for r in data.eval_results}
    assert sorted(got) == [("test", "bleu"), ("test", "chrf"), ("validation", "bleu"), ("validation", "chrf")]
    for split, computed in (("test", test), ("validation", validation)):
        for metric in ("bleu", "chrf"):
            result = got[split, metric]
            assert result.task_type == "translation" and result.metric_value == round(computed[metric], 2)
            assert result.metric_args == {"signature": computed[f"{metric}_signature"]}
            assert (result.dataset_type, result.dataset_name) == (evals[split]["type"], evals[split]["name"])
    # the human-readable body is still there, below the metadata, and links to no package page
    card = path.read_text()
    assert f"BLEU {test['bleu']:.2f} (`{test['bleu_signature']}`)" in card and "## Limitations" in card
    assert "pypi.org" not in card


def test_card_metadata_refuses_what_the_hub_would_misread():
    from hf_syntax_mt.errors import UserError, UserTypeError
    from hf_syntax_mt.evaluation.model_card import card_metadata

    scores = {"test": corpus_scores(["a b c d e"], ["a b c d f"])}
    with pytest.raises(UserError, match="language 'English' is not an ISO 639 code"):
        card_metadata("T", scores, languages=["English"])
    with pytest.raises(UserTypeError, match=r"languages\[0\] must be a string, got NoneType"):
        card_metadata("T", scores, languages=[None])
    with pytest.raises(UserError, match="eval_datasets names the split 'dev', which has no scores"):
        card_metadata("T", scores, eval_datasets={"dev": {"type": "x", "name": "x"}})
    with pytest.raises(UserError, match=r"eval_datasets\['test'\] has no name"):
        card_metadata("T", scores, eval_datasets={"test": {"type": "x"}})
    # without eval_datasets, every scored split is its own dataset
    (bleu, _chrf) = card_metadata("T", scores).eval_results
    assert (bleu.dataset_type, bleu.dataset_name) == ("test", "test")
    assert bleu.metric_value == round(scores["test"]["bleu"], 2)
