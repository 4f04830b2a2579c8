"""Document-level context (Zhang et al., 2018, "Improving the Transformer Translation Model with Document-Level
Context").

Section 2.2 of the paper: the context of the source sentence ``X^(k)`` is the previous ``k`` source sentences of
the same document, ``X^(<k)``; the first sentence of a document has none. This module turns documents into that
context, along the package's data path:

- :func:`read_documents`: parallel text with document boundaries -> ``Dataset`` with ``source``, ``target``,
  ``doc_id``. Boundaries come from a doc-id file (one id a line, consecutive identical ids = one document, as
  ``shared/data/docnmt-en-de/*.docid``, see :func:`read_doc_ids`) or, without one, from blank lines between
  documents. Both readers live in :mod:`.readers` (the first step of the data flow) and stay importable from here.
- :func:`add_document_context`: a ``datasets.map`` pass adding ``context`` (``list[str]``, the up-to-k previous
  source sentences of the same document, oldest first).
- :func:`encode_context`: a ``context`` list -> ``context_input_ids`` (used by
  :class:`~hf_syntax_mt.data.preprocess.SyntaxMTPreprocessor` and the pipeline).
- :func:`doc_id_spans` (runs of equal ids: :func:`id_spans`) and :func:`blank_line_spans`: the documents of one input file to translate, as line spans
  (``hf-syntax-mt translate --docids`` / ``--documents blank-lines``), with errors naming the file and line.

Documents must be contiguous: add the context *before* shuffling (a document id that reappears after another
document is an error, in the files and in the dataset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import UserError, UserTypeError
from ..validation import check_strings
from .readers import read_doc_ids, read_documents

__all__ = [
    "DocumentContext",
    "add_document_context",
    "blank_line_spans",
    "doc_id_spans",
    "document_context_step",
    "encode_context",
    "id_spans",
    "read_doc_ids",
    "read_documents",
]


def encode_context(tokenizer, sentences: Sequence[str], max_length: int | None) -> list[int]:
    """Token ids of the context sentences, concatenated oldest first, keeping the last ``max_length`` ids.

    Each sentence is tokenized on its own with the tokenizer's special tokens (Marian: ``... </s>``) and without
    truncation; the concatenation is then cut from the left, so the kept window is the most recent part of the
    context (it may begin inside a sentence).

    Empty (or whitespace-only, or ``None``) sentences contribute nothing: an empty line carries no context, and
    a context made only of empty lines is no context at all (``[]``, the model's "first sentence" case).

    Args:
        tokenizer: the model's tokenizer (fast or sentencepiece ``MarianTokenizer``).
        sentences: the previous source sentences of the document, oldest first.
        max_length: the most tokens to keep (``None``: keep all).

    Returns:
        ``(M,)`` token ids, ``M <= max_length``; ``[]`` when there is no non-empty sentence.
    """
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0):
        raise UserError(f"max_length must be a non-negative int or None, got {max_length!r}")
    if isinstance(sentences, str):
        raise UserTypeError(f"sentences must be a list of strings, got the string {sentences!r}")
    texts = [s for s in sentences if s is not None and str(s).strip()]
    if not texts or max_length == 0:
        return []
    ids: list[int] = []
    for sentence_ids in tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]:
        ids.extend(int(i) for i in sentence_ids)
    if max_length is not None and len(ids) > max_length:
        ids = ids[len(ids) - max_length :]
    return ids


# ------------------------------------------------------------------------------------------------------------------
# The documents of an input to translate: line spans
# ------------------------------------------------------------------------------------------------------------------
def id_spans(ids: Sequence[str]) -> list[tuple[int, int]]:
    """``[(start, end), ...]``: 0-based half-open ranges of the runs of equal ids, in order (``["a", "a", "b"]`` ->
    ``[(0, 2), (2, 3)]``); the ids must be strings (`doc_id_spans` reads and checks a doc-id file)."""
    ids = check_strings(ids, "ids", "document ids (one per line)")
    spans: list[tuple[int, int]] = []
    for i, doc in enumerate(ids):
        if i == 0 or doc != ids[i - 1]:
            spans.append((i, i + 1))
        else:
            spans[-1] = (spans[-1][0], i + 1)
    return spans


def doc_id_spans(lines: Sequence[str], docid_file, text_file="the input") -> list[tuple[int, int]]:
    """The documents of ``lines`` as given by a doc-id file beside them: ``[(start, end), ...]``, 0-based half-open
    line ranges, one per run of equal ids, in order; they cover every line. Blank lines inside a document stay
    sentences (translated as empty lines).

    Raises:
        ValueError: naming the file and line of a doc-id file of the wrong length, an empty id, an id that comes back
            after another document (:func:`read_doc_ids`), or a document whose lines are all blank.
    """
    ids = read_doc_ids(docid_file, len(lines), text_file)
    spans = id_spans(ids)
    for start, end in spans:
        if not any(line.strip() for line in lines[start:end]):
            raise UserError(
                f"{docid_file}:{start + 1}: document {ids[start]!r} (lines {start + 1}-{end} of {text_file}) is "
                "empty: all its lines are blank. Remove its lines from both files, or check that the doc-id file "
                "belongs to this text."
            )
    return spans


def blank_line_spans(lines: Sequence[str], text_file="the input") -> list[tuple[int, int]]:
    """The documents of ``lines`` separated by single blank (whitespace-only) lines: ``[(start, end), ...]``,
    0-based half-open line ranges of the documents' sentences, in order; the blank lines belong to none. One blank
    line after the last document is a separator like the others (kept as a blank line by ``translate``).

    Raises:
        ValueError: naming the file and line of an empty document: a blank first line, or two blank lines in a row
            (also at the end; there is no empty sentence in this format: use ``--docids`` to keep empty lines).
    """
    lines = check_strings(lines, "lines", "strings (the input lines)")
    spans: list[tuple[int, int]] = []
    if not lines:
        return spans  # an empty input: no document
    start = 0
    if len(lines) > 1 and not lines[-1].strip() and lines[-2].strip():
        lines = lines[:-1]  # one blank line closing the last document, as after every other document
    for i, line in enumerate([*lines, ""]):  # a virtual blank line closes the last document
        if line.strip():
            continue
        if i == start:
            where, lineno = (
                ("a blank first line", 1) if i == 0
                else ("a blank last line", i) if i == len(lines)
                else (f"a second blank line in a row (lines {i} and {i + 1})", i + 1)
            )  # fmt: skip
            raise UserError(
                f"{text_file}:{lineno}: empty document: {where}. Documents are separated by exactly one blank line; "
                "remove the extra blank line (or give --docids to keep empty lines as sentences)."
            )
        spans.append((start, i))
        start = i + 1
    return spans


# ------------------------------------------------------------------------------------------------------------------
# Context
# ------------------------------------------------------------------------------------------------------------------
class DocumentContext:
    """Batched ``datasets.map`` function (``with_indices=True``) giving each row its document context.

    It holds the whole source column and, for each row, the index of its document's first row, so batches (and
    ``num_proc`` shards) see sentences of earlier batches: row ``i`` gets ``sources[max(start[i], i - k) : i]``
    (Section 2.2: the previous k source sentences ``X^(<k)``, oldest first; ``[]`` for a document's first
    sentence). Picklable (plain lists).

    Args:
        sources: the source sentences of the dataset, in row order (``None`` is read as ``""``).
        doc_ids: the document id of each row; a document is a run of equal ids.
        k: how many previous sentences (0: every context is empty).
        context_column: name of the output column.

    Raises:
        ValueError: ``k`` is negative, the lengths differ, or an id reappears after another document (the
            dataset was shuffled, or documents were interleaved).
    """

    def __init__(self, sources: Sequence[str | None], doc_ids: Sequence[Any], k: int, context_column: str = "context"):
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise UserError(f"k (context sentences) must be a non-negative int, got {k!r}")
        if len(sources) != len(doc_ids):
            raise UserError(f"{len(sources)} source sentences but {len(doc_ids)} document ids")
        doc_ids = list(doc_ids)
        self.sources = ["" if s is None else str(s) for s in sources]
        self.k = k
        self.context_column = context_column
        self.starts: list[int] = []  # (N,) index of the first row of each row's document
        first_row: dict[Any, int] = {}
        for i, doc in enumerate(doc_ids):
            if i > 0 and doc == doc_ids[i - 1]:
                self.starts.append(self.starts[-1])
                continue
            if doc in first_row:
                raise UserError(
                    f"document {doc!r} starts at row {first_row[doc]} and appears again at row {i}, after another "
                    "document: documents must be contiguous (add the context before shuffling)"
                )
            first_row[doc] = i
            self.starts.append(i)

    def context(self, i: int) -> list[str]:
        """The context of row ``i``: up to k previous sentences of its document, oldest first."""
        if self.k == 0:
            return []
        return self.sources[max(self.starts[i], i - self.k) : i]

    def __call__(self, batch: dict[str, list[Any]], indices: Sequence[int]) -> dict[str, list[list[str]]]:
        return {self.context_column: [self.context(i) for i in indices]}


def add_document_context(
    dataset,
    k: int,
    source_column: str = "source",
    doc_column: str = "doc_id",
    context_column: str = "context",
    num_proc: int | None = None,
    batch_size: int = 1000,
    map_kwargs: dict[str, Any] | None = None,
):
    """Add a ``context`` column: the up-to-k previous source sentences of the same document, oldest first.

    A ``datasets.map`` pass (batched, ``with_indices``) of :class:`DocumentContext`; correct across batch and
    ``num_proc`` shard boundaries. The first sentence of each document gets ``[]``; ``k=0`` gives ``[]`` everywhere.
    A ``DatasetDict`` gets the context split by split. Run it before shuffling: documents must be contiguous.

    Args:
        dataset: ``Dataset`` or ``DatasetDict`` with the source and document-id columns (as from
            :func:`read_documents`).
        k: number of previous sentences (the paper's context size).
        source_column, doc_column, context_column: column names.
        num_proc, batch_size: ``Dataset.map`` arguments.
        map_kwargs: more ``Dataset.map`` arguments.

    Returns:
        the dataset with a ``context`` column of type ``list[str]``.
    """
    from datasets import DatasetDict, List, Value

    if isinstance(dataset, DatasetDict):
        return DatasetDict(
            {
                name: add_document_context(split, k, source_column, doc_column, context_column, num_proc, batch_size,
                                           map_kwargs)
                for name, split in dataset.items()
            }
        )  # fmt: skip
    for column in (source_column, doc_column):
        if column not in dataset.column_names:
            raise KeyError(f"column {column!r} not in the dataset columns {dataset.column_names}")
    fn = DocumentContext(list(dataset[source_column]), list(dataset[doc_column]), k, context_column)
    # Explicit type: a first batch of first sentences only would otherwise fix the column type to list<null>.
    features = dataset.features.copy()
    features[context_column] = List(Value("string"))
    return dataset.map(
        fn,
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        features=features,
        desc=f"Document context (k={k})",
        **(map_kwargs or {}),
    )


def document_context_step(dataset, context, k: int):
    """The train script's document-context step (a method's `DataTransform`, run on each raw split before the
    preprocessor): `add_document_context` with the up-to-k previous sentences (Section 2.2), in `context.num_proc`
    processes."""
    return add_document_context(dataset, k, num_proc=context.num_proc)
