"""Turn parallel text into model inputs with ``datasets.Dataset.map``.

:class:`SyntaxMTPreprocessor` is the batched map function: it parses the source side (or reads pre-computed
parses), tokenizes it, maps the tree onto the subwords (:func:`~hf_syntax_mt.data.subwords.align_parse`) and
tokenizes the target side into ``labels``. Output columns are named like ``forward()`` arguments:
``input_ids``, ``attention_mask``, ``labels`` and the columns the registered methods declare (`methods.Column`), each
computed from the source or the target parse by its own ``compute`` in the same pass (a target column aligned with
``labels``); `SyntaxMTPreprocessor.for_config` makes those a model reads. When the dataset
has a ``context`` column (the previous source sentences of the document, from
:func:`~hf_syntax_mt.data.documents.add_document_context`), it also makes the columns the methods that read a
document declare, as those methods make them from the previous sentences (`methods.registry.document_inputs`, the
pipeline's own route).

Edge cases:

- Empty (or whitespace-only) source lines are **kept**: the parser is not called, the input is the tokenizer's
  special tokens alone (Marian: ``[</s>]``, a position column ``[0]``: the token itself); a warning gives their
  number.
  Empty target lines give ``labels`` with the special tokens alone.
- Over-long lines are truncated to ``max_source_length`` / ``max_target_length`` keeping the final ``</s>``;
  source parents that pointed past the cut point to the last kept token (see :mod:`.subwords`).
- A parser or alignment failure raises ``ValueError`` naming the dataset row index and its text.

The preprocessor is picklable and deterministic (parsers pickle their configuration only, and the tokenizer's
own truncation state is never touched), so ``num_proc > 1`` works and a second identical ``map`` call reuses
``datasets``' cache instead of parsing again.

The readers of parallel files (:func:`load_parallel_files`, :func:`read_parallel_conllu`) live in :mod:`.readers` and
stay importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..errors import UserError
from ..methods.registry import (
    DataOptions,
    column_specs,
    document_columns,
    document_inputs,
    input_columns,
    supervision_columns,
)
from .parsed import ParsedSentence
from .parsers import Parser
from .readers import load_parallel_files, read_parallel_conllu
from .subwords import align_parse

logger = logging.getLogger(__name__)

__all__ = ["SyntaxMTPreprocessor", "prepare_dataset", "load_parallel_files", "read_parallel_conllu"]


def _truncate_ids(ids: list[int], max_length: int | None, special_ids: set[int]) -> list[int]:
    """Cut ``ids`` to ``max_length`` keeping a trailing special token (``</s>``)."""
    if max_length is None or len(ids) <= max_length:
        return ids
    if ids and ids[-1] in special_ids:
        if max_length < 1:
            raise UserError(f"max_length={max_length} cannot hold the final special token")
        return ids[: max_length - 1] + ids[-1:]
    return ids[:max_length]


def parse_texts(parser: Parser, texts: list[str], describe=lambda k: f"batch row {k}") -> list[ParsedSentence]:
    """Parse `texts` in one batched call; empty texts get an empty parse without reaching the parser. When the batch
    fails, rows are re-parsed one by one to name the failing one (`describe(k)` says which row it is)."""
    out: list[ParsedSentence | None] = [None] * len(texts)
    todo = []
    for k, text in enumerate(texts):
        if text is None or not str(text).strip():
            out[k] = ParsedSentence([], [], [], [], text=text or "", spans=[])
        else:
            todo.append(k)
    if todo:
        batch = [texts[k] for k in todo]
        try:
            parsed = parser.parse(batch)
            if len(parsed) != len(batch):
                raise RuntimeError(f"parser returned {len(parsed)} parses for {len(batch)} texts")  # the backend's bug
        except Exception as batch_error:
            for k in todo:  # find the failing row
                try:
                    parser.parse([texts[k]])
                except Exception as e:
                    raise UserError(
                        f"parser {parser!r} failed on {describe(k)}: {texts[k]!r}: {type(e).__name__}: {e}"
                    ) from e
            raise UserError(f"parser {parser!r} failed on a batch: {batch_error}") from batch_error
        for k, p in zip(todo, parsed, strict=True):
            out[k] = p
    return out  # type: ignore[return-value]


class SyntaxMTPreprocessor:
    """Batched ``datasets.map`` function: parse, tokenize, align; or, with ``columns=()``, tokenize only.

    Which columns it makes is read from the method registry (`methods.Column`): a column whose ``parse`` is
    ``"source"`` is computed from the source parse, one whose ``parse`` is ``"target"`` from the target parse, and the
    columns of the methods that read a document (kind ``"context"``) from the ``context_column``.

    Args:
        tokenizer: the model's tokenizer (fast, or the sentencepiece ``MarianTokenizer``).
        parser: a :class:`~hf_syntax_mt.data.parsers.Parser`; not needed when ``source_parse_column`` is given.
        source_column: column with the source texts.
        target_column: column with the target texts; when it is absent from a batch, no ``labels`` are made.
        source_parse_column: column with pre-computed parses (dicts with ``words, heads`` and optional
            ``deprels, upos, text, spans, mwt``, as written by ``ParsedSentence.to_dict``); overrides ``parser``.
        max_source_length: maximum source length in tokens (special tokens included).
        max_target_length: maximum ``labels`` length in tokens (special tokens included).
        columns: the method columns to make from the parses (names the registered methods declare, e.g.
            ``methods.registry.parse_columns(config)``; `for_config` gives a model's), each computed by its
            `methods.Column.compute`. ``()``: tokenize only (no parse is read). ``None`` (default): every registered
            column of the sides whose parses are given (``parser`` / ``source_parse_column``, ``target_parser`` /
            ``target_parse_column``).
        target_parser: a parser for the target side; with it (or ``target_parse_column``) the preprocessor also
            produces the target-parse columns (``Column.parse == "target"``), and ``labels`` come from the same
            tokenization.
        target_parse_column: column with pre-computed target parses (like ``source_parse_column``).
        context_column: column with the previous source sentences of each row's document (``list[str]``, oldest
            first); when it is in a batch, the columns of the methods that read a document are made from it
            (`methods.registry.document_inputs`: those the config switches on; without a config, every such method).
        config: the model's config, given to each column's `compute` and each document method (`for_config` passes
            it); None: the options below, else the methods' defaults.
        **options: without a config, the method options the columns are made with (`methods.registry.DataOptions`,
            e.g. a document method's token limit), each checked as the method checks it.

    Call it as ``preprocessor(batch, indices)`` (``map(batched=True, with_indices=True)``); ``indices`` only
    serve error messages. Returns a dict of per-row lists: ``input_ids``, ``attention_mask``, the parse columns
    (``(S,)`` each), ``labels`` and the target-parse columns, the document columns (``(M,)``, ``M`` may be 0).
    """

    def __init__(
        self,
        tokenizer,
        parser: Parser | None = None,
        source_column: str = "source",
        target_column: str = "target",
        source_parse_column: str | None = None,
        max_source_length: int | None = None,
        max_target_length: int | None = None,
        target_parser: Parser | None = None,
        target_parse_column: str | None = None,
        context_column: str = "context",
        columns: Sequence[str] | None = None,
        config=None,
        **options: Any,
    ):
        specs = column_specs()
        if columns is None:  # every column of the parses given
            given = {"source": parser is not None or source_parse_column is not None,
                     "target": target_parser is not None or target_parse_column is not None}  # fmt: skip
            columns = [name for name, c in specs.items() if c.parse is not None and given[c.parse]]
        unknown = [c for c in columns if c not in specs or specs[c].parse is None]
        if unknown:
            parsed = sorted(name for name, c in specs.items() if c.parse is not None)
            raise UserError(f"columns={list(columns)}: {unknown} are not columns computed from a parse; the registered "
                            f"methods declare {parsed}.")  # fmt: skip
        # in registry order, each a `methods.Column` (align_parse computes a method's own column by its `compute`)
        self.source_columns = [specs[c] for c in specs if c in columns and specs[c].parse == "source"]
        self.target_columns = [specs[c] for c in specs if c in columns and specs[c].parse == "target"]
        if self.source_columns and parser is None and source_parse_column is None:
            raise UserError(
                f"SyntaxMTPreprocessor needs a parser or a source_parse_column with pre-computed parses for "
                f"{self.source_columns} (or columns=() to tokenize only)"
            )
        if self.target_columns and target_parser is None and target_parse_column is None:
            raise UserError(f"{self.target_columns} are computed from target parses: give target_parser= or "
                            "target_parse_column=.")  # fmt: skip
        if options and config is not None:
            raise UserError(f"{sorted(options)} are method options: with config= given, set them in the config.")
        lengths = (("max_source_length", max_source_length), ("max_target_length", max_target_length))
        for name, value in lengths:
            if value is not None and value < 1:
                raise UserError(f"{name} must be a positive number of tokens, got {value}")
        self.tokenizer = tokenizer
        self.parser = parser
        self.source_column = source_column
        self.target_column = target_column
        self.source_parse_column = source_parse_column
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.target_parser = target_parser
        self.target_parse_column = target_parse_column
        self.context_column = context_column
        self.config = config
        # what the document methods read as their config: the model's, else the options given (checked here)
        self.document_config = config if config is not None else DataOptions(**options)

    @property
    def tokenize_only(self) -> bool:
        """Whether no column is computed from a parse (``columns=()``, or a model that reads none)."""
        return not self.source_columns and not self.target_columns

    @classmethod
    def for_config(cls, config, tokenizer, parser=None, **kwargs) -> SyntaxMTPreprocessor:
        """A preprocessor that produces every column the methods of `config` (a `SyntaxMTConfig`) read from the
        parses (tokenize only when they read none), with the other arguments as given (``source_column``...).

        The document columns (from ``context_column``) are those the config's methods read, made with its options.
        """
        specs = column_specs()
        wanted = {*input_columns(config), *supervision_columns(config)}  # what the config's methods read
        columns = [c for c in wanted if c in specs and specs[c].parse is not None]
        kwargs.setdefault("config", config)
        return cls(tokenizer, parser, columns=columns, **kwargs)

    def _read_parses(self, batch, column: str, texts: list[str], indices) -> list[ParsedSentence]:
        if column not in batch:
            raise KeyError(f"parse column {column!r} not in the dataset columns {sorted(batch)}")
        parses = []
        for k, d in enumerate(batch[column]):
            try:
                parses.append(d if isinstance(d, ParsedSentence) else ParsedSentence.from_dict(d))
            except (ValueError, TypeError) as e:
                raise UserError(f"invalid parse in {self._row_label(k, indices)} ({texts[k]!r}): {e}") from e
        return parses

    def _row_label(self, k: int, indices: Sequence[int] | None) -> str:
        return f"row {indices[k]}" if indices is not None else f"batch row {k}"

    def _parse(self, texts: list[str], indices: Sequence[int] | None) -> list[ParsedSentence]:
        return parse_texts(self.parser, texts, lambda k: self._row_label(k, indices))  # type: ignore[arg-type]

    def __call__(self, batch: dict[str, list[Any]], indices: Sequence[int] | None = None) -> dict[str, list[Any]]:
        if self.source_column not in batch:
            raise KeyError(f"source column {self.source_column!r} not in the dataset columns {sorted(batch)}")
        texts = ["" if t is None else t for t in batch[self.source_column]]
        _warn_empty(texts, indices)
        out = self._tokenize(texts) if not self.source_columns else self._align(batch, texts, indices)
        if self.target_column in batch:
            targets = ["" if t is None else t for t in batch[self.target_column]]
            _warn_empty(targets, indices, "target")
            if self.target_columns:
                out.update(self._target_with_heads(batch, targets, indices))
            else:
                special_ids = set(self.tokenizer.all_special_ids)
                labels = self.tokenizer(text_target=targets)["input_ids"]
                out["labels"] = [_truncate_ids(list(ids), self.max_target_length, special_ids) for ids in labels]
        if self.context_column in batch:
            out.update(self.document_columns(batch[self.context_column]))
        return out

    def _tokenize(self, texts: list[str]) -> dict[str, list[Any]]:
        """``input_ids`` and ``attention_mask``, truncated keeping ``</s>`` (tokenize-only: no parse)."""
        special = set(self.tokenizer.all_special_ids)
        encoded = self.tokenizer(texts)["input_ids"]
        ids = [_truncate_ids(list(x), self.max_source_length, special) for x in encoded]
        return {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]}

    def _align(self, batch, texts: list[str], indices) -> dict[str, list[Any]]:
        """The source columns from the parses, mapped onto the subwords (`align_parse`)."""
        if self.source_parse_column is not None:
            parses = self._read_parses(batch, self.source_parse_column, texts, indices)
        else:
            parses = self._parse(texts, indices)
        out: dict[str, list[Any]] = {str(name): [] for name in ("input_ids", "attention_mask", *self.source_columns)}
        for k, (text, parse) in enumerate(zip(texts, parses, strict=True)):
            try:
                aligned = align_parse(self.tokenizer, parse, text=text if text.strip() else None,
                                      max_length=self.max_source_length, columns=self.source_columns,
                                      config=self.config)  # fmt: skip
            except UserError as e:  # a parse that does not fit the text; anything else is a bug
                raise UserError(
                    f"cannot align the parse with the tokens in {self._row_label(k, indices)}: {text!r}: {e}"
                ) from e
            for name in out:
                out[name].append(aligned[name])
        return out

    def document_columns(self, contexts: Sequence[Sequence[str] | None]) -> dict[str, list[list]]:
        """The document methods' columns (each row ``(M_i,)``) of a batch of contexts (each the previous source
        sentences of a row's document, oldest first; None or ``[]``: none), as the methods make them."""
        rows = [document_inputs(self.document_config, self.tokenizer, list(c or [])) for c in contexts]
        return {name: [row[name] for row in rows] for name in document_columns(self.document_config)}

    def output_columns(self, input_columns: Sequence[str]) -> list[str]:
        """The columns produced for a dataset with ``input_columns``, in output order."""
        names = ["input_ids", "attention_mask", *map(str, self.source_columns)]
        if self.target_column in input_columns:
            names += ["labels", *map(str, self.target_columns)]
        if self.context_column in input_columns:
            names += document_columns(self.document_config)
        return names

    def output_features(self, input_columns: Sequence[str]):
        """``datasets.Features`` of :meth:`output_columns`: the types ``datasets`` infers for them (token ids int32,
        ``attention_mask`` int8, float columns float64, other ints int64), given explicitly so
        that a first batch where a column is all empty lists (first sentences: no context) does not fix its type to
        ``list<null>``."""
        from datasets import Features, List, Value

        specs = column_specs()
        dtypes = {"input_ids": "int32", "attention_mask": "int8"}
        for name, spec in specs.items():  # a column padded with the pad id holds token ids
            dtypes.setdefault(name, "float64" if spec.is_float else "int32" if spec.pad == "pad_token_id" else "int64")
        return Features({name: List(Value(dtypes.get(name, "int64"))) for name in self.output_columns(input_columns)})

    def _target_with_heads(self, batch, targets: list[str], indices) -> dict[str, list[Any]]:
        """``labels`` and the target-parse columns (a position column: positions in ``labels``)."""
        if self.target_parse_column is not None:
            parses = self._read_parses(batch, self.target_parse_column, targets, indices)
        else:
            parses = parse_texts(self.target_parser, targets, lambda k: f"target of {self._row_label(k, indices)}")
        out: dict[str, list[Any]] = {str(name): [] for name in ("labels", *self.target_columns)}
        for k, (text, parse) in enumerate(zip(targets, parses, strict=True)):
            try:
                aligned = align_parse(
                    self.tokenizer, parse, text=text if text.strip() else None, max_length=self.max_target_length,
                    columns=self.target_columns, target=True, config=self.config,
                )  # fmt: skip
            except UserError as e:  # a parse that does not fit the text; anything else is a bug
                raise UserError(
                    f"cannot align the target parse with the tokens in {self._row_label(k, indices)}: {text!r}: {e}"
                ) from e
            out["labels"].append(aligned["input_ids"])
            for name in self.target_columns:
                out[str(name)].append(aligned[name])
        return out


def prepare_dataset(
    dataset,
    tokenizer,
    parser: Parser | None,
    num_proc: int | None = None,
    desc: str = "Parsing and aligning",
    batch_size: int = 256,
    map_kwargs: dict[str, Any] | None = None,
    **kw: Any,
):
    """Run :class:`SyntaxMTPreprocessor` over a ``Dataset`` / ``DatasetDict`` and drop the raw columns.

    Args:
        dataset: ``datasets.Dataset`` or ``DatasetDict`` with the source (and target) text columns.
        tokenizer, parser: see :class:`SyntaxMTPreprocessor`.
        num_proc: worker processes for ``map``.
        desc: progress bar description.
        batch_size: rows per ``map`` batch (one parser call per batch).
        map_kwargs: more ``Dataset.map`` arguments (e.g. ``cache_file_name``, ``load_from_cache_file``).
        **kw: more :class:`SyntaxMTPreprocessor` arguments (``source_column``, ``max_source_length``...).
    """
    preprocessor = SyntaxMTPreprocessor(tokenizer, parser, **kw)
    columns = dataset.column_names
    if isinstance(columns, dict):  # DatasetDict
        columns = next(iter(columns.values()), [])
        splits = dataset.values()
    else:
        splits = [dataset]
    n_empty = sum(1 for split in splits for t in split[preprocessor.source_column] if t is None or not str(t).strip())
    if n_empty:
        logger.warning("%d empty source line(s): kept, with the special tokens alone as input", n_empty)
    return dataset.map(
        preprocessor,
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=list(columns),
        features=preprocessor.output_features(columns),
        desc=desc,
        **(map_kwargs or {}),
    )


def _warn_empty(texts: list[str], indices: Sequence[int] | None, side: str = "source") -> None:
    """The warning the module docstring promises for empty source (and target) lines, with the first rows that have
    one."""
    empty = [k if indices is None else indices[k] for k, t in enumerate(texts) if not t.strip()]
    if empty:
        rows = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
        where = "row" if indices is not None else "batch row"
        what = "input" if side == "source" else "labels (the model learns to output nothing for them)"
        logger.warning(f"{len(empty)} empty {side} line(s) ({where}s {rows}) kept, with the special tokens alone as "
                       f"{what}")  # fmt: skip
