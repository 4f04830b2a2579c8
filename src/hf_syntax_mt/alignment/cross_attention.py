"""Alignments out of a model's cross-attention, and the Trainer hook of the alignment methods.

- `recording_alignment`: keep a decoder layer's cross-attention probabilities during a forward call;
- `align` / `Alignment` / `plot_alignment`: alignments out of a chosen layer's cross-attention, and a PNG plot;
- `symmetry_trace`: tr(alpha_{s->t} alpha_{t->s}), the bilingual-symmetry bonus;
- `AlignmentTrainingCallback`: feeds the Trainer's step to the global-fertility schedule.

The structural alignment biases (Cohn et al. 2016) live in `hf_syntax_mt.methods.alignment_bias` (the bias module
and its decoding state) and `hf_syntax_mt.methods.fertility` (global fertility); the joint training of both
directions with the trace bonus in `hf_syntax_mt.symmetric`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import TrainerCallback

from ..errors import UserError

__all__ = [
    "Alignment",
    "AlignmentTrainingCallback",
    "align",
    "alignment_read",
    "plot_alignment",
    "recording_alignment",
    "symmetry_trace",
]


@contextlib.contextmanager
def recording_alignment(model: nn.Module, layer: int | None = None, enabled: bool = True):
    """Within the block, the cross-attention of decoder layer `layer` (default `config.resolved_alignment_layer`)
    of `model` (a `SyntaxMTForConditionalGeneration`) is kept in the forward call's `AttentionRecord`; read it as
    `recorded.probs` `(B, H, T, S)` (with gradient) after the call. Nesting is allowed. Not compatible with gradient
    checkpointing of the decoder layers (the recomputed forward would record again)."""
    recorded = _Recorded()
    if not enabled:
        yield recorded
        return
    layer = model.config.resolved_alignment_layer if layer is None else layer
    n = len(model.model.decoder.layers)
    if not 0 <= layer < n:
        raise UserError(f"layer={layer} but the decoder has {n} layers: give an index in 0..{n - 1}.")
    model.record_cross_layers.append(layer)
    try:
        yield recorded
        record = model.last_attention_record
        recorded.probs = record.cross.get(layer) if record is not None else None
    finally:
        model.record_cross_layers.remove(layer)
        if not model.record_cross_layers:
            model.last_attention_record = None


@dataclass
class _Recorded:
    probs: torch.Tensor | None = None


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
        raise UserError(
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
        soft: `(J, I)` float tensor: row j = attention (read heads averaged) when predicting target unit j, over source
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


def alignment_read(config, layer: int | None = None, heads: int | None = None) -> tuple[int, int]:
    """The decoder layer `align` reads and how many of its first heads it averages (see `align` for the defaults)."""
    from ..methods.guided_alignment import GuidedAlignment

    guided = GuidedAlignment().active(config)
    guided_layer = GuidedAlignment.layer(config)
    if layer is None:
        layer = guided_layer if guided else config.resolved_alignment_layer
    n = config.decoder_attention_heads
    if heads is None:
        heads = config.guided_alignment_heads if guided and layer == guided_layer else n
    if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= n:
        raise UserError(f"heads={heads!r}: give how many of the layer's first heads to average, 1 to {n} "
                         "(decoder_attention_heads), or None for the default")  # fmt: skip
    return layer, heads


@torch.no_grad()
def align(
    model: nn.Module,
    input_ids: torch.LongTensor,
    labels: torch.LongTensor,
    attention_mask: torch.Tensor | None = None,
    layer: int | None = None,
    source_word_ids: Sequence[Sequence[int | None]] | None = None,
    target_word_ids: Sequence[Sequence[int | None]] | None = None,
    shift: bool = False,
    heads: int | None = None,
    **model_kwargs,
) -> list[Alignment]:
    """Source-target alignments from the cross-attention of decoder layer `layer`, its first `heads` heads averaged.

    Args:
        model: a `SyntaxMTForConditionalGeneration`.
        input_ids: `(B, I)` source ids; `attention_mask` `(B, I)` (default: all ones).
        labels: `(B, J)` target ids (-100 = padding), as for training; row j of the result is the attention used
            to predict `labels[:, j]`.
        layer: decoder layer (default: the guided-alignment layer of a model trained with guided alignment, else
            `config.resolved_alignment_layer`).
        source_word_ids, target_word_ids: per pair, the word index of every token (`None` for special tokens), as
            given by a fast tokenizer's `word_ids()`. With them the matrix is per word: a target word's row is the
            mean of its subword rows, a source word's column the sum of its subword columns.
        shift: Shift-Att (Chen et al. 2020, EMNLP): read the row of `labels[:, j]` at the step where it is the
            decoder *input* (row j + 1) instead of the step that predicts it (row j, Naive-Att). The last token
            (`</s>`) is never an input: its row is zero.
        heads: how many of the layer's first heads are averaged. Default: the `guided_alignment_heads` that guided
            alignment supervised when `layer` is its layer (as fairseq's `alignment_heads`: the other heads of that
            layer are free to attend elsewhere), else all heads.
        **model_kwargs: passed to the model (e.g. `parent_positions`).

    Returns:
        one `Alignment` per pair, padding removed.
    """
    layer, heads = alignment_read(model.config, layer, heads)
    was_training = model.training
    model.eval()
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    try:
        with recording_alignment(model, layer) as rec:
            model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **model_kwargs)
    finally:
        model.train(was_training)
    probs = rec.probs[:, :heads].mean(dim=1).float().cpu()  # (B, H, J, I) -> (B, J, I)
    result = []
    for b in range(input_ids.shape[0]):
        n_src = int(attention_mask[b].sum())
        n_tgt = int((labels[b] != -100).sum())
        soft = probs[b, :n_tgt, :n_src]  # (J, I)
        if shift and n_tgt:  # Shift-Att: y_j aligned at step j + 1, where y_j is the decoder input
            soft = torch.cat([probs[b, 1:n_tgt, :n_src], probs.new_zeros(1, n_src)])
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
    `config.global_fertility_start_step`). The terms of the objective (`fertility_loss`, `translation_loss`, and for
    `SymmetricTranslationModel` `forward_loss`, `backward_loss`, `symmetry_bonus`) are model outputs, logged by
    `SyntaxMTTrainer` (one place, exact under gradient accumulation), which adds this callback itself."""

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            for m in _translation_models(model):
                m.alignment_training_step = state.global_step

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.on_step_begin(args, state, control, model=model)
