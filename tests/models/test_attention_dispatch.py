"""One attention dispatch (issue 68): the method heads' kernels are transformers attention functions chosen once per
attention at construction, and every head plan (the eager span, the fused groups among the other heads) is made
then. Checked against independent computations: transformers' own eager and SDPA functions, a round trip of head
indices through each plan, and the eager path with FlexAttention not opted in."""

import types

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_calls import count_calls
from tiny_config import EOS, PAD, TINY
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.marian.modeling_marian import eager_attention_forward

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.attention_functions import EAGER_HOOKS, FLEX, SDPA_BIAS, eager_hook_attention, sdpa_bias_attention
from hf_syntax_mt.modeling_layers import _dispatch_plans

ATOL = 1e-6


def qkv_and_mask(seed=0, B=2, H=3, T=5, S=6, d=4):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, n, d, generator=g) for n in (T, S, S))
    mask = torch.zeros(B, 1, T, S)
    mask[1, :, :, 4:] = torch.finfo(torch.float32).min  # the second example has 4 keys
    return q, k, v, mask


def test_the_kernels_are_registered_transformers_attention_functions():
    assert ALL_ATTENTION_FUNCTIONS[EAGER_HOOKS] is eager_hook_attention
    assert ALL_ATTENTION_FUNCTIONS[SDPA_BIAS] is sdpa_bias_attention


def test_without_hooks_they_are_transformers_eager_and_sdpa():
    """Given no method groups, the eager hook path is transformers' eager attention (output and probabilities) and
    the biased SDPA is transformers' sdpa, with the same additive mask."""
    q, k, v, mask = qkv_and_mask()
    module = types.SimpleNamespace(training=False, is_causal=False)
    out, probs = eager_hook_attention(module, q, k, v, mask, scaling=0.5)
    ref_out, ref_probs = eager_attention_forward(module, q, k, v, mask, scaling=0.5)
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(probs, ref_probs, atol=ATOL, rtol=0)
    out, _ = sdpa_bias_attention(module, q, k, v, mask, scaling=0.5)
    ref_out, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.5, is_causal=False)
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=0)


class Group:
    def __init__(self, fused):
        self.fused = fused


@st.composite
def layouts(draw):
    """Head groups (method with a fused form or none, first, stop) laid side by side from head 0, the layer's head
    count, its fused form, and which groups need the eager path."""
    sizes = draw(st.lists(st.integers(1, 3), min_size=0, max_size=4))
    forms = draw(st.lists(st.sampled_from([None, "bias", "score_mod"]), min_size=len(sizes), max_size=len(sizes)))
    groups, start = [], 0
    for size, form in zip(sizes, forms, strict=True):
        groups.append((Group(form), start, start + size))
        start += size
    H = start + draw(st.integers(0, 3)) or 1
    form = "bias" if "bias" in forms else "score_mod" if "score_mod" in forms else None
    return groups, H, form


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_every_plan_puts_each_head_in_one_kernel_with_its_group(layout):
    """Each plan made at construction, for every (fused runs, groups needing eager) a call can meet: the eager span
    covers exactly the groups from the first flagged to the last; the other heads, numbered as the kernel sees them
    (the span taken out), map each fused group back onto its heads in the layer, and only groups of the layer's
    fused form outside the span, when it runs, are fused."""
    groups, H, form = layout
    plans = _dispatch_plans(groups, H, form)
    assert len(plans) == (2 if form else 1) * 2 ** len(groups)
    for (fused_runs, flags), plan in plans.items():
        flagged = [g for g, flag in zip(groups, flags, strict=True) if flag]
        if flagged:
            assert (plan.e0, plan.e1) == (flagged[0][1], flagged[-1][2])
        else:
            assert plan.e0 == plan.e1
        assert [g[1:] for g in plan.eager] == [
            g[1:] for g in groups if plan.e0 <= g[1] and g[2] <= plan.e1 and flagged
        ]
        others = [h for h in range(H) if not plan.e0 <= h < plan.e1]  # layer heads in the kernel's order
        for method, a, b, start, stop in plan.fused:
            assert others[a:b] == list(range(start, stop))
            assert fused_runs and method.fused == form
        expected = [g for g in groups if fused_runs and g[0].fused == form and (g[2] <= plan.e0 or g[1] >= plan.e1)]
        assert [(m, s, e) for m, _, _, s, e in plan.fused] == expected


def batch():
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [11, 12, 13, EOS, PAD, PAD]])
    return dict(
        input_ids=input_ids,
        attention_mask=(input_ids != PAD).long(),
        parent_positions=torch.tensor([[1.0, 1.0, 1.0, 3.0, 3.0, 5.0], [1.0, 1.0, 1.0, 3.0, 4.0, 5.0]]),
        decoder_input_ids=torch.tensor([[PAD, 20, 21], [PAD, 30, 31]]),
    )


def test_without_the_flex_import_pascal_runs_eager_under_every_setting(monkeypatch):
    """A model built while FlexAttention is not registered (`hf_syntax_mt.flex` not imported) chose no fused kernel
    for its PASCAL layers: `"fused"` runs no FlexAttention, and the PASCAL heads equal the eager path's; a model built
    after the registration chose it."""
    monkeypatch.delitem(AttentionInterface._global_mapping, FLEX, raising=False)
    calls = count_calls(monkeypatch)
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, encoder_pascal_heads=[2, 1])).eval()
    attn = model.model.encoder.layers[0].self_attn
    assert attn.fused_form is None and attn.fused_kernel is None
    with torch.no_grad():
        model.config.syntax_attention_kernel = "eager"
        eager = model(**batch()).logits
        model.config.syntax_attention_kernel = "fused"
        fused = model(**batch()).logits
    assert calls == {"flex": 0, "bias": 0}
    torch.testing.assert_close(fused, eager, atol=0, rtol=0)
    sentinel = object()
    monkeypatch.setitem(AttentionInterface._global_mapping, FLEX, sentinel)
    later = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, encoder_pascal_heads=[2, 1]))
    assert later.model.encoder.layers[0].self_attn.fused_kernel is sentinel
    assert later.model.encoder.layers[0].self_attn.fused_form == "score_mod"


def test_a_layer_with_a_bias_group_chooses_the_biased_sdpa():
    """FlexAttention takes no additive bias: a layer with a bias group chooses the biased SDPA (its score_mod groups
    take the eager path), a layer without method heads no fused kernel."""
    heads = dict(encoder_tree_bias_heads=[1, 0], encoder_pascal_heads=[1, 0])
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, **heads))
    first, second = (layer.self_attn for layer in model.model.encoder.layers)
    assert first.fused_form == "bias" and first.fused_kernel is ALL_ATTENTION_FUNCTIONS[SDPA_BIAS]
    assert first.eager_kernel is ALL_ATTENTION_FUNCTIONS[EAGER_HOOKS]
    assert second.fused_form is None and second.head_groups == []
