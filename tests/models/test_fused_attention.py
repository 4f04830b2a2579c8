"""The fused kernels of the method heads (`syntax_attention_kernel`) against the eager path and the papers' equations,
per example and per head, on the CPU: PASCAL's score_mod in FlexAttention (its unfused reference path, forward only,
as flex has no CPU backward), the alignment biases as SDPA's additive mask (forward and gradients), and the choice of
kernel. Batches have padding and different lengths. Tolerance: 1e-5 absolute in fp32 (the kernels only reorder
float additions). The same comparisons on CUDA, with gradients and in bf16, are in tests/gpu/test_fused_gpu.py."""

import math

import pytest
import torch
from bf16_gradients import KEY_BIAS, assert_key_bias_gradients_close
from kernel_calls import count_calls
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt import flex as fused_kernels  # the opt-in FlexAttention: importing it switches it on
from hf_syntax_mt.modeling_layers import SyntaxMTAttention

ATOL = 1e-5
PASCAL = dict(encoder_pascal_heads=[2, 1])


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, **overrides})).eval()
    with torch.no_grad():  # non-zero alignment biases (v starts at 0) and bi-affine U
        for module in model.modules():
            if hasattr(module, "output_weight"):
                module.output_weight.normal_(0.0, 1.0)
            if getattr(module, "biaffine_u", None) is not None:
                module.biaffine_u.add_(0.3 * torch.randn_like(module.biaffine_u))
    return model


def batch():
    """Three sources of lengths 7, 5 and 3 (padded to 7) with parent positions, and targets of lengths 6, 4, 2."""
    input_ids = torch.tensor(
        [[5, 6, 7, 8, 9, 10, EOS], [11, 12, 13, 14, EOS, PAD, PAD], [15, 16, EOS, PAD, PAD, PAD, PAD]]
    )
    return dict(
        input_ids=input_ids,
        attention_mask=(input_ids != PAD).long(),
        # middle positions of the parents; padding holds anything in range
        parent_positions=torch.tensor(
            [
                [2.0, 2.0, 2.0, 4.5, 2.0, 4.5, 6.0],
                [1.5, 1.5, 1.5, 3.0, 4.0, 0.0, 6.0],
                [1.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0],
            ]
        ),
        dbsa_heads=torch.tensor(
            [[1, 2, 2, 4, 2, 5, 6], [1, 2, 2, 3, 4, -100, -100], [1, 1, 2, -100, -100, -100, -100]]
        ),
        labels=torch.tensor(
            [[20, 21, 22, 23, 24, EOS], [30, 31, 32, EOS, -100, -100], [40, EOS, -100, -100, -100, -100]]
        ),
    )


def per_head(model, inputs, kernel, site="encoder", layer=0, grad=False, **kwargs):
    """The model's outputs and the per-head attention output `(B, T, H, d)` (the input of `out_proj`) of one
    attention module, with `syntax_attention_kernel=kernel`."""
    model.config.syntax_attention_kernel = kernel
    stack = model.model.encoder.layers if site == "encoder" else model.model.decoder.layers
    attn = stack[layer].self_attn if site != "cross" else stack[layer].encoder_attn
    seen = {}
    handle = attn.out_proj.register_forward_pre_hook(lambda module, args: seen.update(heads=args[0]))
    try:
        with torch.set_grad_enabled(grad):
            out = model(**inputs, **kwargs)
    finally:
        handle.remove()
    B, T, _ = seen["heads"].shape
    return out, seen["heads"].view(B, T, attn.num_heads, attn.head_dim)


