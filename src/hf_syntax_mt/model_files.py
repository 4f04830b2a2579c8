"""A saved model directory, read before transformers loads it: every file it needs is opened and its
header parsed, so that a damaged file is named with what to do instead of a traceback from deep in a loader.

`check_model_files` reads ``config.json`` (a JSON object), the tokenizer (``tokenizer.json`` / ``tokenizer_config.json``
as JSON, a sentencepiece model through sentencepiece) and the weights' headers (``model.safetensors`` through the
safetensors library, which checks the header against the file's length; a sharded index and each of its shards).
The tensors themselves are not read: the check costs milliseconds whatever the model's size.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .errors import UserError, UserTypeError, file_error

__all__ = [
    "check_ctranslate2_folder", "check_generation_config", "check_marian_folder", "check_model_files",
    "check_model_folder", "check_weights_against_config",
]  # fmt: skip

_RESTORE = "restore it from the training run's output directory (or save the model again with save_pretrained)"


def _json_value(path: Path, what: str, fix: str = _RESTORE):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: {path} is not UTF-8 text (byte {e.start}), so not JSON: the file is damaged; "
                        f"{fix}") from None  # fmt: skip
    except json.JSONDecodeError as e:
        raise UserError(f"{what}: {path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}): the file "
                        f"is truncated or damaged; {fix}") from None  # fmt: skip
    except RecursionError:
        raise UserError(f"{what}: {path} is not a JSON file this package reads (nested too deeply): the file is "
                        f"damaged; {fix}") from None  # fmt: skip
    except OSError as e:  # no permission, a folder of that name: the system's words and their fix
        raise file_error(e, path, f"{what}:") from None


def _json_object(path: Path, what: str, fix: str = _RESTORE) -> dict:
    value = _json_value(path, what, fix)
    if not isinstance(value, dict):
        raise UserError(f"{what}: {path} holds a JSON {type(value).__name__}, not an object; {fix}")
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


def _check_tokenizer(directory: Path, what: str, fix: str = _RESTORE) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json"):
        if (directory / name).is_file():
            _json_object(directory / name, what, fix)
    if (directory / "tokenizer.json").is_file():  # its structure, read as transformers' fast tokenizer reads it
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_file(str(directory / "tokenizer.json"))
        except Exception as e:  # tokenizers' own Exception: "Model missing.", "data did not match any variant..."
            raise UserError(f"{what}: {directory / 'tokenizer.json'} is not a tokenizer ({e}): the file was edited "
                            f"or damaged; {fix}") from None  # fmt: skip
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
                                f"{fix}") from None  # fmt: skip


def check_model_folder(directory: str | os.PathLike, what: str | None = None) -> dict:
    """The check of a saved model folder that every reader runs before transformers loads it (`translate`,
    `evaluate --model/--baseline-model`, `export`, the pipeline): a readable ``config.json`` whose ``model_type``
    hf-syntax-mt or transformers knows, no custom pipeline code for the task the package runs, a tokenizer, and then
    every file read (`check_model_files`). A Marian folder `save_marian` wrote is such a folder too. ``what`` starts
    each message (e.g. ``"--model runs/x"``). Returns the config as a dict.

    Raises:
        UserError: one line naming the file that fails and what to do.
    """
    directory = Path(directory)
    what = what or str(directory)
    if not directory.is_dir():
        raise UserError(f"{what}: no such directory {directory}; give the directory a training run or save_pretrained "
                        "wrote (it holds config.json)")  # fmt: skip
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise UserError(f"{what}: the directory {directory.resolve()} has no config.json, so it is not a saved model; "
                        "give the directory a training run or save_pretrained wrote.")  # fmt: skip
    config = _json_object(config_file, what)
    restore = ("the file was edited, or the directory holds another library's model; restore config.json from the "
               "training run's output (or save the model again with save_pretrained)")  # fmt: skip
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hf_syntax_mt  # noqa: F401  (registers syntax_mt and syntax_mt_symmetric)

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise UserError(f"{what}: {config_file} has model_type {model_type!r}, which neither hf-syntax-mt (syntax_mt, "
                        f"syntax_mt_symmetric) nor transformers (e.g. marian) knows: {restore}")  # fmt: skip
    pipelines = config.get("custom_pipelines")
    if isinstance(pipelines, dict) and "syntax-translation" in pipelines:
        raise UserError(f"{what}: {config_file} declares its own code for the task 'syntax-translation' "
                        f"(custom_pipelines), which hf-syntax-mt never writes and does not run: {restore}")  # fmt: skip
    tokenizer_files = ("tokenizer.json", "*.spm", "*.model", "vocab.json", "vocab.txt")  # fast, or sentencepiece
    if not any(f.is_file() for pattern in tokenizer_files for f in directory.glob(pattern)):
        raise UserError(f"{what}: {directory} has no tokenizer (no tokenizer.json): copy tokenizer.json and "
                        "tokenizer_config.json from the training run's output directory, where save_pretrained wrote "
                        "them beside the model")  # fmt: skip
    return check_model_files(directory, what)


def check_marian_folder(directory: str | os.PathLike, what: str | None = None) -> dict:
    """A transformers Marian folder (`save_marian`'s, or an opus-mt checkpoint), as `export --to ctranslate2` reads
    it: `check_model_folder`, and ``model_type`` ``marian``. Returns the config as a dict."""
    what = what or str(directory)
    config = check_model_folder(directory, what)
    if config.get("model_type") != "marian":
        raise UserError(f"{what}: {Path(directory) / 'config.json'} holds a {config.get('model_type')!r} model, not "
                        "a Marian one; give the folder save_marian (hf-syntax-mt export --to marian) wrote")  # fmt: skip
    return config


def check_model_files(directory: str | os.PathLike, what: str | None = None) -> dict:
    """Read the files of a saved model directory: ``config.json`` as a JSON object, the tokenizer's JSON files and
    sentencepiece models, the token ids of ``config.json`` and ``generation_config.json`` (each in the vocabulary),
    and the weights' safetensors headers (single file or sharded). ``what`` starts each message (e.g.
    ``"--model runs/x"``; default: the directory). Returns the config as a dict.

    Raises:
        UserError: naming the file that fails and what to do (no config.json, a file that is not JSON or is
            truncated, weights whose header cannot be read, no weights, a token id outside the vocabulary).
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
    vocab_size = config.get("decoder_vocab_size") or config.get("vocab_size")
    vocab_size = vocab_size if isinstance(vocab_size, int) and not isinstance(vocab_size, bool) else None
    _check_token_ids(config, directory / "config.json", vocab_size, what, f"correct it; {_RESTORE}")
    _check_tokenizer(directory, what)
    if (directory / "generation_config.json").is_file():
        check_generation_config(directory, what, vocab_size)
    weights, shapes = _check_weights(directory, what)
    check_weights_against_config(directory, weights, shapes, what)
    return config


