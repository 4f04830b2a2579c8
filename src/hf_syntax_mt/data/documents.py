"""Document-level context (Zhang et al., 2018, "Improving the Transformer Translation Model with Document-Level
Context").

Section 2.2 of the paper: the context of the source sentence ``X^(k)`` is the previous ``k`` source sentences of
the same document, ``X^(<k)``; the first sentence of a document has none. This module turns documents into that
context, along the package's data path:

- :func:`read_documents`: parallel text with document boundaries -> ``Dataset`` with ``source``, ``target``,
  ``doc_id``. Boundaries come from a doc-id file (one id a line, consecutive identical ids = one document, as
  ``shared/data/docnmt-en-de/*.docid``, see :func:`read_doc_ids`) or, without one, from blank lines between
  documents.
- :func:`add_document_context`: a ``datasets.map`` pass adding ``context`` (``list[str]``, the up-to-k previous
  source sentences of the same document, oldest first).
- :func:`encode_context`: a ``context`` list -> ``context_input_ids`` (used by
  :class:`~hf_syntax_mt.data.preprocess.SyntaxMTPreprocessor` and the pipeline).

Documents must be contiguous: add the context *before* shuffling (a document id that reappears after another
document is an error, in the files and in the dataset).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["DocumentContext", "add_document_context", "encode_context", "read_doc_ids", "read_documents"]


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
        raise ValueError(f"max_length must be a non-negative int or None, got {max_length!r}")
    if isinstance(sentences, str):
        raise TypeError(f"sentences must be a list of strings, got the string {sentences!r}")
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
# Reading documents
# ------------------------------------------------------------------------------------------------------------------
def _read_lines(path: str | os.PathLike) -> list[str]:
    from .preprocess import _read_lines as read_lines

    return read_lines(path)


def read_doc_ids(
    docid_file: str | os.PathLike, n_lines: int | None = None, text_file: str | os.PathLike | None = None
) -> list[str]:
    """The document ids of a doc-id file: one id a line (surrounding spaces stripped); a document is a run of
    identical ids, and an id may not come back after another document.

    Args:
        docid_file: the file (gzip ok).
        n_lines: the number of lines of the text it goes with (checked when given); ``text_file`` names it.

    Raises:
        ValueError: naming the file and line of an empty or reappearing id, or both files and counts.
    """
    ids = _read_lines(docid_file)
    if n_lines is not None and len(ids) != n_lines:
        raise ValueError(
            f"document id file and text have different line counts: {docid_file} has {len(ids)} lines, "
            f"{text_file or 'the text'} has {n_lines} lines"
        )
    first_line: dict[str, int] = {}  # doc id -> line (1-based) where its document starts
    previous = None
    for lineno, raw in enumerate(ids, start=1):
        doc = raw.strip()
        if not doc:
            raise ValueError(f"{docid_file}:{lineno}: empty document id (every line needs one)")
        if doc != previous:
            if doc in first_line:
                raise ValueError(
                    f"{docid_file}:{lineno}: document id {doc!r} reappears after another document (its document "
                    f"started at line {first_line[doc]} and ended before line {lineno}); a document's lines must "
                    "be consecutive"
                )
            first_line[doc] = lineno
            previous = doc
        ids[lineno - 1] = doc
    return ids


def _split_blank_lines(sources: list[str], targets: list[str] | None, source_file, target_file):
    """Blank-line separated documents -> (sources, targets, doc ids) without the blank lines."""
    out_src: list[str] = []
    out_tgt: list[str] = []
    doc_ids: list[str] = []
    n_docs, in_doc = 0, False
    for lineno, src in enumerate(sources, start=1):
        blank = not src.strip()
        if targets is not None and blank != (not targets[lineno - 1].strip()):
            blank_file, other_file = (source_file, target_file) if blank else (target_file, source_file)
            other = targets[lineno - 1] if blank else src
            raise ValueError(
                f"line {lineno}: a blank line (document boundary) in {blank_file} but not in {other_file} "
                f"({other[:80]!r}); both files need their blank lines at the same positions"
            )
        if blank:
            if in_doc:
                n_docs, in_doc = n_docs + 1, False
            continue
        in_doc = True
        out_src.append(src)
        if targets is not None:
            out_tgt.append(targets[lineno - 1])
        doc_ids.append(f"doc{n_docs}")
    return out_src, (out_tgt if targets is not None else None), doc_ids


def read_documents(
    source_file: str | os.PathLike,
    target_file: str | os.PathLike | None = None,
    docid_file: str | os.PathLike | None = None,
    source_column: str = "source",
    target_column: str = "target",
    doc_column: str = "doc_id",
):
    """Read documents of (parallel) text into a ``datasets.Dataset``, one row per sentence, in file order.

    Two formats:

    - with ``docid_file``: one document id per line, line-aligned with the text files; consecutive identical ids
      form one document. Empty text lines are kept as (empty) sentences.
    - without it: documents separated by blank lines. Blank (whitespace-only) lines are boundaries, not sentences
      (several in a row are one boundary); documents are named ``doc0``, ``doc1``, ... When a target is given, its
      blank lines must be at the same positions as the source's.

    Files may be gzip-compressed (detected from the content).

    Returns:
        ``Dataset`` with columns ``source``, ``target`` (when ``target_file`` is given) and ``doc_id`` (str).

    Raises:
        ValueError: line counts differ (naming both files and counts); a document id reappears after another
            document or is empty (naming the file and line); blank lines at different positions (naming the line).
    """
    from datasets import Dataset

    sources = _read_lines(source_file)
    targets = _read_lines(target_file) if target_file is not None else None
    if targets is not None and len(sources) != len(targets):
        raise ValueError(
            f"parallel files have different line counts: {source_file} has {len(sources)} lines, "
            f"{target_file} has {len(targets)} lines"
        )
    if docid_file is not None:
        doc_ids = read_doc_ids(docid_file, len(sources), source_file)
    else:
        sources, targets, doc_ids = _split_blank_lines(sources, targets, source_file, target_file)
    columns: dict[str, list[str]] = {source_column: sources}
    if targets is not None:
        columns[target_column] = targets
    columns[doc_column] = doc_ids
    return Dataset.from_dict(columns)


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
            raise ValueError(f"k (context sentences) must be a non-negative int, got {k!r}")
        if len(sources) != len(doc_ids):
            raise ValueError(f"{len(sources)} source sentences but {len(doc_ids)} document ids")
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
                raise ValueError(
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