def direct_pascal_heads(attn, hidden, parent_positions, lengths, k, sigma):
    """Eqs. 1-3 one example and one head at a time, over the real tokens only: softmax(Q K^T / sqrt(d) * N(j; p_t,
    sigma^2)) V for the first k heads, softmax(Q K^T / sqrt(d)) V for the others; `(B, T, H, d)`, 0 on padding."""
    B, T, _ = hidden.shape
    H, d = attn.num_heads, attn.head_dim
    q, key, v = (proj(hidden).view(B, T, H, d) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
    out = torch.zeros(B, T, H, d)
    for b in range(B):
        L = lengths[b]
        for h in range(H):
            scores = q[b, :L, h] @ key[b, :L, h].T / math.sqrt(d)  # Eq. 1, (L, L)
            if h < k:
                j = torch.arange(L, dtype=torch.float32)
                for t in range(L):  # Eq. 3: N(j; p_t, sigma^2)
                    p = float(parent_positions[b, t])
                    gauss = torch.exp(-((j - p) ** 2) / (2 * sigma**2)) / math.sqrt(2 * math.pi * sigma**2)
                    scores[t] = scores[t] * gauss  # Eq. 2
            out[b, :L, h] = torch.softmax(scores, dim=-1) @ v[b, :L, h]
    return out


@pytest.mark.parametrize("sigma", [1.0, 0.7])
def test_pascal_flex_equals_eager_and_eqs_1_to_3_per_example_and_head(sigma):
    model = make_model(**PASCAL, pascal_sigma=sigma)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    lengths = inputs["attention_mask"].sum(-1).tolist()
    decoder_input_ids = torch.full((3, 2), PAD)
    for layer, k in enumerate(PASCAL["encoder_pascal_heads"]):
        seen = {}
        attn = model.model.encoder.layers[layer].self_attn
        handle = attn.register_forward_pre_hook(lambda m, args, seen=seen: seen.update(x=args[0]))
        _, eager = per_head(model, inputs, "eager", layer=layer, decoder_input_ids=decoder_input_ids)
        handle.remove()
        _, fused = per_head(model, inputs, "fused", layer=layer, decoder_input_ids=decoder_input_ids)
        with torch.no_grad():
            direct = direct_pascal_heads(attn, seen["x"], inputs["parent_positions"], lengths, k, sigma)
        for b, L in enumerate(lengths):
            for h in range(attn.num_heads):
                torch.testing.assert_close(fused[b, :L, h], eager[b, :L, h], atol=ATOL, rtol=0)
                torch.testing.assert_close(fused[b, :L, h], direct[b, :L, h], atol=ATOL, rtol=0)


def test_pascal_flex_padding_does_not_leak():
    """Each sentence alone (no padding) gives the rows it has in the padded batch."""
    model = make_model(**PASCAL)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20, 21]] * 3)
    full, heads = per_head(model, inputs, "fused", decoder_input_ids=dec)
    for b, L in enumerate(inputs["attention_mask"].sum(-1).tolist()):
        alone = {k: v[b : b + 1, :L] for k, v in inputs.items()}
        out, alone_heads = per_head(model, alone, "fused", decoder_input_ids=dec[b : b + 1])
        torch.testing.assert_close(alone_heads[0], heads[b, :L], atol=ATOL, rtol=0)
        torch.testing.assert_close(out.logits[0], full.logits[b], atol=ATOL, rtol=0)


def test_pascal_parent_only_and_parent_ignoring_in_the_score_mod():
    """The parent-only weighting and, in training (no gradient: flex's CPU path), parent ignoring with the same random
    rows as the eager path."""
    model = make_model(**PASCAL, pascal_weighting="parent_only", parent_ignoring=0.5)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20]] * 3)
    _, eval_eager = per_head(model, inputs, "eager", decoder_input_ids=dec)
    _, eval_fused = per_head(model, inputs, "fused", decoder_input_ids=dec)
    model.train()
    torch.manual_seed(3)
    _, train_eager = per_head(model, inputs, "eager", decoder_input_ids=dec)
    torch.manual_seed(3)
    _, train_fused = per_head(model, inputs, "fused", decoder_input_ids=dec)
    valid = inputs["attention_mask"].bool()  # (B, T): real query rows
    torch.testing.assert_close(eval_fused[valid], eval_eager[valid], atol=ATOL, rtol=0)
    torch.testing.assert_close(train_fused[valid], train_eager[valid], atol=ATOL, rtol=0)
    assert not torch.allclose(train_eager[valid], eval_eager[valid], atol=1e-3)  # rows were ignored