#: the fields of config.json and generation_config.json that hold token ids (one, a list, or a list of lists)
_TOKEN_ID_FIELDS = ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id", "forced_bos_token_id",
                    "forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens", "bad_words_ids")  # fmt: skip


def _check_token_ids(values: dict, path: Path, vocab_size: int | None, what: str, fix: str) -> None:
    """Each token id of ``values`` an int from 0 to ``vocab_size - 1`` (transformers loads ``decoder_start_token_id:
    99999`` and fails at the first ``generate`` with an IndexError)."""
    if vocab_size is None:
        return
    for name in _TOKEN_ID_FIELDS:
        value = values.get(name)
        flat = [] if value is None else [value] if not isinstance(value, list) else value
        flat = [i for v in flat for i in (v if isinstance(v, list) else [v])]
        bad = [i for i in flat if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab_size]
        if bad:
            raise UserError(f"{what}: {path} sets {name}={value!r}, but a token id must be an int from 0 to "
                            f"{vocab_size - 1} (the model's vocabulary has {vocab_size} tokens); {fix}")  # fmt: skip


# the generation settings a saved generation_config.json may hold, with the smallest value that works (and the
# largest beam count that fits in memory: as `translate --num-beams`)
_GENERATION_INTS = {"num_beams": (1, 256), "num_return_sequences": (1, 256), "num_beam_groups": (1, 256),
                    "max_length": (1, None), "max_new_tokens": (1, None), "min_length": (0, None),
                    "min_new_tokens": (0, None), "no_repeat_ngram_size": (0, None), "top_k": (0, None),
                    "encoder_no_repeat_ngram_size": (0, None)}  # fmt: skip
