"""Turn parallel text into model inputs with ``datasets.Dataset.map``.

:class:`SyntaxMTPreprocessor` is the batched map function: it parses the source side (or reads pre-computed
parses), tokenizes it, maps the tree onto the subwords (:func:`~hf_syntax_mt.data.subwords.align_parse`) and
tokenizes the target side into ``labels``. Output columns are named like ``forward()`` arguments:
``input_ids``, ``attention_mask``, ``parent_positions``, ``labels`` and, on request, every supervision and
feature column of the syntax options, computed in the same pass: ``lisa_parents``, ``dbsa_heads`` (source),
``decoder_dbsa_heads`` (target, aligned with ``labels``; needs target parses), ``word_index`` + ``word_heads``
(syntax-directed heads) and ``pos_ids``, ``deprel_ids``, ``subword_tag_ids`` (input features). When the dataset
has a ``context`` column (the previous source sentences of the document, from
:func:`~hf_syntax_mt.data.documents.add_document_context`), it also produces ``context_input_ids`` and
``context_attention_mask`` (:func:`~hf_syntax_mt.data.documents.encode_context`: each sentence with its special
tokens, oldest first, left-truncated to ``max_context_length`` so the most recent tokens are kept).

Edge cases:

- Empty (or whitespace-only) source lines are **kept**: the parser is not called, the input is the tokenizer's
  special tokens alone (Marian: ``[</s>]``, ``parent_positions == [0.0]``); a warning gives their number.
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
from .documents import encode_context
from .parsed import ParsedSentence
from .parsers import Parser
from .readers import load_parallel_files, read_parallel_conllu
from .subwords import align_parse

logger = logging.getLogger(__name__)

__all__ = ["SyntaxMTPreprocessor", "TokenizeOnly", "prepare_dataset", "load_parallel_files", "read_parallel_conllu"]


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
    """Batched ``datasets.map`` function: parse, tokenize, align.

    Args:
        tokenizer: the model's tokenizer (fast, or the sentencepiece ``MarianTokenizer``).
        parser: a :class:`~hf_syntax_mt.data.parsers.Parser`; not needed when ``source_parse_column`` is given.
        source_column: column with the source texts.
        target_column: column with the target texts; when it is absent from a batch, no ``labels`` are made.
        source_parse_column: column with pre-computed parses (dicts with ``words, heads`` and optional
            ``deprels, upos, text, spans, mwt``, as written by ``ParsedSentence.to_dict``); overrides ``parser``.
        max_source_length: maximum source length in tokens (special tokens included).
        max_target_length: maximum ``labels`` length in tokens (special tokens included).
        compute_lisa: also produce ``lisa_parents``.
        compute_dbsa: also produce ``dbsa_heads``.
        compute_tree: also produce ``word_index`` and ``word_heads`` (syntax-directed heads).
        compute_features: also produce ``pos_ids``, ``deprel_ids`` and ``subword_tag_ids`` (input features).
        target_parser: a parser for the target side; with it (or ``target_parse_column``) the preprocessor also
            produces ``decoder_dbsa_heads`` (decoder DBSA heads), and ``labels`` come from the same tokenization.
        target_parse_column: column with pre-computed target parses (like ``source_parse_column``).
        context_column: column with the document context (``list[str]``, previous source sentences, oldest first);
            when it is in a batch, ``context_input_ids`` and ``context_attention_mask`` (all ones) are produced.
        max_context_length: most context tokens kept (the most recent ones); ``None``: no limit.

    Call it as ``preprocessor(batch, indices)`` (``map(batched=True, with_indices=True)``); ``indices`` only
    serve error messages. Returns a dict of per-row lists: ``input_ids``, ``attention_mask``,
    ``parent_positions`` (``(S,)`` floats), ``labels``, ``context_input_ids`` / ``context_attention_mask`` (``(M,)``,
    ``M`` may be 0) and the optional columns.
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
        compute_lisa: bool = False,
        compute_dbsa: bool = False,
        compute_tree: bool = False,
        compute_features: bool = False,
        target_parser: Parser | None = None,
        target_parse_column: str | None = None,
        context_column: str = "context",
        max_context_length: int | None = None,
    ):
        if parser is None and source_parse_column is None:
            raise UserError("SyntaxMTPreprocessor needs a parser or a source_parse_column with pre-computed parses")
        lengths = (("max_source_length", max_source_length), ("max_target_length", max_target_length),
                   ("max_context_length", max_context_length))  # fmt: skip
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
        self.compute_lisa = compute_lisa
        self.compute_dbsa = compute_dbsa
        self.compute_tree = compute_tree
        self.compute_features = compute_features
        self.target_parser = target_parser
        self.target_parse_column = target_parse_column
        self.context_column = context_column
        self.max_context_length = max_context_length

    @classmethod
    def for_config(cls, config, tokenizer, parser=None, **kwargs) -> SyntaxMTPreprocessor | TokenizeOnly:
        """A preprocessor that produces every column the options of `config` (a `SyntaxMTConfig`) consume; a
        `TokenizeOnly` when no parser is given and no option needs a parse.

        With document context (``config.uses_context``), ``max_context_length`` defaults to
        ``config.resolved_max_context_length`` (``max_context_length``, else ``max_position_embeddings``).
        """
        from ..methods.registry import input_columns, supervision_columns

        columns = {*input_columns(config), *supervision_columns(config)}  # what the config's methods read
        options = dict(
            compute_lisa="lisa_parents" in columns,
            compute_dbsa="dbsa_heads" in columns,
            compute_tree="word_index" in columns,
            compute_features=any(c in columns for c in ("pos_ids", "deprel_ids", "subword_tag_ids")),
        )
        needs_target = "decoder_dbsa_heads" in columns
        if needs_target and kwargs.get("target_parser") is None and kwargs.get("target_parse_column") is None:
            raise UserError(
                f"decoder_dbsa_heads={config.decoder_dbsa_heads} is trained on target parses: give target_parser= "
                "or target_parse_column=."
            )
        if getattr(config, "uses_context", False):
            options["max_context_length"] = config.resolved_max_context_length
        needs_parse = config.needs_source_parse or needs_target or any(v is True for v in options.values())
        if parser is None and not needs_parse and kwargs.get("source_parse_column") is None:
            # nothing the model reads depends on a parse (e.g. document context alone): tokenize only
            return TokenizeOnly(tokenizer, kwargs.get("max_source_length"), kwargs.get("max_target_length"),
                                options.get("max_context_length"))  # fmt: skip
        return cls(tokenizer, parser, **{**options, **kwargs})

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
        if self.source_parse_column is not None:
            parses = self._read_parses(batch, self.source_parse_column, texts, indices)
        else:
            parses = self._parse(texts, indices)
        _warn_empty(texts, indices)

        names = self.output_columns([])  # the source-side columns
        out: dict[str, list[Any]] = {name: [] for name in names}
        for k, (text, parse) in enumerate(zip(texts, parses, strict=True)):
            try:
                aligned = align_parse(
                    self.tokenizer,
                    parse,
                    text=text if text.strip() else None,
                    max_length=self.max_source_length,
                    compute_lisa=self.compute_lisa,
                    compute_dbsa=self.compute_dbsa,
                    compute_tree=self.compute_tree,
                    compute_features=self.compute_features,
                )
            except UserError as e:  # a parse that does not fit the text; anything else is a bug
                raise UserError(
                    f"cannot align the parse with the tokens in {self._row_label(k, indices)}: {text!r}: {e}"
                ) from e
            for name in out:
                out[name].append(aligned[name])

        if self.target_column in batch:
            targets = ["" if t is None else t for t in batch[self.target_column]]
            _warn_empty(targets, indices, "target")
            if self.target_parser is not None or self.target_parse_column is not None:
                out.update(self._target_with_heads(batch, targets, indices))
            else:
                special_ids = set(self.tokenizer.all_special_ids)
                labels = self.tokenizer(text_target=targets)["input_ids"]
                out["labels"] = [_truncate_ids(list(ids), self.max_target_length, special_ids) for ids in labels]
        if self.context_column in batch:
            out.update(self.encode_contexts(batch[self.context_column]))
        return out

    def encode_contexts(self, contexts: Sequence[Sequence[str] | None]) -> dict[str, list[list[int]]]:
        """``context_input_ids`` (each ``(M_i,)``) and ``context_attention_mask`` (ones) of a batch of contexts."""
        ids = [encode_context(self.tokenizer, list(c or []), self.max_context_length) for c in contexts]
        return {"context_input_ids": ids, "context_attention_mask": [[1] * len(row) for row in ids]}

    def output_columns(self, input_columns: Sequence[str]) -> list[str]:
        """The columns produced for a dataset with ``input_columns``, in output order."""
        names = ["input_ids", "attention_mask", "parent_positions"]
        names += ["lisa_parents"] * self.compute_lisa + ["dbsa_heads"] * self.compute_dbsa
        names += ["word_index", "word_heads"] * self.compute_tree
        names += ["pos_ids", "deprel_ids", "subword_tag_ids"] * self.compute_features
        if self.target_column in input_columns:
            names.append("labels")
            if self.target_parser is not None or self.target_parse_column is not None:
                names.append("decoder_dbsa_heads")
        if self.context_column in input_columns:
            names += ["context_input_ids", "context_attention_mask"]
        return names

    def output_features(self, input_columns: Sequence[str]):
        """``datasets.Features`` of :meth:`output_columns`: the types ``datasets`` infers for them (``input_ids``
        int32, masks int8, ``parent_positions`` float64, other ids int64), given explicitly so that a first batch
        where a column is all empty lists (first sentences: no context) does not fix its type to ``list<null>``."""
        from datasets import Features, List, Value

        dtypes = {"input_ids": "int32", "context_input_ids": "int32", "attention_mask": "int8",
                  "context_attention_mask": "int8", "parent_positions": "float64"}  # fmt: skip
        return Features({name: List(Value(dtypes.get(name, "int64"))) for name in self.output_columns(input_columns)})

    def _target_with_heads(self, batch, targets: list[str], indices) -> dict[str, list[Any]]:
        """``labels`` and ``decoder_dbsa_heads`` (positions in ``labels``) from target parses."""
        if self.target_parse_column is not None:
            parses = self._read_parses(batch, self.target_parse_column, targets, indices)
        else:
            parses = parse_texts(self.target_parser, targets, lambda k: f"target of {self._row_label(k, indices)}")
        out: dict[str, list[Any]] = {"labels": [], "decoder_dbsa_heads": []}
        for k, (text, parse) in enumerate(zip(targets, parses, strict=True)):
            try:
                aligned = align_parse(
                    self.tokenizer, parse, text=text if text.strip() else None, max_length=self.max_target_length,
                    compute_dbsa=True, target=True,
                )  # fmt: skip
            except UserError as e:  # a parse that does not fit the text; anything else is a bug
                raise UserError(
                    f"cannot align the target parse with the tokens in {self._row_label(k, indices)}: {text!r}: {e}"
                ) from e
            out["labels"].append(aligned["input_ids"])
            out["decoder_dbsa_heads"].append(aligned["dbsa_heads"])
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