def test_pascal_beside_recorded_dbsa_heads_and_output_attentions(monkeypatch):
    """Layer 0 has 2 PASCAL heads, 1 DBSA head (recorded for its loss: eager) and a plain one: PASCAL and the plain
    head run in flex around the eager DBSA head, and the loss, its DBSA term and the logits equal the eager path's.
    `output_attentions=True` returns every head's probabilities, the same as eager."""
    calls = count_calls(monkeypatch)
    model = make_model(encoder_pascal_heads=[2, 0], encoder_dbsa_heads=[1, 0]).train()  # dropouts are 0
    inputs = {k: v for k, v in batch().items()}
    eager, eager_heads = per_head(model, inputs, "eager")
    assert calls["flex"] == 0
    fused, fused_heads = per_head(model, inputs, "fused")
    assert calls["flex"] == 1  # layer 0 of the encoder
    for name in ("loss", "dbsa_loss", "logits"):
        torch.testing.assert_close(getattr(fused, name), getattr(eager, name), atol=ATOL, rtol=0)
    valid = inputs["attention_mask"].bool()
    torch.testing.assert_close(fused_heads[valid], eager_heads[valid], atol=ATOL, rtol=0)
    model.eval()
    plain = {k: v for k, v in inputs.items() if k != "dbsa_heads"}
    eager = per_head(model, plain, "eager", output_attentions=True)[0]
    fused = per_head(model, plain, "fused", output_attentions=True)[0]
    for a, b in zip(eager.encoder_attentions, fused.encoder_attentions, strict=True):
        assert a.shape[1] == model.config.encoder_attention_heads
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_a_layer_with_pascal_tree_bias_dbsa_and_a_plain_head_takes_two_kernels(monkeypatch):
    """Encoder layer 0 holds a PASCAL head, a tree-bias head, a DBSA head and a plain one (in that order). Fused
    without a loss: PASCAL eager (FlexAttention takes no additive bias), the tree bias folded into SDPA's mask beside
    the DBSA and plain heads (zeros there); with DBSA's loss the eager span runs from PASCAL to DBSA, the plain head in
    the configured kernel. Every head, the loss and the DBSA loss equal the eager path's."""
    calls = count_calls(monkeypatch)
    spans = []
    eager = SyntaxMTAttention._eager
    monkeypatch.setattr(
        SyntaxMTAttention,
        "_eager",
        lambda self, ctx, q, *a: spans.append((self.site, q.shape[1])) or eager(self, ctx, q, *a),
    )
    model = make_model(encoder_pascal_heads=[1, 0], encoder_tree_bias_heads=[1, 0], encoder_dbsa_heads=[1, 0])
    with torch.no_grad():
        model.model.encoder.layers[0].self_attn.tree_bias.copy_(torch.tensor([1.3]))
    inputs = batch()
    inputs["word_index"] = torch.tensor([[1, 2, 3, 4, 5, 6, 0], [1, 2, 3, 4, 0, 0, 0], [1, 2, 0, 0, 0, 0, 0]])
    inputs["word_heads"] = torch.tensor([[2, 0, 2, 3, 4, 5], [2, 0, 2, 3, 0, 0], [0, 1, 0, 0, 0, 0]])
    valid = inputs["attention_mask"].bool()  # (B, S): real query rows
    plain = {k: v for k, v in inputs.items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20, 21]] * 3)
    _, eager_heads = per_head(model, plain, "eager", decoder_input_ids=dec)
    spans.clear()
    _, fused_heads = per_head(model, plain, "fused", decoder_input_ids=dec)
    assert calls == {"flex": 0, "bias": 1} and spans == [("encoder", 1)]  # PASCAL alone eager
    torch.testing.assert_close(fused_heads[valid], eager_heads[valid], atol=ATOL, rtol=0)
    eager_out, eager_heads = per_head(model, inputs, "eager")
    spans.clear()
    fused_out, fused_heads = per_head(model, inputs, "fused")
    assert calls == {"flex": 0, "bias": 1} and spans == [("encoder", 3)]  # PASCAL, tree bias, DBSA (recorded)
    torch.testing.assert_close(fused_heads[valid], eager_heads[valid], atol=ATOL, rtol=0)
    for name in ("loss", "dbsa_loss"):
        torch.testing.assert_close(getattr(fused_out, name), getattr(eager_out, name), atol=ATOL, rtol=0)


