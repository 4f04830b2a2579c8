"""A saved model directory, read before transformers loads it (issue 49): every file it needs is opened and its
header parsed, so that a damaged file is named with what to do instead of a traceback from deep in a loader.

`check_model_files` reads ``config.json`` (a JSON object), the tokenizer (``tokenizer.json`` / ``tokenizer_config.json``
as JSON, a sentencepiece model through sentencepiece) and the weights' headers (``model.safetensors`` through the
safetensors library, which checks the header against the file's length; a sharded index and each of its shards).
The tensors themselves are not read: the check costs milliseconds whatever the model's size.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import UserError

__all__ = ["check_model_files"]

_RESTORE = "restore it from the training run's output directory (or save the model again with save_pretrained)"


def _json_object(path: Path, what: str) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: {path} is not UTF-8 text (byte {e.start}), so not JSON: the file is damaged; "
                        f"{_RESTORE}") from None  # fmt: skip
    except json.JSONDecodeError as e:
        raise UserError(f"{what}: {path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}): the file "
                        f"is truncated or damaged; {_RESTORE}") from None  # fmt: skip
    except OSError as e:
        raise UserError(f"{what}: {path} cannot be read ({e.strerror}); {_RESTORE}") from None
    if not isinstance(value, dict):
        raise UserError(f"{what}: {path} holds a JSON {type(value).__name__}, not an object; {_RESTORE}")
    return value


def _safetensors_header(path: Path, what: str) -> list[str]:
    """The tensor names of a safetensors file, from its header (the safetensors library checks that the header is
    valid and that the file is as long as the header says)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return list(f.keys())
    except Exception as e:  # SafetensorError (HeaderTooLarge, InvalidHeader, MetadataIncompleteBuffer, ...), OSError
        raise UserError(f"{what}: {path} is not a readable safetensors file ({type(e).__name__}: {e}): the weights "
                        f"are truncated or damaged; {_RESTORE}") from None  # fmt: skip


def _check_weights(directory: Path, what: str) -> None:
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.is_file():
        if not _safetensors_header(single, what):
            raise UserError(f"{what}: {single} holds no tensors; {_RESTORE}")
        return
    if index.is_file():
        weight_map = _json_object(index, what).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise UserError(f"{what}: {index} has no 'weight_map' object naming the shards; {_RESTORE}")
        for shard in sorted(set(map(str, weight_map.values()))):
            path = directory / shard
            if Path(shard).is_absolute() or ".." in Path(shard).parts or not path.is_file():
                raise UserError(f"{what}: {index} names the shard {shard!r}, which is not a file of {directory}; "
                                f"{_RESTORE}")  # fmt: skip
            names = set(_safetensors_header(path, what))
            if missing := [k for k, v in weight_map.items() if v == shard and k not in names]:
                raise UserError(f"{what}: {path} lacks {missing[:3]}, which {index.name} puts there; {_RESTORE}")
        return
    if not any((directory / name).is_file() for name in ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        raise UserError(f"{what}: {directory} has no weights (no model.safetensors); copy model.safetensors from the "
                        "training run's output directory, where save_pretrained wrote it beside config.json")  # fmt: skip


def _check_tokenizer(directory: Path, what: str) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json"):
        if (directory / name).is_file():
            _json_object(directory / name, what)
    pieces = sorted(p for pattern in ("*.spm", "*.model") for p in directory.glob(pattern) if p.is_file())
    if pieces:
        try:
            import sentencepiece
        except ImportError:  # nothing to read them with here; the tokenizer's own load says what to install
            return
        for path in pieces:
            try:
                sentencepiece.SentencePieceProcessor(model_file=str(path))
            except Exception as e:  # RuntimeError / OSError from the C++ parser
                raise UserError(f"{what}: {path} is not a readable sentencepiece model ({type(e).__name__}: {e}); "
                                f"{_RESTORE}") from None  # fmt: skip


def check_model_files(directory: str | os.PathLike, what: str | None = None) -> dict:
    """Read the files of a saved model directory: ``config.json`` as a JSON object, the tokenizer's JSON files and
    sentencepiece models, and the weights' safetensors headers (single file or sharded). ``what`` starts each message
    (e.g. ``"--model runs/x"``; default: the directory). Returns the config as a dict.

    Raises:
        UserError: naming the file that fails and what to do (no config.json, a file that is not JSON or is
            truncated, weights whose header cannot be read, no weights).
    """
    directory = Path(directory)
    what = what or str(directory)
    if not directory.is_dir():
        raise UserError(f"{what}: no such directory {directory}; give the directory a training run or save_pretrained "
                        "wrote (it holds config.json)")  # fmt: skip
    if not (directory / "config.json").is_file():
        raise UserError(f"{what}: {directory} has no config.json, so it is not a saved model; give the directory a "
                        "training run or save_pretrained wrote")  # fmt: skip
    config = _json_object(directory / "config.json", what)
    _check_tokenizer(directory, what)
    _check_weights(directory, what)
    return config
