"""One source of head order (issue 52): a method registered in the middle of the order (right after `tree`) moves
the LISA and DBSA heads to the right in every attention, and every reader of head positions follows: the attention
modules, `SyntaxMTConfig.encoder_head_layout` and the trees `evaluation.probing.read_trees` reads."""

import pytest
import torch
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.evaluation.probing import read_trees, word_heads_from_attention
from hf_syntax_mt.methods import Method, register, registered, unregister


class FirstToken(Method):
    """Its heads attend to the first token only: a pattern no trained or random head has, so reading one of its
    heads as LISA's shows."""

    name = "first_token"

    def active(self, config):
        return bool((config.method_options or {}).get(self.name))

    def heads(self, config, site, layer):
        heads = (config.method_options or {}).get(self.name, {}).get("heads", [0] * config.encoder_layers)
        return heads[layer] if site == "encoder" else 0

    def probs(self, ctx, probs, start, stop):
        return torch.zeros_like(probs).index_fill(-1, torch.tensor([0]), 1.0)  # (B, k, T, S)


@pytest.fixture
def first_token_after_tree():
    """`first_token` registered right after `tree` (with the public register/unregister only), order restored after."""
    names = [m.name for m in registered()]
    later = registered()[names.index("tree") + 1 :]
    for method in later:
        unregister(method.name)
    register(FirstToken())
    for method in later:
        register(method)
    yield
    unregister("first_token")
    assert [m.name for m in registered()] == names


def batch():
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD]])
    return dict(
        input_ids=input_ids,
        attention_mask=(input_ids != PAD).long(),
        word_index=torch.tensor([[1, 1, 2, 3, 3, 0], [1, 2, 2, 0, 0, 0]]),
        word_heads=torch.tensor([[2, 0, 2], [2, 0, 0]]),
    )


def test_probing_reads_each_methods_own_heads_with_a_method_in_the_middle(first_token_after_tree):
    config = SyntaxMTConfig(**TINY, encoder_tree_heads=[1, 0], encoder_lisa_heads=[1, 0], encoder_dbsa_heads=[1, 0],
                            method_options={"first_token": {"heads": [1, 0]}})  # fmt: skip
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(config).eval()
    attn = model.model.encoder.layers[0].self_attn
    # the registry's order: tree, first_token, then the bi-affine heads (LISA, DBSA)
    assert [(m.name, a, b) for m, a, b in attn.head_groups] == [("tree", 0, 1), ("first_token", 1, 2),
                                                                 ("biaffine", 2, 4)]  # fmt: skip
    assert list(config.encoder_head_layout(0).items()) == [("tree", 1), ("first_token", 1), ("lisa", 1), ("dbsa", 1)]
    inputs = batch()
    with torch.no_grad():
        attentions = model.get_encoder()(**inputs, output_attentions=True).attentions[0]  # (B, H, S, S)
    assert torch.equal(attentions[:, 1, :, 0], torch.ones(2, 6))  # head 1 is first_token's

    def trees(head, root):
        return [
            word_heads_from_attention(attentions[b, head], inputs["word_index"][b].tolist(), root) for b in range(2)
        ]

    assert read_trees(model, inputs, kind="lisa") == trees(2, "first")
    assert read_trees(model, inputs, kind="dbsa") == trees(3, "last")
    # the test tells the heads apart: first_token's head gives other trees than LISA's and DBSA's
    assert trees(1, "first") != trees(2, "first") and trees(1, "last") != trees(3, "last")


def test_register_after_puts_a_method_in_the_middle_of_the_order():
    names = [m.name for m in registered()]
    register(FirstToken(), after="tree")
    try:
        order = [m.name for m in registered()]
        assert order == [*names[: names.index("tree") + 1], "first_token", *names[names.index("tree") + 1 :]]
    finally:
        unregister("first_token")
    assert [m.name for m in registered()] == names
    with pytest.raises(ValueError, match="no method 'nope' is registered"):
        register(FirstToken(), after="nope")
    assert "first_token" not in [m.name for m in registered()]


def test_a_method_registered_late_keeps_its_declared_options_in_method_options():
    """`Method.config_options` become `SyntaxMTConfig` fields only for the built-in methods (registered before the config
    class exists); a method registered later keeps them in ``method_options[name]``, each checked by its own check as a
    field is (and an undeclared key refused)."""
    from hf_syntax_mt.methods import Option

    def at_most_two(config, name):
        if any(h > 2 for h in getattr(config, name) or []):
            raise ValueError(f"{name}={getattr(config, name)}: at most 2 heads a layer")

    class Late(FirstToken):
        name = "late"
        config_options = {"late_heads": Option("list[int] | None", None, "Heads.", check=at_most_two)}

    register(Late())
    try:
        assert SyntaxMTConfig(**TINY).method_options is None  # not given: the default
        SyntaxMTConfig(**TINY, method_options={"late": {"late_heads": [2, 0]}})
        with pytest.raises(ValueError, match=r"late_heads=\[3, 0\]: at most 2 heads"):
            SyntaxMTConfig(**TINY, method_options={"late": {"late_heads": [3, 0]}})
        with pytest.raises(
            ValueError, match=r"method_options\['late'\] has \['late_head'\].*Did you mean 'late_heads'"
        ):
            SyntaxMTConfig(**TINY, method_options={"late": {"late_head": [1, 0]}})
    finally:
        unregister("late")
    SyntaxMTConfig(**TINY)
