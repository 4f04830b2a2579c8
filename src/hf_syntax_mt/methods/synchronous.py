"""The synchronous syntactic attention loss: the encoder's DBSA attention E, mapped into the target space by the
cross-attention C of decoder layer l_sync (Eq. 7), is pulled towards the decoder's DBSA attention D (Eqs. 8-9)."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from ..validation import Option, check_decoder_layer, check_weight, checking
from .base import Method
from .biaffine import Biaffine, decoder_valid


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


class Synchronous(Method):
    name = "synchronous"
    inference_needs = None  # a training-only loss on the DBSA heads (which fold into q_proj: `Biaffine`)
    config_options = {
        "sync_loss_weight": Option(
            "float | int",
            0.0,
            """lambda_sync of Eq. 6 (synchronous syntactic attention); > 0 needs DBSA heads in encoder and decoder.""",
            check=checking(check_weight, "0 switches the synchronous loss off"),
        ),
        "sync_cross_attention_layer": Option(
            "int | None",
            None,
            """l_sync, the decoder layer (0-based) whose encoder-decoder attention C maps E into the target space
            (Eq. 7). Default: the penultimate layer (the paper's 5 of 6).""",
            check=checking(check_decoder_layer, "0-based, or None for the penultimate layer, which the paper uses"),
        ),
    }
    losses = ("sync_loss",)
    tester_config = {"encoder_dbsa_heads": [1, 0], "decoder_dbsa_heads": [1, 0], "sync_loss_weight": 0.5}
    trainable = ("biaffine_u",)

    @staticmethod
    def sync_layer(config) -> int:
        """l_sync, 0-based: `sync_cross_attention_layer`, else the penultimate decoder layer."""
        if config.sync_cross_attention_layer is not None:
            return config.sync_cross_attention_layer
        return max(config.decoder_layers - 2, 0)

    def active(self, config) -> bool:
        return config.sync_loss_weight > 0

    def supervision_columns(self, config) -> tuple[str, ...]:
        # the loss reads the DBSA heads' attention, which is recorded only where their trees are given
        return ("dbsa_heads",) if self.active(config) else ()

    def validate(self, config) -> None:
        if self.active(config) and not (Biaffine.uses_encoder_dbsa(config) and Biaffine.uses_decoder_dbsa(config)):
            raise UserError(
                f"sync_loss_weight={config.sync_loss_weight} needs DBSA heads in both the encoder and the decoder "
                f"(encoder_dbsa_heads={config.encoder_dbsa_heads}, decoder_dbsa_heads={config.decoder_dbsa_heads})."
            )

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Synchronous syntactic attention loss (Eqs. 6-9), lambda_sync={config.sync_loss_weight}, "
                f"l_sync = decoder layer {self.sync_layer(config)}.")  # fmt: skip

    def wants_record(self, model, batch):
        if batch.get("labels") is None:
            return False, set()
        return True, {self.sync_layer(model.config)}

    def loss(self, model, record, batch, outputs):
        enc = [r.probs.mean(1) for r in record.of_kind("encoder", "dbsa")]  # (B, S, S) each
        dec = [r.probs.mean(1) for r in record.of_kind("decoder", "dbsa")]  # (B, T, T) each
        cross = record.cross.get(self.sync_layer(model.config))
        if batch.get("labels") is None or not enc or not dec or cross is None:
            return {}
        # several DBSA heads (or layers) are combined by averaging their attention matrices; C averages the heads of
        # layer l_sync
        E, D = torch.stack(enc).mean(0), torch.stack(dec).mean(0)  # (B, S, S), (B, T, T)
        valid = decoder_valid(batch["labels"], D.shape[:2], D.device)
        return {"sync_loss": synchronous_loss(E, D, cross.mean(dim=1), valid)}

    def loss_weights(self, config):
        return {"sync_loss": config.sync_loss_weight}
