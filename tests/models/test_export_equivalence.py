"""Issue 65, items 1-2: served equals trained, by construction.

Every engine decodes with the settings `generation_defaults.resolve_generation` gives (the model's own length limit,
beams, penalties and forced tokens): `generate`, the ONNX Runtime engine's search, a Marian export and a CTranslate2
directory decode the same with those settings passed explicitly as with none passed, on a model built with the API
whose generation config has no length limit (transformers' 20-token default cut every line before). Hypothesis
properties over random exportable configs (every exportable method, unequal encoder and decoder head counts, perturbed
weights): the Marian export's logits within 1e-5, CTranslate2's float32 greedy outputs equal `generate`'s, the
engine's search (Marian's decoder step: the graph the ONNX engine exports) equal to `generate` greedy and beam; the
ONNX Runtime graph itself in the slow set (one export takes 10-40 s here). The CTranslate2 loader's copy of upstream
code is checked against the installed ctranslate2."""

import contextlib
import inspect
import json
import re
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.cli import main
from hf_syntax_mt.decoding.marian_step import TorchDecoder, decoder_changes
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.export import export_to_ctranslate2, export_to_marian, save_marian
from hf_syntax_mt.export.serve import CTranslate2Pipeline
from hf_syntax_mt.generation_defaults import DEFAULT_NUM_BEAMS, resolve_generation
from hf_syntax_mt.methods import get_method, registered
from hf_syntax_mt.training import train_tokenizer

ctranslate2 = pytest.importorskip("ctranslate2", reason="the deploy extra (pip install 'hf-syntax-mt[deploy]')")

WORDS = "le la un une chat chien maison jardin mange dort voit grand petit rouge bleu vite".split()
TEXTS = ["le chat dort", "un grand chien rouge mange vite", "la maison"]
#: the registered methods whose inference graph is Marian's (the registry says which)
EXPORTABLE = [m.name for m in registered() if m.tester_config is not None and m.inference_needs is None]
#: positions of the models built here: the length limit where their generation config sets none
POSITIONS = 24
FAST = settings(max_examples=4, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
SLOW = settings(FAST, max_examples=40)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 4, vocab_size=60,
                           min_frequency=1)  # fmt: skip


def method_options(name: str | None, encoder_layers: int, decoder_layers: int) -> dict:
    """The method's tester config, its per-layer lists fitted to the layer counts (the method in the first layer)."""
    if name is None:
        return {}
    out = {}
    for key, value in get_method(name).tester_config.items():
        if isinstance(value, list):
            layers = encoder_layers if key.startswith("encoder_") else decoder_layers
            value = [value[0]] + [0] * (layers - 1)
        out[key] = value
    if name == "guided_alignment":
        out["guided_alignment_layer"] = decoder_layers - 1
    return out


@st.composite
def exportable(draw) -> dict:
    """A random exportable model: sizes, each stack's own head count, activation, method, weights' seed."""
    return dict(
        d_model=draw(st.sampled_from([16, 32])), encoder_attention_heads=draw(st.sampled_from([1, 2, 4])),
        decoder_attention_heads=draw(st.sampled_from([1, 2, 4])), encoder_layers=draw(st.integers(1, 2)),
        decoder_layers=draw(st.integers(1, 2)), ffn=draw(st.sampled_from([16, 48])),
        activation_function=draw(st.sampled_from(["relu", "gelu", "swish", "gelu_new"])),
        scale_embedding=draw(st.booleans()), method=draw(st.sampled_from([None, *EXPORTABLE])),
        seed=draw(st.integers(0, 2**16)),
    )  # fmt: skip


#: the case the issue found: a decoder with fewer heads than the encoder (CTranslate2 split it into the encoder's)
UNEQUAL = dict(d_model=32, encoder_attention_heads=4, decoder_attention_heads=1, encoder_layers=2, decoder_layers=2,
               ffn=48, activation_function="gelu", scale_embedding=True, method=None, seed=3)  # fmt: skip


