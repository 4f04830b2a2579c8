"""Guided alignment (Garg et al. 2019, "Jointly Learning to Align and Translate with Transformer Models"; as
fairseq's `transformer_align`, OpenNMT-py and Marian): the cross-attention of one decoder layer, averaged over its
first `guided_alignment_heads` heads, is supervised by external alignments (e.g. eflomal's) with the loss
L_a = -sum_t log A[t, a_t] over the target tokens t that have an aligned source token a_t (Garg et al.'s
alignment loss, as fairseq's `label_smoothed_cross_entropy_with_alignment` computes it, with one link per target
token; the paper is not among ../shared/papers), added with weight `guided_alignment_weight`.

Supervision: `decoder_alignment` `(B, T)`, per *label* position the source subword position it aligns to (-100:
none), built from a Pharaoh file per training pair by `hf_syntax_mt.alignment.targets.AlignmentTargets`.
"""

from __future__ import annotations

import torch

from ..validation import Option, check_decoder_layer, check_int, check_weight, checking
from .base import Method
from .columns import Column, DataTransform


def guided_alignment_nll(probs: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """-sum log A[b, t, a_t] over the valid target positions.

    Args:
        probs: `(B, T, S)` supervised attention (rows sum to 1 over the source).
        target: `(B, T)` long, the aligned source position of each target position.
        valid: `(B, T)` bool, target positions that have a link (and are real labels).
    """
    S = probs.shape[-1]
    # L_a = -sum_t log A[t, a_t] (Garg et al. 2019's alignment loss, one link per target token)
    p = probs.float().gather(-1, target.clamp(0, S - 1).unsqueeze(-1)).squeeze(-1)  # A[b, t, a_t], (B, T)
    return -(p.clamp_min(torch.finfo(torch.float32).tiny).log().masked_fill(~valid, 0.0)).sum()


class GuidedAlignment(Method):
    name = "guided_alignment"
    inference_needs = None  # a training-only loss on a cross-attention
    config_options = {
        "guided_alignment_weight": Option(
            "float | int",
            0.0,
            """Guided alignment (Garg et al. 2019): weight of the loss -sum_t log A[t, a_t] that supervises a
            cross-attention with external alignments (`decoder_alignment`, e.g. from eflomal through
            `hf_syntax_mt.alignment.targets.AlignmentTargets`); 0 (default) switches it off. Garg et al. use 0.05.""",
            check=checking(check_weight, "0 switches guided alignment off; Garg et al. use 0.05"),
        ),
        "guided_alignment_layer": Option(
            "int | None",
            None,
            """The supervised decoder layer (0-based); `None` (default): `resolved_alignment_layer`.""",
            check=checking(
                check_decoder_layer, "or None for the model's alignment layer (Garg et al.: the penultimate)"
            ),
        ),
        "guided_alignment_heads": Option(
            "int",
            1,
            """The first k heads of that layer, averaged, are supervised (Garg et al.: one head).""",
        ),
    }
    supervision = (Column("decoder_alignment", "target"),)  # from `alignment.targets.AlignmentTargets`
    transforms = (
        DataTransform(
            "Guided-alignment targets", "hf_syntax_mt.alignment.targets:add_alignment_targets", training_only=True,
            reads="alignment", flag="{split}_alignment_file",
            missing="guided_alignment_weight={guided_alignment_weight} trains on word alignments: give "
                    "--train_alignment_file (Pharaoh, one line per training pair, e.g. from eflomal)",
            enable="--config_overrides guided_alignment_weight=0.05 (Garg et al.'s weight)",
        ),
    )  # fmt: skip
    losses = ("alignment_loss",)
    tester_config = {"guided_alignment_weight": 0.5}
    trainable = ("model.decoder.layers.1.encoder_attn",)  # the tester's supervised (last) layer

    def active(self, config) -> bool:
        return config.guided_alignment_weight > 0

    @staticmethod
    def layer(config) -> int:
        if config.guided_alignment_layer is not None:
            return config.guided_alignment_layer
        return config.resolved_alignment_layer

    def validate(self, config) -> None:
        check_int(config, "guided_alignment_heads", 1, config.decoder_attention_heads, hint="at most "
                  "decoder_attention_heads; the first k heads of the layer are averaged and supervised; Garg et al. "
                  "supervise 1")  # fmt: skip

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Guided alignment (Garg et al. 2019): the first {config.guided_alignment_heads} head(s) of decoder "
                f"layer {self.layer(config)}'s cross-attention supervised by external alignments, weight "
                f"{config.guided_alignment_weight}.")  # fmt: skip

    def wants_record(self, model, batch):
        if batch.get("labels") is None or batch.get("decoder_alignment") is None:
            return False, set()
        return False, {self.layer(model.config)}

    def loss(self, model, record, batch, outputs):
        target, labels = batch.get("decoder_alignment"), batch.get("labels")
        probs = record.cross.get(self.layer(model.config))
        if target is None or labels is None or probs is None:
            return {}
        attention = probs[:, : model.config.guided_alignment_heads].mean(dim=1)  # (B, T, S)
        target = target.to(attention.device)
        valid = (target >= 0) & (labels.to(attention.device) != -100)  # (B, T)
        return {"alignment_loss": guided_alignment_nll(attention, target, valid)}

    def loss_weights(self, config):
        return {"alignment_loss": config.guided_alignment_weight}
