"""Structural alignment biases (issue 4): each bias and loss against a direct, slow implementation of its equation,
padding, cached vs uncached decoding, the trace bonus, save/load, validation, alignments out, Trainer smoke runs.
Tiny random configs, fixed seeds."""

import math
import types

import pytest
import torch
from datasets import Dataset
from tiny_config import EOS, PAD, TINY
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel, Seq2SeqTrainingArguments

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.alignment import (
    Alignment,
    AlignmentStateLayer,
    AlignmentTrainingCallback,
    DataCollatorForSymmetricTranslation,
    StructuralAlignmentBias,
    SymmetricTranslationModel,
    plot_alignment,
    symmetry_trace,
)
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.modeling_layers import CACHE
from hf_syntax_mt.training import SyntaxMTTrainer

ALL = ["position", "markov", "fertility"]


def randomise_biases(model, std=1.0, seed=0):
    """Fresh biases are exactly 0 (v = 0); give every bias parameter a random value so that the tests see them."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, StructuralAlignmentBias):
                for p in module.parameters():
                    p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


def make_model(seed=0, randomise=True, **overrides):
    torch.manual_seed(seed)
    options = dict(alignment_bias_layers=[1], alignment_window=1)
    config = SyntaxMTConfig(**{**TINY, **options, **overrides})
    model = SyntaxMTForConditionalGeneration(config).eval()
    return randomise_biases(model, seed=seed) if randomise else model


def batch():
    """Sources of lengths 6 and 4, targets of lengths 5 and 3 (right padding on both sides)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
    labels = torch.tensor([[13, 14, 15, 16, EOS], [17, 18, EOS, -100, -100]])
    return input_ids, (input_ids != PAD).long(), labels


# ------------------------------------------------------------------------------------------------------------
# direct implementations
# ------------------------------------------------------------------------------------------------------------


def capture_cross_attention_inputs(model, layer, **kw):
    """Run the model; return the cross-attention's query input (B, T, D), its key input (B, S, D) and the outputs."""
    seen = {}

    def hook(module, args, kwargs):
        seen["x"], seen["e"] = args[0].detach(), kwargs["key_value_states"].detach()

    attn = model.model.decoder.layers[layer].encoder_attn
    handle = attn.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        out = model(**kw, output_attentions=True)
    finally:
        handle.remove()
    return seen["x"], seen["e"], out


def direct_probs(model, layer, x, e, attention_mask, biases, k):
    """Cross-attention probabilities of `layer`, one example, head, target and source position at a time."""
    attn = model.model.decoder.layers[layer].encoder_attn
    bias = attn.alignment_bias
    H, d = attn.num_heads, attn.head_dim
    with torch.no_grad():
        q, kk = attn.q_proj(x), attn.k_proj(e)  # (B, T, D), (B, S, D)
    B, T, S = x.shape[0], x.shape[1], e.shape[1]
    expected = torch.zeros(B, H, T, S)
    for b in range(B):
        valid = [i for i in range(S) if attention_mask[b, i] == 1]
        src_len = len(valid)  # the paper's I
        s = {(h, j, i): float(q[b, j, h * d:(h + 1) * d] @ kk[b, i, h * d:(h + 1) * d]) / math.sqrt(d)
             for h in range(H) for j in range(T) for i in valid}  # fmt: skip
        alpha0 = [[0.0] * S for _ in range(T)]  # bias-free base attention, averaged over the heads
        for h in range(H):
            for j in range(T):
                z = sum(math.exp(s[h, j, i]) for i in valid)
                for i in valid:
                    alpha0[j][i] += math.exp(s[h, j, i]) / z / H

        def a0(j, i, alpha0=alpha0):
            return alpha0[j][i] if 0 <= j < T and 0 <= i < S else 0.0

        for j in range(T):
            hidden = {}
            for i in valid:
                phi = []
                if "position" in biases:
                    phi += [math.log(1 + j), math.log(1 + i), math.log(1 + src_len)]  # Eq. 6
                if "markov" in biases:
                    phi += [a0(j - 1, i + o) for o in range(-k, k + 1)]  # Eq. 7: alpha_{j-1, i-k..i+k}
                if "fertility" in biases:
                    phi += [sum(a0(jj, i + o) for jj in range(j)) for o in range(-k, k + 1)]  # sum_{j'<j}
                if bias is not None:
                    hidden[i] = [
                        math.tanh(float(bias.feature_bias[a].detach())
                                  + sum(float(bias.feature_weight[f, a].detach()) * phi[f] for f in range(len(phi))))
                        for a in range(bias.hidden_size)
                    ]  # fmt: skip
            for h in range(H):
                logits = {}
                for i in valid:
                    value = s[h, j, i]
                    if bias is not None:  # v_h tanh(W phi + b)
                        value += sum(
                            float(bias.output_weight[h, a].detach()) * hidden[i][a] for a in range(bias.hidden_size)
                        )
                    logits[i] = value
                z = sum(math.exp(v) for v in logits.values())
                for i, v in logits.items():
                    expected[b, h, j, i] = math.exp(v) / z
    return expected


