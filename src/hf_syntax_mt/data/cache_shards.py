"""One shard of the parse cache (`parsers.CachedParser`), checked record by record so that no bad file can stop a run or
give a text another text's parse (a damaged, truncated or hand-edited shard). Records hold ``{"key": sha256(text),
"text": text, "parse": ParsedSentence.to_dict()}`` (``text`` is absent from the shards of earlier versions: the parse's
own text stands for it). `read_shard` uses a record only if its key is its text's and its parse's words are that text's
tokens (`parse_matches_text`); a shard that cannot be read is skipped, and a line that is not such a record is dropped
from its shard, each with one warning naming the shard (and the lines); its texts are parsed again."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from .parsed import ParsedSentence

__all__ = ["parse_matches_text", "read_shard"]

logger = logging.getLogger("hf_syntax_mt.data.parsers")


def parse_matches_text(parse: ParsedSentence, text: str) -> bool:
    """Whether ``parse`` is a parse of ``text``: its text is ``text`` (up to whitespace) and its words are the text's
    tokens, in order, with only whitespace between them (through its spans where it has them; the words of a
    multi-word token such as French "du" = "de le" share the token's span). An empty text has no words."""
    if not text.strip() or not parse.words:
        return not text.strip() and not parse.words
    source = text if parse.text is None else parse.text
    if source.split() != text.split():  # the parse of another text (whitespace may differ: CoNLL-U lookups)
        return False
    position = 0
    if parse.spans is None:
        if parse.mwt:  # a multi-word token's words cannot be located without their span
            return False
        for word in parse.words:
            found = source.find(word, position) if word else -1
            if found < 0 or source[position:found].strip():
                return False
            position = found + len(word)
        return not source[position:].strip()
    for first, end in parse.surface_tokens():
        start, stop = parse.spans[first]
        surface = source[start:stop]
        if start < position or source[position:start].strip() or not surface.strip():
            return False
        if end - first == 1 and parse.words[first] != surface:
            return False
        position = stop
    return not source[position:].strip()


def _record(line: str, key_of: Callable[[str], str]) -> tuple[str, ParsedSentence | None]:
    """(key, parse) of one shard line; parse None for a record of another text. Raises ValueError (or TypeError,
    KeyError, AttributeError, RecursionError) for a line that is not a record."""
    record = json.loads(line)
    parse = ParsedSentence.from_dict(record["parse"])
    text, key = record.get("text", parse.text), record["key"]
    if not isinstance(text, str) or not isinstance(key, str):
        raise TypeError("the key or the text is not a string")
    return key, parse if key_of(text) == key and parse_matches_text(parse, text) else None


def read_shard(path: Path, key_of: Callable[[str], str]) -> dict[str, ParsedSentence]:
    """The parses of one shard by key (``key_of(text)`` must give each record's key); {} for an unreadable shard. A
    line that is not a record, or a record of another text, is dropped from the shard (rewritten without it)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:  # dropped by another process since it was listed
        return {}
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("parse cache: skipped the shard %s, which cannot be read (%s: %s); its texts are parsed again",
                       path, type(e).__name__, e)  # fmt: skip
        return {}
    parses, kept, malformed, foreign = {}, [], [], 0
    for number, line in enumerate(lines, start=1):
        try:
            key, parse = _record(line, key_of)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # a torn or foreign line
            malformed.append(f"line {number}: {type(e).__name__}")
            continue
        if parse is None:
            foreign += 1  # the parse of another text under this key or text, or no word for a text
            continue
        parses[key] = parse
        kept.append(line if line.endswith("\n") else line + "\n")
    if malformed:
        shown = "; ".join(malformed[:3]) + ("; ..." if len(malformed) > 3 else "")
        logger.warning("parse cache: dropped %d line(s) of the shard %s that are not parse records (%s); their texts "
                       "are parsed again", len(malformed), path, shown)  # fmt: skip
    if foreign:
        logger.warning("parse cache: dropped %d record(s) of the shard %s whose text is not the one their key stands "
                       "for, or whose words are not their text's tokens; those texts are parsed again", foreign, path)  # fmt: skip
    if malformed or foreign:
        _rewrite(path, kept)
    return parses


def _rewrite(path: Path, lines: list[str]) -> None:
    """The shard with ``lines`` only (deleted if none), replaced atomically; a shard that cannot be rewritten (a
    read-only cache) stays as it is: its bad lines are dropped again on the next read."""
    try:
        if not lines:
            path.unlink(missing_ok=True)
            return
        partial = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        partial.write_text("".join(lines), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass
