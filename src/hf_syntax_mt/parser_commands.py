"""`hf-syntax-mt parse` and `hf-syntax-mt train-parser`: the flags of `cli_args._add_parse` and `_add_train_parser` turned
into calls of `data.parse_corpus.parse_corpus` and `data.parser_training.train_spacy_parser`. Here, not in `data`,
because the parser comes from the train script's own mapping of ``--parser`` / ``--parser_model`` /
``--parser_cache_dir`` (`training.data.build_parser`), which the data side may not import."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["parse_command", "train_parser_command"]


def parse_command(args: argparse.Namespace) -> int:
    """``hf-syntax-mt parse``: the input read first (a bad file fails before the parser loads), the parser built as
    ``train`` builds it, then `parse_corpus`."""
    from .data.parse_corpus import parse_corpus
    from .data.readers import read_lines
    from .training.data import build_parser
    from .training.script_args import DataArguments

    read_lines(args.input)  # a missing, undecodable or damaged input is named before the parser loads
    parser = build_parser(DataArguments(parser=args.parser, parser_model=args.parser_model,
                                        parser_cache_dir=args.parser_cache_dir))  # fmt: skip
    n = parse_corpus(args.input, args.output, parser, batch_size=args.batch_size)
    print(f"wrote {n} CoNLL-U blocks (one per line of {args.input}) to {args.output}; parser "
          f"{parser.signature()}", file=sys.stderr)  # fmt: skip
    return 0


def train_parser_command(args) -> int:
    """``hf-syntax-mt train-parser``: `train_spacy_parser` with the flags, then where the model is and its scores."""
    from .data.parser_training import RECORD, train_spacy_parser

    record = train_spacy_parser(args.lang, args.train, args.dev, args.output, max_seconds=args.max_seconds,
                                max_steps=args.max_steps, eval_frequency=args.eval_frequency,
                                threads=args.threads)  # fmt: skip
    dev = record["dev_scores"]
    print(f"dev UAS {dev['uas']}  LAS {dev['las']}  POS {dev['pos']}  ({record['dev']['sentences']} sentences of "
          f"{args.dev}; training {record['seconds'].get('train')} s, stopped by {record['stopped_by']})\n"
          f"the parser: {record['model']}  (use it with --parser spacy --parser_model {record['model']}; its scores "
          f"in {Path(args.output) / RECORD})")  # fmt: skip
    return 0
