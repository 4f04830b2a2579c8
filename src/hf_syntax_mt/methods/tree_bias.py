"""Learned tree-distance attention bias, in chosen encoder heads: a head's masked logits get `-w_h * d_tree(i, j)`,
with `d_tree` the number of dependency-tree edges between the words of tokens i and j (the distance of Chen et al.
2017's syntax-directed attention, reviewed in the thesis) and `w_h = softplus(raw_h) > 0` learned per head.

Unlike `tree` (a fixed Gaussian window multiplied into the probabilities), the bias is additive, Gaussian-free and
learned, so the softmax renormalises and SDPA can take it as its additive mask (`fused = "bias"`). A special token is
at distance `inf` from every other token; here that distance is 0 (no bias). Inputs: `word_index` `(B, S)` and
`word_heads` `(B, W)`; the tree distances are computed once per forward and shared with `tree`.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import initialization as init

from ..errors import UserError
from ..validation import Option, check_per_layer_heads, check_positive, checking
from .base import Method, per_layer
from .records import AttentionContext
from .tree_distance import TREE_COLUMNS, shared_tree_distances


class TreeBias(Method):
    name = "tree_bias"
    inference_needs = (
        "a parse at inference: its heads add a learned bias by tree distance (`word_index`, `word_heads`)"
    )
    config_options = {
        "encoder_tree_bias_heads": Option(
            "list[int] | None",
            None,
            "Number of learned tree-distance bias heads in each encoder layer: their masked logits get\n"
            "-w_h * d_tree(i, j), the dependency-tree distance between the two tokens' words times a weight\n"
            "w_h = softplus(raw_h) learned per head (special tokens: no bias). Needs `word_index` and `word_heads`.",
            check=check_per_layer_heads,
        ),
        "tree_bias_init": Option(
            "float | int",
            1.0,
            "w_h of every tree-bias head at initialisation (> 0: w_h is a softplus).",
            check=checking(check_positive, "the initial w_h = softplus(raw_h), which is never 0"),
        ),
    }
    inputs = TREE_COLUMNS
    fused = "bias"
    tester_config = {"encoder_tree_bias_heads": [1, 1]}
    trainable = ("tree_bias",)

    def active(self, config) -> bool:
        return any(per_layer(config, "encoder_tree_bias_heads", "encoder"))

    def heads(self, config, site, layer):
        return per_layer(config, "encoder_tree_bias_heads", "encoder")[layer] if site == "encoder" else 0

    def describe(self, config):
        if not self.active(config):
            return None
        layers = ", ".join(f"layer {i}: {k}" for i, k in enumerate(config.encoder_tree_bias_heads) if k)
        return f"Learned tree-distance attention bias -w_h * d_tree (w_h learned per head) in encoder {layers}."

    def build_attention(self, attention, config, site, layer, num_heads):
        # raw_h of each of its heads, w_h = softplus(raw_h)
        attention.tree_bias = nn.Parameter(torch.empty(num_heads)) if num_heads else None

    def init_weights(self, module, config):
        raw = getattr(module, "tree_bias", None)
        if isinstance(raw, nn.Parameter):
            w0 = float(config.tree_bias_init)
            init.constant_(raw, w0 + math.log(-math.expm1(-w0)))  # softplus^-1(w0) = log(e^w0 - 1), stable

    def prepare(self, config, inputs, input_shape, attention_mask):
        heads = f"encoder_tree_bias_heads={config.encoder_tree_bias_heads}"
        d = shared_tree_distances(inputs, input_shape, "tree-bias", heads)  # (B, S, S), inf next to special tokens
        return {"tree_bias_distances": d.masked_fill(d.isinf(), 0.0)}  # (B, S, S)

    def _bias(self, ctx: AttentionContext, start: int, stop: int) -> torch.Tensor:
        d = ctx.inputs.get("tree_bias_distances")
        if d is None:
            raise UserError(f"This layer has {stop - start} tree-bias heads and needs `word_index` and `word_heads`.")
        w = nn.functional.softplus(ctx.module.tree_bias)  # w_h > 0, (k,)
        # thesis lit. review, syntax-directed attention: d_tree = fewest tree edges; energy e_ij - w_h * d_tree(i, j)
        return -w.view(1, -1, 1, 1) * d.unsqueeze(1)  # (B, k, T, S)

    def logits(self, ctx: AttentionContext, logits, start, stop):
        return logits + self._bias(ctx, start, stop).to(logits.dtype)  # (B, k, T, S)

    def attention_bias(self, ctx: AttentionContext, query, key, start, stop):
        return self._bias(ctx, start, stop).to(query.dtype)  # (B, k, T, S)
