"""What transformers' own model tests (`MarianModelTest` with our classes swapped in) ask of a model, written here
for ours (issue 44): tuple outputs equal to the dict outputs for both model classes, the legacy
`config.gradient_checkpointing` flag, a config built from defaults, the decoding cache under both names and in the
signature, and the version floors checked at import."""

import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration, SyntaxMTModel
from hf_syntax_mt.compat import MIN_VERSIONS, check_versions
from hf_syntax_mt.modeling_layers import CACHE

ROOT = Path(__file__).resolve().parents[2]
MODELS = (SyntaxMTModel, SyntaxMTForConditionalGeneration)


def make(cls, seed=0, **overrides):
    torch.manual_seed(seed)
    return cls(SyntaxMTConfig(**{**TINY, **overrides})).eval()


def batch():
    """Two sources of lengths 5 and 3 (padded) and targets of lengths 4 and 3 (-100 past the end)."""
    input_ids = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    labels = torch.tensor([[11, 12, 13, EOS], [14, 15, EOS, -100]])
    decoder_input_ids = torch.tensor([[PAD, 11, 12, 13], [PAD, 14, 15, EOS]])
    return input_ids, (input_ids != PAD).long(), decoder_input_ids, labels


def assert_same_tuple(tup, out):
    """`tup` holds the dict output's non-None fields, in order (transformers' `ModelOutput.to_tuple`)."""
    fields = [(name, value) for name, value in out.items() if value is not None]
    assert isinstance(tup, tuple) and len(tup) == len(fields), [name for name, _ in fields]
    for got, (name, value) in zip(tup, fields, strict=True):
        if torch.is_tensor(value):
            torch.testing.assert_close(got, value, rtol=0, atol=0, msg=name)
        elif isinstance(value, tuple):  # hidden states / attentions per layer
            assert len(got) == len(value), name
            for a, b in zip(got, value, strict=True):
                torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
        else:  # the decoding cache
            assert type(got) is type(value), name


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("how", ["argument", "config"])
def test_return_dict_false_gives_the_dict_outputs_as_a_tuple(cls, how):
    model = make(cls, encoder_pascal_heads=[2, 0])
    ids, mask, dec, labels = batch()
    parents = torch.tensor([[1.0, 1.0, 3.0, 3.0, 4.0], [1.0, 1.0, 2.0, 3.0, 4.0]])  # (B, S), eos/pad -> own position
    inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, parent_positions=parents,
                  output_hidden_states=True, output_attentions=True)  # fmt: skip
    if cls is SyntaxMTForConditionalGeneration:
        inputs["labels"] = labels
    with torch.no_grad():
        out = model(**inputs)
        if how == "argument":
            tup = model(**inputs, return_dict=False)
        else:
            model.config.return_dict = False
            tup = model(**inputs)
    assert len(out.encoder_attentions) == 2 and out.decoder_hidden_states is not None
    assert_same_tuple(tup, out)
    if cls is SyntaxMTForConditionalGeneration:  # loss first, then the logits, as Marian's tuples
        expected = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        torch.testing.assert_close(tup[0], expected)
        assert tup[1].shape == (2, 4, TINY["vocab_size"])


def test_tuple_encoder_outputs_are_accepted():
    model = make(SyntaxMTForConditionalGeneration)
    ids, mask, dec, _ = batch()
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
        encoded = model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=False)
        assert isinstance(encoded, tuple)
        again = model(encoder_outputs=encoded, attention_mask=mask, decoder_input_ids=dec, return_dict=False)[0]
    torch.testing.assert_close(again, full)


def _layer_calls(model, step):
    """How often the first encoder layer's feed-forward runs in one training step (forward, loss, backward)."""
    calls = []
    handle = model.model.encoder.layers[0].fc1.register_forward_hook(lambda *_: calls.append(1))
    step(model)
    handle.remove()
    return len(calls)


