"""Global fertility (Cohn et al. 2016): a contextual Normal model of how many target tokens each source token
aligns to, N(f_i; mu(h_i), sigma^2(h_i)), whose negative log-likelihood is added to the loss after
`global_fertility_start_step` training steps. The alignment is the head-averaged cross-attention of
`config.resolved_alignment_layer`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..validation import Option, check_int, check_weight, checking
from .base import Method


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
        # Sec. 3.2 (global fertility): p(f_i | s, i) = N(mu(e_i), sigma^2(e_i)), f_i = sum_j alpha_{j,i}
        alpha = probs.mean(dim=1)  # heads averaged, (B, T, S)
        f = torch.einsum("bts,bt->bs", alpha, target_mask.to(alpha.dtype))  # f_i = sum_j alpha_ji, (B, S)
        mu, var = self(encoder_states)  # (B, S) each
        nll = 0.5 * torch.log(2 * math.pi * var) + (f - mu.to(f.dtype)).square() / (2 * var)  # -log N(f; mu, s^2)
        if attention_mask is not None:
            nll = nll * attention_mask.to(nll.dtype)
        denominator = target_mask.sum() if num_items is None else num_items
        return nll.sum() / denominator


class Fertility(Method):
    name = "fertility"
    inference_needs = None  # a training-only loss; its network is dropped (`export_state`)
    config_options = {
        "global_fertility_weight": Option(
            "float | int",
            0.0,
            """Weight of the global-fertility negative log-likelihood added to the loss (0: off, no parameter added).""",
            check=check_weight,
        ),
        "global_fertility_start_step": Option(
            "int",
            0,
            """Training step from which the global-fertility loss is added (the paper's pre-training schedule: train
            without it first). Steps come from `AlignmentTrainingCallback` or `model.alignment_training_step`.""",
            check=checking(
                check_int, 0, hint="the training step that switches the global-fertility loss on; 0: from the start"
            ),
        ),
    }
    losses = ("fertility_loss",)
    tester_config = {"global_fertility_weight": 0.3}
    trainable = ("global_fertility",)

    def active(self, config) -> bool:
        return config.global_fertility_weight > 0

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Global fertility (Cohn et al. 2016), weight {config.global_fertility_weight} from training step "
                f"{config.global_fertility_start_step}, on the cross-attention of decoder layer "
                f"{config.resolved_alignment_layer}.")  # fmt: skip

    def callbacks(self, config):
        return ("hf_syntax_mt.alignment.cross_attention:AlignmentTrainingCallback",) if self.active(config) else ()

    def build_model(self, model, config):
        model.alignment_training_step = 0  # the schedule's clock (`AlignmentTrainingCallback` sets it)
        # only when weighted: a model without it has no such parameter
        model.global_fertility = (
            GlobalFertility(config.d_model, config.alignment_bias_hidden_size) if self.active(config) else None
        )

    def _on(self, model, batch) -> bool:
        return (
            batch.get("labels") is not None
            and getattr(model, "global_fertility", None) is not None
            and model.alignment_training_step >= model.config.global_fertility_start_step
        )

    def wants_record(self, model, batch):
        return False, ({model.config.resolved_alignment_layer} if self._on(model, batch) else set())

    def loss(self, model, record, batch, outputs):
        if not self._on(model, batch):
            return {}
        probs = record.cross[model.config.resolved_alignment_layer]  # (B, H, T, S)
        labels = batch["labels"]
        # summed (num_items=1): the model divides every term by the same target-token count
        return {"fertility_loss": model.global_fertility.loss(
            probs, outputs.encoder_last_hidden_state, batch.get("attention_mask"), labels != -100, num_items=1
        )}  # fmt: skip

    def loss_weights(self, config):
        return {"fertility_loss": config.global_fertility_weight}

    def export_state(self, model, state):
        for key in [k for k in state if k.startswith("global_fertility.")]:  # the loss's network: training only
            del state[key]