# ------------------------------------------------------------------------------------------------------------
# local biases
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "biases, k",
    [(ALL, 1), (ALL, 0), (["position"], 1), (["markov"], 2), (["fertility"], 1), (["markov", "fertility"], 1)],
)
def test_biased_cross_attention_matches_equations(biases, k):
    model = make_model(alignment_biases=biases, alignment_window=k)
    ids, mask, labels = batch()
    x, e, out = capture_cross_attention_inputs(model, 1, input_ids=ids, attention_mask=mask, labels=labels)
    expected = direct_probs(model, 1, x, e, mask, biases, k)
    got = out.cross_attentions[1]  # (B, H, T, S)
    for b, (n_src, n_tgt) in enumerate([(6, 5), (4, 3)]):
        torch.testing.assert_close(got[b, :, :n_tgt, :n_src], expected[b, :, :n_tgt, :n_src], atol=1e-5, rtol=1e-4)
        assert bool((got[b, :, :, n_src:] == 0).all())  # padding gets no attention
    # the plain layer 0 is untouched: plain softmax(QK^T)
    x0, e0, _ = capture_cross_attention_inputs(model, 0, input_ids=ids, attention_mask=mask, labels=labels)
    plain = direct_probs(model, 0, x0, e0, mask, [], k)
    torch.testing.assert_close(out.cross_attentions[0][0], plain[0], atol=1e-5, rtol=1e-4)


def test_each_bias_changes_the_attention():
    ids, mask, labels = batch()
    kw = dict(input_ids=ids, attention_mask=mask, labels=labels, output_attentions=True)
    plain = make_model(alignment_bias_layers=None)(**kw).cross_attentions[1]
    for bias in ALL:
        got = make_model(alignment_biases=[bias])(**kw).cross_attentions[1]
        assert not torch.allclose(got, plain, atol=1e-3), bias


def test_padding_does_not_leak():
    model = make_model(global_fertility_weight=1.0)
    ids, mask, labels = batch()
    full = model(input_ids=ids, attention_mask=mask, labels=labels)
    alone = model(input_ids=ids[1:, :4], attention_mask=mask[1:, :4], labels=labels[1:, :3])
    torch.testing.assert_close(full.logits[1, :3], alone.logits[0], atol=1e-5, rtol=1e-4)
    # changing the padded source tokens changes nothing
    noisy = ids.clone()
    noisy[1, 4:] = 30
    again = model(input_ids=noisy, attention_mask=mask, labels=labels)
    torch.testing.assert_close(again.logits[1], full.logits[1])
    torch.testing.assert_close(again.fertility_loss, full.fertility_loss)