def test_the_legacy_gradient_checkpointing_flag_checkpoints_with_the_same_gradients(tmp_path):
    plain = make(SyntaxMTForConditionalGeneration, seed=1).train()
    flagged = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, gradient_checkpointing=True)).train()
    flagged.load_state_dict(plain.state_dict())
    ids, mask, _, labels = batch()

    def step(model):
        model.zero_grad()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    # checkpointing runs each layer again in the backward pass: twice per step instead of once
    assert _layer_calls(plain, step) == 1
    assert _layer_calls(flagged, step) == 2
    grads = {name: p.grad for name, p in plain.named_parameters() if p.grad is not None}
    assert grads and {name for name, p in flagged.named_parameters() if p.grad is not None} == set(grads)
    for name, p in flagged.named_parameters():
        if name in grads:
            torch.testing.assert_close(p.grad, grads[name], rtol=1e-5, atol=1e-6, msg=name)
    # consumed, as transformers does: a saved model does not switch checkpointing on when loaded for inference
    flagged.save_pretrained(tmp_path)
    assert "gradient_checkpointing" not in (tmp_path / "config.json").read_text()
    assert SyntaxMTModel(SyntaxMTConfig(**TINY, gradient_checkpointing=True)).encoder.gradient_checkpointing


def test_a_config_from_defaults_builds_and_the_model_names_a_token_id_outside_the_vocabulary(tmp_path):
    default = SyntaxMTConfig()  # opus-mt's sizes: pad 58100 of 58101
    small = SyntaxMTConfig(vocab_size=99, d_model=16, encoder_attention_heads=4, decoder_attention_heads=4)
    assert (default.pad_token_id, small.pad_token_id) == (58100, 58100)
    small.save_pretrained(tmp_path)  # a config that only a model cannot use still round-trips
    assert SyntaxMTConfig.from_pretrained(tmp_path).vocab_size == 99
    for cls in MODELS:
        with pytest.raises(
            ValueError, match=r"pad_token_id=58100 is not a token id of the vocabulary \(vocab_size=99"
        ):
            cls(small)
    with pytest.raises(ValueError, match="decoder_start_token_id=99 is not a token id"):
        SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, "decoder_start_token_id": 99}))
    small.pad_token_id = small.decoder_start_token_id = PAD
    model = SyntaxMTForConditionalGeneration(small)  # within the vocabulary: builds, and the padding row is PAD's
    assert model.model.shared.padding_idx == PAD


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_the_cache_is_in_the_signature_under_the_installed_name_and_taken_under_both(cls):
    params = inspect.signature(cls.forward).parameters
    other = "past_key_values" if CACHE == "cache" else "cache"
    assert CACHE in params and other not in params
    # `**kwargs: Unpack[TransformersKwargs]`, as transformers' models: its tests read output_attentions from it
    assert "output_attentions" in params["kwargs"].annotation.__args__[0].__annotations__
    assert list(params)[:7] == ["self", "input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask",
                                "encoder_outputs", CACHE]  # fmt: skip
    model = make(cls)
    ids, mask, dec, _ = batch()
    head = (lambda out: out.logits) if cls is SyntaxMTForConditionalGeneration else (lambda out: out.last_hidden_state)
    with torch.no_grad():
        full = head(model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec))
        for name in ("cache", "past_key_values"):
            prefix = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, :2], use_cache=True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rest = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec[:, 2:], use_cache=True,
                             **{name: getattr(prefix, CACHE)})  # fmt: skip
            torch.testing.assert_close(head(rest), full[:, 2:], atol=1e-5, rtol=1e-5)
            assert getattr(rest, CACHE).get_seq_length() == 4
            deprecated = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
            # from 5.24 on the old name warns as transformers' own models do; before, it is the name
            assert len(deprecated) == (CACHE == "cache" and name == "past_key_values")


def test_too_old_transformers_or_torch_is_one_import_error_naming_the_release():
    def installed(versions):
        return lambda name: versions[name]

    with pytest.raises(ImportError, match=r"needs transformers 5\.17\.0 or newer, but transformers 5\.16\.1 is "
                                          r"installed: pip install 'transformers>=5\.17\.0,<6'$"):  # fmt: skip
        check_versions(installed({"transformers": "5.16.1", "torch": "2.13.0"}))
    with pytest.raises(ImportError, match=r"needs torch 2\.6\.0 or newer, but torch 2\.5\.1\+cu121 is installed"):
        check_versions(installed({"transformers": "5.24.0", "torch": "2.5.1+cu121"}))
    for ok in ({"transformers": "5.17.0", "torch": "2.6.0"}, {"transformers": "5.25.0.dev0", "torch": "2.13.0+cpu"}):
        check_versions(installed(ok))
    # a real `import hf_syntax_mt` where transformers reports 5.3.0: the last line is the one error
    code = (
        "import importlib.metadata as m; real = m.version; "
        "m.version = lambda name: '5.3.0' if name == 'transformers' else real(name); import hf_syntax_mt"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "hf_syntax_mt.errors.DependencyVersionError: hf-syntax-mt needs transformers 5.17.0 or newer, but transformers 5.3.0 is installed: "
        "pip install 'transformers>=5.17.0,<6'"
    )


