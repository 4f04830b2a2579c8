"""Every attention implementation the model class declares gives eager's outputs with every registered method that
takes heads, the way transformers' common tests run each one (`test_eager_matches_sdpa_inference`): the method's
tiny tester model, saved and loaded with `from_pretrained(..., attn_implementation=...)`, on a padded batch, in its
forward and in cached greedy decoding. No method tensor reaches the configured kernel (a spy kernel). Tolerance: 1e-5
absolute, fp32.

Each implementation hands the attention its own mask format (eager: additive `(B, 1, T, S)`; sdpa: boolean or None;
flex_attention: a `BlockMask`; flash_attention_*: a `(B, S)` key mask or None), which the method heads' score path
normalises (`modeling_layers._additive_mask`). Flash attention is not declared (transformers' flash path is wrong for
padded cross-attention, pinned below); its mask format is tested through a kernel registered with flash's mask
function. FlexAttention runs uncompiled here (its reference path: the same values), as compiling it on this CPU
takes minutes; `test_flex_attention_runs_compiled_as_transformers_calls_it` (slow) runs one forward compiled."""

import pytest
import torch
import transformers.integrations.flash_attention as hf_flash
import transformers.integrations.flex_attention as hf_flex
import transformers.masking_utils as hf_masks
import transformers.modeling_flash_attention_utils as hf_flash_utils
from test_every_method import BASE, BUILTIN, fixture, method_config, training_batch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from transformers import AttentionInterface, AttentionMaskInterface, MarianConfig, MarianMTModel
from transformers.masking_utils import flash_attention_mask, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.methods import get_method, head_layout, input_names, supervision_names

