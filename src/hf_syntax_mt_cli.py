"""The `hf-syntax-mt` console script: `--help` answers without importing torch or transformers.

`import hf_syntax_mt` imports torch and transformers (the package registers its classes with transformers' Auto
classes on import), which takes seconds, and ``hf_syntax_mt.cli`` is inside that package. This module lives outside
it: for ``--help`` / ``-h`` it loads ``hf_syntax_mt/cli.py`` on its own (its module level imports the standard
library only; every subcommand imports what it needs when it runs) and prints the help of the same parser;
everything else goes to `hf_syntax_mt.cli.main`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _parser_module():
    """``hf_syntax_mt/cli.py`` loaded without running the package's ``__init__`` (under a private module name)."""
    spec = importlib.util.find_spec("hf_syntax_mt")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "cli.py"
    module_spec = importlib.util.spec_from_file_location("_hf_syntax_mt_cli_help", path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def main() -> int:
    """`hf-syntax-mt`: help from the parser alone, anything else from `hf_syntax_mt.cli.main`."""
    argv = sys.argv[1:]
    if any(a in ("-h", "--help") for a in argv) and not (argv and argv[0] == "train"):  # train: HfArgumentParser
        module = _parser_module()
        if module is not None:
            module.build_parser().parse_args([a for a in argv if a != "--debug"])  # prints the help and exits
    from hf_syntax_mt.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
