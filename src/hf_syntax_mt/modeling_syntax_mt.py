"""Syntax-aware Marian models: PASCAL parent-scaled self-attention heads in chosen encoder layers.

The models subclass Marian and keep its module names, so every weight of a `MarianMTModel` checkpoint loads into
them ("retrofit"). Syntax heads run through one eager score path; the other heads of the same layer keep the fast
attention kernel (SDPA by default), and the two are concatenated before `out_proj`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.cache_utils import EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoder,
    MarianDecoderLayer,
    MarianEncoder,
    MarianEncoderLayer,
    MarianModel,
    MarianMTModel,
    MarianPreTrainedModel,
    eager_attention_forward,
    shift_tokens_right,
)
from transformers.utils import logging
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .alignment import (
    GlobalFertility,
    StructuralAlignmentBias,
    log_auxiliary_losses,
    recording_alignment,
    structural_alignment_attention,
)
from .configuration_syntax_mt import INPUT_FEATURES, SyntaxMTConfig
from .document_context import ContextEncoder, ContextMasks, context_masks, context_sublayer, is_document_parameter

logger = logging.get_logger(__name__)

# Gaussian weights whose exponent is below -_MAX_EXPONENT are set to exactly 0: exp(-80) ~ 1.8e-35 is still a normal
# float32, while the far tail underflows to denormals that make CPU matmuls 3-5x slower.
_MAX_EXPONENT = 80.0


def pascal_weights(
    parent_positions: torch.Tensor,
    key_length: int,
    sigma: float,
    weighting: str = "gaussian",
) -> torch.Tensor:
    """D_p of the PASCAL paper: the weight of every key position j for every query token t.

    Args:
        parent_positions: `(B, T)` float, p_t = middle position (in subword tokens) of token t's parent word.
        key_length: S, the number of key positions.
        sigma: standard deviation of the Gaussian.
        weighting: `"gaussian"` (Eq. 3) or `"parent_only"` (1 where |j - p_t| <= 0.5, else 0).

    Returns:
        `(B, T, S)` float tensor.
    """
    j = torch.arange(key_length, device=parent_positions.device, dtype=torch.float32)  # (S,)
    dist = j.view(1, 1, -1) - parent_positions.float().unsqueeze(-1)  # (B, T, S)
    if weighting == "parent_only":
        return (dist.abs() <= 0.5).float()
    # Eq. 3: dist(p_t, j) = 1 / sqrt(2 pi sigma^2) * exp(-(j - p_t)^2 / (2 sigma^2))
    exponent = dist.square() / (2.0 * sigma**2)  # (B, T, S)
    weights = torch.exp(-exponent) / math.sqrt(2.0 * math.pi * sigma**2)
    return weights.masked_fill(exponent > _MAX_EXPONENT, 0.0)


def _additive_mask(
    attention_mask: torch.Tensor | None, query_length: int, key_length: int, is_causal: bool, dtype, device
) -> torch.Tensor | None:
    """Turn any mask the attention interface may receive into an additive float mask `(B|1, 1, T, S)`.

    Under SDPA the mask may be `None` (no padding; causality via `is_causal`) or boolean (True = attend); under
    eager it is already additive.
    """
    min_value = torch.finfo(dtype).min
    if attention_mask is None:
        if not is_causal or query_length == 1:
            return None
        # causal with an offset: query t (of T, the last T of S positions) sees keys 0..S-T+t
        q = torch.arange(query_length, device=device).view(-1, 1) + (key_length - query_length)
        k = torch.arange(key_length, device=device).view(1, -1)
        return torch.zeros(1, 1, query_length, key_length, dtype=dtype, device=device).masked_fill(k > q, min_value)
    if attention_mask.dtype == torch.bool:
        return torch.zeros_like(attention_mask, dtype=dtype).masked_fill(~attention_mask, min_value)
    return attention_mask.to(dtype)


def decoder_dbsa_arcs(
    decoder_dbsa_heads: torch.Tensor, dec_valid: torch.Tensor, full_context: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The decoder parse loss's targets: for each decoder position, the position of its head, and which arcs the
    loss supervises.

    Args:
        decoder_dbsa_heads: `(B, T)` long, per label position the label position of its head (-100: none).
        dec_valid: `(B, T)` bool, the decoder positions that predict a label.
        full_context: supervise arcs to later tokens too (`decoder_dbsa_full_context`); otherwise they are left out,
            since a causal head cannot attend there.

    Returns:
        `(heads, valid)`, both `(B, T)`: decoder input t is label t-1, so label heads shift by one position.
    """
    T = decoder_dbsa_heads.shape[1]
    heads = torch.full_like(decoder_dbsa_heads, -100)
    heads[:, 1:] = torch.where(decoder_dbsa_heads[:, :-1] >= 0, decoder_dbsa_heads[:, :-1] + 1, -100)  # (B, T)
    valid = dec_valid & (heads >= 0) & (heads < T)
    valid &= dec_valid.gather(1, heads.clamp(0, T - 1))  # the head is a real decoder input
    if not full_context:
        valid &= heads <= torch.arange(T, device=heads.device)  # an arc to a later token cannot be predicted causally
    return heads, valid


def tree_distances(word_index: torch.Tensor, word_heads: torch.Tensor) -> torch.Tensor:
    """Distance in the dependency tree (number of edges) between the words of every two subword tokens.

    Args:
        word_index: `(B, S)` long, 1-based index of each token's word, 0 for special and padding tokens.
        word_heads: `(B, W)` long, UD heads of the words (1-based, 0 = root; padding words 0).

    Returns:
        `(B, S, S)` float distances; a special token is at distance 0 from itself and `inf` from every other token.
    """
    if word_heads.shape[1] == 0:  # a batch of empty sentences
        word_heads = word_heads.new_zeros(word_heads.shape[0], 1)
    B, W = word_heads.shape
    own = torch.arange(W, device=word_heads.device).expand(B, W)  # (B, W)
    parent = torch.where(word_heads > 0, word_heads - 1, own).clamp(0, W - 1)  # root -> itself
    # ancestors-or-self by pointer doubling: after step k, anc[w] holds the ancestors at distance <= 2^k
    anc = torch.nn.functional.one_hot(own, W).bool() | torch.nn.functional.one_hot(parent, W).bool()  # (B, W, W)
    jump = parent
    for _ in range(max(W - 1, 1).bit_length()):
        anc = anc | torch.gather(anc, 1, jump.unsqueeze(-1).expand(B, W, W))
        jump = torch.gather(jump, 1, jump)
    # in a tree every word's furthest ancestor is a root (its own parent); in a cycle it never is
    stuck = torch.gather(parent, 1, jump) != jump  # (B, W)
    if stuck.any():
        row = int(stuck.any(-1).nonzero()[0])
        raise ValueError(
            f"word_heads of batch row {row} contain a cycle: words {(stuck[row].nonzero().flatten() + 1).tolist()} "
            f"(1-based) never reach the root by following their heads {word_heads[row].tolist()}; tree "
            "distances need a tree (build word_heads from validated parses, e.g. align_parse(..., compute_tree=True))"
        )
    a = anc.float()
    n = a.sum(-1)  # (B, W) depth + 1
    # dist(u, v) = depth(u) + depth(v) - 2 depth(lca(u, v)); common ancestors = depth(lca) + 1
    dist_w = n.unsqueeze(-1) + n.unsqueeze(-2) - 2.0 * torch.bmm(a, a.transpose(1, 2))  # (B, W, W)
    idx = (word_index - 1).clamp(min=0)  # (B, S)
    S = idx.shape[1]
    dist = torch.gather(dist_w, 1, idx.unsqueeze(-1).expand(B, S, W))  # (B, S, W)
    dist = torch.gather(dist, 2, idx.unsqueeze(1).expand(B, S, S))  # (B, S, S)
    special = word_index <= 0  # (B, S)
    either = special.unsqueeze(-1) | special.unsqueeze(-2)  # (B, S, S)
    eye = torch.eye(S, dtype=torch.bool, device=dist.device)
    return dist.masked_fill(either, float("inf")).masked_fill(either & eye, 0.0)


