"""The one description of a config's methods, shared by the model signature (:func:`describe_variant`) and the
model card (:func:`describe_method`): :func:`describe_config`."""

from __future__ import annotations

import json
from typing import NamedTuple


class ConfigDescription(NamedTuple):
    """What a config switches on: its non-default syntax options (name -> value) and one sentence per method."""

    options: dict
    methods: list[str]


def _syntax_options(config) -> dict:
    """The syntax options of a `SyntaxMTConfig` that differ from their defaults (every option a subclass field of
    `MarianConfig`, so options added later show up without editing this function)."""
    import dataclasses

    from transformers import MarianConfig

    from ..configuration_syntax_mt import SyntaxMTConfig

    if not isinstance(config, SyntaxMTConfig):
        return {}
    marian = {f.name for f in dataclasses.fields(MarianConfig)} if dataclasses.is_dataclass(MarianConfig) else set()
    out = {}
    for f in dataclasses.fields(SyntaxMTConfig):
        if f.name in marian or f.name == "source_parser":
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        value = getattr(config, f.name, default)
        if value != default and value is not None:
            out[f.name] = value
    return out


def _per_layer(values) -> str:
    return ", ".join(f"layer {i}: {k}" for i, k in enumerate(values or []) if k)


def _pascal(c) -> str:
    layers = [f"layer {i}: {k} heads" for i, k in enumerate(c.encoder_pascal_heads) if k]
    return (f"- PASCAL parent-scaled self-attention (Bugliarello & Okazaki 2020, Eqs. 1-3) in encoder "
            f"{', '.join(layers)}; {c.pascal_weighting} weighting, sigma={c.pascal_sigma}, "
            f"parent ignoring q={c.parent_ignoring}.")  # fmt: skip


def _context(c) -> str:
    gate = "context gating (Eqs. 21-22)" if c.context_gating else "residual connections (no gating)"
    return (f"- Document-level context (Zhang et al. 2018): the previous {c.context_sentences} source sentences, a "
            f"{c.context_encoder_layers}-layer context encoder, context attention in encoder layers "
            f"{c.context_layers('encoder')} and decoder layers {c.context_layers('decoder')}, {gate}. Translate "
            "documents with `pipe.translate_document(sentences)`.")  # fmt: skip


def _on(*flags: str):
    return lambda c: any(getattr(c, flag, None) for flag in flags)


#: (is the method on?, its sentence), in the order the card lists them. The method registry will take this over.
_METHODS = (
    (_on("uses_pascal"), _pascal),
    (_on("uses_tree"), lambda c: f"- Syntax-directed attention heads (Chen et al. 2017; tree distance <= "
                                 f"{c.tree_window}) in encoder {_per_layer(c.encoder_tree_heads)}."),
    (_on("uses_lisa"), lambda c: f"- LISA heads on subwords (Strubell et al. 2018, as in the PASCAL paper) in encoder "
                                 f"{_per_layer(c.encoder_lisa_heads)}; loss weight {c.lisa_loss_weight}."),
    (_on("uses_encoder_dbsa", "uses_decoder_dbsa"),
     lambda c: f"- Dependency-based self-attention (Deguchi et al. 2019, Eqs. 4-5): encoder "
               f"{_per_layer(c.encoder_dbsa_heads) or 'none'}, decoder {_per_layer(c.decoder_dbsa_heads) or 'none'}; "
               f"lambda_dep={c.dbsa_loss_weight}."),
    (_on("uses_sync"), lambda c: f"- Synchronous syntactic attention loss (Eqs. 6-9), lambda_sync={c.sync_loss_weight}, "
                                 f"l_sync = decoder layer {c.sync_layer}."),
    (_on("input_features"), lambda c: f"- Linguistic input features (Sennrich & Haddow 2016): "
                                      f"{', '.join(c.input_features)}, {c.feature_combination}."),
    (_on("task_token_ids"), lambda c: "- Multi-task parse + translate (Currey & Heafield 2019) with target-side task "
                                      "tokens."),
    (_on("uses_context"), _context),
)  # fmt: skip


def describe_config(config) -> ConfigDescription:
    """The methods a config switches on: the options that differ from their defaults (what the model signature
    records and what `MarianMTModel` would drop) and one sentence per method (the model card). Every description of
    a config's methods comes from here."""
    return ConfigDescription(_syntax_options(config), [sentence(config) for on, sentence in _METHODS if on(config)])


def describe_variant(config) -> str:
    """``marian`` for a config with no syntax option, else ``syntax_mt(option=value,...)`` (non-default options)."""
    options = describe_config(config).options
    if not options:
        return "marian"
    text = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(options.items()))
    return f"syntax_mt({text.replace('|', '/')})"


def describe_method(config) -> str:
    """A sentence per syntax method that the config switches on (the model card's "Method and options")."""
    return "\n".join(describe_config(config).methods) or "- none (vanilla Marian)"


__all__ = ["ConfigDescription", "describe_config", "describe_method", "describe_variant"]
