"""Structural alignment biases on cross-attention (Cohn et al. 2016, "Incorporating Structural Alignment Biases into
an Attentional Neural Translation Model"), adapted to the Transformer: the method of the registry and its
decoding state.

What lives here:

- `StructuralAlignmentBias`: per-head logit bias of a decoder layer's cross-attention from the position bias (Eq. 6),
  the Markov condition (Eq. 7) and local fertility features, through a small tanh layer (the paper's `v tanh(W ...)`).
- `AlignmentStateLayer`: the decoding state kept in the cross-attention cache.
- `AlignmentBias`: the registered method; its `logits` hook adds the bias to every head of the biased layers.

Global fertility is in `methods.fertility`, bilingual symmetry in `hf_syntax_mt.symmetric`, alignments out in
`hf_syntax_mt.alignment`.

Transformer adaptation (why training stays parallel over target positions)
-------------------------------------------------------------------------
In the paper the features of target position j use the attention alpha_{j-1} of the *biased* model, a sequential
recurrence. Here they use the layer's **bias-free base attention** alpha0 = mean over heads of
softmax(q_j k_i^T / sqrt(d) + mask), which depends on target position j only through the causal decoder states, so
all positions are computed at once. (Heads are averaged, as for global fertility, symmetry and `align()`: one
alignment per layer; it also keeps the tanh layer at `(B, T, S, A)` instead of `(B, H, T, S, A)`.)

- position (Eq. 6): psi(j, i, I) = (log(1+j), log(1+i), log(1+I)); j = 0-based target position, i = 0-based source
  position, I = number of non-padding source tokens (never the target length J);
- Markov (Eq. 7): xi1(j, i) = (alpha0_{j-1, i-k}, ..., alpha0_{j-1, i+k}): alpha0 shifted by one along the target
  axis (zeros for j = 0), then a +-k window along the source axis (zeros outside the sentence and on padding);
- local fertility: xi2(j, i) = (sum_{j'<j} alpha0_{j', i-k}, ..., sum_{j'<j} alpha0_{j', i+k}): the exclusive
  cumulative sum of alpha0 over target positions, in the same +-k window.

bias_h(j, i) = v_h . tanh(W [psi; xi1; xi2] + b) is added to the logits of head h (each head has its own v_h),
followed by the softmax. v starts at zero, so a freshly added bias leaves a (retrofitted Marian) model unchanged.

Incremental decoding keeps, per biased layer, the base-attention row of the last decoded position and the running
sum of base-attention rows, each `(B, 1, S)`, in an `AlignmentStateLayer` appended to the cross-attention
`DynamicCache` of the `EncoderDecoderCache`. It is a `DynamicLayer`, so the cache's `reorder_cache` (beam search),
`batch_repeat_interleave` and `batch_select_indices` reorder it with the keys and values; the decoding step j is
the self-attention cache length. Cached decoding therefore computes the features of uncached decoding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import DynamicLayer, EncoderDecoderCache

from ..errors import UserError, UserTypeError
from ..validation import Option, check_int, check_layer_list, checking
from .base import Method
from .records import AttentionContext

ALIGNMENT_BIASES = ("position", "markov", "fertility")


def _window(x: torch.Tensor, k: int) -> torch.Tensor:
    """`x` `(..., S)` -> `(..., S, 2k+1)`: entry `[..., i, m]` = x[..., i - k + m], 0 outside 0..S-1."""
    return nn.functional.pad(x, (k, k)).unfold(-1, 2 * k + 1, 1)


class StructuralAlignmentBias(nn.Module):
    """Per-head additive bias of a cross-attention's logits from structural alignment features.

    The features of a target/source pair (j, i) are shared by the heads (the Markov and fertility ones come from the
    head-averaged base attention); each head has its own output vector v_h:
    bias_h(j, i) = v_h . tanh(W phi(j, i) + b).

    Parameters (H heads, F features, A hidden units): `feature_weight` `(F, A)` (the paper's W^(ap), W^(am), W^(af)
    stacked along F in the order position, Markov, fertility), `feature_bias` `(A,)`, `output_weight` `(H, A)`.
    F = 3 (position) + (2k+1) (Markov) + (2k+1) (fertility), for the enabled biases.
    """

    def __init__(self, num_heads: int, biases: Sequence[str], window: int, hidden_size: int):
        super().__init__()
        self.num_heads, self.window, self.hidden_size = num_heads, window, hidden_size
        self.position = "position" in biases
        self.markov = "markov" in biases
        self.fertility = "fertility" in biases
        K = 2 * window + 1
        self.num_features = 3 * self.position + K * self.markov + K * self.fertility
        self.feature_weight = nn.Parameter(torch.empty(self.num_features, hidden_size))
        self.feature_bias = nn.Parameter(torch.empty(hidden_size))
        self.output_weight = nn.Parameter(torch.empty(num_heads, hidden_size))
        self.reset_parameters()

    @property
    def needs_base_attention(self) -> bool:
        return self.markov or self.fertility

    def reset_parameters(self) -> None:
        """W ~ N(0, 1/F), b = 0, v = 0: the bias starts at exactly 0 (called by `_init_weights` too)."""
        init.normal_(self.feature_weight, mean=0.0, std=1.0 / math.sqrt(self.num_features))
        init.zeros_(self.feature_bias)
        init.zeros_(self.output_weight)

    def extra_repr(self) -> str:
        on = [n for n in ("position", "markov", "fertility") if getattr(self, n)]
        return f"heads={self.num_heads}, biases={on}, window={self.window}, hidden={self.hidden_size}"

    def forward(
        self,
        base: torch.Tensor | None,
        key_valid: torch.Tensor,
        query_length: int,
        query_offset: int = 0,
        previous: torch.Tensor | None = None,
        cumulative: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """The bias `(B, H, T, S)` and the decoding state after these T rows.

        Args:
            base: `(B, H, T, S)` bias-free base attention (needed for Markov / fertility), 0 on padding.
            key_valid: `(B, S)` bool, True for real source tokens.
            query_length: T, the number of target positions in this call.
            query_offset: target position of the first row (number of positions decoded before, 0 in training).
            previous: `(B, 1, S)` head-averaged base attention of position `query_offset - 1` (None: zeros).
            cumulative: `(B, 1, S)` its sum over target positions `< query_offset` (None: zeros).

        Returns:
            `(bias, state)`; state = (head-averaged base attention of the last row, cumulative sum including it),
            each `(B, 1, S)`, or None when neither Markov nor fertility features are used.
        """
        B, S = key_valid.shape
        T, k, H = query_length, self.window, self.num_heads
        W = self.feature_weight  # (F, A)
        device, dtype = W.device, W.dtype
        columns = []  # the features phi(j, i) in the rows' order of W, each (B, T, S, f)
        if self.position:
            # Eq. 6: psi(j, i, I) = (log(1+j), log(1+i), log(1+I)); J is never used
            log_j = torch.log1p(torch.arange(T, device=device, dtype=dtype) + query_offset)  # (T,)
            log_i = torch.log1p(torch.arange(S, device=device, dtype=dtype))  # (S,)
            log_I = torch.log1p(key_valid.sum(-1).to(dtype))  # (B,)
            columns += [
                log_j.view(1, T, 1, 1).expand(B, T, S, 1), log_i.view(1, 1, S, 1).expand(B, T, S, 1),
                log_I.view(B, 1, 1, 1).expand(B, T, S, 1),
            ]  # fmt: skip
        state = None
        if self.needs_base_attention:
            alpha0 = base.mean(dim=1)  # heads averaged: the layer's bias-free alignment, (B, T, S)
            if previous is None:
                previous = alpha0.new_zeros(B, 1, S)
            if cumulative is None:
                cumulative = alpha0.new_zeros(B, 1, S)
            if self.markov:
                prev_rows = torch.cat([previous, alpha0[:, :-1]], dim=1)  # alpha0_{j-1}, (B, T, S)
                columns.append(_window(prev_rows, k))  # Eq. 7: xi1(alpha_{j-1}; i), (B, T, S, 2k+1)
            # running[j] = sum_{j' < j} alpha0_{j'}: exclusive cumulative sum over target positions, (B, T+1, S)
            running = torch.cumsum(torch.cat([cumulative, alpha0], dim=1), dim=1)
            if self.fertility:  # local fertility xi2(alpha_{<j}; i), (B, T, S, 2k+1)
                columns.append(_window(running[:, :-1], k))
            state = (alpha0[:, -1:], running[:, -1:])  # (B, 1, S) each
        feats = torch.cat([c.to(dtype) for c in columns], dim=-1)  # phi(j, i), (B, T, S, F)
        # one matmul for W^(ap) psi + W^(am) xi1 + W^(af) xi2 + b (no (B, T, S, A) sums of broadcast parts)
        pre = torch.addmm(self.feature_bias, feats.view(-1, self.num_features), W)  # (B*T*S, A)
        bias = torch.mm(torch.tanh(pre), self.output_weight.t())  # v_h^T tanh(...), (B*T*S, H)
        return bias.view(B, T, S, H).permute(0, 3, 1, 2), state  # (B, H, T, S)


class AlignmentStateLayer(DynamicLayer):
    """Decoding state of one biased decoder layer, kept as an extra layer of the cross-attention `DynamicCache`.

    `keys` = head-averaged base attention of the last decoded target position, `values` = its sum over all decoded
    positions; both `(B, 1, S)`. Being a `DynamicLayer`, it is reordered (beam search), repeated and selected
    along the batch together with the keys and values of the cache.
    """

    def __init__(self, decoder_layer_idx: int):
        super().__init__()
        self.decoder_layer_idx = decoder_layer_idx
        self.num_positions = 0  # target positions summed into the state

    def __repr__(self):
        return f"{self.__class__.__name__}(decoder_layer_idx={self.decoder_layer_idx})"

    def set_state(self, previous: torch.Tensor, cumulative: torch.Tensor, num_positions: int) -> None:
        self.keys, self.values = previous, cumulative
        self.dtype, self.device = previous.dtype, previous.device
        self.is_initialized, self.num_positions = True, num_positions

    def get_state(self, query_offset: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The state for a call whose first target position is `query_offset` (the positions decoded so far)."""
        initialized = self.is_initialized and self.keys is not None and self.keys.numel() > 0
        if query_offset != (self.num_positions if initialized else 0):
            raise RuntimeError(
                f"The alignment state of decoder layer {self.decoder_layer_idx} covers "
                f"{self.num_positions if initialized else 0} target positions but the cache holds {query_offset}: the "
                "cache was cropped or filled without it (assisted/speculative decoding is not supported with Markov or "
                "fertility alignment biases)."
            )
        return (self.keys, self.values) if initialized else (None, None)