def tree_weights(word_index: torch.Tensor, word_heads: torch.Tensor, window: int) -> torch.Tensor:
    """Syntax-directed attention weights `(B, S, S)` (Chen et al. 2017): exp(-d^2 / (2 sigma^2)), sigma = D / 2,
    for tree distance d <= D = `window`, else 0."""
    d = tree_distances(word_index, word_heads)
    sigma = window / 2.0
    return torch.exp(-d.square() / (2.0 * sigma**2)).masked_fill(d > window, 0.0)


class SyntaxMTAttention(MarianAttention):
    """Marian multi-head attention with syntax heads, in head order:

    - PASCAL heads (`num_pascal_heads`): scores scaled by the Gaussian around the parent (Eqs. 1-3 of PASCAL);
    - syntax-directed heads (`num_tree_heads`): probabilities weighted by a Gaussian of the tree distance;
    - bi-affine heads (`num_lisa_heads`, then `num_dbsa_heads`): `softmax(Q U K^T / sqrt(d))` (Eq. 4 of the
      synchronous syntactic attention paper), supervised by a parse loss computed by the model;
    - the remaining heads: the configured kernel (SDPA by default).

    A bi-affine head is a dot-product head whose query is `Q U`, so when no probability is needed (inference) it
    runs in the fast kernel with the others. With `syntax_store` (a dict, given by the model when it computes
    auxiliary losses) the bi-affine heads' masked logits are stored under `(side, layer, kind)`, and an attention
    with `record_probs` (the cross-attention of the synchronous layer) stores its head-averaged probabilities.
    With no syntax head this is exactly `MarianAttention`, except that `output_attentions=True` returns the
    probabilities of every head whatever the kernel.
    """

    def __init__(
        self,
        *args,
        num_pascal_heads: int = 0,
        num_tree_heads: int = 0,
        num_lisa_heads: int = 0,
        num_dbsa_heads: int = 0,
        record_probs: bool = False,
        alignment_bias: nn.Module | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        for proj, gain in ((self.q_proj, 2**-0.5), (self.k_proj, 2**-0.5), (self.v_proj, 2**-0.5), (self.out_proj, 1.0)):
            proj.xavier_gain = gain  # used by attention_init="xavier" (_init_weights)
        self.num_pascal_heads = num_pascal_heads
        # issue 4: structural alignment bias (cross-attention only); recording feeds the alignment-based losses
        self.alignment_bias = alignment_bias
        self.record_alignment, self.recorded_alignment = False, None
        self.num_tree_heads = num_tree_heads
        self.num_lisa_heads = num_lisa_heads
        self.num_dbsa_heads = num_dbsa_heads
        self.record_probs = record_probs
        num_biaffine = num_lisa_heads + num_dbsa_heads
        # U of Eq. 4, one (d, d) matrix per bi-affine head; initialised to the identity (a plain head)
        self.biaffine_u = nn.Parameter(torch.empty(num_biaffine, self.head_dim, self.head_dim)) if num_biaffine else None

    def _project(self, hidden_states, key_value_states, past_key_values):
        """q, k, v `(B, H, T|S, d)` with Marian's cache handling (self- and cross-attention)."""
        is_cross_attention = key_value_states is not None
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H, T, d)
        cache, is_updated = past_key_values, False
        if isinstance(past_key_values, EncoderDecoderCache):
            is_updated = past_key_values.is_updated.get(self.layer_idx)
            cache = past_key_values.cross_attention_cache if is_cross_attention else past_key_values.self_attention_cache
        if is_cross_attention and past_key_values is not None and is_updated:
            return query, cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        current = key_value_states if is_cross_attention else hidden_states
        kv_shape = (*current.shape[:-1], -1, self.head_dim)
        key = self.k_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        value = self.v_proj(current).view(kv_shape).transpose(1, 2)  # (B, H, S, d)
        if past_key_values is not None:
            key, value = cache.update(key, value, self.layer_idx)
            if is_cross_attention and isinstance(past_key_values, EncoderDecoderCache):
                past_key_values.is_updated[self.layer_idx] = True
        return query, key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values=None,
        attention_mask: torch.Tensor | None = None,
        parent_positions: torch.Tensor | None = None,
        tree_weights: torch.Tensor | None = None,
        syntax_store: dict | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`hidden_states` `(B, T, D)`; `parent_positions` `(B, T)` (PASCAL heads); `tree_weights` `(B, T, S)`
        (syntax-directed heads)."""
        output_attentions = kwargs.get("output_attentions", False)
        kp, kt, kb = self.num_pascal_heads, self.num_tree_heads, self.num_lisa_heads + self.num_dbsa_heads
        store = syntax_store is not None and (kb > 0 or self.record_probs)
        plain = self.alignment_bias is None and not self.record_alignment
        if kp + kt + kb == 0 and not output_attentions and not store and plain:
            return super().forward(hidden_states, key_value_states, past_key_values, attention_mask, **kwargs)

        input_shape = hidden_states.shape[:-1]  # (B, T)
        query, key, value = self._project(hidden_states, key_value_states, past_key_values)
        ob = kp + kt  # first bi-affine head
        if kb:
            q_u = torch.einsum("bhtd,hde->bhte", query[:, ob : ob + kb], self.biaffine_u)  # Eq. 4: Q_h U, (B, kb, T, d)
            query = torch.cat([query[:, :ob], q_u, query[:, ob + kb :]], dim=1)  # (B, H, T, d)
        # heads [0, n_eager) take the eager score path; the rest the configured kernel
        n_eager = self.num_heads if output_attentions or (store and self.record_probs) else ob + (kb if store else 0)
        dropout = self.dropout if self.training else 0.0
        mask = _additive_mask(
            attention_mask, query.shape[2], key.shape[2], self.is_causal and key_value_states is None,
            query.dtype, query.device,
        )  # (B|1, 1, T, S) or None  # fmt: skip
        if not plain:  # issue 4: structural alignment biases (see hf_syntax_mt.alignment)
            out, p = structural_alignment_attention(self, query, key, value, mask, past_key_values, dropout)
            if store and self.record_probs:
                syntax_store[("cross", self.layer_idx)] = p.mean(dim=1)  # (B, T, S), heads averaged
            attn_output = self.out_proj(out.reshape(*input_shape, -1).contiguous())  # (B, T, D)
            return attn_output, p if output_attentions else None

        outputs, probs = [], []
        if n_eager > 0:
            out, p = self._eager(query[:, :n_eager], key[:, :n_eager], value[:, :n_eager], mask, dropout,
                                 parent_positions, tree_weights, syntax_store if store else None)  # fmt: skip
            outputs.append(out)  # (B, T, n_eager, d)
            probs.append(p)
        if n_eager < self.num_heads:
            q, k, v = query[:, n_eager:], key[:, n_eager:], value[:, n_eager:]  # (B, H-n, T|S, d)
            interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, eager_attention_forward
            )
            out, _ = interface(self, q, k, v, attention_mask, dropout=dropout, scaling=self.scaling, **kwargs)
            outputs.append(out)  # (B, T, H-n, d)
        attn_output = torch.cat(outputs, dim=2) if len(outputs) > 1 else outputs[0]  # (B, T, H, d)
        attn_output = self.out_proj(attn_output.reshape(*input_shape, -1).contiguous())  # (B, T, D)
        return attn_output, (probs[0] if output_attentions else None)  # (B, H, T, S)

    def _eager(self, query, key, value, mask, dropout, parent_positions, tree_weights, syntax_store):
        """The first `n` heads by matmul-softmax: `query`/`key`/`value` `(B, n, T|S, d)`; returns `(B, T, n, d)`
        and probabilities `(B, n, T, S)`."""
        kp, kt = self.num_pascal_heads, self.num_tree_heads
        scores = torch.matmul(query, key.transpose(2, 3)) * self.scaling  # Eq. 1: S = Q K^T / sqrt(d), (B, n, T, S)
        if kp:
            if parent_positions is None:
                raise ValueError(
                    f"This layer has {kp} PASCAL heads and needs `parent_positions` (B, S): parse the source with "
                    "`hf_syntax_mt.data.SyntaxMTPreprocessor` or translate with the `syntax-translation` pipeline."
                )
            weights = pascal_weights(
                parent_positions, key.shape[2], self.config.pascal_sigma, self.config.pascal_weighting
            )  # D_p, (B, T, S)
            if self.training and self.config.parent_ignoring > 0:
                # parent ignoring: each row d_t of D_p is set to 1 with probability q, during training only
                ignore = torch.rand(weights.shape[:2], device=weights.device) < self.config.parent_ignoring  # (B, T)
                weights = weights.masked_fill(ignore.unsqueeze(-1), 1.0)
            pascal = scores[:, :kp] * weights.unsqueeze(1).to(scores.dtype)  # Eq. 2: n_tj = s_tj * d^p_tj
            scores = torch.cat([pascal, scores[:, kp:]], dim=1)  # (B, n, T, S)
        logits = scores if mask is None else scores + mask  # (B, n, T, S)
        probs = nn.functional.softmax(logits, dim=-1)  # (B, n, T, S)
        if kt:
            if tree_weights is None:
                raise ValueError(
                    f"This layer has {kt} syntax-directed heads and needs `word_index` and `word_heads`: prepare "
                    "data with `SyntaxMTPreprocessor(compute_tree=True)`."
                )
            # Chen et al. (2017): alpha_tj = align(t, j) * exp(-d_tree(t, j)^2 / (2 sigma^2)), no renormalisation
            tree = probs[:, kp : kp + kt] * tree_weights.unsqueeze(1).to(probs.dtype)  # (B, kt, T, S)
            probs = torch.cat([probs[:, :kp], tree, probs[:, kp + kt :]], dim=1)
        if syntax_store is not None:
            side = "decoder" if self.is_decoder else "encoder"
            ob = kp + kt
            for kind, k in (("lisa", self.num_lisa_heads), ("dbsa", self.num_dbsa_heads)):
                if k:
                    syntax_store[(side, self.layer_idx, kind)] = (
                        logits[:, ob : ob + k], scores[:, ob : ob + k], probs[:, ob : ob + k]
                    )  # masked logits, raw scores, probabilities: (B, k, T, S) each
                    ob += k
            if self.record_probs:
                syntax_store[("cross", self.layer_idx)] = probs.mean(dim=1)  # (B, T, S), heads averaged
        out = torch.matmul(nn.functional.dropout(probs, p=dropout, training=self.training), value)  # (B, n, T, d)
        return out.transpose(1, 2), probs


def _feed_forward(layer, hidden_states: torch.Tensor) -> torch.Tensor:
    """Marian's position-wise feed-forward sublayer with its residual connection and post-norm, `(B, T, D)`."""
    residual = hidden_states
    hidden_states = layer.activation_fn(layer.fc1(hidden_states))
    hidden_states = nn.functional.dropout(hidden_states, p=layer.activation_dropout, training=layer.training)
    hidden_states = layer.fc2(hidden_states)
    hidden_states = nn.functional.dropout(hidden_states, p=layer.dropout, training=layer.training)
    return layer.final_layer_norm(residual + hidden_states)


