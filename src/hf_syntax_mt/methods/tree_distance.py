"""Syntax-directed attention heads (Chen et al. 2017, reviewed in the thesis): a head's probabilities are weighted by
a Gaussian of the dependency-tree distance between the two tokens' words, 0 beyond the window D. Inputs:
`word_index` `(B, S)` and `word_heads` `(B, W)` (`SyntaxMTPreprocessor.for_config`).
"""

from __future__ import annotations

import torch

from ..errors import UserError
from ..validation import Option, check_int, check_per_layer_heads, checking
from .base import Method, per_layer
from .columns import Column, SubwordParse
from .records import AttentionContext, shared


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
        raise UserError(
            f"word_heads of batch row {row} contain a cycle: words {(stuck[row].nonzero().flatten() + 1).tolist()} "
            f"(1-based) never reach the root by following their heads {word_heads[row].tolist()}; tree "
            "distances need a tree (build word_heads from validated parses, e.g. with SyntaxMTPreprocessor)"
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


def tree_weights(
    word_index: torch.Tensor, word_heads: torch.Tensor, window: int, distances: torch.Tensor | None = None
) -> torch.Tensor:
    """Syntax-directed attention weights `(B, S, S)` (Chen et al. 2017): exp(-d^2 / (2 sigma^2)), sigma = D / 2,
    for tree distance d <= D = `window`, else 0 (`distances`: the tree distances, when already computed)."""
    d = tree_distances(word_index, word_heads) if distances is None else distances
    sigma = window / 2.0
    return torch.exp(-d.square() / (2.0 * sigma**2)).masked_fill(d > window, 0.0)


def shared_tree_distances(inputs: dict, input_shape: torch.Size, method: str, heads) -> torch.Tensor:
    """The tree distances `(B, S, S)` of this forward's `word_index` and `word_heads`, checked and computed once
    per forward for every method that reads them (`records.shared`); `method` and `heads` name the asking method's
    option in the error for missing inputs."""
    word_index, word_heads = inputs.get("word_index"), inputs.get("word_heads")
    if word_index is None or word_heads is None:
        raise UserError(
            f"This model has {method} heads ({heads}) and needs `word_index` (B, S) and `word_heads` (B, W): prepare "
            "data with `SyntaxMTPreprocessor.for_config(config, ...)`."
        )
    if word_index.shape != input_shape:
        raise UserError(f"word_index has shape {tuple(word_index.shape)} but the input {tuple(input_shape)}.")
    return shared(inputs, "tree_distances", lambda: tree_distances(word_index, word_heads))


def word_index(sentence: SubwordParse, config) -> list[int]:
    """The `word_index` column: each subword's word, 1-based (0 for special tokens)."""
    return [0 if w is None else w + 1 for w in sentence.word_ids]


def word_heads(sentence: SubwordParse, config) -> list[int]:
    """The `word_heads` column: the parse's UD heads, one per word (1-based, 0 = root)."""
    return list(sentence.parse.heads)


#: the tree inputs of `tree` and `tree_bias`: each subword's word (1-based, 0 for special tokens) and the UD heads
TREE_COLUMNS = (Column("word_index", "source", parse="source", compute=word_index),
                Column("word_heads", "word", parse="source", compute=word_heads))  # fmt: skip


class TreeDistance(Method):
    name = "tree"
    inference_needs = "a parse at inference: its heads weight attention by tree distance (`word_index`, `word_heads`)"
    config_options = {
        "encoder_tree_heads": Option(
            "list[int] | None",
            None,
            """Number of syntax-directed attention heads (Chen et al. 2017, thesis review) in each encoder layer: the
            attention probabilities are multiplied by exp(-d^2 / (2 (D/2)^2)) with d the distance in the dependency
            tree between the two tokens' words, and 0 beyond `tree_window` = D. They follow the PASCAL heads.
            Needs `word_index` and `word_heads` inputs.""",
            check=check_per_layer_heads,
        ),
        "tree_window": Option(
            "int",
            2,
            """D, the largest tree distance a syntax-directed head attends to (sigma = D / 2, as Chen et al.).""",
            check=checking(check_int, 1, hint="Chen et al. use 2 or more"),
        ),
    }
    inputs = TREE_COLUMNS
    tester_config = {"encoder_tree_heads": [1, 1]}

    def active(self, config) -> bool:
        return any(per_layer(config, "encoder_tree_heads", "encoder"))

    def heads(self, config, site, layer):
        return per_layer(config, "encoder_tree_heads", "encoder")[layer] if site == "encoder" else 0

    def describe(self, config):
        if not self.active(config):
            return None
        layers = ", ".join(f"layer {i}: {k}" for i, k in enumerate(config.encoder_tree_heads) if k)
        return f"Syntax-directed attention heads (Chen et al. 2017; tree distance <= {config.tree_window}) in encoder {layers}."

    def prepare(self, config, inputs, input_shape, attention_mask):
        heads = f"encoder_tree_heads={config.encoder_tree_heads}"
        d = shared_tree_distances(inputs, input_shape, "syntax-directed", heads)  # (B, S, S)
        return {"tree_weights": tree_weights(inputs["word_index"], inputs["word_heads"], config.tree_window, d)}

    def probs(self, ctx: AttentionContext, probs, start, stop):
        weights = ctx.inputs.get("tree_weights")
        if weights is None:
            raise UserError(
                f"This layer has {stop - start} syntax-directed heads and needs `word_index` and `word_heads`: prepare "
                "data with `SyntaxMTPreprocessor.for_config(config, ...)`."
            )
        # Chen et al. (2017): alpha_tj = align(t, j) * exp(-d_tree(t, j)^2 / (2 sigma^2)), no renormalisation
        return probs * weights.unsqueeze(1).to(probs.dtype)  # (B, k, T, S)
