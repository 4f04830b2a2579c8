"""One shard of the parse cache (`parsers.CachedParser`), read so that no single bad file can stop a run (issue 57):
a shard that cannot be read (not UTF-8, a folder named ``*.jsonl``, no permission) or a record whose text is not the
one its key stands for (planted, or damaged) is skipped with one warning naming the shard; its texts are parsed
again. Records hold ``{"key": sha256(text), "text": text, "parse": ParsedSentence.to_dict()}`` (``text`` is absent
from the shards of earlier versions: the parse's own text stands for it)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from .parsed import ParsedSentence

__all__ = ["read_shard"]

logger = logging.getLogger("hf_syntax_mt.data.parsers")


def read_shard(path: Path, key_of: Callable[[str], str]) -> dict[str, ParsedSentence]:
    """The parses of one shard by key (``key_of(text)`` must give each record's key); {} for an unreadable shard."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("parse cache: skipped the shard %s, which cannot be read (%s: %s); its texts are parsed again",
                       path, type(e).__name__, e)  # fmt: skip
        return {}
    parses, foreign = {}, 0
    for line in lines:
        try:
            record = json.loads(line)
            parse = ParsedSentence.from_dict(record["parse"])
            text = record.get("text", parse.text)
            damaged = bool(text.strip()) != bool(parse.words) if isinstance(text, str) else True
            if damaged or key_of(text) != record["key"]:
                foreign += 1  # the parse of another text under this key, or no word for a text
                continue
            parses[record["key"]] = parse
        except (ValueError, KeyError, TypeError, AttributeError):  # a torn or foreign line: not a record
            continue
    if foreign:
        logger.warning("parse cache: skipped %d record(s) of the shard %s whose text is not the one their key stands "
                       "for; those texts are parsed again", foreign, path)  # fmt: skip
    return parses
