"""Structural alignment biases on cross-attention (Cohn et al. 2016, "Incorporating Structural Alignment Biases into
an Attentional Neural Translation Model"), adapted to the Transformer.

What lives here:

- `StructuralAlignmentBias`: per-head logit bias of a decoder layer's cross-attention from the position bias (Eq. 6),
  the Markov condition (Eq. 7) and local fertility features, through a small tanh layer (the paper's `v tanh(W ...)`).
- `structural_alignment_attention`: the eager cross-attention path that adds that bias, keeps the decoding state in
  the cache, and records probabilities for the alignment-based losses.
- `GlobalFertility`: the contextual Normal fertility model N(f_i; mu(h_i), sigma^2(h_i)) whose negative
  log-likelihood is added to the loss after a pre-training phase.
- the joint training of both directions with the trace bonus lives in `hf_syntax_mt.symmetric` (the model and
  `DataCollatorForSymmetricTranslation`); both names still import from here.
- `align` / `Alignment` / `plot_alignment`: alignments out of a chosen layer's cross-attention, and a PNG plot.
- `AlignmentTrainingCallback`: feeds the Trainer's step to the fertility schedule and logs the auxiliary losses.

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

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback
from transformers import initialization as init
from transformers.cache_utils import DynamicLayer, EncoderDecoderCache

__all__ = [
    "Alignment",
    "AlignmentStateLayer",
    "AlignmentTrainingCallback",
    "GlobalFertility",
    "StructuralAlignmentBias",
    "align",
    "plot_alignment",
    "recording_alignment",
    "structural_alignment_attention",
    "symmetry_trace",
]


# ----------------------------------------------------------------------------------------------------------------
# Local biases: position, Markov, local fertility
# ----------------------------------------------------------------------------------------------------------------


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
        A, T, k = self.hidden_size, query_length, self.window
        W = self.feature_weight  # (F, A)
        device, dtype = W.device, W.dtype
        pre = self.feature_bias  # (A,)
        f = 0
        if self.position:
            # Eq. 6: W^(ap) psi(j, i, I), psi = (log(1+j), log(1+i), log(1+I)); J is never used
            log_j = torch.log1p(torch.arange(T, device=device, dtype=dtype) + query_offset)  # (T,)
            log_i = torch.log1p(torch.arange(S, device=device, dtype=dtype))  # (S,)
            log_I = torch.log1p(key_valid.sum(-1).to(dtype))  # (B,)
            pre = pre + log_j.view(1, T, 1, 1) * W[0] + log_i.view(1, 1, S, 1) * W[1]  # (1, T, S, A)
            pre = pre + log_I.view(B, 1, 1, 1) * W[2]  # (B, T, S, A)
            f = 3
        state = None
        if self.needs_base_attention:
            alpha0 = base.mean(dim=1)  # heads averaged: the layer's bias-free alignment, (B, T, S)
            if previous is None:
                previous = alpha0.new_zeros(B, 1, S)
            if cumulative is None:
                cumulative = alpha0.new_zeros(B, 1, S)
            windows = []
            if self.markov:
                prev_rows = torch.cat([previous, alpha0[:, :-1]], dim=1)  # alpha0_{j-1}, (B, T, S)
                windows.append(_window(prev_rows, k))  # Eq. 7: xi1(alpha_{j-1}; i), (B, T, S, 2k+1)
            # running[j] = sum_{j' < j} alpha0_{j'}: exclusive cumulative sum over target positions, (B, T+1, S)
            running = torch.cumsum(torch.cat([cumulative, alpha0], dim=1), dim=1)
            if self.fertility:  # local fertility xi2(alpha_{<j}; i), (B, T, S, 2k+1)
                windows.append(_window(running[:, :-1], k))
            state = (alpha0[:, -1:], running[:, -1:])  # (B, 1, S) each
            feats = torch.cat(windows, dim=-1) if len(windows) > 1 else windows[0]  # (B, T, S, K')
            pre = torch.matmul(feats, W[f : f + feats.shape[-1]]) + pre  # W^(am) xi1 + W^(af) xi2 + ..., (B, T, S, A)
        else:
            pre = pre.expand(B, T, S, A)
        hidden = torch.tanh(pre)  # (B, T, S, A)
        bias = torch.matmul(hidden, self.output_weight.t())  # v_h^T tanh(...), (B, T, S, H)
        return bias.permute(0, 3, 1, 2), state  # (B, H, T, S)


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
        raise TypeError(
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


def structural_alignment_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    past_key_values: Any,
    dropout: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager cross-attention with the structural alignment bias of `module.alignment_bias` (if any).

    Args:
        module: a `SyntaxMTAttention` (cross-attention of a decoder layer).
        query: `(B, H, T, d)`; key, value: `(B, H, S, d)`.
        mask: additive `(B|1, 1, T, S)` or None.
        past_key_values: the `EncoderDecoderCache` during cached decoding, else None.
        dropout: attention dropout probability (0 in evaluation).

    Returns:
        `(B, T, H, d)` attention output (before `out_proj`) and probabilities `(B, H, T, S)`. When
        `module.record_alignment` is set the probabilities are also kept in `module.recorded_alignment`.
    """
    B, H, T, _ = query.shape
    S = key.shape[2]
    scores = torch.matmul(query, key.transpose(2, 3)) * module.scaling  # q_j k_i^T / sqrt(d), (B, H, T, S)
    if mask is not None:
        scores = scores + mask
    bias_module = module.alignment_bias
    if bias_module is not None:
        if mask is None:
            key_valid = torch.ones(B, S, dtype=torch.bool, device=query.device)
        else:
            key_valid = (mask[:, 0, -1] > torch.finfo(mask.dtype).min / 2).expand(B, S)  # (B, S)
        base = nn.functional.softmax(scores, dim=-1) if bias_module.needs_base_attention else None  # alpha0
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
        scores = scores + bias
    probs = nn.functional.softmax(scores, dim=-1)  # (B, H, T, S)
    if module.record_alignment:
        module.recorded_alignment = probs
    out = torch.matmul(nn.functional.dropout(probs, p=dropout, training=module.training), value)  # (B, H, T, d)
    return out.transpose(1, 2), probs


