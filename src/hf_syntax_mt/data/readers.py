"""Every reader of the data package: line-aligned UTF-8 text, parallel text, TSV, JSONL, document ids and CoNLL-U.

The first step of the data flow (readers -> parsers -> subwords -> document context -> preprocess -> collator): it
imports only :mod:`.parsed` (the :class:`~hf_syntax_mt.data.parsed.ParsedSentence` that CoNLL-U sentences become).

Parallel files, hypotheses, references, document ids and CoNLL-U files are aligned line by line, so lines end at
``"\\n"`` only (a ``"\\r\\n"`` line end is tolerated, a final newline is optional). ``str.splitlines()`` and Python's
text mode would also break lines at ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and
``\\u2029``, which can occur inside a sentence and would silently shift every following line.

Invalid UTF-8 raises :class:`TextDecodeError` (a ``ValueError``) naming the file, the line and the byte offset,
instead of a bare ``UnicodeDecodeError``. Gzip-compressed files are read transparently. Malformed lines (TSV
columns, JSON fields, CoNLL-U IDs and HEADs, document ids) raise ``ValueError`` naming the file, line and field.

Sections, in the order the data flows:

- text lines: :func:`read_text`, :func:`split_lines`, :func:`read_lines`, :func:`iter_lines`;
- parallel text: :func:`load_parallel_files` (two line-aligned files), :func:`read_tsv`, :func:`read_jsonl`;
- documents: :func:`read_doc_ids`, :func:`read_documents` (a ``doc_id`` column, for the document context);
- CoNLL-U: :func:`iter_conllu`, :func:`read_conllu`, :func:`read_parallel_conllu` (a parsed source + a target).

The readers that build a ``datasets.Dataset`` import ``datasets`` inside the function: this module is part of a
saved model's remote code, which may not import optional packages at module level.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import MissingFileError, UserError, UserFileError, file_error
from .parsed import ParsedSentence

__all__ = [
    "GoldAlignment",
    "TextDecodeError",
    "decode_utf8",
    "iter_conllu",
    "iter_lines",
    "load_parallel_files",
    "parse_pharaoh",
    "read_conllu",
    "read_doc_ids",
    "read_documents",
    "read_jsonl",
    "read_lines",
    "read_parallel_conllu",
    "read_pharaoh",
    "read_text",
    "read_tsv",
    "split_lines",
]

# --------------------------------------------------------------------------------------------------------------
# Text lines
# --------------------------------------------------------------------------------------------------------------
_GZIP_MAGIC = b"\x1f\x8b"


class TextDecodeError(UserError):
    """A text file is not valid UTF-8; the message names the file, line, column and byte offset."""


def _bad_gzip(path, error: Exception) -> UserError:
    """A file that starts like gzip (bytes 1f 8b) but does not decompress: cut short, or not gzip at all."""
    return UserError(f"{path}: not a valid gzip file ({type(error).__name__}: {error}): it starts with the gzip "
                     "signature but is truncated or damaged; compress it again, or give the plain text file")  # fmt: skip


def decode_utf8(raw: bytes, path: str | os.PathLike, first_line: int = 1, offset: int = 0) -> str:
    """Decode ``raw`` (the bytes of ``path`` from line ``first_line``, byte ``offset`` on) as UTF-8.

    Raises :class:`TextDecodeError` with the file, line, column and byte offset of the first invalid byte.
    """
    try:
        text = raw.decode("utf-8")
        # a byte-order mark at the start of a file is not text (Windows editors write it): dropped
        return text[1:] if offset == 0 and first_line == 1 and text.startswith("\ufeff") else text
    except UnicodeDecodeError as e:
        line = first_line + raw.count(b"\n", 0, e.start)
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        where = "of the decompressed text" if str(path).endswith(".gz") else "in the file"
        raise TextDecodeError(
            f"{path}:{line}: invalid UTF-8: byte 0x{raw[e.start]:02x} at column {column} of the line (byte offset "
            f"{offset + e.start} {where}): {e.reason}. The file must be UTF-8 text; convert it, e.g. with "
            f"`iconv -f latin1 -t utf-8 {path}`."
        ) from None


def open_input(path: str | os.PathLike):
    """``open(path, "rb")`` for a file the user named: a missing file, a folder, a file without read permission is a
    `UserFileError` naming it (the package's user error; an `OSError` too), raised here where the file is opened."""
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        raise UserFileError(f"{path}: is a folder, not a file; give the file's path", errno.EISDIR, str(path))
    try:
        return open(path, "rb")
    except OSError as e:
        raise file_error(e, path) from None


def read_text(path: str | os.PathLike) -> str:
    """The whole text of a UTF-8 (optionally gzip-compressed) file; invalid UTF-8 raises :class:`TextDecodeError`."""
    with open_input(path) as f:
        try:
            raw = f.read()
        except OSError as e:
            raise file_error(e, path) from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:  # BadGzipFile is an OSError
            raise _bad_gzip(path, error) from None
    return decode_utf8(raw, path)


def split_lines(text: str) -> list[str]:
    """Split at ``"\\n"`` only: a final newline adds no empty line, and a ``"\\r"`` before ``"\\n"`` is dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline (or an empty text: no line)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 (optionally gzip-compressed) text file, split as :func:`split_lines`; empty lines kept."""
    return split_lines(read_text(path))


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, line)`` pairs (1-based, without the line end) as :func:`read_lines` splits them.

    Each line is decoded on its own, so an invalid byte is reported with its line as soon as it is reached.
    """
    offset = 0
    with open_input(path) as plain:  # iterating a binary file splits at b"\n" only
        compressed = plain.peek(2)[:2] == _GZIP_MAGIC
        f = gzip.open(plain) if compressed else plain
        raws = enumerate(f, start=1)
        while True:
            try:
                lineno, raw = next(raws)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as error:  # a damaged gzip stream (BadGzipFile is an OSError)
                if not compressed:
                    raise file_error(error, path) from None
                raise _bad_gzip(path, error) from None
            line = decode_utf8(raw, path, first_line=lineno, offset=offset)
            offset += len(raw)
            line = line[:-1] if line.endswith("\n") else line
            yield lineno, line[:-1] if line.endswith("\r") else line


# --------------------------------------------------------------------------------------------------------------
# Parallel text: two line-aligned files, TSV, JSONL
# --------------------------------------------------------------------------------------------------------------
def load_parallel_files(
    source_file: str | os.PathLike,
    target_file: str | os.PathLike,
    source_column: str = "source",
    target_column: str = "target",
):
    """Read two line-aligned text files into a ``datasets.Dataset`` with ``source`` and ``target`` columns.

    Empty lines are kept (see the module docstring). Raises ``ValueError`` naming both files and both line
    counts when they differ.
    """
    from datasets import Dataset

    sources, targets = read_lines(source_file), read_lines(target_file)
    if len(sources) != len(targets):
        raise UserError(
            f"parallel files have different line counts: {source_file} has {len(sources)} lines, "
            f"{target_file} has {len(targets)} lines"
        )
    return Dataset.from_dict({source_column: sources, target_column: targets})


def _require_nonempty(path: str) -> None:
    """``FileNotFoundError`` / ``ValueError`` naming ``path`` unless it is a non-empty file (train script inputs)."""
    if Path(path).is_dir():
        raise UserFileError(f"data file {path} is a folder: give the file's path", errno.EISDIR, str(path))
    if not Path(path).is_file():
        raise MissingFileError(f"data file not found: {path}", errno.ENOENT, str(path))
    if Path(path).stat().st_size == 0:
        raise UserError(f"data file {path} is empty")


def read_tsv(path: str) -> dict[str, list[str]]:
    """``source<TAB>target`` lines; an optional header ``source<TAB>target`` is skipped. Errors name file:line."""
    _require_nonempty(path)
    sources, targets = [], []
    for lineno, line in iter_lines(path):  # at "\n" only; invalid UTF-8 names the file, line and byte offset
        cols = line.split("\t")
        if len(cols) != 2:
            raise UserError(f"{path}:{lineno}: expected 2 tab-separated columns (source, target), found "
                             f"{len(cols)}: {line[:80]!r}")  # fmt: skip
        if lineno == 1 and [c.strip().lower() for c in cols] == ["source", "target"]:
            continue
        sources.append(cols[0])
        targets.append(cols[1])
    if not sources:
        raise UserError(f"data file {path} has no rows")
    return {"source": sources, "target": targets}


def iter_json_objects(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Stream ``(line number, object)`` from a JSON-lines file, blank lines skipped; a line that is not valid JSON or
    not an object is reported with its file and line."""
    for lineno, raw in iter_lines(path):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{lineno}: invalid JSON: {e}") from e
        if not isinstance(row, dict):
            raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        yield lineno, row


