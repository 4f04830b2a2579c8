"""The preprocessor makes the columns the registry declares, for every method's config, with the dataset's own column
names (issue 58: a plain config used to get a tokenize-only copy that ignored `source_column` and failed with
`KeyError: 'source'`); the collator then pads each column as its kind says."""

import pytest
import torch
from datasets import Dataset
from tiny_config import TINY
from trees import chain_sentence

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.data.collator import DataCollatorForSyntaxMT
from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.methods import input_columns, registered, supervision_columns
from hf_syntax_mt.methods.registry import column_specs, document_columns, document_window

FR = ["Le chat mange du poisson .", "Il fait beau .", ""]
EN = ["The cat eats fish .", "It is sunny .", "Hello ."]
CONFIGS = {"plain": {}, **{m.name: m.tester_config for m in registered()}}


def _rows() -> Dataset:
    return Dataset.from_dict({
        "fr": FR, "en": EN, "ctx": [[], [FR[0]], FR[:2]],
        "fr_parse": [chain_sentence(t).to_dict() for t in FR], "en_parse": [chain_sentence(t).to_dict() for t in EN],
    })  # fmt: skip


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_config_with_custom_column_names(name, data_marian_tokenizer):
    tok = data_marian_tokenizer
    config = SyntaxMTConfig(**{**TINY, "vocab_size": tok.vocab_size + 1}, **CONFIGS[name])
    specs = column_specs()
    read = [c for c in (*input_columns(config), *supervision_columns(config)) if specs[c].parse is not None]
    prep = SyntaxMTPreprocessor.for_config(
        config, tok, source_column="fr", target_column="en", source_parse_column="fr_parse",
        target_parse_column="en_parse", context_column="ctx", max_source_length=8,
    )  # fmt: skip
    assert prep.tokenize_only == (not read)
    rows = _rows()
    out = rows.map(prep, batched=True, with_indices=True, remove_columns=rows.column_names,
                   features=prep.output_features(rows.column_names))  # fmt: skip
    documents = document_columns(config)  # made from the "ctx" column only for a model that reads a document
    assert bool(documents) == (document_window(config) > 0)
    assert set(out.column_names) == {"input_ids", "attention_mask", "labels", *read, *documents}
    for k, text in enumerate(FR):  # each parse column as align_parse computes it from the row's own parse
        sides = {side: [c for c in read if specs[c].parse == side] or None for side in ("source", "target")}
        source = align_parse(tok, chain_sentence(text), text=text or None, max_length=8, columns=sides["source"],
                             config=config)  # fmt: skip
        assert out[k]["input_ids"] == source["input_ids"] == tok(text, truncation=True, max_length=8)["input_ids"]
        target = align_parse(tok, chain_sentence(EN[k]), text=EN[k], target=True, columns=sides["target"],
                             config=config)  # fmt: skip
        assert out[k]["labels"] == target["input_ids"]
        for column in read:
            expected = target[column] if specs[column].parse == "target" else source[column]
            assert out[k][column] == pytest.approx(expected), (k, column)
    lengths = [len(tok(t)["input_ids"]) for t in FR]
    for name in documents:  # each sentence with its special tokens, concatenated oldest first
        assert [len(c) for c in out[name]] == [0, lengths[0], lengths[0] + lengths[1]]
    batch = DataCollatorForSyntaxMT(tok)([out[k] for k in range(len(FR))])
    for column in read:  # padded as the column's kind says: a position column's padding points to itself
        kind = specs[column].kind
        values = batch[column]
        if kind == "source_position":
            lengths = [len(out[k]["input_ids"]) for k in range(len(FR))]
            for k, n in enumerate(lengths):
                assert values[k, n:].tolist() == list(range(n, values.shape[1]))
        assert values.dtype == (torch.float32 if specs[column].is_float else torch.long)


def test_tokenize_only_is_the_one_preprocessor_with_columns_left_out(data_marian_tokenizer):
    tok = data_marian_tokenizer
    prep = SyntaxMTPreprocessor(tok, source_column="fr", target_column="en", columns=(), max_source_length=4)
    out = prep({"fr": FR, "en": EN})
    special = set(tok.all_special_ids)
    for k, text in enumerate(FR):
        ids = tok(text)["input_ids"]
        expected = ids if len(ids) <= 4 else ids[:3] + ids[-1:]  # truncated keeping </s>
        assert out["input_ids"][k] == expected and expected[-1] in special
    assert set(out) == {"input_ids", "attention_mask", "labels"}
    with pytest.raises(ValueError, match="needs a parser or a source_parse_column"):
        SyntaxMTPreprocessor(tok, columns=["word_index"])
    with pytest.raises(ValueError, match=r"\['context_input_ids'\] are not columns computed from a parse"):
        SyntaxMTPreprocessor(tok, columns=["context_input_ids"])


def test_a_method_with_a_column_of_its_own_needs_no_edit_of_the_data_side(data_marian_tokenizer):
    """A method registered from outside declares a source column that `align_parse` does not know, with its own
    `compute` (here: each subword's word length, 0 for special tokens); the preprocessor makes it from the parse and
    the collator pads it with the declared value."""
    from hf_syntax_mt.methods import Column, Method, register, unregister

    def word_lengths(sentence, config):
        return [0 if w is None else len(sentence.parse.words[w]) for w in sentence.word_ids]

    class WordLength(Method):
        name = "word_length"
        inputs = (Column("word_length_ids", "source", pad=7, parse="source", compute=word_lengths),)

    register(WordLength())
    try:
        tok = data_marian_tokenizer
        prep = SyntaxMTPreprocessor(tok, source_parse_column="parse", columns=["word_length_ids"])
        rows = {"source": FR[:2], "parse": [chain_sentence(t).to_dict() for t in FR[:2]]}
        out = prep(rows)
        for k, text in enumerate(FR[:2]):
            word_ids = align_parse(tok, chain_sentence(text), text=text)["word_ids"]
            assert out["word_length_ids"][k] == [0 if w is None else len(text.split()[w]) for w in word_ids]
        batch = DataCollatorForSyntaxMT(tok)([{n: out[n][k] for n in out} for k in range(2)])
        n = len(out["input_ids"][1])
        assert batch["word_length_ids"][1, n:].tolist() == [7] * (batch["input_ids"].shape[1] - n)
    finally:
        unregister("word_length")
