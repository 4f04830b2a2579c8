"""Bilingual symmetry (Cohn et al. 2016, Section 3.3) as a `PreTrainedModel`: two `SyntaxMTForConditionalGeneration`
directions (s->t and t->s) in one model with its own config, trained jointly with the trace bonus

    L = -log p(t|s) - log p(s|t) + gamma * B,   B = -tr(alpha_{s->t} alpha_{t->s})

so that `Seq2SeqTrainer` checkpoints it (and resumes it) like any model, and `save_pretrained` / `from_pretrained` /
`AutoModel` load it. In the spirit of fairseq's `transformer_align.py`: a small wrapper, the math lives in
`hf_syntax_mt.alignment` (`symmetry_trace`, `recording_alignment`).

    config = SymmetricTranslationConfig(forward=fr_en.config, backward=en_fr.config, symmetry_weight=0.5)
    model = SymmetricTranslationModel(config)                         # random weights, or
    model = SymmetricTranslationModel.from_directions(fr_en, en_fr, symmetry_weight=0.5)   # two trained models
    model.save_pretrained("runs/joint"); AutoModel.from_pretrained("runs/joint")
    model.align(input_ids, labels, reverse_input_ids, reverse_labels, method="intersection")
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

try:  # transformers >= 5.20; before, composite configs list their parts in `sub_configs`
    from transformers.configuration_utils import SubConfigSpec
except ImportError:  # pragma: no cover - exercised by `make test-floors`
    SubConfigSpec = None

from .alignment.cross_attention import align, recording_alignment, symmetry_trace
from .configuration_syntax_mt import SyntaxMTConfig
from .errors import UserError
from .modeling_syntax_mt import SyntaxMTForConditionalGeneration


@strict
class SymmetricTranslationConfig(PreTrainedConfig):
    """Both directions' configs and the symmetry options.

    Args:
        forward (`SyntaxMTConfig` or dict): the s->t model.
        backward (`SyntaxMTConfig` or dict): the t->s model (ids must be shared with the forward target vocabulary:
            the reverse inputs are the forward labels).
        symmetry_weight (`float`, defaults to 0.0): gamma of the trace bonus (0: two independent models).
        forward_alignment_layer, backward_alignment_layer (`int`, *optional*): decoder layers whose cross-attention
            is compared (default: each direction's `resolved_alignment_layer`).
    """

    model_type = "syntax_mt_symmetric"
    if SubConfigSpec is not None:
        sub_configs_defaults = {
            "forward": SubConfigSpec(config_class=SyntaxMTConfig),
            "backward": SubConfigSpec(config_class=SyntaxMTConfig),
        }
    else:
        sub_configs = {"forward": SyntaxMTConfig, "backward": SyntaxMTConfig}
    forward: SyntaxMTConfig | dict | None = None
    backward: SyntaxMTConfig | dict | None = None
    symmetry_weight: float | int = 0.0
    forward_alignment_layer: int | None = None
    backward_alignment_layer: int | None = None

    def __post_init__(self, **kwargs):
        for side in ("forward", "backward"):  # dicts -> SyntaxMTConfig (what `sub_configs_defaults` does on >= 5.20)
            value = getattr(self, side)
            if value is None or isinstance(value, dict):
                setattr(self, side, SyntaxMTConfig(**(value or {})))
        super().__post_init__(**kwargs)
        self.validate_symmetric()  # a plain ValueError at creation, not strict's wrapper

    def validate_symmetric(self):
        """Part of `@strict` validation."""
        if isinstance(self.symmetry_weight, bool) or not self.symmetry_weight >= 0:
            raise UserError(f"symmetry_weight={self.symmetry_weight!r} must be a number >= 0.")
        for side in ("forward", "backward"):
            layer, config = getattr(self, f"{side}_alignment_layer"), getattr(self, side)
            if layer is not None and not 0 <= layer < config.decoder_layers:
                raise UserError(f"{side}_alignment_layer={layer} but the {side} model has "
                                 f"decoder_layers={config.decoder_layers}.")  # fmt: skip

    @property
    def alignment_layers(self) -> tuple[int, int]:
        return (
            self.forward.resolved_alignment_layer
            if self.forward_alignment_layer is None
            else self.forward_alignment_layer,
            self.backward.resolved_alignment_layer
            if self.backward_alignment_layer is None
            else self.backward_alignment_layer,
        )


@dataclass
class SymmetricTranslationOutput(ModelOutput):
    """Loss L = -log p(t|s) - log p(s|t) + gamma * B of the joint model, and its parts.

    Args:
        loss: the total loss.
        forward_loss, backward_loss: translation losses (per target token, incl. any global-fertility term).
        symmetry_bonus: B = -tr(alpha_{s->t} alpha_{t->s}) summed over the batch / forward target tokens (before
            gamma).
    """

    loss: torch.Tensor | None = None
    forward_loss: torch.Tensor | None = None
    backward_loss: torch.Tensor | None = None
    symmetry_bonus: torch.Tensor | None = None


class SymmetricTranslationModel(PreTrainedModel):
    """Two translation directions trained jointly with the bilingual-symmetry trace bonus (see the module docstring).

    Works with `Seq2SeqTrainer` (checkpoints, resume) and `DataCollatorForSymmetricTranslation` (the reverse
    direction's inputs are the forward labels and vice versa). `forward_model` and `backward_model` are ordinary
    `SyntaxMTForConditionalGeneration`s; `save_directions(dir)` writes each as its own model directory.

    The older call `SymmetricTranslationModel(forward_model, backward_model, symmetry_weight=..., layers=...)` still
    works (it is `from_directions`).
    """

    config_class = SymmetricTranslationConfig
    base_model_prefix = "symmetric"
    main_input_name = "input_ids"
    _no_split_modules = ["SyntaxMTEncoderLayer", "SyntaxMTDecoderLayer"]
    # each direction's loss is a mean over its own tokens, so the Trainer scales for gradient accumulation itself
    accepts_loss_kwargs = False

    def __init__(self, config, backward_model=None, symmetry_weight: float | None = None, layers=None):
        if isinstance(config, PreTrainedModel):  # the pre-PreTrainedModel signature: two direction models
            forward_model = config
            config = _config_from_directions(forward_model, backward_model, symmetry_weight, layers)
            super().__init__(config)
            self.forward_model, self.backward_model = forward_model, backward_model
            config.forward, config.backward = forward_model.config, backward_model.config
        else:
            super().__init__(config)
            self.forward_model = SyntaxMTForConditionalGeneration(config.forward)
            self.backward_model = SyntaxMTForConditionalGeneration(config.backward)
            self.post_init()

    @classmethod
    def from_directions(cls, forward_model, backward_model, symmetry_weight: float | None = None, layers=None):
        """Join two trained direction models (their weights are kept, not re-initialised)."""
        return cls(forward_model, backward_model, symmetry_weight, layers)

    def _init_weights(self, module):
        self.forward_model._init_weights(module)

    @property
    def symmetry_weight(self) -> float:
        return float(self.config.symmetry_weight)

    @property
    def layers(self) -> tuple[int, int]:
        return self.config.alignment_layers

    def forward(
        self,
        input_ids: torch.LongTensor,
        labels: torch.LongTensor,
        reverse_input_ids: torch.LongTensor,
        reverse_labels: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        reverse_attention_mask: torch.Tensor | None = None,
    ) -> SymmetricTranslationOutput:
        """`input_ids` `(B, I)` / `labels` `(B, J)` for s->t; `reverse_input_ids` `(B, J)` / `reverse_labels` `(B, I)`."""
        gamma, (layer_st, layer_ts) = self.symmetry_weight, self.layers
        with (
            recording_alignment(self.forward_model, layer_st, enabled=gamma > 0) as rec_st,
            recording_alignment(self.backward_model, layer_ts, enabled=gamma > 0) as rec_ts,
        ):
            out_st = self.forward_model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
            out_ts = self.backward_model(
                input_ids=reverse_input_ids, attention_mask=reverse_attention_mask, labels=reverse_labels
            )
        loss = out_st.loss + out_ts.loss
        bonus = None
        if gamma > 0:
            forward_mask, backward_mask = labels != -100, reverse_labels != -100  # (B, J), (B, I)
            trace = symmetry_trace(rec_st.probs, rec_ts.probs, forward_mask, backward_mask)  # (B,)
            bonus = -trace.sum() / forward_mask.sum().clamp(min=1)  # B = -tr(alpha_st alpha_ts)
            loss = loss + gamma * bonus
        return SymmetricTranslationOutput(
            loss=loss, forward_loss=out_st.loss, backward_loss=out_ts.loss, symmetry_bonus=bonus
        )

    @torch.no_grad()
    def align(self, input_ids, labels, reverse_input_ids, reverse_labels, attention_mask=None,
              reverse_attention_mask=None, method: str = "intersection", source_word_ids=None,
              target_word_ids=None, shift: bool = False, heads: int | None = None,
              layers: tuple[int, int] | None = None) -> list[set[tuple[int, int]]]:  # fmt: skip
        """Hard links (source index, target index) per pair from both directions, symmetrised with ``method``
        (``forward``, ``backward``, ``intersection``, ``union``, ``grow-diag-final-and``); tokens, or words when the
        word ids of each side are given; ``shift``: Shift-Att in both directions, ``heads``: how many first heads
        of each direction's layer are averaged (as for `alignment.align`); ``layers``: the (forward, backward)
        decoder layers read (default: `layers`, each direction's alignment layer)."""
        from .alignment.words import symmetrize

        layers = self.layers if layers is None else tuple(layers)
        for side, layer, config in zip(("forward", "backward"), layers, (self.config.forward, self.config.backward),
                                       strict=True):  # fmt: skip
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < config.decoder_layers:
                raise UserError(f"layer {layer!r} of the {side} direction: it has decoder layers 0 to "
                                 f"{config.decoder_layers - 1}")  # fmt: skip

        if attention_mask is None:  # the source tokens are the reverse labels
            attention_mask = (reverse_labels != -100).long()
        if reverse_attention_mask is None:  # the target tokens are the forward labels
            reverse_attention_mask = (labels != -100).long()
        st = align(self.forward_model, input_ids, labels, attention_mask, layers[0], source_word_ids,
                   target_word_ids, shift=shift, heads=heads)  # fmt: skip
        ts = align(self.backward_model, reverse_input_ids, reverse_labels, reverse_attention_mask, layers[1],
                   target_word_ids, source_word_ids, shift=shift, heads=heads)  # fmt: skip
        out = []
        for a, b in zip(st, ts, strict=True):
            forward, backward = set(a.links), {(i, j) for j, i in b.links}  # t->s links flipped to (source, target)
            if method == "forward":
                out.append(forward)
            elif method == "backward":
                out.append(backward)
            else:
                out.append(symmetrize(forward, backward, method))
        return out

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained` plus self-contained remote code, as the direction models save theirs
        (`remote_code`): a flat copy of the modules this config and model need, declared in `auto_map`, so that
        ``AutoModel.from_pretrained(dir, trust_remote_code=True)`` loads the joint model without `hf_syntax_mt`.
        Raises `RemoteCodeError` (before writing anything) if a needed module cannot be bundled."""
        import sys

        from .remote_code import build_bundle

        version = getattr(sys.modules.get(__package__ or ""), "__version__", "")
        bundle = build_bundle([SymmetricTranslationConfig, SymmetricTranslationModel], version=version)
        self.config.auto_map = {
            "AutoConfig": bundle.reference(SymmetricTranslationConfig),
            "AutoModel": bundle.reference(SymmetricTranslationModel),
        }
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            bundle.write(save_directory)

    def save_directions(self, save_directory: str | os.PathLike, **kwargs) -> tuple[str, str]:
        """Write `save_directory/forward` and `save_directory/backward` with `save_pretrained`; returns both paths."""
        paths = (os.path.join(save_directory, "forward"), os.path.join(save_directory, "backward"))
        self.forward_model.save_pretrained(paths[0], **kwargs)
        self.backward_model.save_pretrained(paths[1], **kwargs)
        return paths


@dataclass
class DataCollatorForSymmetricTranslation:
    """Pad a batch of `{"input_ids": [...], "labels": [...]}` rows for both directions of `SymmetricTranslationModel`.

    Returns `input_ids`/`attention_mask` `(B, I)` and `labels` `(B, J)` for s->t, and `reverse_input_ids`/
    `reverse_attention_mask` `(B, J)` (the target tokens) and `reverse_labels` `(B, I)` (the source tokens) for t->s.
    Padding: `pad_token_id` in inputs, `label_pad_token_id` (-100) in labels, 0 in masks; right padding.
    """

    pad_token_id: int
    reverse_pad_token_id: int | None = None
    label_pad_token_id: int = -100

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise UserError("cannot collate an empty list of features")
        for n, row in enumerate(features):
            if "input_ids" not in row or "labels" not in row:
                raise UserError(f"feature {n} needs 'input_ids' and 'labels'; got keys {sorted(row)}")
        source = [list(row["input_ids"]) for row in features]
        target = [[t for t in row["labels"] if t != self.label_pad_token_id] for row in features]
        reverse_pad = self.pad_token_id if self.reverse_pad_token_id is None else self.reverse_pad_token_id

        def pad(rows, value, length):
            return torch.tensor([r + [value] * (length - len(r)) for r in rows], dtype=torch.long)

        n_src, n_tgt = max(map(len, source)), max(map(len, target))
        masks_s = [[1] * len(r) for r in source]
        masks_t = [[1] * len(r) for r in target]
        return {
            "input_ids": pad(source, self.pad_token_id, n_src),
            "attention_mask": pad(masks_s, 0, n_src),
            "labels": pad(target, self.label_pad_token_id, n_tgt),
            "reverse_input_ids": pad(target, reverse_pad, n_tgt),
            "reverse_attention_mask": pad(masks_t, 0, n_tgt),
            "reverse_labels": pad(source, self.label_pad_token_id, n_src),
        }


def _config_from_directions(forward_model, backward_model, symmetry_weight, layers) -> SymmetricTranslationConfig:
    gamma = forward_model.config.symmetry_weight if symmetry_weight is None else symmetry_weight
    layers = (None, None) if layers is None else tuple(layers)
    return SymmetricTranslationConfig(forward=forward_model.config.to_dict(), backward=backward_model.config.to_dict(),
                                      symmetry_weight=gamma, forward_alignment_layer=layers[0],
                                      backward_alignment_layer=layers[1])  # fmt: skip


__all__ = [
    "DataCollatorForSymmetricTranslation",
    "SymmetricTranslationConfig",
    "SymmetricTranslationModel",
    "SymmetricTranslationOutput",
]
