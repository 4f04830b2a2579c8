"""A method that learns from supervision it does not get: DBSA, LISA, the synchronous loss, guided
alignment and multi-task training each read training-only columns; without them their loss silently does not run
(the DBSA heads' U matrices then drift as unsupervised query transforms). Driven by the registry: whatever columns an
active method declares (`Method.supervision_columns`) are expected in every training batch.

- `check_batch` runs at the model's first training step (any training loop: the package's Trainer, transformers'
  ``run_translation.py``, a loop of one's own) and warns once, naming the method, the columns it expected and how to
  make them; ``HF_SYNTAX_MT_MISSING_SUPERVISION=error`` (or ``train --missing_supervision error``) makes it an error.
- `check_columns` runs where the package controls the run (`SyntaxMTTrainer.train`, before the first step): a
  missing parse *input* (PASCAL's ``parent_positions``, the tree bias's word heads, ...: needed at inference too) is
  an error there, and missing supervision is the same warning, once.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection

from ..errors import UserError
from .registry import active_methods, column_specs, registered

__all__ = ["ENV", "MissingSupervisionWarning", "check_batch", "check_columns", "missing_supervision"]

#: set to ``error`` to make missing supervision an error instead of a warning
ENV = "HF_SYNTAX_MT_MISSING_SUPERVISION"

#: how the preprocessor and the train script make a column computed from each side's parse
_FROM_PARSE = {
    "source": "from the source parses (parser= or source_parse_column=...; train --train_source_conllu or --parser)",
    "target": "from the target parses (target_parser= or target_parse_column=...; train --train_target_conllu or "
              "--target_parser)",
}  # fmt: skip


def how_made(name: str) -> str:
    """How column `name` is made, read from its declaration: from a parse (`Column.parse`), or by a data step of the
    method that declares it (`Method.transforms`, with the train script's flag); "" when neither says."""
    column = column_specs().get(name)
    if column is not None and column.parse is not None:
        return _FROM_PARSE[column.parse]
    steps = [step for m in registered() if name in (*m.inputs, *m.supervision) for step in m.transforms if step.flag]
    return "; ".join(f"by the data step {step.name!r} from a split's {step.reads!r} column (train "
                     f"--{step.flag.format(split='train')})" for step in steps)  # fmt: skip


class MissingSupervisionWarning(UserWarning):
    """A method's supervision columns are missing from the training data: its loss does not run."""


def strict() -> bool:
    return os.environ.get(ENV, "").strip().lower() == "error"


def missing_supervision(config, present: Collection[str]) -> dict[str, tuple[str, ...]]:
    """Active method name -> the supervision columns it declares that are not in ``present``."""
    out = {}
    for method in active_methods(config):
        missing = tuple(c for c in method.supervision_columns(config) if c not in present)
        if missing:
            out[method.name] = missing
    return out


def _message(missing: dict[str, tuple[str, ...]], where: str) -> str:
    parts = [f"{name} expects {', '.join(columns)}" for name, columns in missing.items()]
    columns = list(dict.fromkeys(c for cs in missing.values() for c in cs))
    how = "; ".join(f"{c} {made}" if (made := how_made(c)) else c for c in columns)
    return (f"{where} has no {', '.join(columns)}: {'; '.join(parts)}, so its loss does not run and its heads train "
            "as unsupervised attention. Make the columns with hf_syntax_mt.data.SyntaxMTPreprocessor.for_config("
            f"config, tokenizer, ...): {how}. {ENV}=error (train --missing_supervision error) makes this an error.")  # fmt: skip


def _report(message: str, error: bool | None) -> None:
    if strict() if error is None else error:
        raise UserError(message)
    warnings.warn(message, MissingSupervisionWarning, stacklevel=4)


def _task_tokens_missing(config, labels) -> bool:
    """A multi-task model (``config.task_token_ids``) whose labels do not start with a task token: the data did not
    go through `hf_syntax_mt.data.multitask.multitask_dataset`, so the model never learns the parsing task."""
    ids = getattr(config, "task_token_ids", None)
    if not ids or labels is None or labels.ndim != 2 or labels.shape[1] == 0:
        return False
    first = labels[:, 0]
    return not bool(sum((first == int(i)) for i in ids.values()).all())


def check_batch(model, present: Collection[str], labels=None, error: bool | None = None) -> None:
    """At the first training step: warn once (or raise `UserError` when ``error`` / ``HF_SYNTAX_MT_MISSING_SUPERVISION=
    error``) when an active method's supervision columns are not in ``present`` (the batch's keyword arguments
    that are not None), or a multi-task model's labels carry no task token."""
    if getattr(model, "_supervision_checked", False):
        return
    model._supervision_checked = True
    error = getattr(model, "_supervision_error", None) if error is None else error  # set by SyntaxMTTrainer
    config = model.config
    if missing := missing_supervision(config, present):
        _report(_message(missing, "The first training batch"), error)
    if _task_tokens_missing(config, labels):
        _report("The first training batch's labels start with no task token of config.task_token_ids "
                f"({config.task_token_ids}): a multi-task model learns the parsing task from the rows that "
                "hf_syntax_mt.data.multitask.multitask_dataset(dataset, parse_column='source_parse') adds (after "
                f"add_task_tokens). {ENV}=error makes this an error.", error)  # fmt: skip


def check_columns(model, columns: Collection[str], error: bool | None = None) -> None:
    """Before the first step of a run the package controls: a parse input the model reads at training and inference
    (a method with ``from_parse``) missing from the training data's ``columns`` is a `UserError`; missing
    supervision warns (once for the run: the first step does not warn again)."""
    config = model.config
    for method in active_methods(config):
        needed = [c for c in method.input_columns(config) if c not in columns]
        if method.from_parse and needed:
            raise UserError(f"the training data has no {', '.join(needed)}, which {method.name} reads at every step "
                            f"(training and translation): prepare it with hf_syntax_mt.data.SyntaxMTPreprocessor."
                            f"for_config(config, tokenizer, parser=...) (or source_parse_column=...), from the "
                            f"source parses; the columns it has: {sorted(columns)}")  # fmt: skip
    if missing := missing_supervision(config, columns):
        model._supervision_checked = True
        _report(_message(missing, "The training data"), error)
