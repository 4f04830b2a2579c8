"""What one forward keeps and hands to the methods' hooks: the attention sites, the records of attention kept for the
auxiliary losses (`HeadRecord`, `AttentionRecord`), what a hook sees besides its tensors (`AttentionContext`), and the
per-forward memo of what several methods derive from the same inputs (`ForwardInputs`, `shared`).

Types only: the `Method` base (`methods/base.py`) and the attention (`modeling_layers.py`) build on them, and they
import nothing of the package."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = ["SITES", "AttentionContext", "AttentionRecord", "ForwardInputs", "HeadRecord", "shared"]

SITES = ("encoder", "decoder", "cross")  # encoder self-attention, decoder self-attention, decoder cross-attention


@dataclass
class HeadRecord:
    """What a supervised self-attention head group stored: masked logits, raw scores and probabilities, each
    `(B, k, T, S)` for the group's k heads."""

    logits: torch.Tensor
    scores: torch.Tensor
    probs: torch.Tensor


@dataclass
class AttentionRecord:
    """Attention kept during one forward for the auxiliary losses, `align()` and the symmetric model (one typed
    record instead of a store keyed by tuples).

    Attributes:
        heads: `(site, layer, kind)` -> `HeadRecord` of a method's heads (e.g. `("encoder", 0, "dbsa")`).
        cross_layers: decoder layers whose cross-attention probabilities are wanted.
        cross: decoder layer -> its cross-attention probabilities `(B, H, T, S)` (with gradient).
        record_heads: whether head groups store their `HeadRecord` (only when a loss reads them).
    """

    record_heads: bool = False
    cross_layers: set[int] = field(default_factory=set)
    heads: dict[tuple[str, int, str], HeadRecord] = field(default_factory=dict)
    cross: dict[int, torch.Tensor] = field(default_factory=dict)

    def wants_cross(self, layer: int) -> bool:
        return layer in self.cross_layers

    def of_kind(self, site: str, kind: str) -> list[HeadRecord]:
        """The head records of one kind on one site, in layer order."""
        return [r for (s, _, k), r in sorted(self.heads.items(), key=lambda kv: kv[0][1]) if s == site and k == kind]


@dataclass
class AttentionContext:
    """What a hook sees besides its tensors: the attention module, its site and layer, the additive mask
    `(B|1, 1, T, S)` or None (whatever mask format the configured kernel takes), the cache, the method inputs (what
    the active methods' `prepare` gave; never the kernel's kwargs) and the record (or None). The mask
    is set for the eager path and SDPA's bias; a score_mod, in FlexAttention, gets padding from the kernel instead
    (`mask` is then None)."""

    module: nn.Module
    site: str
    mask: torch.Tensor | None
    past_key_values: object
    inputs: dict
    record: AttentionRecord | None


class ForwardInputs(dict):
    """The method inputs of one encoder forward (input name -> tensor or None), as `Method.prepare` receives them,
    plus what methods derive from them, computed once per forward and shared (`shared`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.derived: dict[str, Any] = {}


def shared(inputs: dict, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, computed once per forward under `key` when `inputs` is the forward's `ForwardInputs`: methods
    that derive the same tensor from the same inputs (e.g. `"tree_distances"` from `word_index` and `word_heads`)
    call this with the same key and share one result. With a plain dict it is computed each call."""
    if not isinstance(inputs, ForwardInputs):
        return compute()
    if key not in inputs.derived:
        inputs.derived[key] = compute()
    return inputs.derived[key]