def build(tokenizer, draw: dict) -> SyntaxMTForConditionalGeneration:
    """The model ``draw`` describes, with every trained weight (and the logits bias) perturbed away from its initialisation,
    where attention is nearly uniform and a wrong head split hides; generation config as the API leaves it (beams,
    no length limit)."""
    dims = {k: v for k, v in draw.items() if k not in ("ffn", "method", "seed")}
    options = method_options(draw["method"], draw["encoder_layers"], draw["decoder_layers"])
    for site in ("encoder", "decoder"):  # enough heads for the method's (LISA and DBSA share a layer)
        needed = sum(v[0] for k, v in options.items() if k.startswith(f"{site}_") and isinstance(v, list))
        dims[f"{site}_attention_heads"] = max(dims[f"{site}_attention_heads"], needed)
    config = SyntaxMTConfig(
        vocab_size=len(tokenizer), encoder_ffn_dim=draw["ffn"], decoder_ffn_dim=draw["ffn"],
        max_position_embeddings=POSITIONS, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, init_std=0.2, **dims, **options,
    )  # fmt: skip
    torch.manual_seed(draw["seed"])
    model = SyntaxMTForConditionalGeneration(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:  # not the sinusoidal positions, which a saved model does not carry
                parameter.add_(torch.randn_like(parameter) * 0.2)
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias))
    assert model.generation_config.max_length is None  # what the saved model had
    return model


def batch(tokenizer, texts=TEXTS) -> dict:
    return dict(tokenizer(texts, return_tensors="pt", padding=True))


def decode(tokenizer, ids) -> list[str]:
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


def explicit(resolved) -> dict:
    """The resolved settings as a call's keyword arguments (every search setting, by name)."""
    keys = ("num_beams", "max_length", "max_new_tokens", "min_length", "length_penalty", "early_stopping",
            "forced_bos_token_id", "forced_eos_token_id", "bad_words_ids")  # fmt: skip
    return {k: getattr(resolved, k) for k in keys if getattr(resolved, k) is not None}


@contextlib.contextmanager
def ctranslate2_directory(model, tokenizer):
    with tempfile.TemporaryDirectory(prefix="hf-syntax-mt-test-") as tmp:
        model.save_pretrained(Path(tmp) / "model")
        tokenizer.save_pretrained(Path(tmp) / "model")
        yield export_to_ctranslate2(Path(tmp) / "model", Path(tmp) / "ct2")


# ---------------------------------------------------------------------------------------------------------------------
# Item 1: one source of decoding settings
# ---------------------------------------------------------------------------------------------------------------------
def test_the_resolved_settings_are_the_models_own(tokenizer):
    """Independent of any engine: an API-built model's limit is its positions, its beams the package default; a
    call's length replaces the saved one; a limit past the positions is capped."""
    model = build(tokenizer, UNEQUAL)
    resolved, inputs = resolve_generation(model, {"attention_mask": 1})
    assert (resolved.max_length, resolved.max_new_tokens, resolved.num_beams) == (POSITIONS, None, DEFAULT_NUM_BEAMS)
    assert inputs == {"attention_mask": 1}
    assert resolve_generation(model, {"max_new_tokens": 5})[0].max_length is None
    assert resolve_generation(model, {"max_length": 500}, warn=False)[0].max_length == POSITIONS + 1
    model.generation_config.max_length = 12
    assert resolve_generation(model, {"max_new_tokens": 5})[0].max_length is None  # the call's limit wins
    assert model.generation_config.max_length == 12  # the model's own is left as it is


def test_generate_decodes_with_the_resolved_settings(tokenizer):
    """The issue's model: outputs run to its positions (random weights rarely end a sentence), not to 20 tokens."""
    model = build(tokenizer, UNEQUAL)
    model.generation_config.num_beams = 2  # the model's own beam size (fewer steps to run than the default 4)
    inputs = batch(tokenizer)
    resolved = resolve_generation(model)[0]
    with torch.no_grad():
        none_passed = model.generate(**inputs)
        assert torch.equal(none_passed, model.generate(**inputs, **explicit(resolved)))
        assert torch.equal(none_passed, model.generate(**inputs, generation_config=resolved))
    assert none_passed.shape[1] > 21  # transformers' default: 20 new tokens and the start token


def test_the_engines_search_decodes_with_the_resolved_settings(tokenizer):
    """The ONNX engine's search (run on Marian's decoder step in torch; the ONNX graph: the slow test below)."""
    model = build(tokenizer, UNEQUAL)
    model.generation_config.num_beams = 2  # the model's own beam size (fewer steps to run than the default 4)
    inputs = batch(tokenizer)
    decoder = TorchDecoder(model)
    resolved = resolve_generation(model)[0]
    with torch.no_grad():
        for beams in ({}, {"num_beams": 1}):
            none_passed = decoder.generate(inputs["input_ids"], inputs["attention_mask"], **beams)
            given = decoder.generate(inputs["input_ids"], inputs["attention_mask"], **{**explicit(resolved), **beams})
            assert torch.equal(none_passed, given) and torch.equal(none_passed, model.generate(**inputs, **beams))
    assert none_passed.shape[1] > 21


