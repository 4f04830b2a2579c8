"""Reading line-aligned UTF-8 text files: kept for compatibility, the readers live in :mod:`.readers`.

Lines end at ``"\\n"`` only, invalid UTF-8 raises :class:`TextDecodeError` naming the file, line and byte offset, and
gzip-compressed files are read transparently (see :mod:`hf_syntax_mt.data.readers`).
"""

from .readers import TextDecodeError, decode_utf8, iter_lines, read_lines, read_text, split_lines

__all__ = ["TextDecodeError", "decode_utf8", "iter_lines", "read_lines", "read_text", "split_lines"]
