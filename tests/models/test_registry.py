"""A method added in one module plus its registration, with no edit to the attention class, the encoder, the
decoder or the generation class: a toy "key bias" method defined here takes heads, reads an input column, changes
its heads' scores, adds an auxiliary loss, and saves/loads; each is checked against a direct computation."""

import math

import pytest
import torch
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.methods import HeadRecord, Method, input_columns, register, unregister


class KeyBias(Method):
    """Toy: its heads add `bias * toy_ids[key]` to their scores; its loss is the attention mass its heads put on the
    first key, summed over the real query tokens."""

    name = "toy"
    inputs = ("toy_ids",)
    losses = ("toy_loss",)

    @staticmethod
    def options(config) -> dict:
        return (config.method_options or {}).get("toy", {})

    def active(self, config):
        return bool(self.options(config))

    def validate(self, config):
        heads = self.options(config).get("encoder_heads")
        if heads is not None and len(heads) != config.encoder_layers:
            raise ValueError(f"method_options['toy']['encoder_heads'] needs one entry per encoder layer, got {heads}")

    def heads(self, config, site, layer):
        return (
            self.options(config).get("encoder_heads", [0] * config.encoder_layers)[layer] if site == "encoder" else 0
        )

    def describe(self, config):
        return "Toy key bias." if self.active(config) else None

    def prepare(self, config, inputs, input_shape, attention_mask):
        if inputs.get("toy_ids") is None:
            raise ValueError("This model has toy heads and needs `toy_ids` (B, S).")
        return {"toy_shift": inputs["toy_ids"].float() * self.options(config)["bias"]}  # (B, S)

    def scores(self, ctx, scores, start, stop):
        return scores + ctx.inputs["toy_shift"][:, None, None, :]  # (B, k, T, S)

    def record(self, ctx, record: HeadRecord, start, stop):
        if ctx.record.record_heads:
            ctx.record.heads[(ctx.site, ctx.module.layer_idx, "toy")] = record

    def wants_record(self, model, batch):
        return batch.get("labels") is not None, set()

    def loss(self, model, record, batch, outputs):
        heads = record.of_kind("encoder", "toy")
        if not heads:
            return {}
        mask = batch["attention_mask"].float()  # (B, S)
        return {"toy_loss": sum((r.probs[..., 0].mean(1) * mask).sum() for r in heads)}

    def loss_weights(self, config):
        return {"toy_loss": self.options(config)["weight"]}


@pytest.fixture
def toy():
    method = register(KeyBias())
    yield method
    unregister("toy")


def toy_config(**kw):
    return SyntaxMTConfig(**TINY, method_options={"toy": {"encoder_heads": [2, 0], "bias": 1.5, "weight": 0.25}}, **kw)


def batch():
    ids = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, 11, EOS, PAD]])
    return {
        "input_ids": ids, "attention_mask": (ids != PAD).long(), "toy_ids": torch.tensor([[0, 1, 0, 1, 0], [1, 0, 0, 0, 0]]),
        "labels": torch.tensor([[12, 13, EOS], [14, EOS, -100]]),
    }  # fmt: skip


def test_a_toy_method_changes_its_heads_by_the_direct_formula(toy):
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(toy_config()).eval()
    attn = model.model.encoder.layers[0].self_attn
    assert list(attn.heads_of("toy")) == [0, 1]
    inputs = batch()
    seen = {}
    attn.register_forward_pre_hook(lambda m, a, k: seen.update(x=a[0].detach()), with_kwargs=True)
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    probs = out.encoder_attentions[0]  # (B, H, S, S)
    x, H, d = seen["x"], attn.num_heads, attn.head_dim
    q, k = attn.q_proj(x).detach(), attn.k_proj(x).detach()  # (B, S, D)
    for b in range(2):
        n = int(inputs["attention_mask"][b].sum())
        for h in range(H):
            for t in range(n):
                s = [float(q[b, t, h * d:(h + 1) * d] @ k[b, j, h * d:(h + 1) * d]) / math.sqrt(d)
                     + (1.5 * float(inputs["toy_ids"][b, j]) if h < 2 else 0.0) for j in range(n)]  # fmt: skip
                z = sum(math.exp(v) for v in s)
                expected = torch.tensor([math.exp(v) / z for v in s])
                torch.testing.assert_close(probs[b, h, t, :n].float(), expected, atol=1e-5, rtol=1e-4)


def test_a_toy_method_adds_its_weighted_loss_and_its_column(toy):
    torch.manual_seed(0)
    config = toy_config()
    model = SyntaxMTForConditionalGeneration(config).eval()
    assert input_columns(config) == ["toy_ids"]
    inputs = batch()
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    probs = out.encoder_attentions[0][:, :2]  # the toy heads, (B, 2, S, S)
    direct = (probs[..., 0].mean(1) * inputs["attention_mask"]).sum() / (inputs["labels"] != -100).sum()
    torch.testing.assert_close(out["toy_loss"], direct)
    torch.testing.assert_close(out.loss, out.translation_loss + 0.25 * direct)
    # the Trainer keeps dataset columns that forward() names: the toy input and nothing is hidden in **kwargs
    import inspect

    assert "toy_ids" in inspect.signature(model.forward).parameters


def test_a_toy_method_saves_loads_and_is_checked(toy, tmp_path):
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(toy_config()).eval()
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert loaded.config.method_options == model.config.method_options
    with torch.no_grad():
        torch.testing.assert_close(model(**batch()).logits, loaded(**batch()).logits, rtol=0, atol=0)
    with pytest.raises(ValueError, match="one entry per encoder layer"):
        SyntaxMTConfig(**TINY, method_options={"toy": {"encoder_heads": [1], "bias": 1.0, "weight": 1.0}})
    with pytest.raises(ValueError, match="needs `toy_ids`"):
        model(input_ids=batch()["input_ids"], labels=batch()["labels"])


def test_options_of_an_unregistered_method_are_refused():
    with pytest.raises(ValueError, match="no registered method has"):
        SyntaxMTConfig(**TINY, method_options={"nope": {}})
