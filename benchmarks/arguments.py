"""The flag rules every script under ``benchmarks/`` and ``scripts/`` shares, taken from the CLI's (issue 65, item 6).

- **Ranges**: every number flag has an argparse type that refuses a value out of its range with a clear message
  (`int_range`, `float_range` are the CLI's own: ``argument --beams: must be at least 1, got 0``). The named types
  below cover the common kinds; `tests/bench/test_script_flags.py` reads every script's parser and fails on a
  plain ``type=int`` or ``type=float``.
- **Outputs never overwrite inputs**: `refuse_overwriting` applies the CLI's rule (`hf_syntax_mt.overwriting`): a
  file written may be no file read, nor a file of a folder read (a model directory, a data folder).
- **``--quick`` never overrides a flag the user gave**: `apply_quick` sets its small values only on the flags left
  out, and says which given flags it kept.

Standard library only at import: the CLI's modules are loaded without the package's ``__init__`` (which imports
torch), as the console script does, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence


def _standalone(name: str):
    """``hf_syntax_mt.<name>`` (a standard-library-only module), without running the package's ``__init__`` where it
    is not imported yet (`hf_syntax_mt_cli` loads it so, under its real name)."""
    if "hf_syntax_mt" in sys.modules or f"hf_syntax_mt.{name}" in sys.modules:
        return importlib.import_module(f"hf_syntax_mt.{name}")
    try:
        import hf_syntax_mt_cli
    except ImportError:  # not an installed layout: the ordinary import
        return importlib.import_module(f"hf_syntax_mt.{name}")
    for needed in ("errors", "overwriting", name):
        module = hf_syntax_mt_cli._load(needed)  # the console script's loader (one rule for both)
    return module if module is not None else importlib.import_module(f"hf_syntax_mt.{name}")


_cli_args = _standalone("cli_args")
int_range, float_range = _cli_args.int_range, _cli_args.float_range

POSITIVE = _cli_args.POSITIVE  # a count, a size, rounds, repeats: 0 divides by zero or measures nothing
NATURAL = _cli_args.NATURAL  # warm-up rounds or steps, extra samples: 0 is "none"
SEED = _cli_args.SEED  # numpy's and torch's seeds
BEAMS = _cli_args.BEAMS  # 1..128
BATCH = _cli_args.BATCH  # 1..4096 sentences per forward pass
THREADS = int_range(1, 1024)  # torch threads
SECONDS = float_range(above=0)  # a time budget or limit (minutes or seconds): > 0
RATE = float_range(above=0)  # a learning rate
PROBABILITY = float_range(0, 1)


def flag_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse_overwriting(parser: argparse.ArgumentParser | None, args: argparse.Namespace, outputs: Iterable[str],
                       inputs: Iterable[str] = (), folders: Iterable[str] = ()) -> None:  # fmt: skip
    """The CLI's rule on a script's flags (named by ``dest``): no output (a file written) may be an input (a file
    read), another output, or a file of a folder read (`hf_syntax_mt.overwriting.refuse_writing_over`). An error is
    the parser's (exit 2, naming both flags), or without a parser a `SystemExit` with the message."""
    overwriting = _standalone("overwriting")
    flags = lambda names: [(flag_name(n), getattr(args, n, None)) for n in names]  # noqa: E731
    try:
        overwriting.refuse_writing_over(flags(outputs), flags(inputs), flags(folders))
    except _standalone("errors").UserError as e:
        if parser is None:
            raise SystemExit(f"error: {e}") from None
        parser.error(str(e))


def given_flags(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> set[str]:
    """The ``dest`` of every flag given on the command line ``argv`` (default ``sys.argv[1:]``), whatever its value
    (a flag given with its default value counts): argparse sets a default only on a name the namespace lacks, so
    every name starts as a marker and the names still holding it were left out."""
    marker = object()
    names = {a.dest for a in parser._actions if a.dest != argparse.SUPPRESS}
    namespace = argparse.Namespace(**dict.fromkeys(names, marker))
    parser.parse_known_args(sys.argv[1:] if argv is None else list(argv), namespace)
    return {name for name in names if getattr(namespace, name) is not marker}


def apply_quick(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str] | None,
                quick: dict) -> set[str]:  # fmt: skip
    """``--quick``'s small values (``quick``: dest -> value) set on ``args`` for the flags the user left out; a flag
    given keeps its value (``--quick --threads 2`` runs the quick plan on 2 threads), and a note on stderr says which
    it kept. Returns the dests kept. Nothing is done without ``args.quick``."""
    if not getattr(args, "quick", False):
        return set()
    unknown = [name for name in quick if not hasattr(args, name)]
    if unknown:
        raise AssertionError(f"--quick sets {unknown}, which the parser does not define")  # a bug of the script
    kept = given_flags(parser, argv) & set(quick)
    for name, value in quick.items():
        if name not in kept:
            setattr(args, name, value)
    if kept:
        shown = ", ".join(f"{flag_name(n)} {getattr(args, n)}" for n in sorted(kept))
        print(f"note: --quick keeps the flags given ({shown}) instead of its own values", file=sys.stderr)
    return kept