@pytest.mark.parametrize("biases", [None, ["position"], ["markov", "fertility"]])
def test_alignment_bias_sdpa_equals_eager_with_gradients(biases):
    """The biased cross-attention as SDPA with `mask + bias`: per example and per head outputs, the loss and every
    parameter's gradient (the bias network's included) equal the eager path's."""
    model = make_model(alignment_bias_layers=[0, 1], alignment_biases=biases).train()
    inputs = {k: v for k, v in batch().items() if k not in ("parent_positions", "dbsa_heads")}
    results = {}
    for kernel in ("eager", "fused"):
        model.zero_grad()
        out, heads = per_head(model, inputs, kernel, site="cross", layer=1, grad=True)
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[kernel] = (out, heads, grads)
    (eager, eager_heads, eager_grads), (fused, fused_heads, fused_grads) = results["eager"], results["fused"]
    valid = inputs["labels"] != -100  # (B, T): real target rows
    for b in range(3):
        for h in range(model.config.decoder_attention_heads):
            rows = valid[b]
            torch.testing.assert_close(fused_heads[b, rows, h], eager_heads[b, rows, h], atol=ATOL, rtol=0)
    torch.testing.assert_close(fused.loss, eager.loss, atol=ATOL, rtol=0)
    assert eager_grads.keys() == fused_grads.keys()
    assert any("alignment_bias" in n for n in fused_grads)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(fused_grads[name], grad, atol=ATOL, rtol=1e-4, msg=name)


@pytest.mark.parametrize("config", [PASCAL, dict(alignment_bias_layers=[1])], ids=["pascal", "alignment_bias"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_fused_generation_equals_eager_generation(config, num_beams):
    """Cached decoding with the fused kernels gives the eager path's tokens and scores (the alignment biases keep
    their decoding state in the cache), and the same as uncached fused decoding."""
    model = make_model(**config)
    inputs = {k: v for k, v in batch().items() if k in ("input_ids", "attention_mask", "parent_positions")}
    kw = dict(num_beams=num_beams, max_new_tokens=6, do_sample=False, output_scores=True, return_dict_in_generate=True)
    runs = {}
    for kernel, cache in (("eager", True), ("fused", True), ("fused", False)):
        model.config.syntax_attention_kernel = kernel
        runs[kernel, cache] = model.generate(**inputs, use_cache=cache, **kw)
    for key in (("fused", True), ("fused", False)):
        assert torch.equal(runs[key].sequences, runs["eager", True].sequences), key
        for a, b in zip(runs[key].scores, runs["eager", True].scores, strict=True):
            finite = torch.isfinite(b)
            assert torch.equal(finite, torch.isfinite(a))
            torch.testing.assert_close(a[finite], b[finite], atol=1e-4, rtol=0)


def test_kernel_choice(monkeypatch):
    """`auto` runs eager on the CPU; `fused` runs PASCAL in flex only without gradient (flex has no CPU backward) and
    without attention dropout, the alignment biases in SDPA also with gradient."""
    calls = count_calls(monkeypatch)
    pascal = make_model(**PASCAL)
    inputs = {k: v for k, v in batch().items() if k not in ("dbsa_heads",)}
    per_head(pascal, inputs, "auto")
    assert calls == {"flex": 0, "bias": 0}
    per_head(pascal, inputs, "fused")
    assert calls == {"flex": 2, "bias": 0}  # both PASCAL layers
    pascal.train()
    out, _ = per_head(pascal, inputs, "fused", grad=True)
    out.loss.backward()  # no flex backward on the CPU: the eager path ran
    assert calls == {"flex": 2, "bias": 0}
    dropout = make_model(**PASCAL, attention_dropout=0.1).train()
    per_head(dropout, inputs, "fused")
    assert calls == {"flex": 2, "bias": 0}
    align = make_model(alignment_bias_layers=[0]).train()
    per_head(align, inputs, "auto", site="cross", grad=True)
    assert calls == {"flex": 2, "bias": 0}
    per_head(align, inputs, "fused", site="cross", grad=True)
    assert calls == {"flex": 2, "bias": 1}


@pytest.fixture
def fresh_kernels():
    """No flex failure or warning remembered from earlier tests, and none left for later ones."""
    fused_kernels.reset()
    yield
    fused_kernels.reset()


def test_a_flex_kernel_that_fails_falls_back_to_eager_once_with_a_warning(monkeypatch, fresh_kernels):
    """Where FlexAttention cannot run (e.g. it fails to compile on a GPU), the PASCAL heads take the eager path: one
    RuntimeWarning, the eager path's outputs, and no second try of the failing kernel for that head dim."""
    model = make_model(**PASCAL)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20, 21]] * 3)
    eager, eager_heads = per_head(model, inputs, "eager", decoder_input_ids=dec)
    tries = []

    def broken(*args):
        tries.append(1)
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(fused_kernels, "flex", broken)
    with pytest.warns(
        RuntimeWarning, match="FlexAttention failed here .*no compiler here.*head dim 4.*eager path"
    ) as w:
        out, heads = per_head(model, inputs, "fused", decoder_input_ids=dec)
    assert len(w) == 1 and tries == [1]  # layer 1's PASCAL heads did not try the kernel again
    torch.testing.assert_close(heads, eager_heads, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.logits, eager.logits, atol=ATOL, rtol=0)
    per_head(model, inputs, "fused", decoder_input_ids=dec)
    assert tries == [1]


