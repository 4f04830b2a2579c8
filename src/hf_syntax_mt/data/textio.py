"""Reading line-aligned UTF-8 text files: one reader for every text file the package takes.

Parallel files, hypotheses, references, document ids and CoNLL-U files are aligned line by line, so lines end at
``"\\n"`` only (a ``"\\r\\n"`` line end is tolerated, a final newline is optional). ``str.splitlines()`` and Python's
text mode would also break lines at ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and
``\\u2029``, which can occur inside a sentence and would silently shift every following line.

Invalid UTF-8 raises :class:`TextDecodeError` (a ``ValueError``) naming the file, the line and the byte offset,
instead of a bare ``UnicodeDecodeError``. Gzip-compressed files are read transparently.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator

__all__ = ["TextDecodeError", "decode_utf8", "iter_lines", "read_lines", "read_text", "split_lines"]

_GZIP_MAGIC = b"\x1f\x8b"


class TextDecodeError(ValueError):
    """A text file is not valid UTF-8; the message names the file, line, column and byte offset."""


def decode_utf8(raw: bytes, path: str | os.PathLike, first_line: int = 1, offset: int = 0) -> str:
    """Decode ``raw`` (the bytes of ``path`` from line ``first_line``, byte ``offset`` on) as UTF-8.

    Raises :class:`TextDecodeError` with the file, line, column and byte offset of the first invalid byte.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + raw.count(b"\n", 0, e.start)
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        where = "of the decompressed text" if str(path).endswith(".gz") else "in the file"
        raise TextDecodeError(
            f"{path}:{line}: invalid UTF-8: byte 0x{raw[e.start]:02x} at column {column} of the line (byte offset "
            f"{offset + e.start} {where}): {e.reason}. The file must be UTF-8 text; convert it, e.g. with "
            f"`iconv -f latin1 -t utf-8 {path}`."
        ) from None


def read_text(path: str | os.PathLike) -> str:
    """The whole text of a UTF-8 (optionally gzip-compressed) file; invalid UTF-8 raises :class:`TextDecodeError`."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        raw = gzip.decompress(raw)
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
    with open(path, "rb") as plain:  # iterating a binary file splits at b"\n" only
        f = gzip.open(plain) if plain.peek(2)[:2] == _GZIP_MAGIC else plain
        for lineno, raw in enumerate(f, start=1):
            line = decode_utf8(raw, path, first_line=lineno, offset=offset)
            offset += len(raw)
            line = line[:-1] if line.endswith("\n") else line
            yield lineno, line[:-1] if line.endswith("\r") else line
