"""`hf-syntax-mt train --help` in a fraction of a second: the train script's `HfArgumentParser` help, kept.

The train script's flags are `HfArgumentParser`'s over three dataclasses, one of them transformers'
`Seq2SeqTrainingArguments`, and building that parser imports transformers and torch (10-40 s). This module, standard
library only, keeps what the help is made of, each argparse action of the real parser (its flags, nargs, default,
choices, metavar and help text), in ``train_help.json``, and rebuilds an `argparse` parser from it that prints the
same help at any terminal width. The file records what it was made from: the transformers release and the hash of
``training/script_args.py``; where either differs from this installation's, `fast_help` returns None and the real
parser answers. ``python -m hf_syntax_mt.train_help`` writes the file again (a test checks it equals the real
parser's help).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from importlib import metadata
from pathlib import Path

SPEC = Path(__file__).with_name("train_help.json")
SCRIPT_ARGS = Path(__file__).with_name("training") / "script_args.py"
_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
            "_StoreConstAction": "store_const", "_AppendAction": "append", "_CountAction": "count"}  # fmt: skip


def source_key() -> dict:
    """What the help is made from: the installed transformers release and the train script's arguments module."""
    try:
        transformers = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        transformers = None
    return {"transformers": transformers, "script_args": hashlib.sha256(SCRIPT_ARGS.read_bytes()).hexdigest()}


def spec_of(parser: argparse.ArgumentParser) -> dict:
    """The help's content of a real parser: its groups and their actions (the `-h` action is argparse's own)."""
    groups = []
    for group in parser._action_groups:
        actions = []
        for action in group._group_actions:
            if isinstance(action, argparse._HelpAction):
                continue
            kind = _ACTIONS.get(type(action).__name__)
            if kind is None:
                raise TypeError(f"train_help cannot keep the argparse action {type(action).__name__} of {action.dest}")
            default = action.default
            if default is not None and not isinstance(default, (bool, int, float, str)):
                default = str(default)  # enums, lists: only their text shows in the help
            actions.append({
                "option_strings": action.option_strings, "dest": action.dest, "action": kind,
                "nargs": action.nargs, "const": action.const, "default": default, "required": action.required,
                "choices": None if action.choices is None else [str(c) for c in action.choices],
                "metavar": list(action.metavar) if isinstance(action.metavar, tuple) else action.metavar,
                "help": action.help,
            })  # fmt: skip
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    keep = ("usage", "description", "epilog", "add_help", "allow_abbrev", "prefix_chars")
    return {"parser": {k: getattr(parser, k) for k in keep}, "groups": groups,
            "formatter": parser.formatter_class.__name__}  # fmt: skip


def parser_from_spec(spec: dict, prog: str | None = None) -> argparse.ArgumentParser:
    """An `argparse` parser whose help is the kept parser's (at this terminal's width)."""
    formatter = getattr(argparse, spec["formatter"])
    parser = argparse.ArgumentParser(prog=prog, formatter_class=formatter, **spec["parser"])
    defaults = {g.title: g for g in parser._action_groups}
    for group in spec["groups"]:
        target = defaults.get(group["title"]) or parser.add_argument_group(group["title"], group["description"])
        for a in group["actions"]:
            kwargs = {"dest": a["dest"], "default": a["default"], "help": a["help"], "action": a["action"]}
            if a["option_strings"]:
                kwargs["required"] = a["required"]
            if a["action"] in ("store", "append"):
                kwargs.update(nargs=a["nargs"], const=a["const"], choices=a["choices"])
                kwargs["metavar"] = tuple(a["metavar"]) if isinstance(a["metavar"], list) else a["metavar"]
            elif a["action"] == "store_const":
                kwargs["const"] = a["const"]
            if not a["option_strings"]:
                kwargs.pop("dest")
                target.add_argument(a["dest"], **kwargs)
            else:
                target.add_argument(*a["option_strings"], **kwargs)
    return parser


def fast_help(prog: str | None = None) -> str | None:
    """The train script's help from ``train_help.json``, or None where the file is missing or was made from another
    transformers release or another ``script_args.py``."""
    try:
        kept = json.loads(SPEC.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if kept.get("key") != source_key():
        return None
    return parser_from_spec(kept["spec"], prog).format_help()


def write_spec() -> Path:
    """Write ``train_help.json`` from the real parser (imports transformers)."""
    from .training.script_args import train_parser

    SPEC.write_text(json.dumps({"key": source_key(), "spec": spec_of(train_parser())}, indent=1) + "\n",
                    encoding="utf-8")  # fmt: skip
    return SPEC


if __name__ == "__main__":
    print(f"wrote {write_spec()}")