class SyntaxMTEncoderLayer(MarianEncoderLayer):
    """Marian encoder layer whose self-attention may have syntax heads."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        layout = config.encoder_head_layout(layer_idx)
        self.self_attn = SyntaxMTAttention(
            embed_dim=self.embed_dim,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
            **{f"num_{kind}_heads": k for kind, k in layout.items()},
        )
        # issue 5: context attention (Eq. 12) between self-attention and the feed-forward network
        self.context_index, self.context_attn = context_sublayer(config, "encoder", layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        parent_positions: torch.Tensor | None = None,
        tree_weights: torch.Tensor | None = None,
        syntax_store: dict | None = None,
        context_key_value: torch.Tensor | None = None,
        context_masks: ContextMasks | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """`context_key_value` `(B, 2, H, M, d)` and `context_masks`: document context, when this layer has a
        context attention and the batch has context."""
        residual = hidden_states
        hidden_states, _ = self.self_attn(
            hidden_states, attention_mask=attention_mask, parent_positions=parent_positions,
            tree_weights=tree_weights, syntax_store=syntax_store, **kwargs,
        )  # fmt: skip
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.self_attn_layer_norm(residual + hidden_states)  # B^(n), Eq. 11
        if self.context_attn is not None and context_key_value is not None:
            hidden_states = self.context_attn(hidden_states, context_key_value, context_masks)  # D^(n)

        return _feed_forward(self, hidden_states)  # Eqs. 13 / 18


class SyntaxMTDecoderLayer(MarianDecoderLayer):
    """Marian decoder layer: its self-attention may have DBSA heads (causal); the cross-attention of the
    synchronous layer records its probabilities for the synchronous loss."""

    def __init__(self, config: SyntaxMTConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        common = dict(dropout=config.attention_dropout, is_decoder=True, config=config, layer_idx=layer_idx)
        self.self_attn = SyntaxMTAttention(
            self.embed_dim, config.decoder_attention_heads, is_causal=True,
            num_dbsa_heads=config.decoder_head_layout(layer_idx)["dbsa"], **common,
        )  # fmt: skip
        biases = config.alignment_biases_of_layer(layer_idx)
        alignment_bias = (
            StructuralAlignmentBias(
                config.decoder_attention_heads, biases, config.alignment_window, config.alignment_bias_hidden_size
            )
            if biases
            else None
        )
        self.encoder_attn = SyntaxMTAttention(
            self.embed_dim, config.decoder_attention_heads, alignment_bias=alignment_bias,
            record_probs=config.uses_sync and layer_idx == config.sync_layer, **common,
        )  # fmt: skip
        # issue 5: context attention (Eq. 16) between self-attention and encoder-decoder attention
        self.context_index, self.context_attn = context_sublayer(config, "decoder", layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values=None,
        use_cache: bool | None = True,
        context_key_values: tuple[torch.Tensor, ...] | None = None,
        context_masks: ContextMasks | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """`MarianDecoderLayer.forward` with the context attention of Eq. 16 after the self-attention.
        `context_key_values`: the keys/values of every decoder context sublayer, a tuple of `(B, 2, H, M, d)`."""
        residual = hidden_states
        hidden_states, _ = self.self_attn(
            hidden_states, past_key_values=past_key_values, attention_mask=attention_mask, **kwargs
        )
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.self_attn_layer_norm(residual + hidden_states)  # E^(n), Eq. 15
        if self.context_attn is not None and context_key_values is not None:
            hidden_states = self.context_attn(
                hidden_states, context_key_values[self.context_index], context_masks
            )  # F^(n)
        if encoder_hidden_states is not None:  # Eq. 17
            residual = hidden_states
            hidden_states, _ = self.encoder_attn(
                hidden_states, key_value_states=encoder_hidden_states, attention_mask=encoder_attention_mask,
                past_key_values=past_key_values, **kwargs,
            )  # fmt: skip
            hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
            hidden_states = self.encoder_attn_layer_norm(residual + hidden_states)
        return _feed_forward(self, hidden_states)  # Eqs. 13 / 18


class SyntaxMTPreTrainedModel(MarianPreTrainedModel):
    config_class = SyntaxMTConfig
    config: SyntaxMTConfig
    # Every Marian weight keeps its name, so Marian checkpoints load as they are; the parameters added by some options
    # (bi-affine U, feature embeddings) are initialised by `_init_weights`.
    _no_split_modules = ["SyntaxMTEncoderLayer", "SyntaxMTDecoderLayer"]

    def _init_weights(self, module):
        super()._init_weights(module)
        if hasattr(module, "xavier_gain") and getattr(self.config, "attention_init", "normal") == "xavier":
            # fairseq MultiheadAttention.reset_parameters: larger initial scores for PASCAL's Gaussian to scale
            init.xavier_uniform_(module.weight, gain=module.xavier_gain)
        if isinstance(module, SyntaxMTAttention) and module.biaffine_u is not None:
            # U = I: a bi-affine head starts as a plain dot-product head (a retrofitted checkpoint is unchanged)
            eye = torch.eye(module.head_dim, dtype=module.biaffine_u.dtype, device=module.biaffine_u.device)
            init.copy_(module.biaffine_u, eye.expand_as(module.biaffine_u))
        if isinstance(module, StructuralAlignmentBias):  # issue 4: raw parameters, not nn.Linear
            module.reset_parameters()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained` plus self-contained remote code: a flat copy of the modules the config,
        model and pipeline classes need (`remote_code.build_bundle`), declared in `auto_map` (Auto classes with
        `trust_remote_code=True`) and `custom_pipelines`, which routes `pipeline("translation", model=DIR,
        trust_remote_code=True)` to `SyntaxTranslationPipeline`. The directory loads without `hf_syntax_mt`
        installed. Raises `RemoteCodeError` (before writing anything) if a needed module cannot be bundled."""
        from .pipeline_syntax_mt import SyntaxTranslationPipeline
        from .remote_code import build_bundle

        version = getattr(sys.modules.get(__package__ or ""), "__version__", "")
        bundle = build_bundle([type(self.config), SyntaxMTModel, SyntaxMTForConditionalGeneration,
                               SyntaxTranslationPipeline], version=version)  # fmt: skip
        self.config.auto_map = {
            "AutoConfig": bundle.reference(type(self.config)),
            "AutoModel": bundle.reference(SyntaxMTModel),
            "AutoModelForSeq2SeqLM": bundle.reference(SyntaxMTForConditionalGeneration),
        }
        self.config.custom_pipelines = {
            "translation": {
                "impl": bundle.reference(SyntaxTranslationPipeline),
                "pt": ["AutoModelForSeq2SeqLM"],
                "tf": [],
                "type": "text",
            }
        }
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            bundle.write(save_directory)