_GENERATION_FLOATS = {"temperature": 0.0, "top_p": 0.0, "repetition_penalty": 0.0}  # each must be above this


def check_generation_config(
    directory: str | os.PathLike, what: str | None = None, vocab_size: int | None = None
) -> None:
    """``generation_config.json`` read as transformers reads it, and its numbers in range (transformers loads
    ``num_beams: 0`` and fails at the first ``generate``); given ``vocab_size``, each token id in the vocabulary.
    Raises `UserError` naming the file, the field and the fix."""
    if vocab_size is not None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise UserTypeError(
                f"vocab_size must be an int (the model's vocabulary size), got {type(vocab_size).__name__}"
            )
        if not 1 <= vocab_size <= 10**9:
            raise UserError(f"vocab_size {vocab_size}: give the model's vocabulary size (1 to 10**9)")
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
    _check_token_ids(values, path, vocab_size, what, fix)
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


# --------------------------------------------------------------------------------------------------------------
# A CTranslate2 folder (`export_to_ctranslate2`'s)
# --------------------------------------------------------------------------------------------------------------
_REEXPORT = "export the model again: hf-syntax-mt export --model MODEL_DIR --to ctranslate2 --output NEW_DIR"
_CT2_DTYPE_BYTES = (4, 1, 2, 4, 2, 2)  # CTranslate2's DataType ids: float32, int8, int16, int32, float16, bfloat16


def _ct2_variables(path: Path, what: str) -> dict[str, tuple[int, ...]]:
    """The variables' names and shapes of a CTranslate2 ``model.bin`` (aliases resolved), read as CTranslate2 writes
    it (`ModelSpec._serialize`: version, spec name, revision, then each variable's name, shape, type, byte count and
    bytes, then the aliases), seeking over the data: a truncated or foreign file fails here, whatever its size."""
    import struct

    size = path.stat().st_size

    def fail(why: str):
        return UserError(f"{what}: {path} is not a CTranslate2 model file ({why}): it is truncated or damaged; "
                         f"{_REEXPORT}")  # fmt: skip

    try:
        with open(path, "rb") as f:

            def read(fmt: str):
                data = f.read(struct.calcsize(fmt))
                if len(data) < struct.calcsize(fmt):
                    raise fail(f"it ends at byte {size}, inside its header")
                return struct.unpack(fmt, data)[0]

            def string() -> str:
                data = f.read(read("H"))
                if not data or data[-1:] != b"\0":
                    raise fail(f"a name at byte {f.tell() - len(data)} is not a string")
                return data[:-1].decode("utf-8")

            if not 1 <= (version := read("I")) <= 100:
                raise fail(f"binary version {version}")
            if version >= 2:
                string(), read("I")  # the spec's name and revision
            shapes = {}
            for _ in range(read("I")):
                name, rank = string(), read("B")
                dims = tuple(read("I") for _ in range(rank))
                dtype, count = read("B"), read("I")
                if dtype >= len(_CT2_DTYPE_BYTES) or count != _CT2_DTYPE_BYTES[dtype] * math.prod(dims):
                    raise fail(f"the variable {name!r} of shape {list(dims)} is said to hold {count} bytes")
                if f.seek(count, 1) > size:
                    raise fail(f"the variable {name!r} ends past the file's end ({size} bytes)")
                shapes[name] = dims
            aliases = [(string(), string()) for _ in range(read("I"))] if version >= 5 else []
            if f.tell() != size:
                raise fail(f"{size - f.tell()} bytes follow its last variable")
    except UnicodeDecodeError:
        raise fail("a variable name is not UTF-8") from None
    except OSError as e:
        raise UserError(f"{what}: {path} cannot be read ({e.strerror}); {_REEXPORT}") from None
    for alias, name in aliases:
        if name in shapes:
            shapes[alias] = shapes[name]
    return shapes


