"""`hf-syntax-mt train --help` in a fraction of a second: the train script's `HfArgumentParser` help, kept.

The train script's flags are `HfArgumentParser`'s over three dataclasses, one of them transformers'
`Seq2SeqTrainingArguments`, and building that parser imports transformers and torch (10-40 s). This module, standard
library only, keeps what the help is made of, each argparse action of the real parser (its flags, nargs, default,
choices, metavar and help text), in ``train_help.json``, and rebuilds an `argparse` parser from it that prints the
same help at any terminal width. The file records what it was made from: the transformers release and the hash of
``training/script_args.py``; where either differs from this installation's, `fast_help` returns None and the real
parser answers. ``python -m hf_syntax_mt.train_help`` writes the file again (a test checks it equals the real
parser's help).

The same kept parser checks a ``train`` command line before the import (`check_train_args`): an unknown flag, a
value of the wrong type or outside its choices, and a number below the train script's minimum
(``script_args.MINIMUMS``, kept in the file too) answer in a fraction of a second, as `translate`'s errors do.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
from importlib import metadata
from pathlib import Path

from .cli_args import TrainHelpFormatter  # loaded before this module by the console script (hf_syntax_mt_cli)

SPEC = Path(__file__).with_name("train_help.json")
SCRIPT_ARGS = Path(__file__).with_name("training") / "script_args.py"
_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
            "_StoreConstAction": "store_const", "_AppendAction": "append", "_CountAction": "count"}  # fmt: skip


#: the modules the help is made from besides ``script_args.py``: the recipes (``--recipe``'s help) and the methods
#: (a flag for each option they declare)
SOURCES = (Path(__file__).with_name("recipes.py"), *sorted(Path(__file__).with_name("methods").glob("*.py")))


def source_key() -> dict:
    """What the help is made from: the installed transformers release, the train script's arguments module, and the
    recipes and method modules whose options become flags."""
    try:
        transformers = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        transformers = None
    methods = hashlib.sha256()
    for path in SOURCES:
        methods.update(path.name.encode() + b"\0" + path.read_bytes())
    return {"transformers": transformers, "script_args": hashlib.sha256(SCRIPT_ARGS.read_bytes()).hexdigest(),
            "methods": methods.hexdigest()}  # fmt: skip


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
            type_name = getattr(action.type, "__name__", None)
            if default is not None and not isinstance(default, (bool, int, float, str)):
                default = str(default)  # enums, lists: only their text shows in the help
            actions.append({
                "option_strings": action.option_strings, "dest": action.dest, "action": kind,
                "nargs": action.nargs, "const": action.const, "default": default, "required": action.required,
                "choices": None if action.choices is None else [str(c) for c in action.choices],
                "metavar": list(action.metavar) if isinstance(action.metavar, tuple) else action.metavar,
                "help": action.help, "type": type_name if type_name in _TYPES else None,
            })  # fmt: skip
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    keep = ("usage", "description", "epilog", "add_help", "allow_abbrev", "prefix_chars")
    return {"parser": {k: getattr(parser, k) for k in keep}, "groups": groups,
            "formatter": parser.formatter_class.__name__}  # fmt: skip


def _string_to_bool(value):
    """transformers' `hf_argparser.string_to_bool` (``--do_train false``), with its message."""
    if isinstance(value, bool):
        return value
    if value.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Truthy value expected: got {value} but expected one of yes/no, true/false, t/f, "
                                     "y/n, 1/0 (case insensitive).")  # fmt: skip


_string_to_bool.__name__ = "string_to_bool"
#: the value types of the real parser that the kept one checks (any other flag takes its value as text)
_TYPES = {"int": int, "float": float, "string_to_bool": _string_to_bool}


def parser_from_spec(spec: dict, prog: str | None = None, check: bool = False) -> argparse.ArgumentParser:
    """An `argparse` parser whose help is the kept parser's (at this terminal's width); with ``check``, one that
    parses a command line as the real parser does (value types, choices; no defaults: only the given flags are
    read)."""
    formatter = (
        TrainHelpFormatter if spec["formatter"] == "TrainHelpFormatter" else getattr(argparse, spec["formatter"])
    )
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
                if check:
                    kwargs["type"] = _TYPES.get(a.get("type"))
            if check:
                kwargs["default"] = None
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
    kept = _kept()
    return None if kept is None else parser_from_spec(kept["spec"], prog).format_help()


def _kept() -> dict | None:
    try:
        kept = json.loads(SPEC.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return kept if kept.get("key") == source_key() else None


def check_train_args(argv: list[str], prog: str = "hf-syntax-mt train") -> None:
    """Check a ``train`` command line with the kept parser, before torch and transformers are imported: an unknown
    flag is a `UserError` worded as `script_args.parse_args`'s (with the closest flags), a number below its minimum
    as `script_args.check_ranges`'; a wrong value type or choice exits through argparse's usage error, as the real
    parser does. Nothing is checked where the kept file is not this installation's (the real parser then answers),
    nor for a single ``.json`` file of arguments."""
    from .errors import UserError

    kept = _kept()
    if kept is None or (len(argv) == 1 and argv[0].endswith(".json")):
        return
    parser = parser_from_spec(kept["spec"], prog, check=True)
    args, remaining = parser.parse_known_args(argv)
    if remaining:
        known = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
        close = difflib.get_close_matches(remaining[0].split("=")[0], known, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else " (hf-syntax-mt train --help lists them)"
        raise UserError(f"train: unrecognized arguments: {' '.join(remaining)}{hint}")
    for name, minimum in kept.get("minimums", {}).items():
        value = getattr(args, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < minimum:
            raise UserError(f"--{name} must be at least {minimum}, got {value}")
    check_recipe_parses(args, kept.get("method_flags", []))


def check_recipe_parses(args, method_flags) -> None:
    """A ``--recipe`` run whose splits lack a parse the recipe reads (a recipe with DBSA without target trees, say)
    is refused here, before transformers is imported, with every problem listed (`run_requirements`). Only where
    the recipe alone decides the model: a method flag, ``--config_overrides`` or a checkpoint may change what it
    reads, and `training.prepare.check_requirements` checks those runs once the method registry is loaded."""
    from .recipes import RECIPES, parses_read
    from .run_requirements import missing_parses, refuse, will_train

    recipe = getattr(args, "recipe", None)
    if recipe not in RECIPES or getattr(args, "config_overrides", None) or getattr(args, "model_name_or_path", None):
        return
    if any(getattr(args, flag, None) is not None for flag in method_flags):
        return
    reads = {True: parses_read(recipe, training=True), False: parses_read(recipe, training=False)}
    refuse(missing_parses(reads, args, will_train(args)))


def write_spec() -> Path:
    """Write ``train_help.json`` from the real parser (imports transformers)."""
    from .training.script_args import MINIMUMS, model_arguments_class, train_parser

    kept = {"key": source_key(), "spec": spec_of(train_parser()), "minimums": MINIMUMS,
            "method_flags": sorted(model_arguments_class().method_flags)}  # fmt: skip
    SPEC.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    return SPEC


if __name__ == "__main__":
    print(f"wrote {write_spec()}")