def test_a_flex_failure_disables_flex_only_for_what_failed(monkeypatch, fresh_kernels):
    """Issue 48: a head-dim-4 model on which flex fails (as Inductor's flex does below head dim 16) leaves flex on for
    a head-dim-64 model in the same process, which still runs it and gives the eager path's values."""
    calls = count_calls(monkeypatch)
    flex = fused_kernels.flex

    def inductor_like(query, *args):
        if query.shape[-1] < 16:
            raise NotImplementedError("head dim below 16")
        return flex(query, *args)

    monkeypatch.setattr(fused_kernels, "flex", inductor_like)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20, 21]] * 3)
    tiny = make_model(**PASCAL)  # d_model 16, 4 heads: head dim 4
    with pytest.warns(RuntimeWarning, match="head dim 4"):
        per_head(tiny, inputs, "fused", decoder_input_ids=dec)
    assert calls["flex"] == 1  # tried once, then remembered
    wide = make_model(**PASCAL, d_model=256, encoder_ffn_dim=32, decoder_ffn_dim=32)  # head dim 64
    _, eager = per_head(wide, inputs, "eager", decoder_input_ids=dec)
    _, fused = per_head(wide, inputs, "fused", decoder_input_ids=dec)
    assert calls["flex"] == 1 + 2  # both PASCAL layers of the head-dim-64 model ran flex
    valid = inputs["attention_mask"].bool()
    torch.testing.assert_close(fused[valid], eager[valid], atol=ATOL, rtol=0)
    per_head(tiny, inputs, "fused", decoder_input_ids=dec)
    assert calls["flex"] == 3  # the head-dim-4 model does not try again