def _ct2_vocabulary(directory: Path, what: str) -> tuple[Path, list[str]]:
    """The target vocabulary of a CTranslate2 folder (``shared_vocabulary`` or ``target_vocabulary``, JSON or text)."""
    for name in ("shared_vocabulary", "target_vocabulary"):
        if (path := directory / f"{name}.json").is_file():
            tokens = _json_value(path, what, _REEXPORT)
            if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
                raise UserError(f"{what}: {path} is not a list of tokens (JSON strings); {_REEXPORT}")
            return path, tokens
        if (path := directory / f"{name}.txt").is_file():
            try:
                return path, path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as e:
                raise UserError(f"{what}: {path} cannot be read as UTF-8 text ({e}); {_REEXPORT}") from None
    raise UserError(f"{what}: {directory} has no CTranslate2 vocabulary file (shared_vocabulary.json); {_REEXPORT}")


def check_ctranslate2_folder(directory: str | os.PathLike, what: str | None = None) -> dict:
    """A CTranslate2 folder as `translate` and `CTranslate2Pipeline` read it: CTranslate2's ``config.json`` and
    ``model.bin`` (its structure, every byte accounted for), the vocabulary (one token per row of the embeddings, the
    special tokens of config.json in it), the tokenizer copied beside them (readable, knowing every token of the
    vocabulary), ``generation_config.json`` (numbers in range, token ids in the tokenizer's vocabulary) and
    ``hf_syntax_mt_export.json``. Returns the latter as a dict ({} where it is absent: a folder CTranslate2's own
    converter wrote).

    Raises:
        UserError: one line naming the file that fails and what to do (export the model again).
    """
    from .export.layout import EXPORT_INFO, QUANTIZATIONS

    directory = Path(directory).expanduser()
    what = what or str(directory)
    if not directory.is_dir():
        raise UserError(f"{what}: no such directory {directory}; give the folder hf-syntax-mt export --to ctranslate2 "
                        "wrote")  # fmt: skip
    config = _json_object(directory / "config.json", what, _REEXPORT)
    if not (directory / "model.bin").is_file():
        raise UserError(f"{what}: {directory} has no model.bin (CTranslate2's weights); {_REEXPORT}")
    shapes = _ct2_variables(directory / "model.bin", what)
    vocabulary_file, vocabulary = _ct2_vocabulary(directory, what)
    rows = shapes.get("decoder/embeddings/weight", (None,))[0]
    if rows is not None and rows != len(vocabulary):
        raise UserError(f"{what}: {vocabulary_file} holds {len(vocabulary)} tokens, but {directory / 'model.bin'} "
                        f"has {rows} embedding rows: the vocabulary belongs to another export; {_REEXPORT}")  # fmt: skip
    known = set(vocabulary)
    fields = (
        "decoder_start_token",
        "eos_token",
        "unk_token",
        *(("bos_token",) if config.get("add_source_bos") else ()),
    )
    for field in fields:  # (bos_token is read only with add_source_bos: the Marian layout has none)
        if isinstance(token := config.get(field), str) and token not in known:
            raise UserError(f"{what}: {directory / 'config.json'} sets {field}={token!r}, which {vocabulary_file.name} "
                            f"does not hold; {_REEXPORT}")  # fmt: skip
    info = {}
    if (info_file := directory / EXPORT_INFO).is_file():
        info = _json_object(info_file, what, _REEXPORT)
        positions, quantization = info.get("max_position_embeddings"), info.get("quantization")
        if info.get("format") != "ctranslate2":
            raise UserError(f"{what}: {info_file} sets format={info.get('format')!r}, not 'ctranslate2'; {_REEXPORT}")
        if positions is not None and (isinstance(positions, bool) or not isinstance(positions, int) or positions < 1):
            raise UserError(f"{what}: {info_file} sets max_position_embeddings={positions!r}, which must be an int "
                            f">= 1; {_REEXPORT}")  # fmt: skip
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise UserError(f"{what}: {info_file} sets quantization={quantization!r}, which is not a CTranslate2 "
                            f"weight type ({', '.join(QUANTIZATIONS)}); {_REEXPORT}")  # fmt: skip
    _check_tokenizer(directory, what, _REEXPORT)
    tokenizer_vocabulary = _tokenizer_vocabulary(directory, what)
    if missing := [t for t in vocabulary if t not in tokenizer_vocabulary]:
        tokenizer_file = directory / ("tokenizer.json" if (directory / "tokenizer.json").is_file() else "vocab.json")
        raise UserError(f"{what}: {tokenizer_file} does not know {len(missing)} token(s) of "
                        f"{vocabulary_file.name} ({', '.join(map(repr, missing[:3]))}): it belongs to another model; "
                        f"{_REEXPORT}")  # fmt: skip
    if (directory / "generation_config.json").is_file():
        check_generation_config(directory, what, max(tokenizer_vocabulary.values()) + 1)
    return info