def test_a_marian_export_decodes_with_the_resolved_settings(tokenizer, tmp_path):
    """In memory and saved: plain transformers' `generate` (no hf_syntax_mt code) reads them from the exported
    generation config."""
    from transformers import MarianMTModel

    model = build(tokenizer, UNEQUAL)
    model.generation_config.num_beams = 2  # the model's own beam size (fewer steps to run than the default 4)
    inputs = batch(tokenizer)
    resolved = resolve_generation(model)[0]
    save_marian(model, tmp_path / "marian", tokenizer)
    saved = json.loads((tmp_path / "marian" / "generation_config.json").read_text())
    assert (saved["max_length"], saved["num_beams"]) == (POSITIONS, 2)
    with torch.no_grad():
        expected = model.generate(**inputs)
        assert torch.equal(export_to_marian(model).generate(**inputs), expected)
        loaded = MarianMTModel.from_pretrained(tmp_path / "marian").eval()
        assert torch.equal(loaded.generate(**inputs), expected)
        assert torch.equal(loaded.generate(**inputs, **explicit(resolved)), expected)
    assert expected.shape[1] > 21


def test_a_ctranslate2_directory_decodes_with_the_resolved_settings(tokenizer, tmp_path, capsys):
    """Its generation config without a length limit (a directory exported before the fix): the limit is the model's
    positions all the same; `translate` prints the decoding that ran; greedy equals `generate`."""
    model = build(tokenizer, UNEQUAL)
    model.generation_config.num_beams = 1
    with ctranslate2_directory(model, tokenizer) as directory:
        written = json.loads((directory / "generation_config.json").read_text())
        assert (written["max_length"], written["num_beams"]) == (POSITIONS, 1)  # the export writes the limit
        del written["max_length"]  # as the export wrote it before
        (directory / "generation_config.json").write_text(json.dumps(written))
        pipe = CTranslate2Pipeline(directory)
        resolved = pipe.decoding_settings()
        assert (resolved.max_length, resolved.num_beams) == (POSITIONS, 1)
        none_passed = [r["translation_text"] for r in pipe(TEXTS)]
        assert none_passed == [r["translation_text"] for r in pipe(TEXTS, **explicit(resolved))]
        with torch.no_grad():
            ids = model.generate(**batch(tokenizer), num_beams=1)
        assert none_passed == decode(tokenizer, ids) and ids.shape[1] > 21
        source = tmp_path / "in.txt"
        source.write_text("\n".join(TEXTS) + "\n\n", encoding="utf-8")  # an empty line last
        assert main(["translate", "--model", str(directory), "--input", str(source), "--output",
                     str(tmp_path / "out.txt")]) == 0  # fmt: skip
        err = capsys.readouterr().err
        assert f"decoding: beams:1|max_length:{POSITIONS} " in err  # a blank line: empty for every engine
        assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == [*none_passed, ""]
        with pytest.raises(UserError, match="--engine onnxruntime"):
            main(["translate", "--model", str(directory), "--input", str(source), "--engine", "onnxruntime"])
        with pytest.raises(UserError, match="encoder_repetition_penalty=1.5"):
            pipe(TEXTS, encoder_repetition_penalty=1.5)


def test_translate_prints_the_decoding_that_ran_on_a_marian_export(tokenizer, tmp_path, capsys):
    model = build(tokenizer, UNEQUAL)
    save_marian(model, tmp_path / "marian", tokenizer)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(tmp_path / "marian"), "--input", str(source), "--output",
                 str(tmp_path / "out.txt"), "--num-beams", "1", "--device", "cpu"]) == 0  # fmt: skip
    assert f"decoding: beams:1|max_length:{POSITIONS} " in capsys.readouterr().err
    with torch.no_grad():
        expected = [decode(tokenizer, model.generate(**batch(tokenizer, [t]), num_beams=1))[0] for t in TEXTS]
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == expected


# ---------------------------------------------------------------------------------------------------------------------
# Item 2: equivalence by construction
# ---------------------------------------------------------------------------------------------------------------------
def check_marian_and_search(tokenizer, draw: dict) -> None:
    model = build(tokenizer, draw)
    inputs = batch(tokenizer)
    exported = export_to_marian(model)
    labels = inputs["input_ids"].flip(1)
    with torch.no_grad():
        ours, theirs = model(**inputs, labels=labels).logits, exported(**inputs, labels=labels).logits
        assert ours.abs().max() > 1.0  # logits of a real size: the tolerance means something
        torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
        # the engine runs the model itself where its decoder is Marian's, else its Marian export (DBSA decoder heads
        # fold into q_proj)
        decoder = TorchDecoder(exported if decoder_changes(model.config) else model)
        for beams in (1, 2):
            expected = model.generate(**inputs, num_beams=beams, max_new_tokens=8)
            got = decoder.generate(inputs["input_ids"], inputs["attention_mask"], num_beams=beams, max_new_tokens=8)
            assert torch.equal(got, expected), beams


