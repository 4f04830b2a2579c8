"""Register stanza models trained locally so that ``stanza.Pipeline`` (and so ``StanzaParser``) loads them offline.

``stanza.Pipeline(lang, dir=DIR, download_method=None)`` finds its models through ``DIR/resources.json``, which
stanza normally downloads together with the models. :func:`write_stanza_resources` writes that file for models in
stanza's own layout, ``DIR/{lang}/{processor}/{package}.pt`` (and the word vectors ``DIR/{lang}/pretrain/{name}.pt``),
naming them the language's default package, after which
``get_parser("stanza", lang=lang, model_dir=DIR)`` works without network access.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..errors import UserError

#: the processors StanzaParser runs, in pipeline order
PROCESSORS = ("tokenize", "mwt", "pos", "lemma", "depparse")
#: processors whose models are built on a word-vector pretrain
_NEED_PRETRAIN = ("pos", "depparse")


def write_stanza_resources(model_dir: str | os.PathLike, lang: str, package: str, pretrain: str | None = None) -> Path:
    """Write (or update) ``model_dir/resources.json`` so that ``package`` is ``lang``'s default stanza package.

    Args:
        model_dir: the stanza resources directory holding ``{lang}/{processor}/{package}.pt``.
        lang: language code (``"en"``).
        package: the models' file stem (``"ewt"`` for ``en/tokenize/ewt.pt``...).
        pretrain: the word-vector file stem under ``{lang}/pretrain/``; found automatically when there is one.

    Returns the path of resources.json. Other languages already in the file are kept.
    """
    root = Path(model_dir)
    lang_dir = root / lang
    found = [p for p in PROCESSORS if (lang_dir / p / f"{package}.pt").is_file()]
    if "tokenize" not in found or "depparse" not in found:
        raise UserError(
            f"write_stanza_resources: model_dir={str(model_dir)!r} has no {lang}/tokenize/{package}.pt or "
            f"{lang}/depparse/{package}.pt (found processors: {found}); train or copy the models there first"
        )
    if pretrain is None:
        candidates = sorted(p.stem for p in (lang_dir / "pretrain").glob("*.pt"))
        if len(candidates) != 1 and any(p in found for p in _NEED_PRETRAIN):
            raise UserError(
                f"write_stanza_resources: {lang_dir / 'pretrain'} holds {len(candidates)} word-vector files "
                f"({candidates}); pass pretrain=NAME to choose the one the pos and depparse models were trained with"
            )
        pretrain = candidates[0] if candidates else None
    elif not (lang_dir / "pretrain" / f"{pretrain}.pt").is_file():
        raise UserError(
            f"write_stanza_resources: pretrain={pretrain!r} but {lang_dir / 'pretrain' / pretrain}.pt is missing"
        )
    deps = [{"model": "pretrain", "package": pretrain}] if pretrain else []
    entry: dict = {"lang_name": lang}
    for proc in found:
        entry[proc] = {package: {"dependencies": deps} if proc in _NEED_PRETRAIN and deps else {}}
    if pretrain:
        entry["pretrain"] = {pretrain: {}}
    entry["default_processors"] = {proc: package for proc in found}
    entry["packages"] = {"default": {proc: package for proc in found}, package: {proc: package for proc in found}}
    path = root / "resources.json"
    resources = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    resources[lang] = entry
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(resources, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256: each model file is hashed once


def stanza_model_digest(nlp) -> str:
    """The first 12 hex digits of a sha256 over the model files a loaded ``stanza.Pipeline`` uses (its
    ``*_path`` options); ``StanzaParser`` puts it in its signature."""
    paths = sorted(
        {v for k, v in nlp.config.items() if k.endswith("_path") and isinstance(v, str) and os.path.isfile(v)}
    )
    return _files_digest((f"{Path(path).parent.name}/{Path(path).name}", path) for path in paths)


def _files_digest(named_files) -> str:
    """The first 12 hex digits of a sha256 over ``(name, path)`` pairs: each name with its file's sha256."""
    h = hashlib.sha256()
    for name, path in named_files:
        st = os.stat(path)
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _DIGESTS:
            _DIGESTS[key] = file_sha256(path)
        h.update(f"{name}:{_DIGESTS[key]}\n".encode())
    return h.hexdigest()[:12]


def folder_digest(directory: str | os.PathLike) -> str:
    """The first 12 hex digits of a sha256 over every file of a model folder (relative paths and contents, each file
    hashed once per size and mtime): a spaCy pipeline folder trained here keeps its ``meta.json`` name and version
    when it is trained again, so ``SpacyParser`` puts this in its signature and the parse cache never serves the
    old model's parses."""
    root = Path(directory)
    return _files_digest((p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*")) if p.is_file())