@contextlib.contextmanager
def recording_alignment(model: nn.Module, layer: int | None = None, enabled: bool = True):
    """Within the block, the cross-attention of decoder layer `layer` (default `config.resolved_alignment_layer`)
    of `model` (a `SyntaxMTForConditionalGeneration`) keeps its probabilities; read them as `recorded.probs`
    `(B, H, T, S)` (with gradient) after the forward call. Nesting on the same layer is allowed. Not compatible with
    gradient checkpointing of the decoder layers (the recomputed forward would record again)."""
    recorded = _Recorded()
    if not enabled:
        yield recorded
        return
    layer = model.config.resolved_alignment_layer if layer is None else layer
    layers = model.model.decoder.layers
    if not 0 <= layer < len(layers):
        raise ValueError(
            f"layer={layer} but the decoder has {len(layers)} layers: give an index in 0..{len(layers) - 1}."
        )
    attn = layers[layer].encoder_attn
    was_recording = attn.record_alignment
    attn.record_alignment = True
    try:
        yield recorded
        recorded.probs = attn.recorded_alignment
    finally:
        attn.record_alignment = was_recording
        if not was_recording:
            attn.recorded_alignment = None


@dataclass
class _Recorded:
    probs: torch.Tensor | None = None


# ----------------------------------------------------------------------------------------------------------------
# Global fertility
# ----------------------------------------------------------------------------------------------------------------


