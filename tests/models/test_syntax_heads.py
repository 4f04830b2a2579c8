"""DBSA, LISA, syntax-directed heads, the synchronous loss and input features against direct implementations of
their equations, per example and per head. Tiny random configs, fixed seeds."""

import math

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from trees import bfs_distance

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.methods.tree_distance import tree_distances

ALL = dict(
    encoder_pascal_heads=[1, 0], encoder_tree_heads=[1, 0], encoder_lisa_heads=[1, 0], encoder_dbsa_heads=[1, 0],
    decoder_dbsa_heads=[0, 2], sync_loss_weight=0.5, sync_cross_attention_layer=0,
    input_features=["pos", "deprel", "subword_tag"],
)  # fmt: skip


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, **overrides})).eval()
    with torch.no_grad():  # a non-trivial U for every bi-affine head
        for module in model.modules():
            if getattr(module, "biaffine_u", None) is not None:
                module.biaffine_u.add_(0.3 * torch.randn_like(module.biaffine_u))
    return model


def batch():
    """Two sources (lengths 6 and 4, padded) with their trees, and two targets (lengths 5 and 3)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
    # sentence 0: words w1={0,1} w2={2} w3={3,4}, heads w1->w2, w2 root, w3->w2
    # sentence 1: words w1={0} w2={1,2}, heads w1->w2, w2 root
    return dict(
        input_ids=input_ids,
        attention_mask=(input_ids != PAD).long(),
        parent_positions=torch.tensor([[2.0, 2.0, 2.0, 2.0, 2.0, 5.0], [1.5, 1.5, 1.5, 3.0, 4.0, 5.0]]),
        word_index=torch.tensor([[1, 1, 2, 3, 3, 0], [1, 2, 2, 0, 0, 0]]),
        word_heads=torch.tensor([[2, 0, 2], [2, 0, 0]]),
        pos_ids=torch.tensor([[8, 8, 16, 6, 6, 0], [3, 16, 16, 0, 0, 0]]),
        deprel_ids=torch.tensor([[27, 27, 35, 29, 29, 0], [27, 35, 35, 0, 0, 0]]),
        subword_tag_ids=torch.tensor([[1, 3, 4, 1, 3, 0], [4, 1, 3, 0, 0, 0]]),
        lisa_parents=torch.tensor([[2, 2, 2, 2, 2, 5], [1, 1, 1, 3, 4, 5]]),
        dbsa_heads=torch.tensor([[1, 2, 2, 4, 2, 5], [1, 2, 2, 3, 4, 5]]),
        labels=torch.tensor([[20, 21, 22, 23, EOS], [30, 31, EOS, -100, -100]]),
        # target heads as positions in `labels`: some point right (to a later token)
        decoder_dbsa_heads=torch.tensor([[1, 1, 1, 2, 4], [2, 2, 2, 3, 4]]),
    )


def layer_qk(model, inputs, side, layer, cross=False):
    """Projected queries and keys `(B, T, D)` of one attention module, from the layer's input hidden states."""
    with torch.no_grad():
        out = model(**{k: v for k, v in inputs.items() if k != "labels"}, decoder_input_ids=decoder_ids(inputs),
                    output_hidden_states=True)  # fmt: skip
    if side == "encoder":
        attn = model.model.encoder.layers[layer].self_attn
        x = out.encoder_hidden_states[layer]
        return attn, attn.q_proj(x), attn.k_proj(x)
    dec = model.model.decoder.layers[layer]
    x = out.decoder_hidden_states[layer]
    if cross:
        return dec.encoder_attn, None, None
    return dec.self_attn, dec.self_attn.q_proj(x), dec.self_attn.k_proj(x)


def decoder_ids(inputs):
    labels = inputs["labels"]
    shifted = torch.full_like(labels, PAD)
    shifted[:, 1:] = labels[:, :-1].masked_fill(labels[:, :-1] == -100, PAD)
    return shifted