ATOL = 1e-5
#: each implementation the class declares, by the flag that declares it (eager needs none)
DECLARED = {"eager": None, "sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}
#: flash attention's mask format (a `(B, S)` key mask or None, causality from `module.is_causal`), with a direct kernel
KEY_MASK = "key_mask_reference"


def _has_heads(name: str) -> bool:
    config = SyntaxMTConfig(**BASE, **method_config(name))
    sides = (("encoder", config.encoder_layers, config.encoder_attention_heads),
             ("decoder", config.decoder_layers, config.decoder_attention_heads),
             ("cross", config.decoder_layers, config.decoder_attention_heads))  # fmt: skip
    return any(
        g[0].name == name for site, n, h in sides for layer in range(n) for g in head_layout(config, site, layer, h)
    )


#: the registered methods that take attention heads (the others leave every attention Marian's)
WITH_HEADS = [name for name in BUILTIN if _has_heads(name)]


def _attend(q, k, v, scale, causal, valid=None):
    """softmax(q k^T * scale) v for one sequence: `q` `(t, H, d)`, `k`/`v` `(s, H, d)`, keys with `valid` `(s,)` False
    masked; causal aligned bottom-right (query i sees keys 0..s-t+i), as flash-attn >= 2.1."""
    t, s = q.shape[0], k.shape[0]
    scores = torch.einsum("thd,shd->hts", q, k) * scale  # (H, t, s)
    allowed = torch.ones(t, s, dtype=torch.bool) if valid is None else valid.view(1, s).expand(t, s)
    if causal:
        allowed = allowed & (torch.arange(s).view(1, -1) <= torch.arange(t).view(-1, 1) + (s - t))  # (t, s)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(-1), v)  # (t, H, d)


def key_mask_reference(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """A kernel with flash attention's contract, one row at a time: `attention_mask` `(B, S')` (1 = attend; the last
    S positions are the keys) or None, causality from `module.is_causal`; `query` `(B, H, T, d)` -> `(B, T, H, d)`."""
    assert dropout == 0.0
    B, S = query.shape[0], key.shape[2]
    causal = module.is_causal and query.shape[2] > 1
    rows = []
    for b in range(B):
        valid = None if attention_mask is None else attention_mask[b, -S:].bool()
        rows.append(_attend(query[b].transpose(0, 1), key[b].transpose(0, 1), value[b].transpose(0, 1), scaling,
                            causal, valid))  # fmt: skip
    return torch.stack(rows), None


@pytest.fixture
def uncompiled_flex(monkeypatch):
    """transformers' flex path with flex_attention and create_block_mask uncompiled (the same values)."""
    monkeypatch.setattr(hf_flex.WrappedFlexAttention, "__call__", lambda self: flex_attention)
    monkeypatch.setattr(hf_masks, "create_block_mask", lambda *a, _compile=False, **k: create_block_mask(*a, **k))


@pytest.fixture
def key_mask_kernel(monkeypatch):
    """`key_mask_reference` registered as an attention implementation whose masks are flash attention's."""
    monkeypatch.setitem(AttentionInterface._global_mapping, KEY_MASK, key_mask_reference)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, KEY_MASK, flash_attention_mask)


def perturbed_model(name: str, seed: int = 0) -> SyntaxMTForConditionalGeneration:
    """The method's tester model (eager) with every weight perturbed (the sinusoidal positions aside: they are not
    saved), so that parameters that start at zero (the alignment biases' output weights) change the attention."""
    torch.manual_seed(seed)
    config = SyntaxMTConfig(**BASE, **method_config(name))
    config._attn_implementation = "eager"
    model = SyntaxMTForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" not in name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    return model


def generation_inputs(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k not in ("labels", *supervision_names())}


def outputs(model, batch: dict) -> tuple:
    """Logits and loss of the forward, and tokens and per-step scores of cached greedy decoding."""
    with torch.no_grad():
        out = model(**batch)
        generated = model.generate(**generation_inputs(batch), max_new_tokens=3, num_beams=1, do_sample=False,
                                   output_scores=True, return_dict_in_generate=True)  # fmt: skip
    return out.logits, out.loss, generated.sequences, torch.stack(generated.scores)


def test_the_declared_implementations_are_the_tested_ones():
    """The class declares exactly the implementations this module runs (a new flag fails until it is tested), and
    the methods with heads include every kind of head (score change, bias, probabilities, supervised)."""
    flags = {"_supports_sdpa", "_supports_flex_attn", "_supports_flash_attn"}
    declared = {flag for flag in flags if getattr(SyntaxMTForConditionalGeneration, flag)}
    assert declared == {flag for flag in DECLARED.values() if flag}
    assert {"pascal", "tree", "tree_bias", "biaffine", "alignment_bias"} <= set(WITH_HEADS)


#: every method with heads on the default path, and those with a fused form also under "fused"
CASES = [(name, "auto") for name in WITH_HEADS] + [(name, "fused") for name in WITH_HEADS if get_method(name).fused]


@pytest.mark.parametrize(("name", "kernel"), CASES)
def test_every_implementation_gives_eagers_outputs(name, kernel, tmp_path, uncompiled_flex, key_mask_kernel):
    """The forward's logits and loss, and cached greedy decoding (tokens and per-step scores), under each declared
    implementation (and flash's mask format) equal eager's on a padded batch; `syntax_attention_kernel="fused"` also
    runs the fused method forms (PASCAL's score_mod in FlexAttention, the additive biases in SDPA) beside the
    configured kernel, with padding read from its mask."""
    model = perturbed_model(name)
    model.config.syntax_attention_kernel = kernel
    model.save_pretrained(tmp_path)
    batch = training_batch()
    assert not batch["attention_mask"].all()  # padding: the mask formats differ
    expected = outputs(model, batch)
    for implementation in (*DECLARED, KEY_MASK):
        loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path, attn_implementation=implementation).eval()
        assert loaded.config._attn_implementation == implementation
        logits, loss, sequences, scores = outputs(loaded, batch)
        torch.testing.assert_close(logits, expected[0], rtol=0, atol=ATOL, msg=implementation)
        torch.testing.assert_close(loss, expected[1], rtol=0, atol=ATOL, msg=implementation)
        assert torch.equal(sequences, expected[2]), implementation
        torch.testing.assert_close(scores, expected[3], rtol=0, atol=ATOL, msg=implementation)


@pytest.mark.slow  # compiling FlexAttention on the CPU takes about a minute
def test_flex_attention_runs_compiled_as_transformers_calls_it():
    """One forward of a PASCAL model under flex_attention as transformers runs it (compiled): eager's logits."""
    model = perturbed_model("pascal")
    batch = training_batch()
    with torch.no_grad():
        expected = model(**batch).logits
        model.set_attn_implementation("flex_attention")
        got = model(**batch).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)


def test_a_kernel_without_a_mask_format_is_refused_for_method_heads(monkeypatch):
    """transformers gives a kernel registered without a mask function no mask: method heads would attend to
    padding, so their attention refuses it, naming the implementation and the fix; plain heads still run it."""
    monkeypatch.setitem(AttentionInterface._global_mapping, "no_mask_kernel", ALL_ATTENTION_FUNCTIONS["sdpa"])
    model = perturbed_model("pascal")
    batch = training_batch()
    model.config._attn_implementation = "no_mask_kernel"
    with pytest.raises(UserError, match=r"attn_implementation='no_mask_kernel' has no mask function.*register"):
        with torch.no_grad():
            model(**batch)
    plain = perturbed_model("input_features")  # no method heads: Marian's attention
    with torch.no_grad():
        plain.config._attn_implementation = "no_mask_kernel"
        plain(**batch)