def test_fresh_bias_is_zero_and_marian_checkpoints_load(tmp_path):
    torch.manual_seed(1)
    marian = MarianMTModel(MarianConfig(**TINY)).eval()
    marian.save_pretrained(tmp_path / "marian")
    model = SyntaxMTForConditionalGeneration.from_pretrained(
        tmp_path / "marian", alignment_bias_layers=[0, 1], global_fertility_weight=0.1
    ).eval()
    for name, p in model.named_parameters():
        assert torch.isfinite(p).all(), name
        if name.endswith("output_weight"):
            assert bool((p == 0).all()), name  # v = 0: no effect until trained
        if name.endswith("feature_weight"):
            assert 0.05 < float(p.detach().std()) < 2.0, name  # initialised, not left as uninitialised memory
    for name, p in model.global_fertility.named_parameters():
        assert torch.isfinite(p).all() and (float(p.detach().abs().max()) < 10), name
    ids, mask, labels = batch()
    torch.testing.assert_close(
        model(input_ids=ids, attention_mask=mask, labels=labels).logits,
        marian(input_ids=ids, attention_mask=mask, labels=labels).logits,
        atol=1e-5, rtol=1e-4,
    )  # fmt: skip


def test_bias_gets_gradients():
    model = make_model(randomise=False).train()
    ids, mask, labels = batch()
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    bias = model.model.decoder.layers[1].encoder_attn.alignment_bias
    assert bias.output_weight.grad.abs().sum() > 0  # v gets a gradient at v = 0


# ------------------------------------------------------------------------------------------------------------
# cached decoding
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_cached_equals_uncached(num_beams):
    model = make_model(seed=2, alignment_bias_layers=[0, 1])
    ids, mask, _ = batch()
    # tiny random models repeat one token; forbidding repeats makes every step's history (Markov, fertility) differ
    kw = dict(input_ids=ids, attention_mask=mask, max_new_tokens=12, num_beams=num_beams, do_sample=False,
              no_repeat_ngram_size=1)  # fmt: skip
    cached = model.generate(**kw)
    uncached = model.generate(**kw, use_cache=False)
    assert torch.equal(cached, uncached)
    # the biases matter for the decode
    plain = make_model(seed=2, alignment_bias_layers=None).generate(**kw)
    assert not torch.equal(plain, cached)
    for b, n in enumerate([6, 4]):
        alone = model.generate(**{**kw, "input_ids": ids[b : b + 1, :n], "attention_mask": mask[b : b + 1, :n]})
        assert torch.equal(cached[b][: alone.shape[1]], alone[0])


def test_forced_decode_cached_logits_equal_uncached():
    model = make_model(seed=3, alignment_bias_layers=[0, 1])
    ids, mask, labels = batch()
    decoder_input_ids = torch.cat([torch.full((2, 1), PAD), labels.clamp(min=0)[:, :-1]], dim=1)  # (B, T)
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_input_ids).logits  # (B, T, V)
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    past, steps = None, []
    for t in range(decoder_input_ids.shape[1]):
        out = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=decoder_input_ids[:, t:t + 1],
                    use_cache=True, **{CACHE: past})  # fmt: skip
        past = getattr(out, CACHE)  # `cache` from transformers 5.24 on, `past_key_values` before
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    states = [layer for layer in past.cross_attention_cache.layers if isinstance(layer, AlignmentStateLayer)]
    assert sorted(s.decoder_layer_idx for s in states) == [0, 1]
    # two steps at once after a prefix (chunked decoding) give the same logits too, with the cache passed under
    # either name, whichever transformers is installed (`past_key_values` before 5.24, `cache` from 5.24 on)
    for name in ("cache", "past_key_values"):
        out = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=decoder_input_ids[:, :2],
                    use_cache=True)  # fmt: skip
        out2 = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=decoder_input_ids[:, 2:],
                     use_cache=True, **{name: getattr(out, CACHE)})  # fmt: skip
        torch.testing.assert_close(out2.logits, full[:, 2:], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="Both `cache` and `past_key_values` were given"):
        model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=decoder_input_ids[:, 2:],
              cache=getattr(out, CACHE), past_key_values=getattr(out, CACHE))  # fmt: skip