def read_jsonl(path: str, source_lang: str | None = None, target_lang: str | None = None) -> dict[str, list[str]]:
    """JSON lines with ``{"source": ..., "target": ...}``, ``{"translation": {src: ..., tgt: ...}}`` (as in
    run_translation.py) or ``{src: ..., tgt: ...}`` keyed by language codes. Errors name file:line:field."""
    _require_nonempty(path)
    sources, targets = [], []
    for lineno, row in iter_json_objects(path):
        pair = row.get("translation", row)
        keys = ("source", "target") if "source" in pair or "target" in pair else (source_lang, target_lang)
        for key in keys:
            if key is None:
                raise UserError(f"{path}:{lineno}: no 'source'/'target' fields; give --source_lang and "
                                 f"--target_lang to read the fields {sorted(pair)}")  # fmt: skip
            if key not in pair:
                raise UserError(f"{path}:{lineno}: missing field {key!r} (fields: {sorted(pair)})")
            if not isinstance(pair[key], str):
                raise UserError(f"{path}:{lineno}: field {key!r} must be a string, got {pair[key]!r}")
        sources.append(pair[keys[0]])
        targets.append(pair[keys[1]])
    if not sources:
        raise UserError(f"data file {path} has no rows")
    return {"source": sources, "target": targets}