class GlobalFertility(nn.Module):
    """Contextual fertility model p(f_i | s, i) = N(mu(h_i), sigma^2(h_i)) of Cohn et al. (2016).

    mu and sigma^2 are positive functions of the final encoder state h_i: `Linear(D, A) -> tanh -> Linear(A, 2)`,
    then softplus (plus 1e-3 on sigma^2 for stability). Its `nn.Linear`s are initialised by `_init_weights`.
    """

    def __init__(self, d_model: int, hidden_size: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, hidden_size)
        self.fc2 = nn.Linear(hidden_size, 2)

    def forward(self, encoder_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`(B, S, D)` -> mu, sigma^2 `(B, S)`."""
        out = self.fc2(torch.tanh(self.fc1(encoder_states)))  # (B, S, 2)
        mu = nn.functional.softplus(out[..., 0])
        var = nn.functional.softplus(out[..., 1]) + 1e-3
        return mu, var

    def loss(
        self,
        probs: torch.Tensor,
        encoder_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        target_mask: torch.Tensor,
        num_items: int | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Negative log-likelihood of the observed fertilities, normalised like the translation loss.

        Args:
            probs: `(B, H, T, S)` cross-attention probabilities of the alignment layer (averaged over heads here).
            encoder_states: `(B, S, D)`.
            attention_mask: `(B, S)` source mask (None: no padding).
            target_mask: `(B, T)` 1 for real target tokens (labels != -100).
            num_items: number of target tokens to divide by (the Trainer's `num_items_in_batch`); default: the
                target tokens of this batch. The paper adds sum_i -log p(f_i) to the per-sentence loss, a sum over
                target tokens, so dividing both by the same count keeps its relative weight.

        Returns:
            scalar: sum over real source tokens of -log N(f_i; mu_i, sigma_i^2), divided by `num_items`.
        """
        alpha = probs.mean(dim=1)  # heads averaged, (B, T, S)
        f = torch.einsum("bts,bt->bs", alpha, target_mask.to(alpha.dtype))  # f_i = sum_j alpha_ji, (B, S)
        mu, var = self(encoder_states)  # (B, S) each
        nll = 0.5 * torch.log(2 * math.pi * var) + (f - mu.to(f.dtype)).square() / (2 * var)  # -log N(f; mu, s^2)
        if attention_mask is not None:
            nll = nll * attention_mask.to(nll.dtype)
        denominator = target_mask.sum() if num_items is None else num_items
        return nll.sum() / denominator


# ----------------------------------------------------------------------------------------------------------------
# Bilingual symmetry
# ----------------------------------------------------------------------------------------------------------------


def symmetry_trace(
    forward_probs: torch.Tensor,
    backward_probs: torch.Tensor,
    forward_target_mask: torch.Tensor,
    backward_target_mask: torch.Tensor,
) -> torch.Tensor:
    """tr(alpha_{s->t} alpha_{t->s}) per sentence pair, with heads averaged and padding masked.

    Args:
        forward_probs: `(B, H, J, I)` cross-attention of the s->t model (target positions x source tokens).
        backward_probs: `(B, H, I, J)` cross-attention of the t->s model (source positions x target tokens).
        forward_target_mask: `(B, J)` 1 for real target tokens (rows of alpha_{s->t}).
        backward_target_mask: `(B, I)` 1 for real source tokens (rows of alpha_{t->s}).

    Returns:
        `(B,)`: sum_j sum_i alpha_{s->t}[j, i] alpha_{t->s}[i, j]. Heads are combined by their mean (each matrix
        stays row-stochastic); padded rows are zeroed, padded columns are already 0 after the masked softmax.
    """
    st = forward_probs.mean(dim=1) * forward_target_mask.unsqueeze(-1).to(forward_probs.dtype)  # (B, J, I)
    ts = backward_probs.mean(dim=1) * backward_target_mask.unsqueeze(-1).to(backward_probs.dtype)  # (B, I, J)
    if st.shape[1:] != ts.shape[1:][::-1]:
        raise ValueError(
            f"alpha_s->t has shape {tuple(st.shape)} and alpha_t->s {tuple(ts.shape)}: the reverse direction must use "
            "the forward labels as inputs and the forward inputs as labels (DataCollatorForSymmetricTranslation)."
        )
    return (st * ts.transpose(1, 2)).sum(dim=(1, 2))  # tr(alpha_st alpha_ts), (B,)


# ----------------------------------------------------------------------------------------------------------------
# Alignments out
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Alignment:
    """Alignment of one sentence pair.

    Attributes:
        soft: `(J, I)` float tensor: row j = attention (heads averaged) when predicting target unit j, over source
            units i (subword tokens, or words when word ids were given). Rows sum to 1 at token level.
        links: hard links `(i, j)` (source index, target index): for every target unit j its argmax source unit.
    """

    soft: torch.Tensor
    links: list[tuple[int, int]] = field(default_factory=list)

    def pharaoh(self) -> str:
        """Links as `"i-j i-j ..."` (source-target, 0-based), the format of fast_align and GIZA++ tools."""
        return " ".join(f"{i}-{j}" for i, j in self.links)


def _word_matrix(word_ids: Sequence[int | None], n: int) -> tuple[torch.Tensor, int]:
    """`(n_words, n)` one-hot matrix of token -> word (tokens with word id None dropped)."""
    ids = [w for w in word_ids[:n]]
    words = sorted({w for w in ids if w is not None})
    index = {w: r for r, w in enumerate(words)}
    m = torch.zeros(len(words), n)
    for t, w in enumerate(ids):
        if w is not None:
            m[index[w], t] = 1.0
    return m, len(words)


@torch.no_grad()
def align(
    model: nn.Module,
    input_ids: torch.LongTensor,
    labels: torch.LongTensor,
    attention_mask: torch.Tensor | None = None,
    layer: int | None = None,
    source_word_ids: Sequence[Sequence[int | None]] | None = None,
    target_word_ids: Sequence[Sequence[int | None]] | None = None,
    **model_kwargs,
) -> list[Alignment]:
    """Source-target alignments from the cross-attention of decoder layer `layer`, heads averaged.

    Args:
        model: a `SyntaxMTForConditionalGeneration`.
        input_ids: `(B, I)` source ids; `attention_mask` `(B, I)` (default: all ones).
        labels: `(B, J)` target ids (-100 = padding), as for training; row j of the result is the attention used
            to predict `labels[:, j]`.
        layer: decoder layer (default: `config.resolved_alignment_layer`).
        source_word_ids, target_word_ids: per pair, the word index of every token (`None` for special tokens), as
            given by a fast tokenizer's `word_ids()`. With them the matrix is per word: a target word's row is the
            mean of its subword rows, a source word's column the sum of its subword columns.
        **model_kwargs: passed to the model (e.g. `parent_positions`).

    Returns:
        one `Alignment` per pair, padding removed.
    """
    was_training = model.training
    model.eval()
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    try:
        with recording_alignment(model, layer) as rec:
            model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **model_kwargs)
    finally:
        model.train(was_training)
    probs = rec.probs.mean(dim=1).float().cpu()  # (B, J, I)
    result = []
    for b in range(input_ids.shape[0]):
        n_src = int(attention_mask[b].sum())
        n_tgt = int((labels[b] != -100).sum())
        soft = probs[b, :n_tgt, :n_src]  # (J, I)
        if target_word_ids is not None:
            m, _ = _word_matrix(target_word_ids[b], n_tgt)
            soft = (m @ soft) / m.sum(1, keepdim=True).clamp(min=1)  # mean of the word's subword rows
        if source_word_ids is not None:
            m, _ = _word_matrix(source_word_ids[b], n_src)
            soft = soft @ m.T  # sum of the word's subword columns
        links = [(int(i), j) for j, i in enumerate(soft.argmax(dim=-1).tolist())] if soft.numel() else []
        result.append(Alignment(soft=soft, links=links))
    return result