def test_cache_reordering_moves_the_alignment_state():
    model = make_model(seed=3)
    ids, mask, labels = batch()
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=labels.clamp(min=0)[:, :3], use_cache=True)
    cache = getattr(out, CACHE)
    (state,) = [layer for layer in cache.cross_attention_cache.layers if isinstance(layer, AlignmentStateLayer)]
    previous, cumulative = state.keys.clone(), state.values.clone()
    assert previous.shape == (2, 1, 6) and cumulative.shape == (2, 1, 6)
    cache.reorder_cache(torch.tensor([1, 0]))
    assert torch.equal(state.keys, previous.flip(0)) and torch.equal(state.values, cumulative.flip(0))
    cache.batch_repeat_interleave(2)
    assert torch.equal(state.values, cumulative.flip(0).repeat_interleave(2, dim=0))
    cache.batch_select_indices(torch.tensor([0, 3]))
    assert torch.equal(state.values, cumulative.flip(0))
    # a cropped cache (assisted decoding) cannot roll the running sums back: a clear error, not wrong features
    cache.crop(-1)
    with pytest.raises(RuntimeError, match="covers 3 target positions but the cache holds 2"):
        model(input_ids=ids.flip(0), attention_mask=mask.flip(0), decoder_input_ids=labels[:, :1].clamp(min=0),
              use_cache=True, **{CACHE: cache})  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# global fertility
# ------------------------------------------------------------------------------------------------------------


def test_global_fertility_loss_matches_direct_computation():
    model = make_model(global_fertility_weight=0.7, alignment_layer=0)
    ids, mask, labels = batch()
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_attentions=True)
    alpha = out.cross_attentions[0].detach()  # alignment_layer = 0, (B, H, T, S)
    h = out.encoder_last_hidden_state.detach()
    fert = model.global_fertility
    total, n_target = 0.0, int((labels != -100).sum())
    for b in range(2):
        for i in range(int(mask[b].sum())):
            f = sum(float(alpha[b, :, j, i].mean()) for j in range(int((labels[b] != -100).sum())))  # sum_j a_ji
            with torch.no_grad():
                o = fert.fc2(torch.tanh(fert.fc1(h[b, i])))
            mu = math.log1p(math.exp(float(o[0])))
            var = math.log1p(math.exp(float(o[1]))) + 1e-3
            total += 0.5 * math.log(2 * math.pi * var) + (f - mu) ** 2 / (2 * var)  # -log N(f; mu, var)
    torch.testing.assert_close(out.fertility_loss, torch.tensor(total / n_target), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, out.translation_loss + 0.7 * out.fertility_loss)
    # with the Trainer's num_items_in_batch both parts are divided by it
    out2 = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=20)
    torch.testing.assert_close(out2.fertility_loss, torch.tensor(total / 20), atol=1e-5, rtol=1e-5)


def test_global_fertility_schedule_and_gradients():
    model = make_model(global_fertility_weight=1.0, global_fertility_start_step=5).train()
    ids, mask, labels = batch()
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.fertility_loss is None and torch.equal(out.loss, out.translation_loss)
    callback = AlignmentTrainingCallback()
    callback.on_step_begin(None, types.SimpleNamespace(global_step=5), None, model=model)
    assert model.alignment_training_step == 5
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert out.fertility_loss is not None and torch.isfinite(out.fertility_loss)
    out.fertility_loss.backward()
    assert model.global_fertility.fc1.weight.grad.abs().sum() > 0  # the fertility model learns
    attn = model.model.decoder.layers[1].encoder_attn
    assert attn.q_proj.weight.grad.abs().sum() > 0  # ... and the attention is pushed towards it
    assert model.record_cross_layers == [] and model.last_attention_record is None  # nothing left behind
    # generation never computes it
    model.eval().generate(input_ids=ids, attention_mask=mask, max_new_tokens=3)


# ------------------------------------------------------------------------------------------------------------
# bilingual symmetry
# ------------------------------------------------------------------------------------------------------------


def symmetric_pair(gamma=0.5):
    forward = make_model(seed=0, symmetry_weight=gamma).train()
    backward = make_model(seed=1, alignment_bias_layers=[0]).train()
    return SymmetricTranslationModel(forward, backward)