def test_flash_attention_is_refused_with_the_reason(tmp_path):
    model = perturbed_model("pascal")
    model.save_pretrained(tmp_path)
    with pytest.raises(UserError, match=r"flash_attention_2.*not supported.*#35032.*'sdpa'"):
        SyntaxMTForConditionalGeneration.from_pretrained(tmp_path, attn_implementation="flash_attention_2")


@pytest.fixture
def cpu_flash(monkeypatch):
    """transformers' flash_attention_2 path (unpadding, varlen call, re-padding) over a direct implementation of
    flash-attn's two functions, which does not install on this CPU."""

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False):  # fmt: skip
        out = torch.empty_like(q)  # (total_q, H, d)
        for i in range(len(cu_seqlens_q) - 1):
            qa, qb, ka, kb = cu_seqlens_q[i], cu_seqlens_q[i + 1], cu_seqlens_k[i], cu_seqlens_k[i + 1]
            out[qa:qb] = _attend(q[qa:qb], k[ka:kb], v[ka:kb], softmax_scale, causal)
        return out

    def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False):  # (B, T, H, d)
        return torch.stack([_attend(q[b], k[b], v[b], softmax_scale, causal) for b in range(q.shape[0])])

    for name, value in (("_loaded_implementation", "flash_attention_2"), ("_flash_fn", flash_attn_func),
                        ("_flash_varlen_fn", flash_attn_varlen_func), ("_flash_with_kvcache_fn", None),
                        ("_pad_fn", hf_flash_utils._pad_input), ("_unpad_fn", hf_flash_utils._unpad_input),
                        ("_process_flash_kwargs_fn", hf_flash_utils._lazy_define_process_function(flash_attn_varlen_func)),
                        ("_process_with_kvcache_kwargs_fn", dict)):  # fmt: skip
        monkeypatch.setattr(hf_flash_utils, name, value)
    monkeypatch.setattr(hf_flash, "_use_top_left_mask", False)


@pytest.mark.parametrize("padded", [False, True])
def test_transformers_flash_path_is_still_wrong_for_a_padded_source(padded, cpu_flash):
    """Why flash attention is not declared: a plain `MarianMTModel` under transformers' flash path (over a correct
    kernel) gives eager's logits without padding, and other logits with a padded source (its cross-attention's
    queries are unpadded with the source mask, transformers #35032). When a release fixes it, the padded case fails
    here: declare `_supports_flash_attn` again (the method heads read flash's mask format, tested above)."""
    torch.manual_seed(0)
    config = MarianConfig(**BASE)
    config._attn_implementation = "eager"
    model = MarianMTModel(config).eval()
    batch = training_batch()
    batch = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
    if not padded:
        batch = {k: v[:1] for k, v in batch.items()}  # the unpadded row
    with torch.no_grad():
        expected = model(**batch).logits
        model.config._attn_implementation = "flash_attention_2"
        got = model(**batch).logits
    wrong = (got - expected).abs().max().item()
    assert (wrong > 1e-2) if padded else (wrong < ATOL), wrong


def test_no_method_tensor_reaches_the_kernel(monkeypatch):
    """A spy kernel (sdpa's masks) records the keyword arguments of every call: a model with nearly every method
    (PASCAL, syntax-directed, LISA, DBSA on both sides, tree bias, features, alignment biases, fertility, document
    context) in a training forward and in generation hands it no method input, supervision or prepared tensor, and
    no tensor at all besides q, k, v and the mask; the kernel does run beside method heads (fewer heads than the
    layer's)."""
    calls = []
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def spy(module, query, key, value, attention_mask, **kwargs):
        calls.append((module, query.shape[1], dict(kwargs)))
        return sdpa(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(AttentionInterface._global_mapping, "spy", spy)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, "spy", sdpa_mask)
    config = SyntaxMTConfig(**{**fixture.CONFIG, "encoder_tree_bias_heads": [0, 1]})
    config._attn_implementation = "spy"
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(config).eval()
    batch = fixture.batch()
    with torch.no_grad():
        model(**batch)
        model.generate(**generation_inputs(batch), max_new_tokens=3, num_beams=2)
    method_names = {*input_names(), *supervision_names(), "tree_weights", "tree_bias_distances", "method_inputs"}
    assert calls
    assert any(heads < module.num_heads for module, heads, _ in calls)  # beside method heads
    for module, _, kwargs in calls:
        assert not method_names & set(kwargs), (getattr(module, "site", None), set(kwargs))
        tensors = {k for k, v in kwargs.items() if isinstance(v, torch.Tensor | dict)}
        assert not tensors, (getattr(module, "site", None), tensors)
