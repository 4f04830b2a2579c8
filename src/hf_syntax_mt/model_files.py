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

__all__ = ["check_model_files", "check_generation_config", "check_weights_against_config"]

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


def _safetensors_header(path: Path, what: str) -> dict[str, tuple[int, ...]]:
    """The tensor names and shapes of a safetensors file, from its header (the safetensors library checks that the
    header is valid and that the file is as long as the header says)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as e:  # SafetensorError (HeaderTooLarge, InvalidHeader, MetadataIncompleteBuffer, ...), OSError
        raise UserError(f"{what}: {path} is not a readable safetensors file ({type(e).__name__}: {e}): the weights "
                        f"are truncated or damaged; {_RESTORE}") from None  # fmt: skip


# pickle-format weights (not model.bin: CTranslate2 writes its own format under that name)
_PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.ckpt")


def _check_weights(directory: Path, what: str) -> tuple[Path, dict[str, tuple[int, ...]]]:
    """The weights file (or index) and every tensor's shape, read from the safetensors headers."""
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.is_file():
        shapes = _safetensors_header(single, what)
        if not shapes:
            raise UserError(f"{what}: {single} holds no tensors; {_RESTORE}")
        return single, shapes
    if index.is_file():
        weight_map = _json_object(index, what).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise UserError(f"{what}: {index} has no 'weight_map' object naming the shards; {_RESTORE}")
        shapes: dict[str, tuple[int, ...]] = {}
        for shard in sorted(set(map(str, weight_map.values()))):
            path = directory / shard
            if Path(shard).is_absolute() or ".." in Path(shard).parts or not path.is_file():
                raise UserError(f"{what}: {index} names the shard {shard!r}, which is not a file of {directory}; "
                                f"{_RESTORE}")  # fmt: skip
            names = _safetensors_header(path, what)
            if missing := [k for k, v in weight_map.items() if v == shard and k not in names]:
                raise UserError(f"{what}: {path} lacks {missing[:3]}, which {index.name} puts there; {_RESTORE}")
            shapes.update(names)
        return index, shapes
    if pickles := [name for name in _PICKLES if (directory / name).is_file()]:
        raise UserError(f"{what}: {directory / pickles[0]} is a pickle-format weight file, and hf-syntax-mt reads "
                        "safetensors only (a pickle can run code when it is loaded): load the model where you trust "
                        "its origin and save it with save_pretrained, which writes model.safetensors")  # fmt: skip
    raise UserError(f"{what}: {directory} has no weights (no model.safetensors); copy model.safetensors from the "
                    "training run's output directory, where save_pretrained wrote it beside config.json")  # fmt: skip


def _check_tokenizer(directory: Path, what: str) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json"):
        if (directory / name).is_file():
            _json_object(directory / name, what)
    if (directory / "tokenizer.json").is_file():  # its structure, read as transformers' fast tokenizer reads it
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_file(str(directory / "tokenizer.json"))
        except Exception as e:  # tokenizers' own Exception: "Model missing.", "data did not match any variant..."
            raise UserError(f"{what}: {directory / 'tokenizer.json'} is not a tokenizer ({e}): the file was edited "
                            f"or damaged; {_RESTORE}") from None  # fmt: skip
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
    if (directory / "generation_config.json").is_file():
        check_generation_config(directory, what)
    weights, shapes = _check_weights(directory, what)
    check_weights_against_config(directory, weights, shapes, what)
    return config


# the generation settings a saved generation_config.json may hold, with the smallest value that works (and the
# largest beam count that fits in memory: as `translate --num-beams`)
_GENERATION_INTS = {"num_beams": (1, 256), "num_return_sequences": (1, 256), "num_beam_groups": (1, 256),
                    "max_length": (1, None), "max_new_tokens": (1, None), "min_length": (0, None),
                    "min_new_tokens": (0, None), "no_repeat_ngram_size": (0, None), "top_k": (0, None),
                    "encoder_no_repeat_ngram_size": (0, None)}  # fmt: skip
_GENERATION_FLOATS = {"temperature": 0.0, "top_p": 0.0, "repetition_penalty": 0.0}  # each must be above this


