"""Parse a text file once and keep the trees: ``hf-syntax-mt parse``.

For users who parse a corpus once and reuse it: one sentence a line in, one CoNLL-U block a line out (an empty line
becomes a block of comments alone, which `read_conllu` reads back as an empty sentence), so the file feeds
``hf-syntax-mt train --{split}_source_conllu`` / ``--{split}_target_conllu`` and gives the same columns as parsing on
the fly with the same parser (``tests/data/test_parse_corpus.py``). The command (`hf_syntax_mt.parser_commands`)
builds the parser from the train script's flags (``--parser``, ``--parser_model``, ``--parser_cache_dir``:
`training.data.build_parser`, one mapping for both).

    hf-syntax-mt parse --parser spacy --parser_model fr_core_news_sm --input train.fr --output train.fr.conllu.gz
"""

from __future__ import annotations

import errno
import gzip
import os
import sys
from pathlib import Path

from ..errors import UserError, UserFileError, file_error
from .parsed import format_conllu
from .parsers import Parser
from .readers import read_lines

__all__ = ["parse_corpus"]

#: inputs with at least this many lines get a progress bar (on stderr), as `translate`'s
PROGRESS_MIN_LINES = 100


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def parse_corpus(
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    parser: Parser,
    batch_size: int = 256,
    progress: bool | None = None,
) -> int:
    """Parse every line of ``input_path`` (UTF-8 text, optionally gzip-compressed) with ``parser`` and write one
    CoNLL-U block per line, in order, to ``output_path`` (gzip-compressed when its name ends in ``.gz``).

    Every block has ``# sent_id = N`` (the 1-based line number) and ``# text`` (the parser's text: spaCy and stanza
    keep the line verbatim, spaces included, which the readers locate the words in); an empty or blank
    line is a block of these two comments alone (`format_conllu` with ``empty=True``). The output is written to a
    hidden temporary file beside it and renamed into place at the end: an interrupted run leaves no partial file
    (with a `CachedParser`, the next run parses only what the last one had not).

    Args:
        input_path: the text, one sentence a line.
        output_path: the CoNLL-U file to write (replaced if it exists; never the input).
        parser: any `Parser` (`get_parser`, a `CachedParser`).
        batch_size: lines per parser call.
        progress: a tqdm bar on stderr (default: from `PROGRESS_MIN_LINES` lines on).

    Returns:
        The number of blocks written (the input's number of lines).
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= 1_000_000:
        raise UserError(f"batch_size={batch_size!r}: give a number of lines per parser call, 1 to 1,000,000")
    if not callable(getattr(parser, "parse", None)):
        raise UserError(f"parser={parser!r} is not a Parser (hf_syntax_mt.data.get_parser builds one)")
    input_path, output_path = Path(input_path), Path(output_path)
    if _same_file(input_path, output_path):
        raise UserError(f"--output {output_path} is the --input file: writing it would destroy the text before it is "
                        "read; give another output name (e.g. the input's name + .conllu)")  # fmt: skip
    from .preprocess import parse_texts

    lines = read_lines(input_path)
    if output_path.is_dir():
        raise UserFileError(f"--output {output_path}: is a folder; give the name of the file to write", errno.EISDIR,
                            str(output_path))  # fmt: skip
    from tqdm.auto import tqdm

    show = len(lines) >= PROGRESS_MIN_LINES if progress is None else progress
    tmp = output_path.parent / f".{output_path.name}.{os.getpid()}.tmp"
    try:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        opened = gzip.open(tmp, "wt", encoding="utf-8") if output_path.name.endswith(".gz") else open(
            tmp, "w", encoding="utf-8")  # fmt: skip
    except OSError as e:
        raise file_error(e, output_path, "--output", writing=True) from None
    try:
        with (
            opened as f,
            tqdm(total=len(lines), unit="line", desc="Parsing", file=sys.stderr, disable=not show) as bar,
        ):
            for start in range(0, len(lines), batch_size):
                batch = lines[start : start + batch_size]
                trees = parse_texts(parser, batch, lambda k, s=start: f"{input_path}:{s + k + 1}")
                for k, tree in enumerate(trees):
                    number = start + k + 1
                    try:
                        block = format_conllu(tree, str(number), empty=True)
                    except UserError as e:
                        raise UserError(f"{input_path}:{number}: the parse cannot be written as CoNLL-U: {e}") from e
                    try:
                        f.write(block)
                    except OSError as e:
                        raise file_error(e, output_path, "--output", writing=True) from None
                bar.update(len(batch))
        os.replace(tmp, output_path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(lines)
