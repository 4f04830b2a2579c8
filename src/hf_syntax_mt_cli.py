"""The `hf-syntax-mt` console script: `--help`, argparse errors and the checks between flags answer without importing
torch or transformers.

`import hf_syntax_mt` imports torch and transformers (the package registers its classes with transformers' Auto
classes on import), which takes seconds, and ``hf_syntax_mt.cli`` is inside that package. This module lives outside
it: it loads the package's standard-library modules on their own, ``errors.py`` (the user-error types),
``cli_args.py`` (the parser, its flag types and `check_args`) and, for ``train``, ``train_help.py`` (the train
script's flags, kept from `HfArgumentParser`'s: its help, and the check of a command line), under their real names,
so that the package uses the same classes once it is imported. A command that parses and passes the checks goes to
`hf_syntax_mt.cli.main`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _load(name: str):
    """``hf_syntax_mt/<name>.py`` loaded without running the package's ``__init__``, registered as
    ``hf_syntax_mt.<name>`` (an import of the package later finds it there); None where the package is not found."""
    full = f"hf_syntax_mt.{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.find_spec("hf_syntax_mt")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(full, path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[full] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[full]
        raise
    return module


def _attach() -> None:
    """Make the modules `_load` registered attributes of the package, as an ordinary import of them does."""
    package = sys.modules.get("hf_syntax_mt")
    for name in (
        "errors",
        "overwriting",
        "suggest",
        "cli_engine_args",
        "cli_args",
        "recipes",
        "run_requirements",
        "train_help",
    ):
        if package is not None and f"hf_syntax_mt.{name}" in sys.modules:
            setattr(package, name, sys.modules[f"hf_syntax_mt.{name}"])


def main() -> int:
    """`hf-syntax-mt`: the parser alone first (help, argparse errors, `check_args`), then `hf_syntax_mt.cli.main`."""
    errors = _load("errors")
    # cli_args imports these first (standard library only)
    helpers = [_load(name) for name in ("overwriting", "suggest", "cli_engine_args")]
    cli_args = _load("cli_args") if all(m is not None for m in helpers) else None
    if errors is None or cli_args is None:  # not an installed package layout: the package reports its own errors
        from hf_syntax_mt.cli import main as cli_main

        return cli_main()
    argv, debug = cli_args.split_debug(sys.argv[1:])
    try:
        if argv and argv[0] == "train":
            _load("recipes"), _load("run_requirements")  # standard library only: train_help checks a recipe's parses
            train_help = _load("train_help")
            if any(a in ("-h", "--help") for a in argv[1:]):
                text = train_help.fast_help()  # None where the kept help is not this installation's
                if text is not None:
                    sys.stdout.write(text)
                    return 0
            train_help.check_train_args(argv[1:])  # unknown flags, types, minimums: before the import
        else:
            args = cli_args.build_parser().parse_args(argv)  # help and argparse errors exit here
            cli_args.check_args(args)
        from hf_syntax_mt.cli import main as cli_main  # imports torch and transformers; checks their versions

        _attach()
    except (errors.UserError, errors.DependencyVersionError) as e:
        if debug:
            raise
        print(cli_args.one_line(e), file=sys.stderr)
        return 1
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
