"""What a method derives from the config is answered by the method (the config holds options only): the bi-affine
heads in use, l_sync, the layers with a context attention, and `method_of` for code outside the methods."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_config import TINY
from transformers import MarianConfig

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.methods import get_method, method_of
from hf_syntax_mt.methods.biaffine import Biaffine
from hf_syntax_mt.methods.document_context import context_layers, uses_context
from hf_syntax_mt.methods.synchronous import Synchronous


@pytest.mark.parametrize(
    "options, lisa, encoder_dbsa, decoder_dbsa",
    [({}, False, False, False), (dict(encoder_lisa_heads=[0, 1]), True, False, False),
     (dict(encoder_dbsa_heads=[1, 0], decoder_dbsa_heads=[0, 0]), False, True, False),
     (dict(decoder_dbsa_heads=[0, 2]), False, False, True)],
)  # fmt: skip
def test_the_biaffine_method_says_which_heads_a_config_uses(options, lisa, encoder_dbsa, decoder_dbsa):
    config = SyntaxMTConfig(**TINY, **options)
    answers = (Biaffine.uses_lisa(config), Biaffine.uses_encoder_dbsa(config), Biaffine.uses_decoder_dbsa(config))
    assert answers == (lisa, encoder_dbsa, decoder_dbsa)
    assert (method_of(config, "biaffine") is get_method("biaffine")) == any(answers)


@pytest.mark.parametrize(
    "layers, given, expected", [(2, None, 0), (4, None, 2), (6, None, 4), (4, 3, 3), (1, None, 0)]
)
def test_l_sync_is_the_given_layer_else_the_penultimate(layers, given, expected):
    config = SyntaxMTConfig(**{**TINY, "decoder_layers": layers}, sync_cross_attention_layer=given)
    assert Synchronous.sync_layer(config) == expected


@pytest.mark.parametrize(
    "options, encoder, decoder",
    [({}, [], []), (dict(context_sentences=1), [0, 1], [0, 1]),
     (dict(context_sentences=2, encoder_context_layers=[], decoder_context_layers=[1]), [], [1]),
     (dict(encoder_context_layers=[1]), [], [])],  # layers listed, but no context sentences: no context attention
)  # fmt: skip
def test_the_layers_with_a_context_attention(options, encoder, decoder):
    config = SyntaxMTConfig(**TINY, **options)
    assert (context_layers(config, "encoder"), context_layers(config, "decoder")) == (encoder, decoder)
    assert uses_context(config) == (options.get("context_sentences", 0) > 0)
    assert (method_of(config, "document_context") is not None) == uses_context(config)


def test_method_of_answers_none_for_an_inactive_method_an_unknown_name_and_a_plain_marian_config():
    config = SyntaxMTConfig(**TINY, global_fertility_weight=0.5)
    assert method_of(config, "fertility") is get_method("fertility")
    assert method_of(config, "synchronous") is None and method_of(config, "no_such_method") is None
    assert method_of(MarianConfig(**TINY), "fertility") is None


def test_the_config_holds_no_method_derived_property():
    moved = ("uses_lisa", "uses_encoder_dbsa", "uses_decoder_dbsa", "uses_sync", "sync_layer", "uses_global_fertility",
             "uses_context", "context_layers")  # fmt: skip
    assert not [name for name in moved if hasattr(SyntaxMTConfig, name)]


@pytest.mark.parametrize(
    "options, expected",
    [({}, None), (dict(context_sentences=1), TINY["max_position_embeddings"]),
     (dict(context_sentences=1, max_context_length=5), 5)],
)  # fmt: skip
def test_the_preprocessor_finds_document_context_by_its_column_kind(options, expected, data_marian_tokenizer):
    """`for_config` asks the registry for the document methods' columns (no method name, no config property): with
    document context, a long context is cut to its last `max_context_length` tokens (else `max_position_embeddings`);
    without, no context column is made."""
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor

    tok = data_marian_tokenizer
    config = SyntaxMTConfig(**TINY, **options)
    previous = ["a b c d e f g h"] * 40  # longer than max_position_embeddings tokens
    full = [i for s in previous for i in tok(s)["input_ids"]]
    assert len(full) > TINY["max_position_embeddings"]
    out = SyntaxMTPreprocessor.for_config(config, tok)({"source": ["x y"], "context": [previous]})
    if expected is None:
        assert "context_input_ids" not in out
    else:
        assert out["context_input_ids"] == [full[-expected:]]
        assert out["context_attention_mask"] == [[1] * expected]


@pytest.mark.parametrize("options, window", [({}, 0), (dict(context_sentences=3), 3)])
def test_the_document_window_and_the_option_that_sets_it_are_the_methods_answers(options, window):
    """What the pipeline and the model's messages ask the registry (they name no option): k, and the option as set
    and as an example; a plain Marian config reads no document."""
    from hf_syntax_mt.methods.registry import document_settings, document_window

    config = SyntaxMTConfig(**TINY, **options)
    assert document_window(config) == window
    assert document_settings(config) == f"context_sentences={window}"
    assert document_settings(config, 2) == "context_sentences=2"
    assert (document_window(MarianConfig(**TINY)), document_settings(MarianConfig(**TINY))) == (
        0,
        "context_sentences=0",
    )


WORDS = ["le", "chat", "dort", "sur", "la", "table", "", "  "]


@settings(max_examples=30, deadline=None, database=None, derandomize=True)
@given(
    previous=st.lists(st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join), max_size=3),
    limit=st.one_of(st.none(), st.integers(1, 40)),
)
def test_a_sentences_document_inputs_are_the_training_datas_context(data_fast_tokenizer, previous, limit):
    """The pipeline's context inputs (`Method.document_inputs`) are exactly what `encode_context` makes for the
    training data: blank sentences add nothing, the most recent `max_context_length` ids are kept (else
    `max_position_embeddings`); a sentence-level model makes none."""
    from hf_syntax_mt.data.documents import encode_context
    from hf_syntax_mt.methods.registry import document_inputs

    config = SyntaxMTConfig(**TINY, context_sentences=3, max_context_length=limit)
    expected = encode_context(data_fast_tokenizer, previous, limit or TINY["max_position_embeddings"])
    got = document_inputs(config, data_fast_tokenizer, previous)
    assert got == {"context_input_ids": expected, "context_attention_mask": [1] * len(expected)}
    assert document_inputs(SyntaxMTConfig(**TINY), data_fast_tokenizer, previous) == {}


@settings(max_examples=25, deadline=None, database=None, derandomize=True)
@given(
    contexts=st.lists(st.lists(st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join), max_size=3), min_size=1,
                      max_size=4),
    limit=st.one_of(st.none(), st.integers(1, 40)),
)  # fmt: skip
def test_data_made_without_a_model_encodes_contexts_as_encode_context(data_fast_tokenizer, contexts, limit):
    """A preprocessor without a config (`registry.DataOptions`: the options given, else the declared defaults) makes
    the document columns row by row as `encode_context` does (``None``: no limit), and survives the pickling
    `datasets.map` workers need with equal output."""
    import pickle

    from hf_syntax_mt.data.documents import encode_context
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor

    options = {} if limit is None else {"max_context_length": limit}
    pre = SyntaxMTPreprocessor(data_fast_tokenizer, columns=(), **options)
    batch = {"source": ["x"] * len(contexts), "context": contexts}
    out = pre(batch)
    assert out["context_input_ids"] == [encode_context(data_fast_tokenizer, c, limit) for c in contexts]
    assert out["context_attention_mask"] == [[1] * len(ids) for ids in out["context_input_ids"]]
    assert pickle.loads(pickle.dumps(pre))(batch) == out
