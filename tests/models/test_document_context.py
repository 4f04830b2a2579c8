"""Document-level context (issue 5; Zhang et al. 2018): the context encoder (Eqs. 4-9), context attention in the
encoder (Eq. 12) and decoder (Eq. 16), context gating (Eqs. 21-22) against a direct computation, one example at a
time; empty context; two-step training (frozen sentence-level parameters); PASCAL heads; save/load; generation."""

import math

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from torch.nn import functional as F
from transformers import MarianConfig, MarianMTModel, Seq2SeqTrainer, Seq2SeqTrainingArguments

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.methods.document_context import context_layers, uses_context


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    config = SyntaxMTConfig(**{**TINY, "context_sentences": 2, **overrides})
    return SyntaxMTForConditionalGeneration(config).eval()


def batch():
    """Three sentences with contexts of lengths 5, 0 (a document's first sentence) and 3, right-padded."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD], [13, 14, EOS, PAD, PAD, PAD]])
    context = torch.tensor([[20, 21, EOS, 22, EOS], [PAD] * 5, [30, 31, EOS, PAD, PAD]])
    context_mask = torch.tensor([[1, 1, 1, 1, 1], [0] * 5, [1, 1, 1, 0, 0]])
    labels = torch.tensor([[40, 41, 42, EOS], [43, 44, EOS, -100], [45, EOS, -100, -100]])
    return input_ids, (input_ids != PAD).long(), context, context_mask, labels


# ---------------------------------------------------------------------------------------------------------------
# A direct implementation of the paper's equations, one unpadded example at a time
# ---------------------------------------------------------------------------------------------------------------


def multi_head(x, memory, w_q, w_k, w_v, w_o, heads, causal=False):
    """MultiHead(Q=x, K=memory, V=memory) of Vaswani et al.; w_* are (weight, bias) pairs. x (T, D), memory (S, D)."""
    T, D = x.shape
    d = D // heads
    q = (x @ w_q[0].T + w_q[1]).view(T, heads, d).transpose(0, 1)  # (H, T, d)
    k = (memory @ w_k[0].T + w_k[1]).view(-1, heads, d).transpose(0, 1)  # (H, S, d)
    v = (memory @ w_v[0].T + w_v[1]).view(-1, heads, d).transpose(0, 1)
    scores = q @ k.transpose(1, 2) / math.sqrt(d)  # (H, T, S)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(0, 1).reshape(T, D)
    return out @ w_o[0].T + w_o[1]


def wb(linear):
    return linear.weight, linear.bias


def layer_norm(x, norm):
    return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, norm.eps)


def ffn(x, layer):
    return layer_norm(x + layer.fc2(F.gelu(layer.fc1(x))), layer.final_layer_norm)  # activation_function="gelu"


def context_sublayer(h, c, module, kv_weight, kv_bias, j, heads, gating):
    """Eq. 12 / 16 (MultiHead(H, C, C)) + Eqs. 21-22 (or the residual of Eq. 20), then LayerNorm."""
    D = h.shape[-1]
    w_k = (kv_weight[2 * j * D : (2 * j + 1) * D], kv_bias[2 * j * D : (2 * j + 1) * D])
    w_v = (kv_weight[(2 * j + 1) * D : (2 * j + 2) * D], kv_bias[(2 * j + 1) * D : (2 * j + 2) * D])
    s = multi_head(h, c, wb(module.q_proj), w_k, w_v, wb(module.out_proj), heads)
    if gating:
        w_i, w_s = module.gate_input_proj.weight, module.gate_sublayer_proj.weight
        lam = torch.sigmoid(h @ w_i.T + s @ w_s.T)  # Eq. 22
        mixed = lam * h + (1 - lam) * s  # Eq. 21
    else:
        mixed = h + s  # Eq. 20
    return layer_norm(mixed, module.layer_norm)


def direct_logits(model, ids, context, labels):
    """Teacher-forced logits `(L, V)` of one example; `context` None = no context (the sentence-level model)."""
    cfg, enc, dec = model.config, model.model.encoder, model.model.decoder
    H = cfg.encoder_attention_heads
    with torch.no_grad():
        c = None
        if context is not None and uses_context(cfg):
            ce = enc.context_encoder
            c = enc.embed_tokens(context) * enc.embed_scale + enc.embed_positions((1, len(context)))  # Eq. 4
            for layer in ce.layers:  # Eqs. 5-9, post-norm residuals (Eq. 6)
                a = multi_head(c, c, *(wb(getattr(layer.self_attn, f"{p}_proj")) for p in "qkvo"[:3]),
                               wb(layer.self_attn.out_proj), H)  # fmt: skip
                c = ffn(layer_norm(c + a, layer.self_attn_layer_norm), layer)
            kv_w, kv_b = ce.key_value_proj.weight, ce.key_value_proj.bias
        x = enc.embed_tokens(ids) * enc.embed_scale + enc.embed_positions((1, len(ids)))
        for i, layer in enumerate(enc.layers):
            att = layer.self_attn
            x = layer_norm(x + multi_head(x, x, wb(att.q_proj), wb(att.k_proj), wb(att.v_proj), wb(att.out_proj), H),
                           layer.self_attn_layer_norm)  # Eq. 11  # fmt: skip
            if c is not None and i in context_layers(cfg, "encoder"):
                j = context_layers(cfg, "encoder").index(i)
                x = context_sublayer(x, c, layer.context_attn, kv_w, kv_b, j, H, cfg.context_gating)  # Eq. 12
            x = ffn(x, layer)  # Eq. 13
        n_enc = len(context_layers(cfg, "encoder"))
        y_in = torch.cat([torch.tensor([cfg.decoder_start_token_id]), labels[:-1]])
        y = dec.embed_tokens(y_in) * dec.embed_scale + dec.embed_positions((1, len(y_in)))  # Eq. 14
        for i, layer in enumerate(dec.layers):
            att = layer.self_attn
            y = layer_norm(y + multi_head(y, y, wb(att.q_proj), wb(att.k_proj), wb(att.v_proj), wb(att.out_proj), H,
                                          causal=True), layer.self_attn_layer_norm)  # Eq. 15  # fmt: skip
            if c is not None and i in context_layers(cfg, "decoder"):
                j = n_enc + context_layers(cfg, "decoder").index(i)
                y = context_sublayer(y, c, layer.context_attn, kv_w, kv_b, j, H, cfg.context_gating)  # Eq. 16
            ca = layer.encoder_attn
            y = layer_norm(y + multi_head(y, x, wb(ca.q_proj), wb(ca.k_proj), wb(ca.v_proj), wb(ca.out_proj), H),
                           layer.encoder_attn_layer_norm)  # Eq. 17  # fmt: skip
            y = ffn(y, layer)  # Eq. 18
        return model.lm_head(y) + model.final_logits_bias[0]  # Eq. 19


def model_logits(model, input_ids, attention_mask, context, context_mask, labels):
    with torch.no_grad():
        return model(
            input_ids=input_ids, attention_mask=attention_mask, labels=labels,
            context_input_ids=context, context_attention_mask=context_mask,
        ).logits  # fmt: skip


def unpadded(input_ids, context, context_mask, labels, b):
    ids = input_ids[b][input_ids[b] != PAD]
    ctx = context[b][context_mask[b].bool()]
    lab = labels[b][labels[b] != -100]
    return ids, (ctx if len(ctx) else None), lab


# ---------------------------------------------------------------------------------------------------------------
# Equations
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},  # paper's model: context in every encoder and decoder layer, gating
        {"context_gating": False},  # residual (Eq. 20)
        {"encoder_context_layers": [], "context_encoder_layers": 2},  # decoder only, N_c = 2
        {"decoder_context_layers": [], "encoder_context_layers": [1]},  # encoder layer 1 only
    ],
)
def test_logits_match_direct_computation_per_example(options):
    model = make_model(**options)
    input_ids, attention_mask, context, context_mask, labels = batch()
    logits = model_logits(model, input_ids, attention_mask, context, context_mask, labels)  # (B, L, V)
    for b in range(input_ids.shape[0]):
        ids, ctx, lab = unpadded(input_ids, context, context_mask, labels, b)
        expected = direct_logits(model, ids, ctx, lab)
        torch.testing.assert_close(logits[b, : len(lab)], expected, atol=1e-5, rtol=1e-4)


def test_context_changes_the_output_only_where_there_is_context():
    model = make_model()
    input_ids, attention_mask, context, context_mask, labels = batch()
    with_context = model_logits(model, input_ids, attention_mask, context, context_mask, labels)
    without = model_logits(model, input_ids, attention_mask, None, None, labels)
    assert not torch.allclose(with_context[0], without[0], atol=1e-3)
    assert not torch.allclose(with_context[2], without[2], atol=1e-3)
    torch.testing.assert_close(with_context[1], without[1], atol=0, rtol=0)  # the first sentence: no context


def test_empty_context_is_exactly_the_sentence_level_model():
    """A document model without context computes the sentence-level model it was built from (theta_s)."""
    doc = make_model(seed=1)
    torch.manual_seed(2)
    sentence = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY)).eval()
    missing, unexpected = doc.load_state_dict(sentence.state_dict(), strict=False)
    assert not unexpected and missing and all("context_" in name for name in missing)
    input_ids, attention_mask, context, context_mask, labels = batch()
    expected = model_logits(sentence, input_ids, attention_mask, None, None, labels)
    for ctx, mask in ((None, None), (context[:, :0], context_mask[:, :0]), (context, torch.zeros_like(context_mask))):
        got = model_logits(doc, input_ids, attention_mask, ctx, mask, labels)
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_context_padding_and_batch_do_not_leak():
    model = make_model()
    input_ids, attention_mask, context, context_mask, labels = batch()
    logits = model_logits(model, input_ids, attention_mask, context, context_mask, labels)
    # row 2 alone, without its context padding, and with a longer padded context
    b = 2
    alone = model_logits(model, input_ids[b : b + 1, :3], attention_mask[b : b + 1, :3], context[b : b + 1, :3],
                         context_mask[b : b + 1, :3], labels[b : b + 1, :2])  # fmt: skip
    torch.testing.assert_close(logits[b, :2], alone[0], atol=1e-5, rtol=1e-5)
    longer = torch.cat([context, torch.full((3, 4), 77)], dim=1)
    longer_mask = torch.cat([context_mask, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    torch.testing.assert_close(
        model_logits(model, input_ids, attention_mask, longer, longer_mask, labels), logits, atol=1e-5, rtol=1e-5
    )


# ---------------------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_cached_equals_uncached_and_uses_context(num_beams):
    model = make_model(init_std=1.0)
    input_ids, attention_mask, context, context_mask, _ = batch()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, context_input_ids=context,
                  context_attention_mask=context_mask, num_beams=num_beams, max_new_tokens=8, do_sample=False)  # fmt: skip
    cached = model.generate(**kwargs, use_cache=True)
    uncached = model.generate(**kwargs, use_cache=False)
    assert torch.equal(cached, uncached)
    # greedy/beam outputs with context == the per-example argmax of the direct computation (first step)
    without = model.generate(**{**kwargs, "context_input_ids": None, "context_attention_mask": None})
    assert torch.equal(cached[1], without[1])  # no context in row 1
    assert not torch.equal(cached, without)


def test_context_is_encoded_once_per_sentence_before_beams(monkeypatch):
    """The context encoder and every context key/value projection run once, on the un-expanded batch."""
    from hf_syntax_mt.methods.document_context import ContextEncoder

    model = make_model()
    input_ids, attention_mask, context, context_mask, _ = batch()
    encoded, projected = [], []
    handle = model.model.encoder.context_encoder.register_forward_hook(
        lambda module, args, out: encoded.append(args[0].shape[0])
    )
    layout = ContextEncoder._layout
    monkeypatch.setattr(ContextEncoder, "_layout", lambda self, proj, real: projected.append(proj.shape) or
                        layout(self, proj, real))  # fmt: skip
    model.generate(input_ids=input_ids, attention_mask=attention_mask, context_input_ids=context,
                   context_attention_mask=context_mask, num_beams=4, max_new_tokens=6)  # fmt: skip
    handle.remove()
    assert encoded == [3]  # one call, on the 3 sentences (not 3 x 4 beams)
    # one projection per side, each on the real context tokens only, with 2 D columns per context sublayer
    real, width = int(context_mask.sum()), 2 * model.config.d_model
    sides = [len(context_layers(model.config, side)) for side in ("encoder", "decoder")]
    assert projected == [torch.Size([real, width * n]) for n in sides]


def test_combined_with_pascal_heads():
    model = make_model(encoder_pascal_heads=[2, 0])
    input_ids, attention_mask, context, context_mask, labels = batch()
    parents = torch.arange(6, dtype=torch.float).expand(3, 6).clone()
    parents[0, :5] = torch.tensor([2.0, 2.0, 2.0, 0.5, 0.5])
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, parent_positions=parents,
                  context_input_ids=context, context_attention_mask=context_mask)  # fmt: skip
    with torch.no_grad():
        logits = model(**kwargs, labels=labels).logits
        no_parse_change = model(**{**kwargs, "parent_positions": parents.flip(-1).clamp(max=5)}, labels=labels).logits
    assert not torch.allclose(logits[0], no_parse_change[0], atol=1e-4)  # PASCAL heads still read the parse
    cached = model.generate(**kwargs, num_beams=2, max_new_tokens=6)
    assert torch.equal(cached, model.generate(**kwargs, num_beams=2, max_new_tokens=6, use_cache=False))
    sentence = make_model(encoder_pascal_heads=[2, 0], context_sentences=0)
    sentence.load_state_dict(model.state_dict(), strict=False)
    with torch.no_grad():
        alone = sentence(input_ids=input_ids, attention_mask=attention_mask, parent_positions=parents, labels=labels)
    torch.testing.assert_close(logits[1], alone.logits[1], atol=1e-6, rtol=0)  # row 1 has no context


# ---------------------------------------------------------------------------------------------------------------
# Two-step training, checkpoints, config
# ---------------------------------------------------------------------------------------------------------------


def test_two_step_training_updates_only_document_parameters(tmp_path):
    """Step 2 (Section 2.4): from a Marian checkpoint, theta_s stays bit-identical, theta_d moves."""
    torch.manual_seed(0)
    marian = MarianMTModel(MarianConfig(**TINY)).eval()
    marian.save_pretrained(tmp_path / "marian")
    model = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path / "marian", context_sentences=2)
    trainable = model.freeze_sentence_level_parameters()
    assert trainable == model.document_parameter_names() and trainable
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for name, p in marian.named_parameters():  # the sentence-level weights are Marian's
        torch.testing.assert_close(before[name], p, atol=0, rtol=0)
    for name in trainable:  # the new ones were initialised, not left as empty memory
        assert torch.isfinite(before[name]).all() and before[name].abs().max() < 10

    input_ids, attention_mask, context, context_mask, labels = batch()
    rows = [
        {"input_ids": input_ids[b][attention_mask[b].bool()].tolist(), "labels": labels[b][labels[b] != -100].tolist(),
         "context_input_ids": context[b][context_mask[b].bool()].tolist(),
         "context_attention_mask": [1] * int(context_mask[b].sum())}
        for b in range(3)
    ] * 4  # fmt: skip

    class Tok:
        pad_token_id, padding_side = PAD, "right"

    args = Seq2SeqTrainingArguments(
        str(tmp_path / "run"), max_steps=3, per_device_train_batch_size=4, learning_rate=1e-2, weight_decay=0.1,
        report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    Seq2SeqTrainer(model=model, args=args, train_dataset=rows,
                   data_collator=DataCollatorForSyntaxMT(Tok(), model=model)).train()  # fmt: skip
    for name, p in model.named_parameters():
        if name in trainable:
            assert not torch.equal(p, before[name]) or "layer_norm.bias" in name, name
        else:
            assert torch.equal(p, before[name]), f"frozen parameter {name} changed"
    moved = [name for name in trainable if not torch.equal(dict(model.named_parameters())[name], before[name])]
    assert len(moved) > len(trainable) // 2


def test_freezing_needs_document_parameters():
    with pytest.raises(ValueError, match="context_sentences=0"):
        make_model(context_sentences=0).freeze_sentence_level_parameters()


def test_save_load_round_trip(tmp_path):
    model = make_model(context_gating=False, encoder_context_layers=[0], decoder_context_layers=[1],
                       context_encoder_layers=2, max_context_length=32, context_sentences=3)  # fmt: skip
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    for key in ("context_sentences", "context_gating", "encoder_context_layers", "decoder_context_layers",
                "context_encoder_layers", "max_context_length"):  # fmt: skip
        assert getattr(loaded.config, key) == getattr(model.config, key)
    input_ids, attention_mask, context, context_mask, labels = batch()
    torch.testing.assert_close(
        model_logits(loaded, input_ids, attention_mask, context, context_mask, labels),
        model_logits(model, input_ids, attention_mask, context, context_mask, labels), atol=1e-6, rtol=0,
    )  # fmt: skip


def test_no_parameters_without_context():
    assert make_model(context_sentences=0).document_parameter_names() == []
    model = make_model(encoder_context_layers=[0], decoder_context_layers=[])
    names = model.document_parameter_names()
    assert any(".encoder.layers.0.context_attn." in n for n in names)
    assert not any(".encoder.layers.1.context_attn." in n or ".decoder." in n for n in names)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"context_sentences": -1}, "context_sentences=-1"),
        ({"context_sentences": 1.5}, "context_sentences"),
        ({"context_encoder_layers": 0}, "context_encoder_layers=0"),
        ({"encoder_context_layers": [2]}, "0..1"),
        ({"decoder_context_layers": [0, 0]}, "distinct"),
        ({"encoder_context_layers": [], "decoder_context_layers": []}, "reach nothing"),
        ({"max_context_length": 65}, "max_position_embeddings=64"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**{**TINY, "context_sentences": 2, **overrides})


def test_bad_context_inputs_give_clear_errors():
    model = make_model()
    input_ids, attention_mask, context, context_mask, labels = batch()
    with pytest.raises(ValueError, match="batch has 3 rows"):
        model(input_ids=input_ids, labels=labels, context_input_ids=context[:2])
    with pytest.raises(ValueError, match="context_attention_mask has shape"):
        model(
            input_ids=input_ids, labels=labels, context_input_ids=context, context_attention_mask=context_mask[:, :2]
        )
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        model(input_ids=input_ids, labels=labels, context_input_ids=torch.full((3, 65), 5))


@pytest.mark.parametrize("empty", ["none", "zero_width", "all_masked"])
def test_frozen_training_step_on_a_batch_without_context(empty):
    """A batch of first sentences still gives a loss that backpropagates to theta_d (with a zero gradient)."""
    model = make_model().train()
    model.freeze_sentence_level_parameters()
    input_ids, attention_mask, context, context_mask, labels = batch()
    ctx = {"none": (None, None), "zero_width": (context[:, :0], context_mask[:, :0]),
           "all_masked": (context, torch.zeros_like(context_mask))}[empty]  # fmt: skip
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, context_input_ids=ctx[0],
                 context_attention_mask=ctx[1]).loss  # fmt: skip
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.count_nonzero(g) == 0 for g in grads)