def check_generation_config(directory: str | os.PathLike, what: str | None = None) -> None:
    """``generation_config.json`` read as transformers reads it, and its numbers in range (transformers loads
    ``num_beams: 0`` and fails at the first ``generate``). Raises `UserError` naming the file, the field and the fix."""
    import math

    path = Path(directory) / "generation_config.json"
    what = what or str(directory)
    values = _json_object(path, what)
    fix = "correct it, or delete the file (the model's config.json then gives the defaults)"
    for name, (low, high) in _GENERATION_INTS.items():
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            bound = f"an int from {low} to {high}" if high else f"an int >= {low}"
            raise UserError(f"{what}: {path} sets {name}={value!r}, which must be {bound}; {fix}")
    for name, above in _GENERATION_FLOATS.items():
        value = values.get(name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= above
        ):
            raise UserError(f"{what}: {path} sets {name}={value!r}, which must be a number above {above:g}; {fix}")
    from transformers import GenerationConfig

    try:
        GenerationConfig.from_pretrained(str(directory))
    except (ValueError, TypeError, KeyError) as e:  # transformers' own checks between fields
        raise UserError(f"{what}: {path}: {e}; {fix}") from None


def _model_class(config):
    from transformers import AutoModel, AutoModelForSeq2SeqLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING

    return AutoModelForSeq2SeqLM if type(config) in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING else AutoModel


def check_weights_against_config(
    directory: str | os.PathLike, weights: Path, shapes: dict[str, tuple[int, ...]], what: str | None = None
) -> None:
    """The tensors of ``weights`` against the model ``config.json`` builds (on the meta device: no memory, no
    weights): a tensor of another shape (an edited ``d_model`` or ``vocab_size``), a tensor the model does not have
    or one it needs and the file lacks is a `UserError` naming the file (transformers would stop on the first, and
    start the others from random weights after its load report). Tied weights and the sinusoidal positions that
    transformers never saves may be absent."""
    import re

    import torch
    from transformers import AutoConfig

    directory = Path(directory)
    what = what or str(directory)
    config_file = directory / "config.json"
    try:
        config = AutoConfig.from_pretrained(str(directory))
    except UserError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:  # strict config validation, a field's type
        raise UserError(
            f"{what}: {config_file} does not make a config ({type(e).__name__}: {e}); {_RESTORE}"
        ) from None
    try:
        with torch.device("meta"):
            model = _model_class(config).from_config(config)
    except UserError as e:
        raise UserError(f"{what}: {config_file}: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise UserError(f"{what}: {config_file} does not make a model ({type(e).__name__}: {e}); {_RESTORE}") from None
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    prefix = f"{model.base_model_prefix}." if getattr(model, "base_model_prefix", "") else ""
    in_file, in_model = (prefix and any(k.startswith(prefix) for k in keys) for keys in (shapes, expected))
    if prefix and in_model and not in_file:  # a base model's weights under a model with a head
        shapes = {prefix + k: v for k, v in shapes.items()}
    elif prefix and in_file and not in_model:  # a model with a head read as its base model: the head is not read
        shapes = {k[len(prefix) :]: v for k, v in shapes.items() if k.startswith(prefix)}
    tied = set(getattr(model, "all_tied_weights_keys", None) or getattr(model, "_tied_weights_keys", None) or ())
    patterns = lambda keys: [re.compile(k) for k in keys or ()]  # noqa: E731
    may_miss, may_add = (
        patterns(model._keys_to_ignore_on_load_missing),
        patterns(model._keys_to_ignore_on_load_unexpected),
    )
    fields = ", ".join(f"{k}={getattr(config, k)}" for k in ("model_type", "vocab_size", "d_model", "encoder_layers",
                                                              "decoder_layers") if hasattr(config, k))  # fmt: skip
    restore = (f"config.json ({fields}) was edited or belongs to another model: restore the config.json saved with "
               "these weights (the training run's output directory)")  # fmt: skip
    for name, shape in shapes.items():
        if name in expected and expected[name] != shape:
            raise UserError(f"{what}: {weights} holds {name} of shape {list(shape)}, but {config_file} makes it "
                            f"{list(expected[name])}: {restore}")  # fmt: skip
    if extra := [k for k in shapes if k not in expected and not any(p.search(k) for p in may_add)]:
        raise UserError(f"{what}: {weights} holds {len(extra)} tensor(s) the model of {config_file} does not have "
                        f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}): {restore}")  # fmt: skip
    if missing := [
        k for k in expected if k not in shapes and k not in tied and not any(p.search(k) for p in may_miss)
    ]:
        raise UserError(f"{what}: {weights} lacks {len(missing)} tensor(s) the model of {config_file} needs "
                        f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): the weights are "
                        f"incomplete, or {restore}")  # fmt: skip