def _alignment_state_layer(past_key_values: Any, layer_idx: int, num_layers: int) -> AlignmentStateLayer | None:
    """The `AlignmentStateLayer` of decoder layer `layer_idx` in the cache (created on first use), or None."""
    if past_key_values is None:
        return None
    if not isinstance(past_key_values, EncoderDecoderCache):
        raise UserTypeError(
            f"Structural alignment biases need an EncoderDecoderCache for cached decoding, got "
            f"{type(past_key_values).__name__}."
        )
    cache = past_key_values.cross_attention_cache
    for layer in cache.layers:
        if isinstance(layer, AlignmentStateLayer) and layer.decoder_layer_idx == layer_idx:
            return layer
    if cache.layer_class_to_replicate is not None:  # lazily grown cache: keep slots 0..L-1 for the real layers
        while len(cache.layers) < num_layers:
            cache.layers.append(cache.layer_class_to_replicate())
    layer = AlignmentStateLayer(layer_idx)
    cache.layers.append(layer)
    return layer


class AlignmentBias(Method):
    """Every head of the cross-attention of the layers in `alignment_bias_layers` gets the structural bias."""

    name = "alignment_bias"
    inference_needs = (
        "extra modules: a small network adds the structural alignment biases to the cross-attention "
        "logits at every decoding step"
    )
    config_options = {
        "alignment_bias_layers": Option(
            "list[int] | None",
            None,
            """Decoder layers (indices `0..decoder_layers-1`) whose cross-attention gets the structural alignment
            biases of Cohn et al. (2016) in every head (see `hf_syntax_mt.alignment`). `None` (default): none.""",
            check=checking(check_layer_list, "decoder", "the layers that get the biases"),
        ),
        "alignment_biases": Option(
            "list[str] | None",
            None,
            """Which biases those layers add, a non-empty subset of `["position", "markov", "fertility"]`: position bias
            (Eq. 6), Markov condition (Eq. 7) and local fertility. `None` (default): all three.""",
        ),
        "alignment_window": Option(
            "int",
            2,
            """k of the Markov and local-fertility features, which look at source positions i-k..i+k.""",
            check=checking(check_int, 0, hint="k: features over i-k..i+k, e.g. 2"),
        ),
        "alignment_bias_hidden_size": Option(
            "int",
            16,
            """Width A of the small tanh layer that maps the features to one logit bias per head.""",
            check=checking(check_int, 1, hint="e.g. 16"),
        ),
    }
    tester_config = {"alignment_bias_layers": [1]}
    trainable = ("alignment_bias",)

    def active(self, config) -> bool:
        return bool(config.alignment_bias_layers)

    @staticmethod
    def biases_of_layer(config, layer: int) -> tuple[str, ...]:
        """The structural biases of decoder layer `layer`'s cross-attention (empty when none)."""
        if not config.alignment_bias_layers or layer not in config.alignment_bias_layers:
            return ()
        return tuple(b for b in ALIGNMENT_BIASES if b in (config.alignment_biases or ALIGNMENT_BIASES))

    def heads(self, config, site, layer):
        return -1 if site == "cross" and self.biases_of_layer(config, layer) else 0

    def validate(self, config) -> None:
        n = config.decoder_layers
        layers = config.alignment_bias_layers
        biases = config.alignment_biases
        if biases is not None:
            unknown = [b for b in biases if b not in ALIGNMENT_BIASES]
            if unknown or not biases:
                raise UserError(
                    f"alignment_biases={biases!r}: give a non-empty subset of {list(ALIGNMENT_BIASES)} (or None for all)."
                )
            if not layers:
                raise UserError(
                    f"alignment_biases={biases!r} is set but alignment_bias_layers is empty: choose the decoder layers "
                    f"that get them, e.g. alignment_bias_layers=[{n - 1}]."
                )

    def describe(self, config):
        if not self.active(config):
            return None
        biases = ", ".join(config.alignment_biases or ALIGNMENT_BIASES)
        return (f"Structural alignment biases (Cohn et al. 2016): {biases} in the cross-attention of decoder layers "
                f"{config.alignment_bias_layers}, window k={config.alignment_window}.")  # fmt: skip

    def build_attention(self, attention, config, site, layer, num_heads):
        if not num_heads:
            attention.alignment_bias = None
            return
        attention.alignment_bias = StructuralAlignmentBias(
            num_heads, self.biases_of_layer(config, layer), config.alignment_window, config.alignment_bias_hidden_size
        )

    def init_weights(self, module, config):
        if isinstance(module, StructuralAlignmentBias):  # raw parameters, not nn.Linear
            module.reset_parameters()

    fused = "bias"

    def logits(self, ctx: AttentionContext, logits, start, stop):
        """Adds bias_h(j, i) to the masked logits `(B, H, T, S)` of every head, keeping the decoding state in the
        cache during cached decoding."""
        B, _, T, S = logits.shape
        return logits + self._bias(ctx, logits, (B, T, S), logits.device)

    def attention_bias(self, ctx: AttentionContext, query, key, start, stop):
        """The bias of `logits` for SDPA: the masked logits are needed only for the base attention alpha0, so
        without Markov and fertility features no `(B, H, T, S)` logits are made here."""
        logits = None
        if ctx.module.alignment_bias.needs_base_attention:
            logits = torch.matmul(query, key.transpose(2, 3)) * ctx.module.scaling  # (B, H, T, S)
            logits = logits if ctx.mask is None else logits + ctx.mask
        return self._bias(ctx, logits, (query.shape[0], query.shape[2], key.shape[2]), query.device)

    def _bias(self, ctx: AttentionContext, logits, shape: tuple[int, int, int], device) -> torch.Tensor:
        """bias_h(j, i) `(B, H, T, S)` from the masked logits `(B, H, T, S)` (None when no feature reads alpha0);
        `shape` = (B, T, S)."""
        module, mask, past_key_values = ctx.module, ctx.mask, ctx.past_key_values
        bias_module = module.alignment_bias
        B, T, S = shape
        if mask is None:
            key_valid = torch.ones(B, S, dtype=torch.bool, device=device)
        else:
            key_valid = (mask[:, 0, -1] > torch.finfo(mask.dtype).min / 2).expand(B, S)  # (B, S)
        base = nn.functional.softmax(logits, dim=-1) if bias_module.needs_base_attention else None  # alpha0
        state_layer = _alignment_state_layer(past_key_values, module.layer_idx, module.config.decoder_layers)
        previous = cumulative = None
        offset = 0
        if state_layer is not None:
            offset = past_key_values.self_attention_cache.get_seq_length(module.layer_idx) - T  # j of the first row
            if bias_module.needs_base_attention:
                previous, cumulative = state_layer.get_state(offset)
        bias, state = bias_module(base, key_valid, T, offset, previous, cumulative)  # (B, H, T, S)
        if state_layer is not None and state is not None:
            state_layer.set_state(*state, num_positions=offset + T)
        return bias