def check_parent_positions(parent_positions: torch.Tensor, input_shape: torch.Size, attention_mask=None) -> None:
    """Raise a clear error for `parent_positions` of the wrong shape or out of range (before any kernel runs)."""
    if parent_positions.shape != input_shape:
        raise ValueError(
            f"parent_positions has shape {tuple(parent_positions.shape)} but input_ids has shape "
            f"{tuple(input_shape)}: give one parent position per input token (B, S)."
        )
    if parent_positions.is_floating_point() and not torch.isfinite(parent_positions).all():
        raise ValueError("parent_positions contains NaN or infinite values.")
    valid = parent_positions >= 0
    valid &= parent_positions <= input_shape[-1] - 1
    if attention_mask is not None:
        valid |= attention_mask == 0  # padding may hold anything
    if not bool(valid.all()):
        b, t = (~valid).nonzero()[0].tolist()
        raise ValueError(
            f"parent_positions[{b}, {t}] = {parent_positions[b, t].item()} is outside 0..{input_shape[-1] - 1}: "
            "parent positions index subword tokens of the same (truncated) sequence."
        )


@dataclass
class SyntaxMTEncoderOutput(BaseModelOutput):
    r"""
    `BaseModelOutput` plus the document context the decoder reads (issue 5); batch-first, so `generate()` copies them
    for beams with the rest of the encoder outputs.

    context_key_values (`torch.FloatTensor` of shape `(batch_size, n_dec, 2, num_heads, context_length, head_dim)`):
        Keys and values of C^(N_c) for each decoder context attention (Eq. 16), computed once per sentence.
    context_attention_mask (`torch.LongTensor` of shape `(batch_size, context_length)`):
        1 for real context tokens.
    """

    context_key_values: torch.FloatTensor | None = None
    context_attention_mask: torch.Tensor | None = None


# Supervision given to `forward()` for the auxiliary losses only; the encoder ignores them (generate() passes every
# non-decoder keyword argument to the encoder).
_SUPERVISION = ("lisa_parents", "dbsa_heads")


