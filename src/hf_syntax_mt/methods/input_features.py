"""Linguistic input features (Sennrich & Haddow 2016): UPOS, universal dependency relation and B/I/E/O subword tags,
each embedded and summed with (or concatenated into) the token embedding. Inputs: `pos_ids`, `deprel_ids`,
`subword_tag_ids` `(B, S)` (ids in `INPUT_FEATURES`, 0 = none; `SyntaxMTPreprocessor.for_config`).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from ..validation import Option, check_choice, check_int, checking
from ..vocabularies import DEPRELS, INPUT_FEATURES, SUBWORD_TAGS, UPOS_TAGS
from .base import Method
from .columns import Column, SubwordParse

FEATURE_COMBINATIONS = ("sum", "concat")


def _check_features(config, name: str) -> None:
    features = getattr(config, name)
    if features is not None:
        unknown = [f for f in features if f not in INPUT_FEATURES]
        if unknown or len(set(features)) != len(features):
            raise UserError(f"{name}={features} must be distinct names among {sorted(INPUT_FEATURES)}.")


_POS_IDS = {tag: k + 1 for k, tag in enumerate(UPOS_TAGS)}
_DEPREL_IDS = {rel: k + 1 for k, rel in enumerate(DEPRELS)}
_TAG_IDS = {tag: k + 1 for k, tag in enumerate(SUBWORD_TAGS)}


def pos_ids(sentence: SubwordParse, config) -> list[int]:
    """The `pos_ids` column: each subword's word's UPOS id (0: special token or unknown tag)."""
    upos = sentence.parse.upos
    return [0 if w is None else _POS_IDS.get(upos[w] if upos else "", 0) for w in sentence.word_ids]


def deprel_ids(sentence: SubwordParse, config) -> list[int]:
    """The `deprel_ids` column: each subword's word's universal relation id ("nmod:poss" -> "nmod"; 0: special token
    or unknown relation)."""
    rels = sentence.parse.deprels
    return [0 if w is None else _DEPREL_IDS.get((rels[w] if rels else "").split(":")[0].lower(), 0)
            for w in sentence.word_ids]  # fmt: skip


def subword_tag_ids(sentence: SubwordParse, config) -> list[int]:
    """The `subword_tag_ids` column: B/I/E of a word split into several subwords, O of a word of one (0: special)."""
    out = []
    for t, w in enumerate(sentence.word_ids):
        own = sentence.positions[w] if w is not None else ()
        tag = None if w is None else "O" if len(own) == 1 else "B" if t == own[0] else "E" if t == own[-1] else "I"
        out.append(0 if tag is None else _TAG_IDS[tag])
    return out


_COMPUTE = {"pos": pos_ids, "deprel": deprel_ids, "subword_tag": subword_tag_ids}


class InputFeatures(Method):
    name = "input_features"
    inference_needs = (
        "a parse at inference: the POS, relation and subword-tag ids of the source are embedded with "
        "its tokens (feature embeddings a Marian model lacks)"
    )
    config_options = {
        "input_features": Option(
            "list[str] | None",
            None,
            """Linguistic input features (Sennrich & Haddow 2016) embedded and combined with the token embedding:
            any of `"pos"` (UPOS), `"deprel"` (universal relation) and `"subword_tag"` (B/I/E/O). Inputs:
            `pos_ids`, `deprel_ids`, `subword_tag_ids` (ids in `INPUT_FEATURES`, 0 = none).""",
            check=_check_features,
        ),
        "feature_combination": Option(
            "str",
            "sum",
            """`"sum"`: each feature has a d_model embedding added to the token embedding. `"concat"`: each feature
            has a `feature_embedding_dim` embedding and they replace the last dimensions of the token embedding
            (concatenation at a fixed total size, as the paper).""",
            check=checking(check_choice, FEATURE_COMBINATIONS),
        ),
        "feature_embedding_dim": Option(
            "int",
            8,
            """Size of each feature embedding with `feature_combination="concat"`.""",
            check=checking(check_int, 1),
        ),
    }
    inputs = tuple(Column(f"{name}_ids", "source", parse="source", compute=_COMPUTE[name]) for name in INPUT_FEATURES)
    tester_config = {"input_features": ["pos", "deprel", "subword_tag"]}
    trainable = ("feature_embeddings",)

    def active(self, config) -> bool:
        return bool(config.input_features)

    def input_columns(self, config):
        return tuple(f"{name}_ids" for name in config.input_features or [])

    def validate(self, config) -> None:
        n_features = len(config.input_features or [])
        if config.feature_combination == "concat" and n_features:
            if not 1 <= config.feature_embedding_dim * n_features < config.d_model:
                raise UserError(
                    f"feature_embedding_dim={config.feature_embedding_dim} x {n_features} features must leave room "
                    f"for the token embedding in d_model={config.d_model}."
                )

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Linguistic input features (Sennrich & Haddow 2016): {', '.join(config.input_features)}, "
                f"{config.feature_combination}.")  # fmt: skip

    def build_encoder(self, encoder, config):
        dim = config.d_model if config.feature_combination == "sum" else config.feature_embedding_dim
        # one embedding table per feature, id 0 = none
        encoder.feature_embeddings = nn.ModuleDict(
            {
                name: nn.Embedding(len(INPUT_FEATURES[name]) + 1, dim, padding_idx=0)
                for name in config.input_features or []
            }
        )

    def embed(self, encoder, input_ids, embeds, inputs):
        if not encoder.feature_embeddings:
            return embeds
        feats = []
        for name, table in encoder.feature_embeddings.items():
            ids = inputs.get(f"{name}_ids")
            if ids is None:
                raise UserError(
                    f"This model uses the input feature {name!r} (input_features={encoder.config.input_features}) and "
                    f"needs `{name}_ids` (B, S): prepare data with `SyntaxMTPreprocessor.for_config(config, ...)`."
                )
            if ids.shape != input_ids.shape:
                raise UserError(f"{name}_ids has shape {tuple(ids.shape)} but input_ids {tuple(input_ids.shape)}.")
            feats.append(table(ids))  # (B, S, d_f)
        if encoder.config.feature_combination == "sum":
            return embeds + sum(feats)  # E x + sum_k E_k f_k
        width = sum(f.shape[-1] for f in feats)
        return torch.cat([embeds[..., : embeds.shape[-1] - width], *feats], dim=-1)  # [E x ; E_1 f_1 ; ...]
