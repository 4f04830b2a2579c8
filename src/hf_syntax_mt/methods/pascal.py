"""PASCAL: parent-scaled self-attention (Bugliarello & Okazaki 2020), in chosen encoder heads.

A PASCAL head multiplies its scaled scores by a Gaussian centred on the middle subword of the token's parent word
(Eqs. 1-3); with `parent_ignoring` a row of the weights is set to 1 during training. Input: `parent_positions`
`(B, S)`, attached per subword by `hf_syntax_mt.data.SyntaxMTPreprocessor`.
"""

from __future__ import annotations

import math

import torch

from ..errors import UserError
from ..validation import Option, check_choice, check_per_layer_heads, check_probability, checking
from .base import Method, per_layer
from .columns import Column, SubwordParse
from .records import AttentionContext

PASCAL_WEIGHTINGS = ("gaussian", "parent_only")
# Below this sigma the Gaussian is already 0 one position away from the parent and its peak 1 / (sigma sqrt(2 pi))
# overflows half precision; at 1e-30, 2 sigma^2 underflows float32 and the weights are NaN.
MIN_PASCAL_SIGMA = 1e-3


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
    return parent_weight(j.view(1, 1, -1) - parent_positions.float().unsqueeze(-1), sigma, weighting)  # (B, T, S)


def parent_weight(dist: torch.Tensor, sigma, weighting="gaussian") -> torch.Tensor:
    """d^p_tj elementwise from `dist` = j - p_t (float32, any shape): the one formula of `pascal_weights` and of the
    FlexAttention `score_mod`, which computes it per query/key pair. `sigma`: a float, or (score_mod) its
    `gaussian_factors` as 0-dim tensors; `weighting`: a name of `PASCAL_WEIGHTINGS`, or (score_mod) a 0-dim bool
    tensor, True for `"parent_only"` (tensors, so that a compiled kernel reads them as data, not as constants to
    specialise on)."""
    if isinstance(weighting, str) and weighting == "parent_only":
        return (dist.abs() <= 0.5).to(torch.float32)
    inv_two_var, inv_norm = gaussian_factors(sigma) if isinstance(sigma, (float, int)) else sigma
    # Eq. 3: dist(p_t, j) = 1 / sqrt(2 pi sigma^2) * exp(-(j - p_t)^2 / (2 sigma^2))
    exponent = dist * dist * inv_two_var
    # the far tail as exactly 0: exp(-80) ~ 1.8e-35 is still a normal float32, while the tail underflows to denormals
    # that make CPU matmuls 3-5x slower (a literal: a compiled score_mod with dynamic shapes takes a module-level
    # float as a graph input, which breaks its backward into a host sync)
    weights = torch.where(exponent > 80.0, 0.0, torch.exp(-exponent) * inv_norm)
    return weights if isinstance(weighting, str) else torch.where(weighting, (dist.abs() <= 0.5).to(weights), weights)


def gaussian_factors(sigma: float) -> tuple[float, float]:
    """1 / (2 sigma^2) and 1 / sqrt(2 pi sigma^2), the factors of Eq. 3."""
    return 1.0 / (2.0 * sigma**2), 1.0 / math.sqrt(2.0 * math.pi * sigma**2)


_CONSTANTS: dict = {}