def test_symmetry_trace_matches_direct_computation():
    torch.manual_seed(0)
    B, H, n_tgt, n_src = 2, 3, 4, 5
    st = torch.rand(B, H, n_tgt, n_src).softmax(-1)
    ts = torch.rand(B, H, n_src, n_tgt).softmax(-1)
    fmask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    bmask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    got = symmetry_trace(st, ts, fmask, bmask)
    for b in range(B):
        expected = 0.0
        for j in range(n_tgt):
            for i in range(n_src):
                if fmask[b, j] and bmask[b, i]:
                    expected += float(st[b, :, j, i].mean()) * float(ts[b, :, i, j].mean())
        assert abs(float(got[b]) - expected) < 1e-5


def test_symmetric_model_loss_collator_and_save_directions(tmp_path):
    model = symmetric_pair(gamma=0.5)
    collate = DataCollatorForSymmetricTranslation(pad_token_id=PAD)
    features = [
        {"input_ids": [5, 6, 7, 8, EOS], "labels": [13, 14, EOS]},
        {"input_ids": [9, EOS], "labels": [15, 16, 17, 18, EOS]},
    ]
    batch_ = collate(features)
    assert batch_["reverse_input_ids"].tolist() == [[13, 14, EOS, PAD, PAD], [15, 16, 17, 18, EOS]]
    assert batch_["reverse_labels"].tolist() == [[5, 6, 7, 8, EOS], [9, EOS, -100, -100, -100]]
    assert batch_["reverse_attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    out = model(**batch_)
    fwd = model.forward_model(input_ids=batch_["input_ids"], attention_mask=batch_["attention_mask"],
                              labels=batch_["labels"], output_attentions=True)  # fmt: skip
    bwd = model.backward_model(input_ids=batch_["reverse_input_ids"], attention_mask=batch_["reverse_attention_mask"],
                               labels=batch_["reverse_labels"], output_attentions=True)  # fmt: skip
    st, ts = fwd.cross_attentions[1].detach(), bwd.cross_attentions[0].detach()  # each model's alignment layer
    trace = 0.0
    for b in range(2):
        for j in range(int((batch_["labels"][b] != -100).sum())):
            for i in range(int((batch_["reverse_labels"][b] != -100).sum())):
                trace += float(st[b, :, j, i].mean()) * float(ts[b, :, i, j].mean())
    n = int((batch_["labels"] != -100).sum())
    torch.testing.assert_close(out.symmetry_bonus, torch.tensor(-trace / n), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, fwd.loss + bwd.loss + 0.5 * out.symmetry_bonus, atol=1e-5, rtol=1e-5)
    out.loss.backward()
    assert model.backward_model.model.decoder.layers[0].encoder_attn.q_proj.weight.grad.abs().sum() > 0

    forward_dir, backward_dir = model.save_directions(tmp_path)
    for path, original in ((forward_dir, model.forward_model), (backward_dir, model.backward_model)):
        loaded = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        assert type(loaded) is SyntaxMTForConditionalGeneration
        assert loaded.config.alignment_bias_layers == original.config.alignment_bias_layers
        original.eval()
        kw = dict(input_ids=batch_["input_ids"], attention_mask=batch_["attention_mask"], labels=batch_["labels"])
        torch.testing.assert_close(loaded(**kw).logits, original(**kw).logits)


# ------------------------------------------------------------------------------------------------------------
# alignments out
# ------------------------------------------------------------------------------------------------------------


def test_align_soft_hard_and_word_level(tmp_path):
    model = make_model()
    ids, mask, labels = batch()
    result = model.align(ids, labels, attention_mask=mask, layer=1)
    attn = model(input_ids=ids, attention_mask=mask, labels=labels, output_attentions=True).cross_attentions[1]
    assert [tuple(a.soft.shape) for a in result] == [(5, 6), (3, 4)]
    torch.testing.assert_close(result[1].soft, attn[1].mean(0)[:3, :4])
    torch.testing.assert_close(result[0].soft.sum(-1), torch.ones(5))
    assert result[0].links == [(int(attn[0, :, j].mean(0).argmax()), j) for j in range(5)]
    assert result[0].pharaoh() == " ".join(f"{i}-{j}" for i, j in result[0].links)
    # Shift-Att: label j is read at step j + 1 (where it is the decoder input); the last label (</s>) gets a zero row
    shifted = model.align(ids, labels, attention_mask=mask, layer=1, shift=True)
    for b, (n_tgt, n_src) in enumerate([(5, 6), (3, 4)]):
        a = attn[b].detach().mean(0)  # (T, S), padded
        for j in range(n_tgt):
            row = a[j + 1, :n_src] if j + 1 < n_tgt else torch.zeros(n_src)
            torch.testing.assert_close(shifted[b].soft[j], row)
    assert shifted[0].links[:4] == [(int(attn[0, :, j + 1].mean(0).argmax()), j) for j in range(4)]
    # words: source {0,1} {2} {3,4}, eos dropped; target {0} {1,2} {3}, eos dropped
    src_words = [[0, 0, 1, 2, 2, None], [0, 1, 1, None]]
    tgt_words = [[0, 1, 1, 2, None], [0, 0, None]]
    words = model.align(
        ids, labels, attention_mask=mask, layer=1, source_word_ids=src_words, target_word_ids=tgt_words
    )
    a = attn[0].detach().mean(0)  # (T, S)
    expected = torch.zeros(3, 3)
    for tw, rows in enumerate([[0], [1, 2], [3]]):
        for sw, cols in enumerate([[0, 1], [2], [3, 4]]):
            expected[tw, sw] = sum(float(a[r, c]) for r in rows for c in cols) / len(rows)
    torch.testing.assert_close(words[0].soft, expected)
    assert words[1].soft.shape == (1, 2)
    assert words[0].links == [(int(expected[j].argmax()), j) for j in range(3)]
    assert model.training is False

    path = plot_alignment(words[0], tmp_path / "a.png", ["le", "chat", "dort"], ["the", "cat", "sleeps"], title="x")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    plot_alignment(torch.rand(2, 3), tmp_path / "b.png")
    assert isinstance(result[0], Alignment)


# ------------------------------------------------------------------------------------------------------------
# config
# ------------------------------------------------------------------------------------------------------------

OPTIONS = dict(
    alignment_bias_layers=[0, 1], alignment_biases=["position", "fertility"], alignment_window=3,
    alignment_bias_hidden_size=8, alignment_layer=0, global_fertility_weight=0.25, global_fertility_start_step=100,
    symmetry_weight=0.5,
)  # fmt: skip


def test_config_and_model_round_trip(tmp_path):
    config = SyntaxMTConfig(**TINY, **OPTIONS)
    config.save_pretrained(tmp_path / "config")
    assert SyntaxMTConfig.from_pretrained(tmp_path / "config").to_dict() == config.to_dict()
    model = make_model(**OPTIONS)
    model.save_pretrained(tmp_path / "model")
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "model").eval()
    for key, value in OPTIONS.items():
        assert getattr(loaded.config, key) == value, key
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value, msg=key)
    ids, mask, labels = batch()
    loaded.alignment_training_step = model.alignment_training_step = 100
    a, b = (
        loaded(input_ids=ids, attention_mask=mask, labels=labels),
        model(input_ids=ids, attention_mask=mask, labels=labels),
    )
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.fertility_loss, b.fertility_loss, atol=1e-5, rtol=1e-5)


