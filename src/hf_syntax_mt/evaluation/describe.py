"""The one description of a config's methods, shared by the model signature (:func:`describe_variant`) and the
model card (:func:`describe_method`): :func:`describe_config`, whose sentences come from the method registry
(each method's `describe`)."""

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


def describe_config(config) -> ConfigDescription:
    """The methods a config switches on: the options that differ from their defaults (what the model signature
    records and what `MarianMTModel` would drop) and one sentence per method (the model card). Every description of
    a config's methods comes from here."""
    from ..methods.registry import describe

    methods = [f"- {line}" for text in describe(config) for line in text.split("\n")]  # each method describes itself
    if getattr(config, "task_token_ids", None):  # a spine option, not a registered method
        methods.append("- Multi-task parse + translate (Currey & Heafield 2019) with target-side task tokens.")
    return ConfigDescription(_syntax_options(config), methods)


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
