"""The options of `translate` that belong to a decoding engine rather than to the model: CTranslate2's weight types
(`export --quantization`, `translate --compute-type`) and its threads (`translate --threads`). Kept apart from
`cli_args` (the other subcommands' flags), which `build_parser` calls into."""

from __future__ import annotations

import argparse

from .errors import UserError

#: CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`): `export --quantization`
CT2_QUANTIZATIONS = (
    "float32",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
)
#: `ctranslate2.Translator`'s compute types: the weight types, `default` (the type the folder was exported in) and
#: `auto` (the fastest type this machine supports)
CT2_COMPUTE_TYPES = ("default", "auto", *CT2_QUANTIZATIONS)
#: past this many threads a value can only oversubscribe the machine
MAX_THREADS = 1024


def ctranslate2_arguments(parser: argparse.ArgumentParser, int_range) -> None:
    """``--threads`` and ``--compute-type`` of `translate` (a CTranslate2 folder only: `refuse_engine_flags`);
    ``int_range`` is `cli_args.int_range` (passed in: cli_args imports this module)."""
    parser.add_argument("--threads", type=int_range(0, MAX_THREADS), help="a CTranslate2 folder (export --to "
                        "ctranslate2): the CPU threads of one translation (CTranslate2's intra_threads; default 0, "
                        "CTranslate2's own choice); printed on stderr")  # fmt: skip
    parser.add_argument("--compute-type", choices=CT2_COMPUTE_TYPES, help="a CTranslate2 folder: the type it computes "
                        "in (CTranslate2's compute_type; default: the type it was exported in; auto: the fastest this "
                        "machine has; int8 is the fastest on most CPUs); printed on stderr")  # fmt: skip


def refuse_engine_flags(args: argparse.Namespace) -> None:
    """``--threads`` / ``--compute-type`` given for a model that is no CTranslate2 folder: a `UserError`."""
    for flag in ("threads", "compute_type"):
        if getattr(args, flag, None) is not None:
            name = f"--{flag.replace('_', '-')}"
            raise UserError(f"{name} is CTranslate2's, and --model {args.model} is no CTranslate2 folder: export it "
                            "with hf-syntax-mt export --to ctranslate2 and translate the folder, or leave out "
                            f"{name} (the threads of generate follow OMP_NUM_THREADS; --bf16 computes in bfloat16)")  # fmt: skip