def test_defaults_switch_everything_off():
    config = SyntaxMTConfig(**TINY)
    assert config.alignment_bias_layers is None and config.global_fertility_weight == 0
    assert config.symmetry_weight == 0 and config.resolved_alignment_layer == 1
    model = SyntaxMTForConditionalGeneration(config)
    assert model.global_fertility is None
    assert not any(isinstance(m, StructuralAlignmentBias) for m in model.modules())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(alignment_bias_layers=[2]), r"alignment_bias_layers contains 2 but the model has decoder_layers=2"),
        (dict(alignment_bias_layers=[-1]), r"contains -1 .* layer indices in 0..1"),
        (dict(alignment_bias_layers=[1, 1]), "lists a layer twice"),
        (dict(alignment_bias_layers=[1], alignment_biases=["diagonal"]), r"alignment_biases=\['diagonal'\]"),
        (dict(alignment_bias_layers=[1], alignment_biases=[]), "non-empty subset"),
        (dict(alignment_biases=["markov"]), "alignment_bias_layers is empty"),
        (dict(alignment_window=-1), r"alignment_window=-1 must be an int >= 0"),
        (dict(alignment_bias_hidden_size=0), r"alignment_bias_hidden_size=0 must be an int >= 1"),
        (dict(alignment_layer=5), r"alignment_layer=5 must be an int in 0..1 \(the model has decoder_layers=2"),
        (dict(global_fertility_weight=-0.1), r"global_fertility_weight=-0.1 must be a finite number >= 0"),
        (dict(symmetry_weight=float("nan")), r"symmetry_weight=nan must be"),
        (dict(global_fertility_start_step=-3), r"global_fertility_start_step=-3 must be an int >= 0"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**{**TINY, **overrides})