class SyntaxMTEncoder(SyntaxMTPreTrainedModel, MarianEncoder):
    """Marian encoder with syntax heads and linguistic input features.

    Inputs besides Marian's (all `(B, S)` aligned with `input_ids` unless said otherwise): `parent_positions` (PASCAL),
    `word_index` + `word_heads` `(B, W)` (syntax-directed heads), `pos_ids` / `deprel_ids` / `subword_tag_ids`
    (input features).
    """

    _can_record_outputs = {"hidden_states": SyntaxMTEncoderLayer, "attentions": SyntaxMTAttention}

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTEncoderLayer(config, i) for i in range(config.encoder_layers)])
        features = config.input_features or []
        dim = config.d_model if config.feature_combination == "sum" else config.feature_embedding_dim
        # Sennrich & Haddow (2016): one embedding table per feature, id 0 = none
        self.feature_embeddings = nn.ModuleDict(
            {name: nn.Embedding(len(INPUT_FEATURES[name]) + 1, dim, padding_idx=0) for name in features}
        )
        self.context_encoder = ContextEncoder(config) if config.uses_context else None  # issue 5
        self.post_init()

    def embed(self, input_ids, features: dict[str, torch.Tensor | None]) -> torch.Tensor:
        """Token embeddings (scaled as Marian) combined with the feature embeddings, `(B, S, D)`."""
        embeds = self.embed_tokens(input_ids) * self.embed_scale  # (B, S, D)
        if not self.feature_embeddings:
            return embeds
        feats = []
        for name, table in self.feature_embeddings.items():
            ids = features.get(f"{name}_ids")
            if ids is None:
                raise ValueError(
                    f"This model uses the input feature {name!r} (input_features={self.config.input_features}) and "
                    f"needs `{name}_ids` (B, S): prepare data with `SyntaxMTPreprocessor(compute_features=True)`."
                )
            if ids.shape != input_ids.shape:
                raise ValueError(f"{name}_ids has shape {tuple(ids.shape)} but input_ids {tuple(input_ids.shape)}.")
            feats.append(table(ids))  # (B, S, d_f)
        if self.config.feature_combination == "sum":
            return embeds + sum(feats)  # E x + sum_k E_k f_k
        width = sum(f.shape[-1] for f in feats)
        return torch.cat([embeds[..., : embeds.shape[-1] - width], *feats], dim=-1)  # [E x ; E_1 f_1 ; ...]

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        parent_positions: torch.Tensor | None = None,
        word_index: torch.LongTensor | None = None,
        word_heads: torch.LongTensor | None = None,
        pos_ids: torch.LongTensor | None = None,
        deprel_ids: torch.LongTensor | None = None,
        subword_tag_ids: torch.LongTensor | None = None,
        syntax_store: dict | None = None,
        context_input_ids: torch.LongTensor | None = None,
        context_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> SyntaxMTEncoderOutput:
        for name in _SUPERVISION:
            kwargs.pop(name, None)
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            features = {"pos_ids": pos_ids, "deprel_ids": deprel_ids, "subword_tag_ids": subword_tag_ids}
            inputs_embeds = self.embed(input_ids, features)
        seq_len = inputs_embeds.shape[1]
        if seq_len > self.max_source_positions:
            raise ValueError(
                f"The input has {seq_len} tokens but max_position_embeddings={self.max_source_positions}: truncate "
                "the source (`SyntaxMTPreprocessor(max_source_length=...)` or `tokenizer(..., truncation=True)`)."
            )
        if self.config.uses_pascal:
            if parent_positions is None:
                raise ValueError(
                    f"This model has PASCAL heads (encoder_pascal_heads={self.config.encoder_pascal_heads}) and "
                    "needs `parent_positions` (B, S): prepare data with `hf_syntax_mt.data.SyntaxMTPreprocessor` or "
                    "translate raw text with `pipeline('syntax-translation', model=...)`."
                )
            check_parent_positions(parent_positions, inputs_embeds.shape[:2], attention_mask)
        weights = None
        if self.config.uses_tree:
            if word_index is None or word_heads is None:
                raise ValueError(
                    f"This model has syntax-directed heads (encoder_tree_heads={self.config.encoder_tree_heads}) and "
                    "needs `word_index` (B, S) and `word_heads` (B, W): prepare data with "
                    "`SyntaxMTPreprocessor(compute_tree=True)`."
                )
            if word_index.shape != inputs_embeds.shape[:2]:
                raise ValueError(f"word_index has shape {tuple(word_index.shape)} but the input {tuple(inputs_embeds.shape[:2])}.")
            weights = tree_weights(word_index, word_heads, self.config.tree_window)  # (B, S, S)

        context = self._encode_context(context_input_ids, context_attention_mask, inputs_embeds.shape[0])
        encoder_kv, decoder_kv, context_mask = context if context is not None else (None, None, None)

        hidden_states = inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])  # (B, S, D)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
        )
        # one (B, 2, H, M, d) per context sublayer; unbind, not indexing, so backward stacks once instead of
        # filling a zero tensor of every sublayer's keys and values per layer
        encoder_kv = encoder_kv.unbind(1) if encoder_kv is not None else None
        masks = context_masks(context_mask) if encoder_kv is not None else None  # once for every layer
        for layer in self.layers:
            if self.training and self.layerdrop > 0.0 and torch.rand([]) < self.layerdrop:
                continue
            context_kv = None
            if encoder_kv is not None and layer.context_attn is not None:
                context_kv = encoder_kv[layer.context_index]  # (B, 2, H, M, d)
            hidden_states = layer(
                hidden_states, mask, parent_positions=parent_positions, tree_weights=weights,
                syntax_store=syntax_store, context_key_value=context_kv, context_masks=masks,
                **kwargs,
            )  # fmt: skip
        return SyntaxMTEncoderOutput(
            last_hidden_state=hidden_states, context_key_values=decoder_kv, context_attention_mask=context_mask
        )

    def _encode_context(self, context_input_ids, context_attention_mask, batch_size: int):
        """Run the context encoder (Section 2.2) once: keys/values for the encoder's and the decoder's context
        attentions and the context mask, or `None` when there is no context to read.

        In training the context path always runs, on one padding token when the batch has no context: every
        document-level parameter then takes part in the loss (with a zero gradient), so a batch of first sentences
        trains with frozen sentence-level parameters and DDP finds no unused parameter."""
        if self.context_encoder is not None and self.training and torch.is_grad_enabled():
            if context_input_ids is None or context_input_ids.shape[-1] == 0:
                context_input_ids = torch.full(
                    (batch_size, 1), self.config.pad_token_id, dtype=torch.long, device=self.embed_tokens.weight.device
                )
                context_attention_mask = torch.zeros_like(context_input_ids)
        if context_input_ids is None:
            return None
        if self.context_encoder is None:
            logger.warning_once(
                "`context_input_ids` were given to a model without document context (context_sentences=0): they are "
                "ignored. Build the model with `context_sentences=k` to use them."
            )
            return None
        if context_input_ids.dim() != 2 or context_input_ids.shape[0] != batch_size:
            raise ValueError(
                f"context_input_ids has shape {tuple(context_input_ids.shape)} but the batch has {batch_size} rows: "
                "give (batch_size, context_length) ids (`hf_syntax_mt.data.documents.encode_context`)."
            )
        if context_attention_mask is None:
            context_attention_mask = torch.ones_like(context_input_ids)
        if context_attention_mask.shape != context_input_ids.shape:
            raise ValueError(
                f"context_attention_mask has shape {tuple(context_attention_mask.shape)} but context_input_ids "
                f"{tuple(context_input_ids.shape)}."
            )
        length = context_input_ids.shape[1]
        if length == 0:  # no row has context: the sentence-level model
            return None
        if length > self.max_source_positions:
            raise ValueError(
                f"The context has {length} tokens but max_position_embeddings={self.max_source_positions}: keep the "
                f"most recent tokens (`encode_context(..., max_length={self.config.resolved_max_context_length})`)."
            )
        embeds = self.embed_tokens(context_input_ids) * self.embed_scale  # (B, M, D)
        embeds = embeds + self.embed_positions(context_input_ids.shape)  # Eq. 4: X^c, embedding + position
        _, encoder_kv, decoder_kv = self.context_encoder(embeds, context_attention_mask)
        return encoder_kv, decoder_kv, context_attention_mask


