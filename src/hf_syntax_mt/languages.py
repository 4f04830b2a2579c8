"""The languages a saved model translates between, where it records them, and the check of transformers' translation
pipeline arguments ``src_lang`` / ``tgt_lang`` against them: the model translates its own direction whatever they
say, so a pair it does not translate is refused rather than silently ignored.

A model of this package translates one direction; what it records of its languages, in the order read:
1. the tokenizer's ``source_lang`` / ``target_lang`` (a Marian tokenizer of an opus-mt checkpoint has them);
2. the config's ``source_lang`` / ``target_lang`` where a config carries them;
3. ``hf_syntax_mt_run.json`` beside the weights: the train script's ``--source_lang`` / ``--target_lang``;
4. the model card's ``language`` metadata (``README.md``): the languages, not their direction.
A model that records none accepts any ``src_lang`` / ``tgt_lang``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import UserError, UserTypeError
from .validation import shown

__all__ = ["check_languages", "model_languages", "primary_language"]


def primary_language(code: str) -> str:
    """The primary subtag of a language code, lower-cased: ``"fr_XX"``, ``"fr-FR"`` and ``"FR"`` are all ``"fr"``."""
    return re.split(r"[-_]", code.strip(), maxsplit=1)[0].lower()


def _card_languages(directory: Path) -> list[str]:
    """The ``language`` entry of the model card's YAML header (a string or a list), read without a YAML library."""
    card = directory / "README.md"
    try:
        text = card.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if not text.startswith("---"):
        return []
    header = text[3:].split("\n---", 1)[0].splitlines()
    for k, line in enumerate(header):
        if not line.startswith("language:"):
            continue
        value = line.split(":", 1)[1].strip()
        if value.startswith("["):
            return [v.strip().strip("'\"") for v in value.strip("[]").split(",") if v.strip()]
        if value:
            return [value.strip("'\"")]
        out = []
        for rest in header[k + 1 :]:  # a block list: the "- xx" lines right below
            if not rest.strip().startswith("- "):
                break
            out.append(rest.strip()[2:].strip().strip("'\""))
        return out
    return []


def model_languages(model, tokenizer=None) -> dict:
    """``{"source", "target", "languages", "from"}``: the model's source and target language (or None each), the
    languages its card names (direction unknown), and where they were read (for messages)."""
    found = {"source": None, "target": None, "languages": [], "from": None}
    for owner, what in ((tokenizer, "the tokenizer"), (getattr(model, "config", None), "config.json")):
        source, target = getattr(owner, "source_lang", None), getattr(owner, "target_lang", None)
        if isinstance(source, str) and isinstance(target, str) and source and target:
            return {**found, "source": source, "target": target, "from": what}
    name = getattr(model, "name_or_path", None) or getattr(getattr(model, "config", None), "_name_or_path", None)
    directory = Path(name) if isinstance(name, str) and name and Path(name).is_dir() else None
    if directory is None:
        return found
    run = directory / "hf_syntax_mt_run.json"
    try:
        data_args = json.loads(run.read_text(encoding="utf-8")).get("data_args") or {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        data_args = {}
    if not isinstance(data_args, dict):  # an edited run file: its languages are not known from it
        data_args = {}
    source, target = data_args.get("source_lang"), data_args.get("target_lang")
    if isinstance(source, str) and isinstance(target, str) and source and target:
        return {**found, "source": source, "target": target, "from": f"{run.name} (--source_lang/--target_lang)"}
    languages = _card_languages(directory)
    return {**found, "languages": languages, "from": "the model card's language metadata" if languages else None}


def check_languages(model, tokenizer, src_lang, tgt_lang) -> None:
    """Refuse ``src_lang`` / ``tgt_lang`` (transformers' translation pipeline arguments) that are not strings, or that
    differ from the languages the model records (compared by primary subtag: ``fr_XX`` is ``fr``)."""
    for name, value in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UserTypeError(f"{name} must be a language code such as 'fr' or 'en', got {shown(value)}")
    known = model_languages(model, tokenizer)
    pair = f"{known['source']} -> {known['target']}"
    for name, value, side in (("src_lang", src_lang, "source"), ("tgt_lang", tgt_lang, "target")):
        if value is None:
            continue
        if known[side] is not None:
            if primary_language(value) != primary_language(known[side]):
                raise UserError(f"{name}={value!r}, but this model translates {pair} (from {known['from']}): it "
                                f"translates one direction only; leave {name} out, or use a model for that "
                                "language")  # fmt: skip
        elif known["languages"] and primary_language(value) not in {primary_language(x) for x in known["languages"]}:
            raise UserError(f"{name}={value!r}, but this model's languages are {known['languages']} (from "
                            f"{known['from']}); leave {name} out, or use a model for that language")  # fmt: skip
    if src_lang is not None and tgt_lang is not None and primary_language(src_lang) == primary_language(tgt_lang):
        raise UserError(f"src_lang and tgt_lang are both {src_lang!r}: a translation needs two languages")
