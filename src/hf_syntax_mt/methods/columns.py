"""The data columns a method declares (`Method.inputs`, `Method.supervision`): each a `Column`, a name with what its
values are aligned with, how they are padded and how they are computed from a parse. The collator, the preprocessor
and the pipeline read these declarations (`registry.column_specs`) and nothing else: `data.subwords.align_parse` maps
a parse onto the subwords (a `SubwordParse`) and calls each column's `compute`, built-in or not."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError

__all__ = ["COLUMN_KINDS", "PARSE_SIDES", "Column", "DataTransform", "SubwordParse", "TransformContext"]

#: what a column's values are aligned with, and so how the collator pads it and how truncation cuts it:
#: "source": one value per `input_ids` token, padded with `pad`; "source_position": one per `input_ids` token, each a
#: position in the same sequence (a padding token points to itself; left padding shifts the others; truncation points
#: a position past the cut to the last kept token); "word": one per syntactic word of the source, its own length,
#: padded with `pad`; "target" / "target_position": the same for `labels`; "context": one per `context_input_ids`
#: token (document context, length M >= 0), padded with `pad`
COLUMN_KINDS = ("source", "source_position", "word", "target", "target_position", "context")
#: the `Column.parse` a column is computed from: the source or the target sentence's parse, or neither (None: another
#: part of the data side makes it, e.g. the document context)
PARSE_SIDES = ("source", "target")
_KINDS_OF_SIDE = {"source": ("source", "source_position", "word"), "target": ("target", "target_position")}


@dataclass(frozen=True)
class SubwordParse:
    """One sentence's parse mapped onto its subwords (before truncation): what `Column.compute` reads.

    Attributes:
        parse: the sentence's `data.parsed.ParsedSentence` (words, 1-based heads with 0 = root, deprels, upos).
        word_ids: `(T,)` the 0-based word each token belongs to, None for special tokens.
        positions: `(n,)` the token positions that stand for each word: its own subwords, or for a word that has
            none (the other words of a multi-word token, a word the tokenizer merged away) the subwords that
            represent it (`data.subwords.align_parse`'s rules); a head points into these.
        target: whether the sentence is a target (tokenized as `labels`).
    """

    parse: Any
    word_ids: tuple[int | None, ...]
    positions: tuple[tuple[int, ...], ...]
    target: bool = False

    def head_subwords(self, w: int) -> tuple[int, ...]:
        """The positions of the head word of word `w` (the root word: its own); a head word without subwords is an
        error (a heads list that `align_parse`'s redirections did not go through)."""
        h = self.parse.heads[w]
        head = w if h == 0 else h - 1
        if not self.positions[head]:
            raise UserError(f"word {head} has no subword in word_ids but is needed as a head by word {w}; use "
                            "align_parse, which redirects heads of multi-word tokens and truncated words")  # fmt: skip
        return self.positions[head]


class Column(str):
    """A data column a method reads: its name (a `str`: every reader of names takes it as one) with how the data side
    treats it.

    Args:
        name: the column's name, which is also the `forward()` argument it becomes.
        kind: one of `COLUMN_KINDS`: what the values are aligned with, how they are padded and truncated.
        pad: the padding value (`"pad_token_id"`: the tokenizer's).
        dtype: `"int64"` or `"float32"`.
        parse: `"source"` or `"target"` (`PARSE_SIDES`): the parse the column is computed from, by `compute`; None:
            not from a parse.
        compute: `compute(sentence, config) -> list`, given a `SubwordParse` and the model's config (None where
            `align_parse` is called without one, e.g. a user's own call: fall back on the option's default): one
            value per token, special tokens included, for a token kind (a position kind: positions in the same
            sequence, a special token its own), one per word for `"word"`. Module-level (the preprocessor is
            pickled for `datasets.map`).
    """

    kind: str
    pad: Any
    dtype: str
    parse: str | None
    compute: Callable[[SubwordParse, Any], list] | None

    def __new__(
        cls,
        name: str,
        kind: str,
        pad: Any = 0,
        dtype: str = "int64",
        parse: str | None = None,
        compute: Callable[[SubwordParse, Any], list] | None = None,
    ):
        if kind not in COLUMN_KINDS:
            raise UserError(f"Column {name!r}: kind={kind!r} must be one of {COLUMN_KINDS}.")
        if parse is not None and parse not in PARSE_SIDES:
            raise UserError(f"Column {name!r}: parse={parse!r} must be one of {PARSE_SIDES} or None.")
        if parse is not None and kind not in _KINDS_OF_SIDE[parse]:
            raise UserError(f"Column {name!r}: a column computed from the {parse} parse has a kind of that side "
                            f"{_KINDS_OF_SIDE[parse]}, not kind={kind!r}.")  # fmt: skip
        if (parse is None) != (compute is None):
            raise UserError(f"Column {name!r}: give parse= and compute= together (a column computed from a parse "
                            f"says which parse and how), got parse={parse!r}, compute={compute!r}.")  # fmt: skip
        if compute is not None and not callable(compute):
            raise UserError(f"Column {name!r}: compute={compute!r} must be a function (sentence, config) -> list.")
        column = super().__new__(cls, name)
        column.kind, column.pad, column.dtype, column.parse, column.compute = kind, pad, dtype, parse, compute
        return column

    def __reduce__(self):  # picklable (datasets hashes and pickles the preprocessor)
        return (Column, (str(self), self.kind, self.pad, self.dtype, self.parse, self.compute))

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("float")

    @property
    def is_position(self) -> bool:
        """Whether its values are positions in their own sequence (cut by truncation to the last kept token)."""
        return self.kind.endswith("_position")


@dataclass(frozen=True)
class DataTransform:
    """A step a method adds to the train script's data pipeline besides its columns, declared as OpenNMT-py's
    transforms declare theirs (`Method.transforms`; `Method.data_transforms(config)` gives those a config runs): the
    train script checks what it reads before any work and runs it, naming no method.

    Attributes:
        name: what the step does, for its progress bar ("Guided-alignment targets").
        apply: ``"module:function"``, imported when the step runs (a method imports nothing above it):
            ``function(dataset, context, **kwargs) -> dataset``, with `context` a `TransformContext`.
        stage: ``"raw"``: on a raw split before the preprocessor (it adds raw columns, e.g. the document context);
            ``"processed"``: on the preprocessed split after it (it adds model columns, e.g. alignment targets).
        training_only: it runs on the split that trains only (training supervision), else on every split.
        reads: the raw column it needs (``"doc_id"``, ``"alignment"``), made by `flag`; None: nothing.
        flag: the train script's option that makes `reads` for a split, ``{split}`` standing for the split's name
            (``"{split}_docid_file"``: ``--train_docid_file``...).
        missing: the one-line error when `reads` is missing: ``{split}`` and the config's options may appear in
            braces (``"context_sentences={context_sentences} needs document boundaries: give --{split}_docid_file"``).
        enable: how to switch the method on, for the error when `reads` is given to a model that does not run the
            step (``"--config_overrides guided_alignment_weight=0.05"``).
        options: the step's keyword arguments from config options: argument -> option (``{"k": "context_sentences"}``).
    """

    name: str
    apply: str
    stage: str = "processed"
    training_only: bool = False
    reads: str | None = None
    flag: str | None = None
    missing: str = ""
    enable: str = ""
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.stage not in ("raw", "processed"):
            raise UserError(f"DataTransform {self.name!r}: stage={self.stage!r} must be 'raw' or 'processed'.")
        if ":" not in self.apply:
            raise UserError(f"DataTransform {self.name!r}: apply={self.apply!r} must be 'module:function'.")

    def runs_on(self, split: str, training: bool) -> bool:
        """Whether it runs on `split` of a run that trains (`training`) or only decodes."""
        return not self.training_only or (split == "train" and training)

    def kwargs(self, config) -> dict:
        return {argument: getattr(config, option) for argument, option in self.options.items()}

    def missing_message(self, config, split: str) -> str:
        return self.missing.format(split=split, **{k: getattr(config, k) for k in _braced(self.missing)})


def _braced(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name and name != "split"]


@dataclass(frozen=True)
class TransformContext:
    """What a `DataTransform` is run with besides its dataset: the split's name, its raw rows (``source``,
    ``target`` and the columns flags added, line aligned with the dataset), the tokenizer, the length limits and the
    number of worker processes."""

    split: str
    raw: Any
    tokenizer: Any
    max_source_length: int | None = None
    max_target_length: int | None = None
    num_proc: int | None = None
