"""Did-you-mean for a mistyped name, standard library only: the CLI's flags (`SuggestingParser`: argparse of Python
before 3.14 says only "unrecognized arguments") and the models' keyword arguments (`compat.refuse_unknown_keywords`).
The console script loads this module without the package's ``__init__`` (`hf_syntax_mt_cli`)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable

__all__ = ["SuggestingParser"]  # closest: the helper it and compat share


def closest(name: str, names: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (`difflib.get_close_matches`, ratio at least 0.6), or None."""
    found = difflib.get_close_matches(name, sorted(set(names)), n=1, cutoff=0.6)
    return found[0] if found else None


class SuggestingParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose "unrecognized arguments" error names the closest flag of the subcommand that was
    chosen (``--nume-beams``: did you mean --num-beams?). Its subparsers are of this class too."""

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(self.unrecognized(namespace, extras))
        return namespace

    def unrecognized(self, namespace: argparse.Namespace, extras: list[str]) -> str:
        """argparse's message for ``extras``, with the closest flag of the chosen subcommand for each flag-like one."""
        parser = self
        for action in self._actions:  # the chosen subcommand's parser holds the flags that were meant
            if isinstance(action, argparse._SubParsersAction):
                parser = action.choices.get(getattr(namespace, action.dest, None) or "", self)
        flags = [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]
        hints = []
        for extra in extras:
            if extra.startswith("--") and (match := closest(extra.split("=", 1)[0], flags)):
                hints.append(f"{extra.split('=', 1)[0]}: did you mean {match}?")
        message = f"unrecognized arguments: {' '.join(extras)}"
        return message + (f" ({'; '.join(hints)})" if hints else "")
