"""The learned tree-distance bias (`tree_bias`) against a direct computation of its equation, per example and per
head: logits_h(i, j) = q_i k_j / sqrt(d) - w_h * d_tree(i, j), w_h = softplus(raw_h), special tokens unbiased. Plus
the fused (SDPA bias) form against the eager one, padding, save/load, the options' checks and
tree distances computed once per forward when `tree` heads read them too. As every method that reads the parse, it
is saved and loaded as remote code without the package by tests/models/test_remote_code.py."""

import math

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from trees import bfs_distance

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.methods import tree_distance

WEIGHTS = [0.4, 1.7]  # w_h of the two tree-bias heads of layer 0


def make_model(seed=0, **overrides):
    options = {**TINY, "encoder_tree_bias_heads": [2, 0], "encoder_tree_heads": [1, 0], **overrides}
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**options)).eval()
    with torch.no_grad():  # distinct weights per head: raw_h = softplus^-1(w_h)
        model.model.encoder.layers[0].self_attn.tree_bias.copy_(torch.tensor(WEIGHTS).expm1().log())
    return model


def batch():
    """Two sources (lengths 6 and 4, padded) with their trees."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
    # sentence 0: words w1={0,1} w2={2} w3={3} w4={4}, heads w1->w2, w2 root, w3->w4, w4->w2 (w1-w3: 3 edges)
    # sentence 1: words w1={0} w2={1,2}, heads w1->w2, w2 root
    return dict(
        input_ids=input_ids,
        attention_mask=(input_ids != PAD).long(),
        word_index=torch.tensor([[1, 1, 2, 3, 4, 0], [1, 2, 2, 0, 0, 0]]),
        word_heads=torch.tensor([[2, 0, 4, 2], [2, 0, 0, 0]]),
    )


def test_tree_bias_heads_match_the_direct_formula_per_example_and_head():
    model, inputs = make_model(), batch()
    attn = model.model.encoder.layers[0].self_attn
    assert list(attn.heads_of("tree_bias")) == [1, 2]  # after the tree head (BUILTIN order)
    seen = {}
    attn.register_forward_pre_hook(lambda m, a, k: seen.update(x=a[0].detach()), with_kwargs=True)
    with torch.no_grad():
        probs = model(**inputs, decoder_input_ids=torch.tensor([[PAD, 5]] * 2), output_attentions=True)
    probs = probs.encoder_attentions[0]  # (B, H, S, S)
    q, k = attn.q_proj(seen["x"]).detach(), attn.k_proj(seen["x"]).detach()  # (B, S, D)
    d = attn.head_dim
    checked = 0
    for b in range(2):
        n = int(inputs["attention_mask"][b].sum())
        words, heads = inputs["word_index"][b].tolist(), inputs["word_heads"][b].tolist()
        for local, h in enumerate(attn.heads_of("tree_bias")):
            for i in range(n):
                logits = []
                for j in range(n):
                    special = words[i] == 0 or words[j] == 0  # distance inf (or 0 to itself): no bias
                    dist = 0 if special else bfs_distance(heads, words[i] - 1, words[j] - 1)
                    energy = float(q[b, i, h * d : (h + 1) * d] @ k[b, j, h * d : (h + 1) * d]) / math.sqrt(d)
                    logits.append(energy - WEIGHTS[local] * dist)
                z = sum(math.exp(v) for v in logits)
                expected = torch.tensor([math.exp(v) / z for v in logits])
                torch.testing.assert_close(probs[b, h, i, :n], expected, atol=1e-5, rtol=1e-4)
                assert probs[b, h, i, n:].abs().max() == 0 if n < 6 else True  # padding keys get nothing
                checked += 1
    assert checked == 2 * (6 + 4)
    assert bfs_distance(batch()["word_heads"][0].tolist(), 0, 2) == 3  # the batch has distances > 1


def test_the_fused_sdpa_bias_equals_the_eager_heads():
    inputs = batch()
    outputs = {}
    for kernel in ("eager", "fused"):
        model = make_model(syntax_attention_kernel=kernel, encoder_tree_heads=None)
        with torch.no_grad():
            outputs[kernel] = model.get_encoder()(**inputs).last_hidden_state  # (B, S, D)
    torch.testing.assert_close(outputs["fused"], outputs["eager"], atol=1e-5, rtol=1e-5)


def test_padding_does_not_leak():
    model, inputs = make_model(), batch()
    with torch.no_grad():
        padded = model.get_encoder()(**inputs).last_hidden_state  # (B, S, D)
        alone = model.get_encoder()(
            input_ids=inputs["input_ids"][1:, :4], attention_mask=inputs["attention_mask"][1:, :4],
            word_index=inputs["word_index"][1:, :4], word_heads=inputs["word_heads"][1:, :2],
        ).last_hidden_state  # fmt: skip
    torch.testing.assert_close(padded[1, :4], alone[0], atol=1e-5, rtol=1e-5)


def test_tree_distances_are_computed_once_per_forward_for_tree_and_tree_bias(monkeypatch):
    calls = []
    real = tree_distance.tree_distances
    monkeypatch.setattr(tree_distance, "tree_distances", lambda *a: calls.append(1) or real(*a))
    model = make_model()  # tree and tree-bias heads
    with torch.no_grad():
        model.get_encoder()(**batch())
    assert len(calls) == 1


def test_weights_initialise_to_tree_bias_init_train_and_round_trip(tmp_path):
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(
        SyntaxMTConfig(**TINY, encoder_tree_bias_heads=[2, 1], tree_bias_init=0.3)
    )
    for layer, k in ((0, 2), (1, 1)):
        w = torch.nn.functional.softplus(model.model.encoder.layers[layer].self_attn.tree_bias)
        torch.testing.assert_close(w, torch.full((k,), 0.3))
    assert model.model.decoder.layers[0].self_attn.tree_bias is None
    model = make_model()
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert loaded.config.encoder_tree_bias_heads == [2, 0] and loaded.config.to_dict() == {
        **model.config.to_dict(),
        "_name_or_path": loaded.config._name_or_path,
    }
    torch.testing.assert_close(loaded.model.encoder.layers[0].self_attn.tree_bias.detach(),
                               torch.tensor(WEIGHTS).expm1().log())  # fmt: skip
    inputs = {**batch(), "labels": torch.tensor([[20, 21, EOS], [22, EOS, -100]])}
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits, rtol=0, atol=0)
    model.train()(**inputs).loss.backward()
    assert model.model.encoder.layers[0].self_attn.tree_bias.grad.abs().min() > 0  # every head's w_h learns


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(tree_bias_init=0), r"tree_bias_init=0 must be a finite number > 0"),
        (dict(tree_bias_init=-1.0), r"tree_bias_init=-1.0 must be a finite number > 0"),
        (dict(tree_bias_init=float("inf")), r"tree_bias_init=inf must be a finite number"),
        (dict(tree_bias_init=True), r"tree_bias_init=True must be a finite number"),
        (dict(encoder_tree_bias_heads=[1]), r"encoder_tree_bias_heads has 1 entries but the model has encoder_layers=2"),
        (dict(encoder_tree_bias_heads=[5, 0]), r"encoder_tree_bias_heads\[0\]=5 but encoder_attention_heads=4"),
    ],
)  # fmt: skip
def test_invalid_options_name_the_problem(options, message):
    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**TINY, **options)


def test_missing_tree_inputs_get_a_clear_error():
    model, inputs = make_model(encoder_tree_heads=None), batch()
    with pytest.raises(
        ValueError, match=r"tree-bias heads \(encoder_tree_bias_heads=\[2, 0\]\) and needs `word_index`"
    ):
        model.get_encoder()(**{**inputs, "word_heads": None})
