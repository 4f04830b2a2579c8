"""What a train command line must bring for the model it trains, checked before any work: the parses each split
reads, the parser flags, guided alignment's links and document context's boundaries.

A split that trains reads what its methods read and learn from (inputs and supervision); a split that only decodes
(validation, test) reads what translating reads, so never a target tree. Standard library only: the console script
checks a ``--recipe`` run here before transformers is imported (`train_help.check_train_args`, from the recipe's own
table), and `training.prepare.check_requirements` checks every run after it, from the method registry; both word their
message here.
"""

from __future__ import annotations

from typing import Any

from .errors import UserError

SPLITS = ("train", "validation", "test")
SIDES = ("source", "target")
#: a parser backend that parses raw text or reads its own CoNLL-U files
PARSING = ("spacy", "stanza", "conllu")


def parser_flags(side: str = "source") -> tuple[str, str]:
    """The flags of one side's parser: ``("parser", "parser_model")`` or ``("target_parser", "target_parser_model")``."""
    prefix = "" if side == "source" else "target_"
    return f"{prefix}parser", f"{prefix}parser_model"


def parser_problem(backend: str | None, model: str | None, side: str = "source") -> str | None:
    """What is wrong with one side's parser flags (a backend without its model), or None."""
    flag, model_flag = parser_flags(side)
    examples = {"conllu": "the CoNLL-U file(s), comma separated",
                "spacy": "a spaCy pipeline, e.g. " + ("fr_core_news_sm" if side == "source" else "en_core_web_sm"),
                "stanza": "the stanza language code, e.g. " + ("fr" if side == "source" else "en")}  # fmt: skip
    if backend in examples and not model:
        return f"--{flag} {backend} needs --{model_flag} with {examples[backend]}"
    return None


def given_splits(flags: Any) -> list[str]:
    """The splits a command line gives data for (every split of ``--dataset_name``); ``flags``: the parsed flags."""
    if getattr(flags, "dataset_name", None):
        return list(SPLITS)
    kinds = ("file", "source_file", "source_conllu", "target_conllu")
    return [s for s in SPLITS if any(getattr(flags, f"{s}_{k}", None) for k in kinds)]


def has_parses(flags: Any, split: str, side: str) -> bool:
    """Whether ``split`` brings ``side``'s parses: its CoNLL-U file (read where the parser flag is ``auto``), or a
    parser of that side."""
    backend = getattr(flags, parser_flags(side)[0], None) or "auto"
    conllu = getattr(flags, f"{split}_{side}_conllu", None) and not getattr(flags, "dataset_name", None)
    return bool(backend in PARSING or (conllu and backend == "auto"))


_HINTS = {
    "source": "--{split}_source_conllu (the {split} sources parsed, CoNLL-U) or --parser spacy --parser_model MODEL "
              "(or --parser stanza --parser_model LANG)",
    "target": "--{split}_target_conllu (the {split} targets parsed, CoNLL-U; `hf-syntax-mt parse` writes one) or "
              "--target_parser spacy --target_parser_model MODEL (or --target_parser stanza --target_parser_model "
              "LANG)",
}  # fmt: skip


def missing_parses(reads: dict[bool, dict[str, list[str]]], flags: Any, training: bool) -> list[str]:
    """One line per split that lacks a parse it reads, and per parser flag without its model. ``reads``: for a
    split that trains (True) and one that decodes (False), parse side -> the methods (or recipe parts) that read it."""
    problems = []
    for side in SIDES:
        flag, model_flag = parser_flags(side)
        if problem := parser_problem(getattr(flags, flag, None), getattr(flags, model_flag, None), side):
            problems.append(problem)
    for split in given_splits(flags):
        trains = split == "train" and training
        for side, methods in reads[trains].items():
            if not has_parses(flags, split, side):
                plural = len(methods) > 1
                verb = ("train on" if plural else "trains on") if trains else (
                    "translate with" if plural else "translates with")  # fmt: skip
                hint = _HINTS[side].format(split=split)
                problems.append(f"the {split} split: {_join(methods)} {verb} {side} trees: give {hint}")
    return problems


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def refuse(problems: list[str]) -> None:
    """Raise one `UserError` listing every problem (nothing when there is none)."""
    if problems:
        lines = "\n".join(f"- {p}" for p in problems)
        many = f"{len(problems)} problems" if len(problems) > 1 else "1 problem"
        raise UserError(f"train: the run cannot start ({many}), nothing was read or parsed:\n{lines}")


def any_do(flags: Any) -> bool:
    """Whether a ``--do_*`` flag was given (``flags``: the command line's, or the parsed training arguments).
    ``TrainingArguments`` turns ``do_eval`` on by itself for an ``--eval_strategy`` other than ``no``: that is no
    ``--do_eval`` (such a run trained nothing and scored no test set); `SyntaxMTTrainingArguments` keeps the given
    value as ``do_eval_given``."""
    do_eval = getattr(flags, "do_eval_given", getattr(flags, "do_eval", None))
    return bool(getattr(flags, "do_train", None) or do_eval or getattr(flags, "do_predict", None))


def will_train(flags: Any) -> bool:
    """Whether a run trains: ``--do_train``, or no ``--do_*`` flag at all (then it trains, evaluates, predicts)."""
    return bool(getattr(flags, "do_train", None) or not any_do(flags))


__all__ = [
    "any_do",
    "given_splits",
    "has_parses",
    "missing_parses",
    "parser_flags",
    "parser_problem",
    "refuse",
    "will_train",
]
