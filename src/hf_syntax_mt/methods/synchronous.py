"""The synchronous syntactic attention loss: the encoder's DBSA attention E, mapped into the target space by the
cross-attention C of decoder layer l_sync (Eq. 7), is pulled towards the decoder's DBSA attention D (Eqs. 8-9)."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from .biaffine import decoder_valid
from .registry import Method, check_decoder_layer, check_weight


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
    fields = ("sync_loss_weight", "sync_cross_attention_layer")
    losses = ("sync_loss",)
    tester_config = {"encoder_dbsa_heads": [1, 0], "decoder_dbsa_heads": [1, 0], "sync_loss_weight": 0.5}
    trainable = ("biaffine_u",)

    def active(self, config) -> bool:
        return config.uses_sync

    def validate(self, config) -> None:
        check_weight(config, "sync_loss_weight", "0 switches the synchronous loss off")
        if config.uses_sync and not (config.uses_encoder_dbsa and config.uses_decoder_dbsa):
            raise UserError(
                f"sync_loss_weight={config.sync_loss_weight} needs DBSA heads in both the encoder and the decoder "
                f"(encoder_dbsa_heads={config.encoder_dbsa_heads}, decoder_dbsa_heads={config.decoder_dbsa_heads})."
            )
        check_decoder_layer(config, "sync_cross_attention_layer", "0-based, or None for the penultimate layer, which "
                            "the paper uses")  # fmt: skip

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Synchronous syntactic attention loss (Eqs. 6-9), lambda_sync={config.sync_loss_weight}, "
                f"l_sync = decoder layer {config.sync_layer}.")  # fmt: skip

    def wants_record(self, model, batch):
        if batch.get("labels") is None:
            return False, set()
        return True, {model.config.sync_layer}

    def loss(self, model, record, batch, outputs):
        enc = [r.probs.mean(1) for r in record.of_kind("encoder", "dbsa")]  # (B, S, S) each
        dec = [r.probs.mean(1) for r in record.of_kind("decoder", "dbsa")]  # (B, T, T) each
        cross = record.cross.get(model.config.sync_layer)
        if batch.get("labels") is None or not enc or not dec or cross is None:
            return {}
        # several DBSA heads (or layers) are combined by averaging their attention matrices; C averages the heads of
        # layer l_sync
        E, D = torch.stack(enc).mean(0), torch.stack(dec).mean(0)  # (B, S, S), (B, T, T)
        valid = decoder_valid(batch["labels"], D.shape[:2], D.device)
        return {"sync_loss": synchronous_loss(E, D, cross.mean(dim=1), valid)}

    def loss_weights(self, config):
        return {"sync_loss": config.sync_loss_weight}
