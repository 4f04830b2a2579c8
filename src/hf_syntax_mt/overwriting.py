"""The rule that an output never overwrites an input, standard library only.

The CLI (`cli_args.refuse_overwriting`) and the scripts under ``benchmarks/`` (`benchmarks.arguments`) check their
path flags with `refuse_writing_over` before any work: a file written may be none of the files read (nor another file
written), and no file of a folder read (a model directory, a data folder). The console script loads this module
without the package's ``__init__`` (`hf_syntax_mt_cli`), so it imports nothing but the standard library and
``errors``.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable

from .errors import UserError

__all__ = ["MODEL_FILE_PATTERNS", "refuse_writing_over"]

#: names a model loader reads: a new file of one of these names in a model directory would change the model
MODEL_FILE_PATTERNS = ("config.json", "generation_config.json", "tokenizer*.json", "special_tokens_map.json",
                       "vocab.json", "*.safetensors", "*.safetensors.index.json", "*.spm", "*.model", "*.bin")  # fmt: skip


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: the same inode when both exist (a symbolic or hard link), else the same
    resolved path (an output that does not exist yet through a linked folder)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def inside_folder(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether writing ``path`` would overwrite a file of ``folder`` (resolved: through links too): the folder
    itself, a file under it, or a new file a model loader would read (``config.json``, ``*.safetensors``, ...). A
    new report beside the model (``runs/x/eval.json``) is fine; a folder that does not exist (a Hub id) holds
    nothing to overwrite."""
    try:
        root = os.path.realpath(os.path.expanduser(folder))
        target = os.path.realpath(os.path.expanduser(path))
    except (OSError, RuntimeError, ValueError):
        return False
    if not os.path.isdir(root) or not (target == root or os.path.commonpath([root, target]) == root):
        return False
    name = os.path.basename(target)
    return target == root or os.path.exists(target) or any(fnmatch.fnmatch(name, p) for p in MODEL_FILE_PATTERNS)


Flags = Iterable[tuple[str, "str | os.PathLike | None"]]


def refuse_writing_over(outputs: Flags, inputs: Flags = (), folders: Flags = ()) -> None:
    """Raise `UserError` where a file written (``outputs``: ``(flag, path)`` pairs) is a file read (``inputs``), an
    earlier output, or a file of a folder read (``folders``). A path of None or ``-`` (standard input or output) is
    not a file and is skipped. The message names both flags and the fix."""
    given = lambda pairs: [(flag, path) for flag, path in pairs if path is not None and str(path) != "-"]  # noqa: E731
    outputs, inputs, folders = given(outputs), given(inputs), given(folders)
    for k, (out, out_path) in enumerate(outputs):
        for flag, path in inputs + outputs[:k]:
            if same_file(out_path, path):
                kind = "writes" if (flag, path) in outputs[:k] else "reads"
                raise UserError(f"{out} {out_path} is the file that {flag} {path} names, which this command {kind} "
                                f"too: give {out} another file name.")  # fmt: skip
        for flag, folder in folders:
            if inside_folder(out_path, folder):
                raise UserError(f"{out} {out_path} is a file of the folder {flag} {folder} names (the model's or "
                                f"data's own files: writing it would destroy them): give {out} a file outside that "
                                "folder.")  # fmt: skip