def direct_biaffine(attn, q, k, valid_keys, h, causal=False):
    """Eq. 4 one example at a time: A_h = softmax(Q_h U K_h^T / sqrt(d)) over the valid (and, causal, earlier) keys."""
    d = attn.head_dim
    U = attn.biaffine_u[h - attn.heads_of("biaffine").start].detach()
    q, k = q.detach(), k.detach()
    B, T, _ = q.shape
    S = k.shape[1]
    A = torch.zeros(B, T, S)
    for b in range(B):
        for t in range(T):
            keys = [j for j in range(S) if valid_keys[b][j] and (not causal or j <= t)]
            s = [float(q[b, t, h * d : (h + 1) * d] @ U @ k[b, j, h * d : (h + 1) * d]) / math.sqrt(d) for j in keys]
            z = sum(math.exp(v) for v in s)
            for j, v in zip(keys, s, strict=True):
                A[b, t, j] = math.exp(v) / z
    return A


@pytest.mark.parametrize("kind,head", [("lisa", 2), ("dbsa", 3)])
def test_encoder_biaffine_heads_match_eq4_and_loss(kind, head):
    model = make_model(**ALL)
    inputs = batch()
    out = model(**inputs, decoder_input_ids=decoder_ids(inputs), output_attentions=True)
    attn, q, k = layer_qk(model, inputs, "encoder", 0)
    valid = inputs["attention_mask"].bool().tolist()
    A = direct_biaffine(attn, q, k, valid, head)
    for b in range(2):
        torch.testing.assert_close(out.encoder_attentions[0][b, head], A[b], atol=1e-5, rtol=1e-4)
    # Eq. 5: -sum_t log P(head(t)) over real tokens, divided by the number of target tokens
    target = inputs["lisa_parents" if kind == "lisa" else "dbsa_heads"]
    nll = sum(-math.log(A[b, t, target[b, t]]) for b in range(2) for t in range(6) if valid[b][t])
    n_tokens = int((inputs["labels"] != -100).sum())
    if kind == "lisa":
        torch.testing.assert_close(out.lisa_loss, torch.tensor(nll / n_tokens), atol=1e-4, rtol=1e-4)
    else:  # dbsa_loss adds the decoder's term; recompute it without the source supervision
        only_target = model(**{**inputs, "dbsa_heads": None}, decoder_input_ids=decoder_ids(inputs))
        decoder_part = float(only_target.dbsa_loss.detach())
        torch.testing.assert_close(out.dbsa_loss, torch.tensor(nll / n_tokens + decoder_part), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("full_context", [False, True])
def test_decoder_dbsa_heads_match_eq4_and_loss(full_context):
    model = make_model(**{**ALL, "decoder_dbsa_full_context": full_context})
    inputs = batch()
    out = model(**inputs, output_attentions=True)
    attn, q, k = layer_qk(model, inputs, "decoder", 1)
    # real decoder positions: those predicting a label (the final </s> is never an input)
    dec_valid = [[lab != -100 for lab in row] for row in inputs["labels"].tolist()]
    total = 0.0
    for h in range(2):
        causal = direct_biaffine(attn, q, k, dec_valid, h, causal=True)
        full = direct_biaffine(attn, q, k, dec_valid, h, causal=False)
        for b in range(2):
            rows = [t for t in range(5) if dec_valid[b][t]]  # padding rows are never used
            torch.testing.assert_close(out.decoder_attentions[1][b, h, rows], causal[b, rows], atol=1e-5, rtol=1e-4)
        A = full if full_context else causal
        for b in range(2):
            for t in range(1, 5):  # decoder position t holds label t-1; its head is label position + 1
                head = int(inputs["decoder_dbsa_heads"][b, t - 1]) + 1
                if not dec_valid[b][t] or head >= 5 or not dec_valid[b][head] or (head > t and not full_context):
                    continue
                total += -math.log(A[b, t, head]) / 2  # averaged over the layer's 2 heads
    n_tokens = int((inputs["labels"] != -100).sum())
    target_only = model(**{**inputs, "dbsa_heads": None})
    torch.testing.assert_close(target_only.dbsa_loss, torch.tensor(total / n_tokens), atol=1e-4, rtol=1e-4)


def test_synchronous_loss_matches_eqs_7_to_9():
    model = make_model(**ALL)
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    E = out.encoder_attentions[0][:, 3]  # the encoder DBSA head
    D = out.decoder_attentions[1][:, :2].mean(1)  # the two decoder DBSA heads, averaged
    C = out.cross_attentions[0].mean(1)  # layer l_sync = 0, heads averaged
    total = 0.0
    for b in range(2):
        T = 5
        mapped = C[b] @ E[b] @ C[b].T  # Eq. 7
        for t in range(T):
            if inputs["labels"][b, t] == -100:
                continue
            z = sum(math.exp(float(mapped[t, q])) for q in range(t + 1))
            for q in range(t + 1):  # Eq. 8: future masked; Eq. 9: masked elements are zero in both
                total += (math.exp(float(mapped[t, q])) / z - float(D[b, t, q])) ** 2
    n_tokens = int((inputs["labels"] != -100).sum())
    torch.testing.assert_close(out.sync_loss, torch.tensor(total / n_tokens), atol=1e-5, rtol=1e-4)
    weighted = out.translation_loss + 0.5 * out.dbsa_loss + 1.0 * out.lisa_loss + 0.5 * out.sync_loss
    torch.testing.assert_close(out.loss, weighted)


def test_tree_distances_match_breadth_first_search():
    heads = [3, 3, 0, 5, 3, 5, 8, 6, 3]  # a deeper tree of 9 words
    word_index = torch.tensor([[1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 9, 0]])
    d = tree_distances(word_index, torch.tensor([heads]))
    for t in range(12):
        for u in range(12):
            wt, wu = int(word_index[0, t]), int(word_index[0, u])
            if wt == 0 or wu == 0:
                expected = 0.0 if t == u else math.inf
            else:
                expected = bfs_distance(heads, wt - 1, wu - 1)
            assert float(d[0, t, u]) == expected, (t, u)


def test_syntax_directed_head_matches_chen_weighting():
    model = make_model(**{**ALL, "tree_window": 2})
    inputs = batch()
    out = model(**inputs, output_attentions=True)
    attn, q, k = layer_qk(model, inputs, "encoder", 0)
    d, h, sigma = attn.head_dim, 1, 1.0  # head 1 follows the PASCAL head; sigma = D / 2
    for b in range(2):
        heads = inputs["word_heads"][b].tolist()  # padding words (head 0) are isolated and never reached
        valid = [j for j in range(6) if inputs["attention_mask"][b, j]]
        for t in valid:
            s = {j: float(q[b, t, h * d : (h + 1) * d] @ k[b, j, h * d : (h + 1) * d]) / math.sqrt(d) for j in valid}
            z = sum(math.exp(v) for v in s.values())
            for j in range(6):
                wt, wj = int(inputs["word_index"][b, t]), int(inputs["word_index"][b, j])
                if j not in valid:
                    expected = 0.0
                else:
                    if wt == 0 or wj == 0:
                        dist = 0 if t == j else math.inf
                    else:
                        dist = bfs_distance(heads, wt - 1, wj - 1)
                    weight = math.exp(-(dist**2) / (2 * sigma**2)) if dist <= 2 else 0.0
                    expected = math.exp(s[j]) / z * weight
                assert abs(float(out.encoder_attentions[0][b, h, t, j]) - expected) < 1e-5, (b, t, j)


@pytest.mark.parametrize("combination", ["sum", "concat"])
def test_input_features_are_combined_as_sennrich_and_haddow(combination):
    model = make_model(**{**ALL, "feature_combination": combination, "feature_embedding_dim": 2})
    inputs = batch()
    encoder = model.model.encoder
    got = encoder.embed(inputs["input_ids"], inputs)
    tok = encoder.embed_tokens(inputs["input_ids"]) * encoder.embed_scale
    feats = [encoder.feature_embeddings[name](inputs[f"{name}_ids"]) for name in ("pos", "deprel", "subword_tag")]
    if combination == "sum":
        expected = tok + feats[0] + feats[1] + feats[2]
    else:
        expected = torch.cat([tok[..., :10], *feats], dim=-1)  # 16 - 3 x 2
    torch.testing.assert_close(got, expected)
    # id 0 (special tokens) has a zero feature embedding
    for table in encoder.feature_embeddings.values():
        assert table.weight[0].abs().sum() == 0


def test_changing_a_later_target_token_leaves_earlier_decoder_rows_unchanged():
    model = make_model(**ALL)
    inputs = batch()
    ids = decoder_ids(inputs)
    changed = ids.clone()
    changed[:, 3] = 50
    kw = {k: v for k, v in inputs.items() if k != "labels"}
    a = model(**kw, decoder_input_ids=ids, output_attentions=True)
    b = model(**kw, decoder_input_ids=changed, output_attentions=True)
    for layer in range(2):
        torch.testing.assert_close(
            a.decoder_attentions[layer][:, :, :3, :3], b.decoder_attentions[layer][:, :, :3, :3]
        )
    torch.testing.assert_close(a.logits[:, :3], b.logits[:, :3])


def test_fast_inference_path_equals_supervised_eager_path():
    """At inference the bi-affine heads run in SDPA with Q U; with supervision they take the eager path."""
    model = make_model(**ALL)
    inputs = batch()
    supervised = model(**inputs)
    plain = model(**{k: v for k, v in inputs.items() if k not in ("lisa_parents", "dbsa_heads", "decoder_dbsa_heads")},
                  decoder_input_ids=decoder_ids(inputs))  # fmt: skip
    assert plain.dbsa_loss is None and plain.lisa_loss is None
    torch.testing.assert_close(supervised.logits, plain.logits, atol=1e-5, rtol=1e-4)


def test_padding_does_not_leak_with_all_options():
    model = make_model(**ALL)
    inputs = batch()
    source_keys = ("input_ids", "attention_mask", "parent_positions", "word_index", "pos_ids", "deprel_ids",
                   "subword_tag_ids")  # fmt: skip
    kw = {k: inputs[k] for k in (*source_keys, "word_heads")}
    full = model(**kw, decoder_input_ids=decoder_ids(inputs)).logits
    alone = {k: inputs[k][1:2, :4] for k in source_keys}
    alone["word_heads"] = inputs["word_heads"][1:2, :2]
    single = model(**alone, decoder_input_ids=decoder_ids(inputs)[1:2]).logits
    torch.testing.assert_close(full[1:2, :3], single[:, :3], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_equals_uncached_generation_with_decoder_syntax_heads(num_beams):
    model = make_model(**ALL)
    inputs = batch()
    kw = {k: v for k, v in inputs.items() if k not in ("labels", "lisa_parents", "dbsa_heads", "decoder_dbsa_heads")}
    cached = model.generate(**kw, max_new_tokens=8, num_beams=num_beams, do_sample=False)
    uncached = model.generate(**kw, max_new_tokens=8, num_beams=num_beams, do_sample=False, use_cache=False)
    assert torch.equal(cached, uncached)
    # generation needs no parse supervision (no parser at inference)
    assert cached.shape[0] == 2


def test_every_option_round_trips_through_save_pretrained(tmp_path):
    options = {**ALL, "tree_window": 3, "dbsa_loss_weight": 0.7, "lisa_loss_weight": 0.2,
               "decoder_dbsa_full_context": True, "feature_combination": "concat", "feature_embedding_dim": 3,
               "task_token_ids": {"translate": 3, "parse": 4}}  # fmt: skip
    model = make_model(**options)
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    for name, value in options.items():
        assert getattr(loaded.config, name) == value, name
    inputs = batch()
    a = model(**inputs)
    b = loaded(**inputs)
    torch.testing.assert_close(a.logits, b.logits)
    torch.testing.assert_close(a.loss, b.loss)


def test_marian_checkpoint_retrofit_initialises_new_parameters(tmp_path):
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    MarianMTModel(MarianConfig(**TINY)).save_pretrained(tmp_path)
    model = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path, **ALL)
    U = model.model.encoder.layers[0].self_attn.biaffine_u
    torch.testing.assert_close(U, torch.eye(4).expand_as(U))  # identity: a plain head until trained
    for table in model.model.encoder.feature_embeddings.values():
        assert torch.isfinite(table.weight).all() and table.weight[1:].std() > 0


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(encoder_dbsa_heads=[1]), "encoder_dbsa_heads has 1 entries"),
        (dict(decoder_dbsa_heads=[5, 0]), "decoder_dbsa_heads\\[0\\]=5"),
        (dict(encoder_pascal_heads=[3, 0], encoder_dbsa_heads=[2, 0]), "asks for 5 syntax heads"),
        (dict(sync_loss_weight=0.5, encoder_dbsa_heads=[1, 0]), "needs DBSA heads in both"),
        (dict(encoder_dbsa_heads=[1, 0], decoder_dbsa_heads=[1, 0], sync_loss_weight=1.0,
              sync_cross_attention_layer=2), r"sync_cross_attention_layer=2 must be an int in 0..1 \(the model has decoder_layers=2"),
        (dict(input_features=["pos", "lemma"]), "input_features"),
        (dict(feature_combination="mean"), "feature_combination"),
        (dict(input_features=["pos"], feature_combination="concat", feature_embedding_dim=16), "leave room"),
        (dict(tree_window=0), "tree_window"),
        (dict(tree_window=True), r"tree_window=True must be an int >= 1"),  # a bool is not a window
        (dict(encoder_dbsa_heads=[1, 0], decoder_dbsa_heads=[1, 0], sync_loss_weight=1.0,
              sync_cross_attention_layer=0.5), r"sync_cross_attention_layer=0.5 must be an int in 0..1"),
        (dict(dbsa_loss_weight=-1.0), "dbsa_loss_weight"),
        (dict(task_token_ids={"translate": 3}), "task_token_ids"),
    ],
)  # fmt: skip
def test_invalid_options_name_the_problem(options, message):
    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**{**TINY, **options})