# --------------------------------------------------------------------------------------------------------------
# Documents (the document context's input)
# --------------------------------------------------------------------------------------------------------------
def read_doc_ids(
    docid_file: str | os.PathLike, n_lines: int | None = None, text_file: str | os.PathLike | None = None
) -> list[str]:
    """The document ids of a doc-id file: one id a line (surrounding spaces stripped); a document is a run of
    identical ids, and an id may not come back after another document.

    Args:
        docid_file: the file (gzip ok).
        n_lines: the number of lines of the text it goes with (checked when given); ``text_file`` names it.

    Raises:
        FileNotFoundError: naming the doc-id file (and the text it goes with) when there is no such file.
        ValueError: naming the file and line of an empty or reappearing id, or both files and counts.
    """
    if not os.path.isfile(docid_file):
        for_text = f" for {text_file}" if text_file is not None else ""
        raise MissingFileError(f"{docid_file}: no such document id file{for_text} (one document id per line of the "
                               "text)", errno.ENOENT, str(docid_file))  # fmt: skip
    ids = read_lines(docid_file)
    if n_lines is not None and len(ids) != n_lines:
        text = text_file or "the text"
        first = min(len(ids), n_lines) + 1  # the first line without a partner
        missing = f"line {first} of {text} has no document id" if len(ids) < n_lines else f"no line {first} in {text}"
        raise UserError(
            f"{docid_file}:{first}: document id file and text have different line counts: {docid_file} has "
            f"{len(ids)} lines, {text} has {n_lines} lines ({missing}); give one document id per line of the text"
        )
    first_line: dict[str, int] = {}  # doc id -> line (1-based) where its document starts
    previous = None
    for lineno, raw in enumerate(ids, start=1):
        doc = raw.strip()
        if not doc:
            raise UserError(f"{docid_file}:{lineno}: empty document id (every line needs one)")
        if doc != previous:
            if doc in first_line:
                raise UserError(
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
            raise UserError(
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

    sources = read_lines(source_file)
    targets = read_lines(target_file) if target_file is not None else None
    if targets is not None and len(sources) != len(targets):
        raise UserError(
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


# --------------------------------------------------------------------------------------------------------------
# CoNLL-U
# --------------------------------------------------------------------------------------------------------------
_UNESCAPE = {"\\s": " ", "\\t": "\t", "\\n": "\n", "\\\\": "\\", "\\p": "|"}


def _unescape_spaces(value: str) -> str:
    return re.sub(r"\\[stnp\\]", lambda m: _UNESCAPE[m.group(0)], value)


def _misc(misc: str) -> dict[str, str]:
    if misc in ("", "_"):
        return {}
    out = {}
    for item in misc.split("|"):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _build_sentence(rows, mwt_rows, comments, path, start_line) -> ParsedSentence:
    """rows: (lineno, id, form, upos, head, deprel, misc); mwt_rows: (lineno, first, last, form, misc)."""
    if not rows and not mwt_rows:  # comments alone: an empty sentence (`format_conllu(..., empty=True)`)
        return ParsedSentence([], [], [], [], text=comments["text"], spans=[])
    if not rows:
        raise UserError(f"{path}:{start_line}: sentence block has no word lines")
    for k, row in enumerate(rows):
        if row[1] != k + 1:
            raise UserError(f"{path}:{row[0]}: word ID {row[1]} is out of sequence (expected {k + 1})")
    n = len(rows)
    for row in rows:
        if not 0 <= row[4] <= n:
            raise UserError(f"{path}:{row[0]}: HEAD {row[4]} is out of range 0..{n}")
    mwt_by_first = {}
    for lineno, first, last, form, misc in mwt_rows:
        if not (1 <= first < last <= n):
            raise UserError(f"{path}:{lineno}: multi-word token range {first}-{last} is invalid for {n} words")
        mwt_by_first[first] = (last, form, misc)
    # Surface tokens in order: (first word id, last word id, form, misc)
    tokens, i = [], 1
    while i <= n:
        if i in mwt_by_first:
            last, form, misc = mwt_by_first[i]
            tokens.append((i, last, form, misc))
            i = last + 1
        else:
            row = rows[i - 1]
            tokens.append((i, i, row[2], row[6]))
            i += 1
    text = comments.get("text")
    token_spans = []
    if text is None:  # rebuild the text from FORM and SpaceAfter / SpacesBefore / SpacesAfter
        pieces, pos = [], 0
        for k, (_, _, form, misc) in enumerate(tokens):
            m = _misc(misc)
            if k == 0 and "SpacesBefore" in m:
                before = _unescape_spaces(m["SpacesBefore"])
                pieces.append(before)
                pos += len(before)
            token_spans.append((pos, pos + len(form)))
            pieces.append(form)
            pos += len(form)
            if "SpacesAfter" in m:
                after = _unescape_spaces(m["SpacesAfter"])
            elif m.get("SpaceAfter") == "No" or k == len(tokens) - 1:
                after = ""
            else:
                after = " "
            pieces.append(after)
            pos += len(after)
        text = "".join(pieces)
    else:  # locate each surface token in the given text
        pos = 0
        for first, _, form, _ in tokens:
            found = text.find(form, pos)
            if found < 0 or text[pos:found].strip():
                line = rows[first - 1][0]
                raise UserError(f"{path}:{line}: token {form!r} not found in '# text' after character {pos}: {text!r}")
            token_spans.append((found, found + len(form)))
            pos = found + len(form)
    spans, mwt = [], []
    for (first, last, _, _), span in zip(tokens, token_spans, strict=True):
        spans.extend([span] * (last - first + 1))
        if last > first:
            mwt.append((first - 1, last))
    try:
        return ParsedSentence(
            words=[r[2] for r in rows],
            heads=[r[4] for r in rows],
            deprels=[r[5] for r in rows],
            upos=[r[3] for r in rows],
            text=text,
            spans=spans,
            mwt=mwt or None,
        )
    except ValueError as e:
        raise UserError(f"{path}:{start_line}: invalid sentence: {e}") from e


def iter_conllu(path: str | os.PathLike) -> Iterable[ParsedSentence]:
    """Yield the sentences of a CoNLL-U file (plain or ``.gz``); see :func:`read_conllu`."""
    rows, mwt_rows, comments, start_line = [], [], {}, 1
    for lineno, line in iter_lines(path):  # lines end at "\n" only; invalid UTF-8 names the file, line and byte
        if not line.strip():
            if rows or mwt_rows or "text" in comments:
                yield _build_sentence(rows, mwt_rows, comments, path, start_line)
            rows, mwt_rows, comments, start_line = [], [], {}, lineno + 1
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                comments.setdefault(key.strip(), value[1:] if value.startswith(" ") else value)
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise UserError(f"{path}:{lineno}: expected 10 tab-separated columns, found {len(cols)}: {line!r}")
        wid = cols[0]
        if "." in wid:  # empty node of the enhanced graph
            continue
        if "-" in wid:
            try:
                first, last = (int(x) for x in wid.split("-"))
            except ValueError:
                raise UserError(f"{path}:{lineno}: invalid multi-word token ID {wid!r}") from None
            mwt_rows.append((lineno, first, last, cols[1], cols[9]))
            continue
        try:
            wid_int = int(wid)
        except ValueError:
            raise UserError(f"{path}:{lineno}: invalid word ID {wid!r}") from None
        try:
            head = int(cols[6])
        except ValueError:
            raise UserError(f"{path}:{lineno}: HEAD must be an integer, found {cols[6]!r}") from None
        rows.append((lineno, wid_int, cols[1], cols[3], head, cols[7], cols[9]))
    if rows or mwt_rows or "text" in comments:
        yield _build_sentence(rows, mwt_rows, comments, path, start_line)


def read_conllu(path: str | os.PathLike) -> list[ParsedSentence]:
    """Read a CoNLL-U file (plain or ``.gz``) into :class:`ParsedSentence` objects.

    Handles ``# text =`` comments, multi-word token lines (``3-4 du``: their words share the token's span and
    become a :attr:`ParsedSentence.mwt` range) and skips empty nodes (``5.1``). Without ``# text`` the text is
    rebuilt from FORM and MISC ``SpaceAfter=No`` (and UDPipe's ``SpacesBefore``/``SpacesAfter``). Comments with a
    ``# text`` and no word line are an empty sentence (`format_conllu`); errors name the file and the line number.
    """
    return list(iter_conllu(path))


def read_parallel_conllu(
    source_conllu: str | os.PathLike,
    target_file: str | os.PathLike,
    source_column: str = "source",
    target_column: str = "target",
    parse_column: str = "source_parse",
):
    """A ``Dataset`` from a parsed source (CoNLL-U, one sentence per target line) and a plain target file.

    Columns: ``source`` (the ``# text``), ``target`` and ``source_parse`` (``ParsedSentence.to_dict()``), ready
    for ``SyntaxMTPreprocessor(..., source_parse_column="source_parse")``.
    """
    from datasets import Dataset

    sentences = read_conllu(source_conllu)
    targets = read_lines(target_file)
    if len(sentences) != len(targets):
        raise UserError(f"{source_conllu} has {len(sentences)} sentences but {target_file} has {len(targets)} lines")
    return Dataset.from_dict(
        {
            source_column: [s.text for s in sentences],
            target_column: targets,
            parse_column: [s.to_dict() for s in sentences],
        }
    )


# ----------------------------------------------------------------------------------------------------------------
# Pharaoh alignments (fast_align, GIZA++, eflomal, awesome-align): one line per pair, links "i-j" (sure), "ipj"
# (possible), 0-based unless said otherwise
# ----------------------------------------------------------------------------------------------------------------

Link = tuple[int, int]


@dataclass(frozen=True)
class GoldAlignment:
    """The gold links of one pair: ``sure`` ⊆ ``possible``."""

    sure: frozenset[Link]
    possible: frozenset[Link]


_LINK = re.compile(r"([0-9]+)([-p])([0-9]+)", re.ASCII)
MAX_WORD_INDEX = 100_000  # far past any sentence: a larger index is a corrupt file, not a word position


def parse_pharaoh(line: str, one_indexed: bool = False, where: str = "line") -> GoldAlignment:
    """Links of one Pharaoh line: ``i-j`` (sure) and ``ipj`` (possible). Indices are ASCII digits (at most
    `MAX_WORD_INDEX`). Errors say which token of ``where``."""
    sure, possible = set(), set()
    for token in line.split():
        match = _LINK.fullmatch(token)
        if match is None:
            raise UserError(f"{where}: {token[:40]!r} is not a link 'i-j' (sure) or 'ipj' (possible), with i and j "
                             "word indices in ASCII digits")  # fmt: skip
        left, sep, right = match.groups()
        if len(left) > 6 or len(right) > 6 or max(int(left), int(right)) > MAX_WORD_INDEX:
            raise UserError(f"{where}: link {token[:40]!r} has an index past {MAX_WORD_INDEX:,}, which is no word "
                             "position: the file is corrupt or not a Pharaoh alignment file")  # fmt: skip
        i, j = int(left) - one_indexed, int(right) - one_indexed
        if i < 0 or j < 0:
            raise UserError(f"{where}: link {token!r} is below the first index ({int(one_indexed)}): the file counts "
                             "from 0, so leave out the one-indexed option")  # fmt: skip
        possible.add((i, j))
        if sep == "-":
            sure.add((i, j))
    return GoldAlignment(frozenset(sure), frozenset(possible))


def read_pharaoh(path: str | os.PathLike, one_indexed: bool = False) -> list[GoldAlignment]:
    """Every line of a Pharaoh file (empty lines = no link, so an aligner that linked nothing is read too); errors
    name the file and line."""
    lines = split_lines(read_text(path))
    return [parse_pharaoh(line, one_indexed, f"{path}:{k}") for k, line in enumerate(lines, start=1)]