def test_flex_is_skipped_untried_where_it_cannot_run():
    """`fused_kernels.can_run`: no flex on CUDA below head dim 16 (Inductor's kernel refuses it), none for what
    failed, none with a gradient where flex is not compiled (the CPU), and none compiled with a dimension of size 1
    (another graph)."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    sizes = (3, 4, 7, 7)
    assert not fused_kernels.can_run(cuda, 8, torch.float32, True, sizes)
    assert fused_kernels.can_run(cuda, 16, torch.float32, True, sizes)
    assert not fused_kernels.can_run(cuda, 64, torch.float32, True, (1, 4, 7, 7))
    assert fused_kernels.can_run(cpu, 4, torch.float32, False, (1, 4, 7, 7))
    assert not fused_kernels.can_run(cpu, 4, torch.float32, True, sizes)


def test_the_limit_reached_warns_once_and_takes_the_eager_path(monkeypatch, fresh_kernels):
    """A call that dynamo runs uncompiled (here: dynamo disabled) takes the eager path, not flex's unfused one, with
    one warning in the package's words that names the limit and the remedies (the limit itself:
    tests/models/test_flex_compile.py)."""
    monkeypatch.setattr(fused_kernels, "COMPILED_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(fused_kernels, "_compiled", fused_kernels._compiled_body)  # what dynamo runs past the limit
    calls = count_calls(monkeypatch)
    model = make_model(**PASCAL)
    inputs = {k: v for k, v in batch().items() if k not in ("labels", "dbsa_heads")}
    dec = torch.tensor([[PAD, 20, 21]] * 3)
    _, eager = per_head(model, inputs, "eager", decoder_input_ids=dec)
    with pytest.warns(RuntimeWarning, match=r"recompile limit.*recompile_limit \(now \d+\).*TORCH_LOGS.*'eager'") as w:
        _, fused = per_head(model, inputs, "fused", decoder_input_ids=dec)
        per_head(model, inputs, "fused", decoder_input_ids=dec)
    assert len(w) == 1 and calls["flex"] == 4  # tried every call (an existing graph may match the next one)
    torch.testing.assert_close(fused, eager, atol=ATOL, rtol=0)


def test_kernel_option_is_validated_and_round_trips(tmp_path):
    with pytest.raises(ValueError, match=r"syntax_attention_kernel='flash'.*one of \('auto', 'eager', 'fused'\)"):
        SyntaxMTConfig(**TINY, syntax_attention_kernel="flash")
    model = make_model(**PASCAL, syntax_attention_kernel="fused")
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path)
    assert loaded.config.syntax_attention_kernel == "fused"
    assert SyntaxMTConfig(**TINY).syntax_attention_kernel == "auto"


def test_supervised_heads_materialise_probabilities_only_for_their_loss(monkeypatch):
    """LISA / DBSA heads and the synchronous loss: a training forward with their supervision runs the eager path for
    the supervised heads only (and every head of l_sync's cross-attention, which the synchronous loss reads);
    generation and a forward without labels run no eager path at all."""
    seen = []
    eager = SyntaxMTAttention._eager

    def spy(self, ctx, query, *args, **kwargs):
        seen.append((self.site, self.layer_idx, query.shape[1]))
        return eager(self, ctx, query, *args, **kwargs)

    monkeypatch.setattr(SyntaxMTAttention, "_eager", spy)
    model = make_model(
        encoder_lisa_heads=[1, 0], encoder_dbsa_heads=[1, 0], decoder_dbsa_heads=[0, 2], sync_loss_weight=0.5,
        sync_cross_attention_layer=0,
    )  # fmt: skip
    inputs = {k: v for k, v in batch().items() if k != "parent_positions"}
    inputs["lisa_parents"] = inputs["dbsa_heads"]
    inputs["decoder_dbsa_heads"] = torch.tensor(
        [[1, 1, 1, 2, 4, 5], [2, 2, 2, 3, -100, -100], [1, 1, -100] + [-100] * 3]
    )
    out = model(**inputs)
    assert out.loss is not None and out.dbsa_loss > 0 and out.lisa_loss > 0 and out.sync_loss > 0
    assert sorted(seen) == [("cross", 0, 4), ("decoder", 1, 2), ("encoder", 0, 2)]
    seen.clear()
    sources = {k: inputs[k] for k in ("input_ids", "attention_mask")}
    model.generate(**sources, num_beams=2, max_new_tokens=4)
    model(**sources, decoder_input_ids=torch.full((3, 2), PAD))
    assert seen == []


@pytest.mark.parametrize("config", [PASCAL, dict(alignment_bias_layers=[0, 1])], ids=["pascal", "alignment_bias"])
def test_fused_kernels_under_bf16_autocast(config):
    """Under bf16 autocast (queries, keys and the mask in bf16; parent positions and the bias network in fp32) the
    fused kernels give the eager path's loss to bf16 precision (2e-2) and finite gradients where they have them."""
    model = make_model(**config)
    inputs = {k: v for k, v in batch().items() if k != "dbsa_heads"}
    losses = {}
    for kernel in ("eager", "fused"):
        model.config.syntax_attention_kernel = kernel
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            losses[kernel] = model(**inputs).loss.float()
    torch.testing.assert_close(losses["fused"], losses["eager"], atol=2e-2, rtol=2e-2)
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(**inputs).loss
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def key_bias_gradients(model, inputs, kernel="eager", bf16=False) -> dict:
    model.config.syntax_attention_kernel = kernel
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        model(**inputs).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_a_key_bias_gradient_is_zero_except_in_pascal_heads():
    """Why tests/gpu/test_fused_gpu.py compares key-projection bias gradients with the fp32 gradient
    (`bf16_gradients.assert_key_bias_gradients_close`): in fp32 a key bias's gradient is ~0 (1e-6 of the largest
    gradient entry) in every head whose scores it only shifts, encoder, decoder and cross-attention, and clearly not
    in the PASCAL heads, which multiply the scores by d_tj (Eq. 2)."""
    model = make_model(**PASCAL).train()
    inputs = {k: v for k, v in batch().items() if k != "dbsa_heads"}
    grads = key_bias_gradients(model, inputs)
    largest = max(g.abs().max() for g in grads.values())
    config, d = model.config, model.config.d_model // model.config.encoder_attention_heads
    pascal_heads = 0
    for name, grad in grads.items():
        if not name.endswith(KEY_BIAS):
            continue
        per_head = grad.view(-1, d).abs().amax(-1)  # (H,)
        pascal = torch.zeros_like(per_head, dtype=torch.bool)
        if ".encoder." in name:
            layer = int(name.split(".layers.")[1].split(".")[0])
            pascal[: config.encoder_head_layout(layer).get("pascal", 0)] = True
        pascal_heads += int(pascal.sum())
        assert (per_head[~pascal] < 1e-6 * largest).all(), (name, per_head)
        assert (per_head[pascal] > 1e-4 * largest).all(), (name, per_head)
    assert pascal_heads == sum(PASCAL["encoder_pascal_heads"])


def test_the_key_bias_rule_on_the_alignment_bias_in_bf16():
    """The key-bias part of tests/gpu/test_fused_gpu.py's bf16 gradient check on the CPU (SDPA has a CPU backward;
    flex has none): the fused alignment bias's key-bias gradients pass it, and moving one by 2e-2 of the largest
    gradient entry fails it."""
    model = make_model(alignment_bias_layers=[0, 1]).train()
    inputs = {k: v for k, v in batch().items() if k not in ("parent_positions", "dbsa_heads")}
    reference = key_bias_gradients(model, inputs)
    eager = key_bias_gradients(model, inputs, bf16=True)
    fused = key_bias_gradients(model, inputs, "fused", bf16=True)
    assert_key_bias_gradients_close(fused, eager, reference)
    largest = max(g.abs().max() for g in reference.values())
    name = "model.decoder.layers.1.encoder_attn.k_proj.bias"
    moved = {**fused, name: fused[name] + 2e-2 * largest}
    with pytest.raises(AssertionError, match=name.replace(".", r"\.")):
        assert_key_bias_gradients_close(moved, eager, reference)


def test_parent_positions_are_checked_where_the_batch_is_built_not_on_the_device():
    """Issue 48: PASCAL's forward reads no value of a device tensor (a host sync per step): a `meta` tensor, whose
    values cannot be read, passes `prepare`; a CPU tensor is still checked there; and the collator, which builds every
    training batch on the CPU, names the bad position."""
    import types

    from hf_syntax_mt.data import DataCollatorForSyntaxMT
    from hf_syntax_mt.methods import get_method

    pascal, config = get_method("pascal"), SyntaxMTConfig(**TINY, **PASCAL)
    shape = torch.Size([2, 5])
    bad = torch.tensor([[0.0, 1.0, 9.0, 3.0, 4.0], [0.0, 0.0, 1.0, 3.0, 4.0]])
    out = pascal.prepare(config, {"parent_positions": bad.to("meta")}, shape, None)
    assert out["parent_positions"].device.type == "meta"
    with pytest.raises(ValueError, match=r"parent_positions\[0, 2\] = 9.0 is outside 0..4"):
        pascal.prepare(config, {"parent_positions": bad}, shape, None)
    with pytest.raises(ValueError, match="shape \\(2, 4\\) but input_ids has shape \\(2, 5\\)"):
        pascal.prepare(config, {"parent_positions": bad[:, :4].to("meta")}, shape, None)
    collate = DataCollatorForSyntaxMT(types.SimpleNamespace(pad_token_id=PAD, padding_side="right"))
    rows = [dict(input_ids=[5, 6, EOS], parent_positions=[1.0, 2.0, 2.0]),
            dict(input_ids=[5, 6, 7, EOS], parent_positions=[1.0, 7.5, 1.0, 3.0])]  # fmt: skip
    with pytest.raises(ValueError, match=r"parent_positions\[1, 1\] = 7.5 is outside 0..3"):
        collate(rows)
    rows[1]["parent_positions"][1] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        collate(rows)
    rows[1]["parent_positions"][1] = 2.5
    assert collate(rows)["parent_positions"].tolist() == [[1.0, 2.0, 2.0, 3.0], [1.0, 2.5, 1.0, 3.0]]