def test_missing_inputs_get_clear_errors():
    model = make_model(**ALL)
    inputs = batch()
    with pytest.raises(ValueError, match="word_index"):
        model(**{**inputs, "word_index": None})
    with pytest.raises(ValueError, match="pos_ids"):
        model(**{**inputs, "pos_ids": None})


@pytest.mark.parametrize("num_beams", [1, 3])
def test_every_method_together_trains_saves_reloads_and_generates(num_beams, tmp_path):
    """Syntax heads of issue 3 with the structural alignment biases and global fertility of issue 4."""
    options = {**ALL, "sync_cross_attention_layer": 1, "alignment_bias_layers": [1], "global_fertility_weight": 0.1}
    model = make_model(**options).train()
    inputs = batch()
    out = model(**inputs)
    for name in ("translation_loss", "dbsa_loss", "lisa_loss", "sync_loss", "fertility_loss"):
        assert getattr(out, name) is not None and torch.isfinite(getattr(out, name)), name
    out.loss.backward()
    assert model.model.encoder.layers[0].self_attn.biaffine_u.grad.abs().sum() > 0
    model.eval().save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(model(**inputs).loss, loaded(**inputs).loss)
    kw = {k: v for k, v in inputs.items() if k not in ("labels", "lisa_parents", "dbsa_heads", "decoder_dbsa_heads")}
    cached = loaded.generate(**kw, max_new_tokens=8, num_beams=num_beams, do_sample=False)
    uncached = loaded.generate(**kw, max_new_tokens=8, num_beams=num_beams, do_sample=False, use_cache=False)
    assert torch.equal(cached, uncached)