def _score_mod_constants(
    sigma: float, weighting: str, device
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """sigma's `gaussian_factors` and "is parent_only" as 0-dim tensors on `device`, made once per value and
    device."""
    key = (float(sigma), weighting, str(device))
    if key not in _CONSTANTS:
        factors = tuple(torch.tensor(f, device=device) for f in gaussian_factors(float(sigma)))
        _CONSTANTS[key] = (factors, torch.tensor(weighting == "parent_only", device=device))
    return _CONSTANTS[key]


def check_parent_positions(
    parent_positions: torch.Tensor, input_shape: torch.Size, attention_mask=None, values: bool = True
) -> None:
    """Raise a clear error for `parent_positions` of the wrong shape or, with `values`, out of range or not finite.

    Reading the values is a host sync on a GPU (and a graph break under `torch.compile`), so the model's forward
    checks them only for CPU tensors, outside compilation; the collator (`DataCollatorForSyntaxMT`) checks every
    batch it builds, on the CPU, before it reaches a device."""
    if parent_positions.shape != input_shape:
        raise UserError(
            f"parent_positions has shape {tuple(parent_positions.shape)} but input_ids has shape "
            f"{tuple(input_shape)}: give one parent position per input token (B, S)."
        )
    if not values:
        return
    if parent_positions.is_floating_point() and not torch.isfinite(parent_positions).all():
        raise UserError("parent_positions contains NaN or infinite values.")
    valid = parent_positions >= 0
    valid &= parent_positions <= input_shape[-1] - 1
    if attention_mask is not None:
        valid |= attention_mask == 0  # padding may hold anything
    if not bool(valid.all()):
        b, t = (~valid).nonzero()[0].tolist()
        raise UserError(
            f"parent_positions[{b}, {t}] = {parent_positions[b, t].item()} is outside 0..{input_shape[-1] - 1}: "
            "parent positions index subword tokens of the same (truncated) sequence."
        )


def _check_sigma(config, name: str) -> None:
    if not getattr(config, name) >= MIN_PASCAL_SIGMA:
        raise UserError(
            f"{name}={getattr(config, name)!r} must be > 0 and at least {MIN_PASCAL_SIGMA} (the paper uses 1.0): "
            "smaller values give NaN weights or overflow; pascal_weighting='parent_only' is the hard limit."
        )


def parent_positions(sentence: SubwordParse, config) -> list[float]:
    """The `parent_positions` column: each subword of word w gets the middle (mean position) of the subwords of
    head(w), the root's its own middle; a special token its own position (DESIGN.md, subword mapping rules)."""
    return [float(t) if w is None else _middle(sentence.head_subwords(w)) for t, w in enumerate(sentence.word_ids)]


def _middle(p: tuple[int, ...]) -> float:
    return sum(p) / len(p)


class Pascal(Method):
    name = "pascal"
    inference_needs = "a parse at inference: its heads scale attention around each token's parent (`parent_positions`)"
    config_options = {
        "encoder_pascal_heads": Option(
            "list[int] | None",
            None,
            """Number of PASCAL (parent-scaled self-attention, Bugliarello & Okazaki 2020) heads in each encoder layer,
            one entry per layer: heads `0..k-1` of layer `l` are PASCAL heads when `encoder_pascal_heads[l] == k`.
            `None` (default) or all zeros: no PASCAL head. The paper's setting puts them in the first layer, e.g.
            `[8, 0, 0, 0, 0, 0]`.""",
            check=check_per_layer_heads,
        ),
        "pascal_sigma": Option(
            "float | int",
            1.0,
            """Standard deviation of the Gaussian N(j; p_t, sigma^2) around the parent's middle position (paper: 1).""",
            check=_check_sigma,
        ),
        "pascal_weighting": Option(
            "str",
            "gaussian",
            """`"gaussian"` (Eq. 3 of the paper) or `"parent_only"` (the paper's ablation: weight 1 on the parent's
            middle token(s), i.e. every j with |j - p_t| <= 0.5, and 0 elsewhere).""",
            check=checking(check_choice, PASCAL_WEIGHTINGS),
        ),
        "parent_ignoring": Option(
            "float | int",
            0.0,
            """Probability q of replacing a row of D_p by ones during training (the paper's "parent ignoring"
            regulariser). Never applied in evaluation mode.""",
            check=checking(check_probability, "of dropping a token's parent attention in training"),
        ),
    }
    inputs = (
        Column("parent_positions", "source_position", dtype="float32", parse="source", compute=parent_positions),
    )
    tester_config = {"encoder_pascal_heads": [2, 0]}

    def active(self, config) -> bool:
        return any(per_layer(config, "encoder_pascal_heads", "encoder"))

    def heads(self, config, site, layer):
        return per_layer(config, "encoder_pascal_heads", "encoder")[layer] if site == "encoder" else 0

    def describe(self, config):
        if not self.active(config):
            return None
        layers = [f"layer {i}: {k} heads" for i, k in enumerate(config.encoder_pascal_heads) if k]
        return (
            f"PASCAL parent-scaled self-attention (Bugliarello & Okazaki 2020, Eqs. 1-3) in encoder "
            f"{', '.join(layers)}; {config.pascal_weighting} weighting, sigma={config.pascal_sigma}, "
            f"parent ignoring q={config.parent_ignoring}."
        )

    def check_batch(self, batch):
        if "parent_positions" in batch and "input_ids" in batch:
            check_parent_positions(batch["parent_positions"], batch["input_ids"].shape, batch.get("attention_mask"))

    def prepare(self, config, inputs, input_shape, attention_mask):
        parent_positions = inputs.get("parent_positions")
        if parent_positions is None:
            raise UserError(
                f"This model has PASCAL heads (encoder_pascal_heads={config.encoder_pascal_heads}) and "
                "needs `parent_positions` (B, S): prepare data with `hf_syntax_mt.data.SyntaxMTPreprocessor` or "
                "translate raw text with `pipeline('syntax-translation', model=...)`."
            )
        # values only where reading them costs no device sync and breaks no compiled graph (the collator checks
        # every batch it builds, on the CPU)
        values = parent_positions.device.type == "cpu" and not torch.compiler.is_compiling()
        check_parent_positions(parent_positions, input_shape, attention_mask, values=values)
        return {"parent_positions": parent_positions}

    fused = "score_mod"

    @staticmethod
    def _parents(ctx: AttentionContext, start: int, stop: int) -> torch.Tensor:
        parent_positions = ctx.inputs.get("parent_positions")
        if parent_positions is None:
            raise UserError(
                f"This layer has {stop - start} PASCAL heads and needs `parent_positions` (B, S): parse the source with "
                "`hf_syntax_mt.data.SyntaxMTPreprocessor` or translate with the `syntax-translation` pipeline."
            )
        return parent_positions

    @staticmethod
    def _ignored(ctx: AttentionContext, parent_positions: torch.Tensor) -> torch.Tensor | None:
        """`(B, T)` bool: the rows of D_p that parent ignoring sets to 1 in this pass (training only), or None."""
        config, module = ctx.module.config, ctx.module
        if not (module.training and config.parent_ignoring > 0):
            return None
        # parent ignoring: each row d_t of D_p is set to 1 with probability q, during training only
        return torch.rand(parent_positions.shape[:2], device=parent_positions.device) < config.parent_ignoring

    def scores(self, ctx: AttentionContext, scores, start, stop):
        parent_positions = self._parents(ctx, start, stop)
        config = ctx.module.config
        weights = pascal_weights(parent_positions, scores.shape[-1], config.pascal_sigma, config.pascal_weighting)
        ignore = self._ignored(ctx, parent_positions)  # (B, T) or None
        if ignore is not None:  # D_p, (B, T, S)
            weights = weights.masked_fill(ignore.unsqueeze(-1), 1.0)
        return scores * weights.unsqueeze(1).to(scores.dtype)  # Eq. 2: n_tj = s_tj * d^p_tj, (B, k, T, S)

    def score_mod(self, ctx: AttentionContext, start, stop):
        """Eqs. 2-3 per query/key pair, for FlexAttention: the same weights as `pascal_weights`, computed in the
        kernel from `parent_positions` instead of a materialised `(B, T, S)` tensor. It reads tensors only (no
        Python number, no branch on the pass), so every PASCAL layer, in training and evaluation, shares one
        compiled graph."""
        parent_positions = self._parents(ctx, start, stop)
        config = ctx.module.config
        parents = parent_positions.float()  # p_t, (B, T)
        ignore = self._ignored(ctx, parent_positions)  # (B, T) or None
        if ignore is None:  # no row ignored in this pass: still a tensor (a `None` would be another graph)
            ignore = torch.zeros(parents.shape, dtype=torch.bool, device=parents.device)  # (B, T)
        sigma, parent_only = _score_mod_constants(config.pascal_sigma, config.pascal_weighting, parents.device)

        def pascal(score, b, h, q_idx, kv_idx):
            weight = parent_weight(kv_idx.to(torch.float32) - parents[b, q_idx], sigma, parent_only)  # Eq. 3
            weight = torch.where(ignore[b, q_idx], 1.0, weight)  # parent ignoring: d_t set to 1
            return score * weight  # Eq. 2: n_tj = s_tj * d^p_tj

        return pascal