# ------------------------------------------------------------------------------------------------------------
# Trainer smoke runs
# ------------------------------------------------------------------------------------------------------------


def toy_pairs(n=64, seed=0):
    """A learnable toy pair: the target is the reversed source shifted by 10 in the vocabulary."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        length = int(torch.randint(3, 8, (1,), generator=g))
        src = torch.randint(3, 40, (length,), generator=g).tolist()
        rows.append({"input_ids": src + [EOS], "labels": [t + 10 for t in reversed(src)] + [EOS]})
    return Dataset.from_list(rows)


def training_args(tmp_path, **overrides):
    args = dict(output_dir=str(tmp_path), per_device_train_batch_size=16, learning_rate=1e-2, max_steps=60,
                logging_steps=10, save_strategy="no", report_to=[], seed=0, use_cpu=True, dataloader_num_workers=0,
                disable_tqdm=True)  # fmt: skip
    return Seq2SeqTrainingArguments(**{**args, **overrides})


def test_trainer_smoke_run_with_biases_and_global_fertility(tmp_path):
    model = make_model(randomise=False, d_model=32, alignment_bias_layers=[0, 1], global_fertility_weight=0.1,
                       global_fertility_start_step=20).train()  # fmt: skip
    trainer = SyntaxMTTrainer(  # logs the terms of the objective; adds the fertility schedule's callback itself
        model=model,
        args=training_args(tmp_path),
        train_dataset=toy_pairs(),
        data_collator=DataCollatorForSyntaxMT(types.SimpleNamespace(pad_token_id=PAD)),
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logs[-1]["loss"] < 0.8 * logs[0]["loss"], logs
    assert "fertility_loss" not in logs[0]  # the pre-training phase (steps < 20)
    fertility = [entry["fertility_loss"] for entry in logs if "fertility_loss" in entry]
    assert fertility and all(math.isfinite(v) for v in fertility), logs
    assert model.alignment_training_step >= 20


def test_trainer_smoke_run_symmetric(tmp_path):
    forward = make_model(randomise=False, d_model=32, symmetry_weight=1.0).train()
    backward = make_model(randomise=False, seed=1, d_model=32).train()
    model = SymmetricTranslationModel(forward, backward)
    trainer = SyntaxMTTrainer(
        model=model,
        args=training_args(tmp_path, max_steps=40),
        train_dataset=toy_pairs(),
        data_collator=DataCollatorForSymmetricTranslation(pad_token_id=PAD),
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logs[-1]["loss"] < 0.8 * logs[0]["loss"], logs
    assert all(math.isfinite(entry["symmetry_bonus"]) and entry["symmetry_bonus"] < 0 for entry in logs), logs
    forward_dir, _ = model.save_directions(tmp_path / "final")
    assert AutoModelForSeq2SeqLM.from_pretrained(forward_dir).config.symmetry_weight == 1.0