class SyntaxMTDecoder(SyntaxMTPreTrainedModel, MarianDecoder):
    """Marian decoder whose attention modules return probabilities under any kernel."""

    _can_record_outputs = {
        "hidden_states": SyntaxMTDecoderLayer,
        "attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(SyntaxMTAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)
        self.layers = nn.ModuleList([SyntaxMTDecoderLayer(config, i) for i in range(config.decoder_layers)])
        self.post_init()


class SyntaxMTModel(SyntaxMTPreTrainedModel, MarianModel):
    """The bare syntax-aware Marian encoder-decoder (no LM head)."""

    _keys_to_ignore_on_load_missing = MarianModel._keys_to_ignore_on_load_missing

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)  # MarianModel: shared embeddings and their tying
        self.encoder = SyntaxMTEncoder(config)
        self.decoder = SyntaxMTDecoder(config)
        self.post_init()

    @staticmethod
    def _decoder_context(encoder_outputs) -> dict:
        """The decoder's share of the encoded document context (issue 5), as decoder-layer keyword arguments."""
        kv = getattr(encoder_outputs, "context_key_values", None)
        if kv is None:
            return {}
        # a tuple of (B, 2, H, M, d), one per decoder context sublayer (unbind: cheap backward, see the encoder)
        # masks built once per forward (one decoding step), not in every layer
        return {"context_key_values": kv.unbind(1), "context_masks": context_masks(encoder_outputs.context_attention_mask)}

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        parent_positions: torch.Tensor | None = None,
        word_index: torch.LongTensor | None = None,
        word_heads: torch.LongTensor | None = None,
        pos_ids: torch.LongTensor | None = None,
        deprel_ids: torch.LongTensor | None = None,
        subword_tag_ids: torch.LongTensor | None = None,
        syntax_store: dict | None = None,
        context_input_ids: torch.LongTensor | None = None,
        context_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        r"""
        parent_positions (`torch.FloatTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Entry t = position (in subword tokens, may be x.5) of the middle of token t's parent word; the root's
            parent is itself; special and padding tokens hold their own position. Required when the config has
            PASCAL heads; ignored when `encoder_outputs` is given.
        word_index (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            1-based index of each token's word (0 for special and padding tokens); syntax-directed heads.
        word_heads (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
            UD heads of the words (1-based, 0 = root); syntax-directed heads.
        pos_ids, deprel_ids, subword_tag_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Linguistic input features (ids in `INPUT_FEATURES`, 0 = none), for `config.input_features`.
        syntax_store (`dict`, *optional*):
            Filled with the bi-affine heads' logits and the synchronous layer's cross-attention for the auxiliary
            losses (the translation model passes it).
        context_input_ids (`torch.LongTensor` of shape `(batch_size, context_length)`, *optional*):
            Document context (`config.context_sentences > 0`): the previous k source sentences of the same document,
            tokenized with special tokens and concatenated, oldest first (`hf_syntax_mt.data.documents`). `None`,
            or a row with no real token, means no context: that row gets the sentence-level computation. Ignored
            when `encoder_outputs` is given (they carry the encoded context).
        context_attention_mask (`torch.Tensor` of shape `(batch_size, context_length)`, *optional*):
            1 for real context tokens, 0 for padding; defaults to all ones.
        """
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                parent_positions=parent_positions,
                word_index=word_index,
                word_heads=word_heads,
                pos_ids=pos_ids,
                deprel_ids=deprel_ids,
                subword_tag_ids=subword_tag_ids,
                syntax_store=syntax_store,
                context_input_ids=context_input_ids,
                context_attention_mask=context_attention_mask,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs[0],
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **({} if syntax_store is None else {"syntax_store": syntax_store}),
            **self._decoder_context(encoder_outputs),
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            past_key_values=decoder_outputs.past_key_values,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


@dataclass
class SyntaxMTSeq2SeqLMOutput(Seq2SeqLMOutput):
    r"""
    `Seq2SeqLMOutput` plus each term of the objective (already included in `loss`, unweighted here):

    translation_loss: the (label-smoothed) cross-entropy L_t.
    dbsa_loss: L_dep of Eq. 5, source and target parse losses of the DBSA heads.
    lisa_loss: the LISA heads' parse loss.
    sync_loss: L_sync of Eq. 9.
    fertility_loss: the global-fertility negative log-likelihood (before `config.global_fertility_weight`), when
        it is active.
    """

    translation_loss: torch.FloatTensor | None = None
    dbsa_loss: torch.FloatTensor | None = None
    lisa_loss: torch.FloatTensor | None = None
    sync_loss: torch.FloatTensor | None = None
    fertility_loss: torch.FloatTensor | None = None


AUXILIARY_LOSSES = ("dbsa_loss", "lisa_loss", "sync_loss", "fertility_loss")