def test_the_checked_floors_are_the_declared_ones():
    text = (ROOT / "pyproject.toml").read_text()
    for name, floor in MIN_VERSIONS.items():
        declared = re.search(rf'^\s*"{name}>=([0-9.]+)[",<]', text, re.M)
        assert declared and declared.group(1) == floor, name
    # the floors environment (`make test-floors`, the `test-floors` extra) installs exactly these releases
    extra = text.split("test-floors = [")[1].split("]")[0]
    pins = dict(re.findall(r'"([a-z_-]+)==([0-9.]+)"', extra))
    required = re.findall(r'^\s*"([a-z_-]+)>=([0-9.]+)', text.split("[project.optional-dependencies]")[0], re.M)
    assert {name for name, _ in required} >= {"transformers", "torch", "datasets", "accelerate", "tokenizers"}
    for name, floor in required:
        if name != "torch":  # the floors environment takes the CPU wheel CI has (CONTRIBUTING.md says why)
            assert pins.get(name) == floor, (name, floor, pins.get(name))


def test_the_attentions_projection_and_cache_update_are_the_installed_marians():
    """`SyntaxMTAttention._project` is a copy of `MarianAttention.forward`'s projection and cache update: the q, k, v
    it gives equal those the installed transformers' forward hands to its attention kernel (caught by a kernel
    registered for the test), in the encoder, in the decoder over two cached steps and in the cross-attention whose
    keys are reused from the cache on the second step; and the caches end equal."""
    from transformers import AttentionInterface
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    from transformers.models.marian.modeling_marian import MarianAttention

    seen = []

    def catch(module, query, key, value, attention_mask, **kwargs):
        seen.append((query, key, value))
        return torch.zeros(*query.shape[:2], query.shape[2], query.shape[3]).transpose(1, 2), None

    AttentionInterface.register("catch_qkv", catch)
    model = make(SyntaxMTModel)
    encoder_attn = model.encoder.layers[0].self_attn
    decoder_attn, cross_attn = model.decoder.layers[1].self_attn, model.decoder.layers[1].encoder_attn
    torch.manual_seed(1)
    d = TINY["d_model"]
    source, steps = torch.randn(2, 5, d), [torch.randn(2, 3, d), torch.randn(2, 1, d)]

    ours_cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    theirs_cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    calls = [(encoder_attn, source, None, None, None)]
    for step in steps:
        calls += [(decoder_attn, step, None, ours_cache, theirs_cache), (cross_attn, step, source, ours_cache,
                                                                          theirs_cache)]  # fmt: skip
    implementation = model.config._attn_implementation
    try:
        model.config._attn_implementation = "catch_qkv"
        with torch.no_grad():
            for module, hidden, key_value, ours, theirs in calls:
                seen.clear()
                MarianAttention.forward(module, hidden, key_value, theirs, None)
                expected = seen[0]
                got = module._project(hidden, key_value, ours, {})
                for a, b in zip(got, expected, strict=True):
                    torch.testing.assert_close(a, b, rtol=0, atol=0)
    finally:
        model.config._attn_implementation = implementation
    for a, b in ((ours_cache.self_attention_cache, theirs_cache.self_attention_cache),
                 (ours_cache.cross_attention_cache, theirs_cache.cross_attention_cache)):  # fmt: skip
        assert torch.equal(a.layers[1].keys, b.layers[1].keys) and torch.equal(a.layers[1].values, b.layers[1].values)
    assert ours_cache.self_attention_cache.layers[1].keys.shape[2] == 4  # two steps: 3 + 1 positions
    assert dict(ours_cache.is_updated) == dict(theirs_cache.is_updated) == {1: True}