def plot_alignment(
    alignment: Alignment | torch.Tensor,
    path: str | os.PathLike,
    source_tokens: Sequence[str] | None = None,
    target_tokens: Sequence[str] | None = None,
    title: str | None = None,
) -> str:
    """Write the alignment matrix (target rows x source columns, hard links circled) to a PNG file.

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change). Returns the path.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    soft = alignment.soft if isinstance(alignment, Alignment) else alignment
    soft = soft.detach().float().cpu().numpy()
    n_tgt, n_src = soft.shape
    fig = Figure(figsize=(max(3.0, 0.45 * n_src + 1.5), max(3.0, 0.45 * n_tgt + 1.0)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(soft, cmap="Greys", vmin=0.0, vmax=max(1e-6, float(soft.max())), aspect="auto")
    if isinstance(alignment, Alignment) and alignment.links:
        i, j = zip(*alignment.links, strict=True)
        ax.scatter(i, j, s=60, facecolors="none", edgecolors="tab:red", linewidths=1.2)
    ax.set_xticks(range(n_src))
    ax.set_yticks(range(n_tgt))
    if source_tokens is not None:
        ax.set_xticklabels(list(source_tokens)[:n_src], rotation=90)
    if target_tokens is not None:
        ax.set_yticklabels(list(target_tokens)[:n_tgt])
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(os.fspath(path), format="png", dpi=100)
    return os.fspath(path)


# ----------------------------------------------------------------------------------------------------------------
# Trainer integration
# ----------------------------------------------------------------------------------------------------------------


def _translation_models(model: nn.Module):
    return [m for m in model.modules() if hasattr(m, "alignment_training_step")]


class AlignmentTrainingCallback(TrainerCallback):
    """Feeds `state.global_step` to every wrapped model's `alignment_training_step` (the global-fertility schedule:
    `config.global_fertility_start_step`) and adds the mean auxiliary losses since the last log
    (`fertility_loss`, `translation_loss`, and for `SymmetricTranslationModel` `forward_loss`, `backward_loss`,
    `symmetry_bonus`) to the Trainer's logs."""

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            for m in _translation_models(model):
                m.alignment_training_step = state.global_step

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.on_step_begin(args, state, control, model=model)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if model is None or logs is None:
            return
        extra = {}
        for prefix, m in _prefixed_models(model):
            for name, (total, count) in m.auxiliary_loss_log.items():
                if count:
                    extra[f"{prefix}{name}"] = round(float(total) / count, 6)
            m.auxiliary_loss_log.clear()
        logs.update(extra)
        if state.log_history and extra:
            state.log_history[-1].update(extra)


def _prefixed_models(model: nn.Module):
    if hasattr(model, "forward_model") and hasattr(model, "backward_model"):  # SymmetricTranslationModel
        return [("forward_", model.forward_model), ("backward_", model.backward_model), ("", model)]
    return [("", model)] if hasattr(model, "auxiliary_loss_log") else []  # a SyntaxMTForConditionalGeneration


def log_auxiliary_losses(model: nn.Module, **losses: torch.Tensor | None) -> None:
    """Accumulate detached auxiliary losses in `model.auxiliary_loss_log` (training only) for the callback."""
    if not model.training:
        return
    log = model.auxiliary_loss_log
    for name, value in losses.items():
        if value is not None:
            total, count = log.get(name, (0.0, 0))
            log[name] = (total + value.detach(), count + 1)


def __getattr__(name: str):
    # the joint model moved to `hf_syntax_mt.symmetric` (a PreTrainedModel now); the old import path still works
    if name in ("SymmetricTranslationModel", "SymmetricTranslationOutput", "SymmetricTranslationConfig",
                "DataCollatorForSymmetricTranslation"):
        from . import symmetric

        return getattr(symmetric, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