def dependency_nll(logits: torch.Tensor, heads: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Summed -log P(head(t) = q) over valid tokens t, averaged over the heads of a layer (Eq. 5, one term).

    Args:
        logits: `(B, k, T, S)` masked attention logits of k supervised heads (softmax over S gives A_h).
        heads: `(B, T)` long, the position q of each token's head.
        valid: `(B, T)` bool, tokens that count.
    """
    B, k, T, S = logits.shape
    logp = nn.functional.log_softmax(logits.float(), dim=-1)  # (B, k, T, S)
    index = heads.clamp(0, S - 1).view(B, 1, T, 1).expand(B, k, T, 1)
    nll = -logp.gather(-1, index).squeeze(-1)  # (B, k, T)
    return nll.masked_fill(~valid.unsqueeze(1), 0.0).sum() / k


def synchronous_loss(E: torch.Tensor, D: torch.Tensor, C: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """L_sync of the synchronous syntactic attention paper, summed over the batch.

    Args:
        E: `(B, S, S)` encoder DBSA attention. D: `(B, T, T)` decoder DBSA attention (causal).
        C: `(B, T, S)` encoder-decoder attention of layer l_sync. valid: `(B, T)` bool, real target positions.
    """
    C, E = C.to(E.dtype), E
    mapped = C @ E @ C.transpose(1, 2)  # Eq. 7: D_mapped = C E C^T, (B, T, T)
    T = mapped.shape[-1]
    future = torch.ones(T, T, dtype=torch.bool, device=mapped.device).triu(1)  # (T, T)
    d_prime = nn.functional.softmax(mapped.masked_fill(future, float("-inf")), dim=-1)  # Eq. 8
    squared = (d_prime - D.to(d_prime.dtype)).square().masked_fill(future, 0.0).sum(-1)  # Eq. 9, (B, T)
    return squared.masked_fill(~valid, 0.0).sum()


class SyntaxMTForConditionalGeneration(SyntaxMTPreTrainedModel, MarianMTModel, GenerationMixin):
    """Syntax-aware Marian translation model.

    Load a Marian checkpoint with PASCAL heads added (the method adds no parameter)::

        model = SyntaxMTForConditionalGeneration.from_pretrained(marian_dir, encoder_pascal_heads=[8, 0, 0, 0, 0, 0])

    The loss is `L_t + dbsa_loss_weight * L_dep + lisa_loss_weight * L_lisa + sync_loss_weight * L_sync`; each term
    is summed over tokens and divided by the number of target tokens (the Trainer's `num_items_in_batch`), as
    fairseq normalises every term of a criterion, so gradient accumulation stays exact.
    """

    # The Trainer passes `num_items_in_batch` (target tokens over all accumulated micro-batches) and the loss is
    # normalised by it, so gradient accumulation gives exactly the gradient of the full batch.
    accepts_loss_kwargs = True
    _keys_to_ignore_on_load_missing = MarianMTModel._keys_to_ignore_on_load_missing
    _keys_to_ignore_on_save = MarianMTModel._keys_to_ignore_on_save

    def __init__(self, config: SyntaxMTConfig):
        super().__init__(config)  # MarianMTModel: LM head, final_logits_bias and weight tying
        self.model = SyntaxMTModel(config)
        # issue 4: global fertility (only when weighted), its schedule step, and the auxiliary losses for logging
        self.global_fertility = (
            GlobalFertility(config.d_model, config.alignment_bias_hidden_size) if config.uses_global_fertility else None
        )
        self.alignment_training_step = 0
        self.auxiliary_loss_log = {}
        self.post_init()

    def document_parameter_names(self) -> list[str]:
        """Names of theta_d, the document-level parameters (context encoder, context attentions and gates)."""
        return [name for name, _ in self.named_parameters() if is_document_parameter(name)]

    def freeze_sentence_level_parameters(self) -> list[str]:
        """Step 2 of the two-step training (Section 2.4): keep theta_s, every sentence-level parameter, fixed and
        train only theta_d. Sets `requires_grad` accordingly (the Trainer's optimizer then holds theta_d alone) and
        returns the names of the trainable parameters.

        Typical use, from a sentence-level model (ours or an opus-mt-style Marian checkpoint)::

            model = SyntaxMTForConditionalGeneration.from_pretrained(sentence_dir, context_sentences=2)
            model.freeze_sentence_level_parameters()
        """
        if not self.config.uses_context:
            raise ValueError(
                "This model has no document-level parameters (context_sentences=0): load it with "
                "`from_pretrained(..., context_sentences=2)` before freezing the sentence-level ones."
            )
        trainable = []
        for name, parameter in self.named_parameters():
            parameter.requires_grad_(is_document_parameter(name))
            if parameter.requires_grad:
                trainable.append(name)
        return trainable

    def translate_document(self, sentences: list[str], tokenizer, parser=None, **generate_kwargs) -> list[str]:
        """Translate one document (a list of source sentences, in order), each sentence with its previous
        `config.context_sentences` sentences as context; see `SyntaxTranslationPipeline.translate_document`.
        `parser` defaults to `config.source_parser` (models with PASCAL heads parse the input)."""
        from .pipeline_syntax_mt import SyntaxTranslationPipeline

        pipe = SyntaxTranslationPipeline(model=self, tokenizer=tokenizer, parser=parser)
        return pipe.translate_document(sentences, **generate_kwargs)

    def align(self, input_ids, labels, **kwargs):
        """Source-target alignments from a decoder layer's cross-attention: see `hf_syntax_mt.alignment.align`."""
        from .alignment import align

        return align(self, input_ids, labels, **kwargs)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values=None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        parent_positions: torch.Tensor | None = None,
        word_index: torch.LongTensor | None = None,
        word_heads: torch.LongTensor | None = None,
        pos_ids: torch.LongTensor | None = None,
        deprel_ids: torch.LongTensor | None = None,
        subword_tag_ids: torch.LongTensor | None = None,
        lisa_parents: torch.LongTensor | None = None,
        dbsa_heads: torch.LongTensor | None = None,
        decoder_dbsa_heads: torch.LongTensor | None = None,
        context_input_ids: torch.LongTensor | None = None,
        context_attention_mask: torch.Tensor | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> SyntaxMTSeq2SeqLMOutput:
        r"""
        parent_positions, word_index, word_heads, pos_ids, deprel_ids, subword_tag_ids, context_input_ids,
        context_attention_mask:
            See [`SyntaxMTModel.forward`].
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Target token ids, -100 for ignored positions; the loss uses `config.label_smoothing`.
        lisa_parents (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Training only: position of the first subword of each token's head word (LISA heads' targets).
        dbsa_heads (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Training only: DBSA subword head of each source token (encoder DBSA heads' targets).
        decoder_dbsa_heads (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Training only: DBSA subword head of each *label* token, as a position in `labels` (-100: none). The
            model shifts it onto the decoder inputs like `labels`.
        num_items_in_batch (`int`, *optional*):
            Number of target tokens in the whole (accumulated) batch; the Trainer passes it. Every loss term is then
            summed and divided by it instead of averaged over this micro-batch.
        """
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = shift_tokens_right(
                    labels, self.config.pad_token_id, self.config.decoder_start_token_id
                )
        config = self.config
        need_store = (
            (config.uses_lisa and lisa_parents is not None)
            or (config.uses_encoder_dbsa and dbsa_heads is not None)
            or (config.uses_decoder_dbsa and decoder_dbsa_heads is not None)
            or (config.uses_sync and labels is not None)
        ) and past_key_values is None
        store: dict | None = {} if need_store else None
        fertility_on = (  # issue 4: global fertility, after `global_fertility_start_step` training steps
            labels is not None
            and self.global_fertility is not None
            and self.alignment_training_step >= self.config.global_fertility_start_step
        )
        with recording_alignment(self, enabled=fertility_on) as alignment:
            outputs = self.model(
                input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                encoder_outputs=encoder_outputs,
                decoder_attention_mask=decoder_attention_mask,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                decoder_inputs_embeds=decoder_inputs_embeds,
                use_cache=use_cache,
                parent_positions=parent_positions,
                word_index=word_index,
                word_heads=word_heads,
                pos_ids=pos_ids,
                deprel_ids=deprel_ids,
                subword_tag_ids=subword_tag_ids,
                syntax_store=store,
                context_input_ids=context_input_ids,
                context_attention_mask=context_attention_mask,
                **kwargs,
            )
        logits = self.lm_head(outputs[0]) + self.final_logits_bias  # (B, T, V)
        loss = translation_loss = None
        if labels is not None:
            translation_loss = nn.functional.cross_entropy(
                logits.view(-1, logits.shape[-1]).float(),
                labels.view(-1).to(logits.device),
                ignore_index=-100,
                label_smoothing=float(config.label_smoothing),
                reduction="sum",
            )
            normalizer = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum().clamp(min=1)
            translation_loss = translation_loss / normalizer
            loss = translation_loss
        aux = {}
        if store:
            aux = self._auxiliary_losses(store, labels, attention_mask, lisa_parents, dbsa_heads, decoder_dbsa_heads)
            if labels is not None:
                aux = {name: value / normalizer for name, value in aux.items()}
                weights = {"dbsa_loss": config.dbsa_loss_weight, "lisa_loss": config.lisa_loss_weight,
                           "sync_loss": config.sync_loss_weight}  # fmt: skip
                loss = loss + sum(weights[name] * value for name, value in aux.items())  # Eq. 6
        if fertility_on:
            aux["fertility_loss"] = self.global_fertility.loss(
                alignment.probs, outputs.encoder_last_hidden_state, attention_mask, labels != -100, num_items_in_batch
            )
            loss = loss + self.config.global_fertility_weight * aux["fertility_loss"]
            log_auxiliary_losses(self, translation_loss=translation_loss, fertility_loss=aux["fertility_loss"])
        return SyntaxMTSeq2SeqLMOutput(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
            translation_loss=translation_loss,
            **aux,
        )

    def _auxiliary_losses(self, store, labels, attention_mask, lisa_parents, dbsa_heads, decoder_dbsa_heads):
        """Summed (not yet normalised) auxiliary losses from what the attention modules stored."""
        aux: dict[str, torch.Tensor] = {}

        def add(name, value):
            aux[name] = aux[name] + value if name in aux else value

        enc_probs, dec_probs, cross = [], [], None
        dec_valid = None
        for key, value in store.items():
            if key[0] == "cross":
                cross = value  # (B, T, S)
                continue
            side, _, kind = key
            logits, raw, probs = value  # (B, k, T, S)
            B, _, T, _ = logits.shape
            if side == "encoder":
                valid = (
                    torch.ones(B, T, dtype=torch.bool, device=logits.device)
                    if attention_mask is None else attention_mask.bool()
                )  # fmt: skip
                if kind == "dbsa":
                    enc_probs.append(probs.mean(1))  # (B, S, S)
                target = lisa_parents if kind == "lisa" else dbsa_heads
                if target is not None:
                    add(f"{kind}_loss", dependency_nll(logits, target.to(logits.device), valid & (target >= 0)))
                continue
            # decoder DBSA: position k holds label k-1 (shifted like labels), position 0 the start token. The real
            # decoder positions are those that predict a label: a padded batch must give the loss of each sentence
            # alone, so the final label (</s>) never counts as an input even when padding follows it.
            if dec_valid is None:
                dec_valid = torch.ones(B, T, dtype=torch.bool, device=logits.device)
                if labels is not None:
                    dec_valid = labels.to(logits.device) != -100
            dec_probs.append(probs.mean(1))  # (B, T, T)
            if decoder_dbsa_heads is None:
                continue
            full = self.config.decoder_dbsa_full_context
            heads, valid = decoder_dbsa_arcs(decoder_dbsa_heads.to(logits.device), dec_valid, full)
            if full:
                # training-only view over the whole target: the same bi-affine scores, padding keys masked
                keys = torch.zeros_like(raw[:, :1, :1, :]).masked_fill(~dec_valid[:, None, None, :], float("-inf"))
                logits = raw + keys
            add("dbsa_loss", dependency_nll(logits, heads, valid))
        if self.config.uses_sync and labels is not None and enc_probs and dec_probs and cross is not None:
            # several DBSA heads (or layers) are combined by averaging their attention matrices; C averages the
            # heads of layer l_sync
            E = torch.stack(enc_probs).mean(0)  # (B, S, S)
            D = torch.stack(dec_probs).mean(0)  # (B, T, T)
            aux["sync_loss"] = synchronous_loss(E, D, cross, dec_valid)
        return aux

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate`; a multi-task model starts every output with its `"translate"` task token
        unless `forced_bos_token_id` or `decoder_input_ids` say otherwise."""
        if self.config.task_token_ids and "forced_bos_token_id" not in kwargs and "decoder_input_ids" not in kwargs:
            kwargs["forced_bos_token_id"] = self.config.task_token_ids["translate"]
        self._cap_generation_length(kwargs)
        return super().generate(*args, **kwargs)

    def _cap_generation_length(self, kwargs: dict) -> None:
        """In place: cap `max_new_tokens` / `max_length` so that the decoder never reads a position past
        `max_position_embeddings` (an opaque `IndexError` deep in the position embedding otherwise), with a warning.

        The decoder reads every output token but the last, so an output of L tokens (decoder start token included)
        needs L - 1 positions."""
        limit = self.config.max_position_embeddings + 1  # longest output, decoder start token included
        config = kwargs.get("generation_config") or self.generation_config
        start = kwargs["decoder_input_ids"].shape[-1] if kwargs.get("decoder_input_ids") is not None else 1
        max_new = kwargs.get("max_new_tokens", config.max_new_tokens)
        max_length = kwargs.get("max_length", config.max_length)
        if max_new is not None and start + max_new > limit:
            logger.warning(
                f"max_new_tokens={max_new} after {start} decoder token(s) would pass the model's "
                f"max_position_embeddings={self.config.max_position_embeddings}: generating at most {limit - start} "
                "new tokens."
            )
            kwargs["max_new_tokens"] = limit - start
        elif max_new is None and max_length is not None and max_length > limit:
            logger.warning(
                f"max_length={max_length} would pass the model's max_position_embeddings="
                f"{self.config.max_position_embeddings}: generating at most {limit} tokens (decoder start included)."
            )
            kwargs["max_length"] = limit


__all__ = [
    "AUXILIARY_LOSSES",
    "SyntaxMTAttention",
    "SyntaxMTSeq2SeqLMOutput",
    "dependency_nll",
    "synchronous_loss",
    "tree_distances",
    "tree_weights",
    "SyntaxMTForConditionalGeneration",
    "SyntaxMTModel",
    "SyntaxMTPreTrainedModel",
    "pascal_weights",
]