def _tokenizer_vocabulary(directory: Path, what: str) -> dict[str, int]:
    """Token -> id of the tokenizer files of a CTranslate2 folder (``tokenizer.json``, or a Marian sentencepiece
    tokenizer's ``vocab.json``)."""
    if (directory / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(directory / "tokenizer.json")).get_vocab(with_added_tokens=True)
    if (directory / "vocab.json").is_file():
        vocab = _json_object(directory / "vocab.json", what, _REEXPORT)
        if vocab and all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()):
            return vocab
        raise UserError(f"{what}: {directory / 'vocab.json'} is not a token -> id object; {_REEXPORT}")
    raise UserError(f"{what}: {directory} has no tokenizer (no tokenizer.json or vocab.json beside model.bin); "
                    f"{_REEXPORT}")  # fmt: skip


def _model_directory(path: str, flag: str = "--model") -> str:
    """``--model`` of translate / align / uas / contrastive / evaluate: an existing model directory, checked against
    itself (`model_files.check_model_files`), else a `UserError` naming the flag and the path. A Hub id
    (``org/name``, no such local folder) is fetched here, where its failure (offline, no such repository) is named,
    and its files are checked as a local directory's."""
    try:
        p = Path(path).expanduser()
    except RuntimeError as e:  # ~user of a user who does not exist
        raise UserError(f"{flag} {path}: {e}; give the model directory's full path") from None
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise UserError(f"{flag} {path}: the directory {p.resolve()} has no config.json, so it is not a saved "
                             "model; give the directory a training run or save_pretrained wrote.")  # fmt: skip
        _check_saved_model(p, path, flag)
        return str(p)
    if p.exists():
        raise UserError(f"{flag} {path} is a file; give the model's directory (the one holding config.json).")
    hub_like = (
        not p.is_absolute() and path.count("/") == 1 and not path.startswith((".", "~")) and not p.parent.is_dir()
    )
    if not hub_like:
        raise UserError(f"{flag} {path}: no such directory ({p.resolve()}); give the directory a training run or "
                         "save_pretrained wrote (it holds config.json).")  # fmt: skip
    local = _hub_snapshot(path, flag)
    _check_saved_model(local, path, flag)
    return str(local)


def _hub_snapshot(repo_id: str, flag: str) -> Path:
    """The local copy of a Hub model (config, tokenizer, safetensors weights only: the package reads no pickle);
    any failure to get it (offline, no such repository, a gated one) is the user's to fix, named here."""
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.spm", "*.model", "*.txt"])
        )
    except Exception as e:  # HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled, HFValidationError, ...
        raise UserError(f"{flag} {repo_id}: no such local directory, and it could not be fetched from the Hugging "
                        f"Face Hub ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); give the "
                        "directory a training run or save_pretrained wrote, or check the model id and the "
                        "network (HF_HUB_OFFLINE)") from None  # fmt: skip


def _check_saved_model(directory: Path, flag_value: str, flag: str = "--model") -> None:
    """The model folder's check (`model_files.check_model_folder`, the one every reader runs), naming the flag."""
    check_model_folder(directory, f"{flag} {flag_value}")