class TokenizeOnly:
    """Batched `datasets.map` function for models without syntax inputs: tokenize, truncate (keeping ``</s>``);
    with a ``context`` column also ``context_input_ids`` / ``context_attention_mask`` (see
    `SyntaxMTPreprocessor.encode_contexts`)."""

    def __init__(self, tokenizer, max_source_length: int | None, max_target_length: int | None,
                 max_context_length: int | None = None):  # fmt: skip
        self.tokenizer = tokenizer
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.max_context_length = max_context_length

    def __call__(self, batch: dict[str, list], indices=None) -> dict[str, list]:
        special = set(self.tokenizer.all_special_ids)
        sources = ["" if s is None else s for s in batch["source"]]
        _warn_empty(sources, indices)
        ids = [_truncate_ids(list(x), self.max_source_length, special) for x in self.tokenizer(sources)["input_ids"]]
        out = {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]}
        if "target" in batch:
            targets = ["" if t is None else t for t in batch["target"]]
            _warn_empty(targets, indices, "target")
            labels = self.tokenizer(text_target=targets)["input_ids"]
            out["labels"] = [_truncate_ids(list(x), self.max_target_length, special) for x in labels]
        if "context" in batch:
            context = [
                encode_context(self.tokenizer, list(c or []), self.max_context_length) for c in batch["context"]
            ]
            out["context_input_ids"], out["context_attention_mask"] = context, [[1] * len(c) for c in context]
        return out

    def output_features(self, input_columns):
        """Explicit ``datasets`` types (an all-empty first batch of contexts must not become ``list<null>``)."""
        from datasets import Features, List, Value

        names = {"input_ids": "int32", "attention_mask": "int8"}
        if "target" in input_columns:
            names["labels"] = "int64"
        if "context" in input_columns:
            names.update(context_input_ids="int32", context_attention_mask="int8")
        return Features({name: List(Value(dtype)) for name, dtype in names.items()})