def check_ctranslate2(tokenizer, draw: dict) -> None:
    model = build(tokenizer, draw)
    with torch.no_grad():
        expected = decode(tokenizer, model.generate(**batch(tokenizer), num_beams=1, max_new_tokens=12))
    with ctranslate2_directory(model, tokenizer) as directory:
        got = [r["translation_text"] for r in CTranslate2Pipeline(directory)(TEXTS, num_beams=1, max_new_tokens=12)]
    assert got == expected


@given(draw=exportable())
@example(draw=UNEQUAL)
@settings(FAST, max_examples=15)  # about 0.3 s an example on one thread
def test_the_marian_export_and_the_engines_search_equal_generate(tokenizer, draw):
    check_marian_and_search(tokenizer, draw)


@given(draw=exportable())
@example(draw=UNEQUAL)
@example(draw={**UNEQUAL, "encoder_attention_heads": 1, "decoder_attention_heads": 4, "method": "biaffine"})
@FAST
def test_ctranslate2_float32_greedy_equals_generate(tokenizer, draw):
    check_ctranslate2(tokenizer, draw)


@pytest.mark.slow
@given(draw=exportable())
@SLOW
def test_ctranslate2_and_the_marian_export_equal_generate_on_more_configs(tokenizer, draw):
    check_marian_and_search(tokenizer, draw)
    check_ctranslate2(tokenizer, draw)


@pytest.mark.slow  # one decoder export with torch.onnx.export(dynamo=True) per example: 10-40 s here
@given(draw=exportable())
@example(draw=UNEQUAL)
@settings(FAST, max_examples=3)
def test_the_onnxruntime_engine_equals_generate(tokenizer, draw):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder

    model = build(tokenizer, draw)
    inputs = batch(tokenizer)
    decoder = OnnxDecoder(export_to_marian(model) if decoder_changes(model.config) else model, cache=False)
    with torch.no_grad():
        for call in ({"num_beams": 1}, {"num_beams": 3, "max_new_tokens": 12}, {}):
            expected = model.generate(**inputs, **call)
            assert torch.equal(decoder.generate(inputs["input_ids"], inputs["attention_mask"], **call), expected)


def test_the_spec_gives_each_stack_its_own_head_count(tokenizer):
    """Independent of decoding: the converted decoder's spec names the decoder's head count."""
    from ctranslate2.converters import transformers as converters

    from hf_syntax_mt.export.ct2 import _loader_class

    marian = export_to_marian(build(tokenizer, UNEQUAL))
    spec = _loader_class(converters)().get_model_spec(marian)
    assert (int(spec.encoder.num_heads), int(spec.decoder.num_heads)) == (4, 1)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_the_loaders_copy_of_ctranslate2_matches_the_installed_release(tokenizer):
    """Source text: upstream's `BartLoader.get_model_spec` is ours with one head count for both stacks (its
    `from_config` arguments with ``heads`` for `encoder_attention_heads`, and the same lines after it). Behaviour: a
    model with equal head counts converts to the same spec variables as upstream's loader gives."""
    from ctranslate2.converters import transformers as converters

    from hf_syntax_mt.export.ct2 import _loader_class

    loader = _loader_class(converters)()
    upstream, ours = inspect.getsource(converters.BartLoader.get_model_spec), inspect.getsource(loader.bart_model_spec)
    assert "Copied from ctranslate2.converters.transformers.BartLoader.get_model_spec" in inspect.getsource(
        _loader_class
    )  # fmt: skip
    call = re.search(r"TransformerSpec\.from_config\((.*?)\n        \)", upstream, re.S)
    assert call, "ctranslate2's BartLoader.get_model_spec no longer builds its spec with TransformerSpec.from_config"
    arguments = call.group(1).replace("model.config.encoder_attention_heads,", "heads,")
    assert _squeezed(arguments) in _squeezed(ours)
    assert _squeezed(upstream[upstream.index("self.set_encoder(") :]) in _squeezed(ours)

    marian = export_to_marian(build(tokenizer, {**UNEQUAL, "decoder_attention_heads": 4}))
    marian.config.normalize_before = marian.config.normalize_embedding = False
    stock = converters.BartLoader.get_model_spec(loader, marian)
    mine = loader.bart_model_spec(marian)
    stock_variables, my_variables = stock.variables(), mine.variables()
    assert stock_variables.keys() == my_variables.keys()
    for name, value in stock_variables.items():
        assert torch.equal(torch.as_tensor(my_variables[name]), torch.as_tensor(value)), name
