"""Sequence-level knowledge distillation (Kim and Rush 2016) for ``hf-syntax-mt train --distill_from TEACHER``: the
teacher beam-translates the training sources and the student trains on its translations, with every other train flag
as it is (the recipe, ``--target_parser``, whose trees are then the teacher's outputs', the run file, the model card).

The translations are kept in a cache file, one per teacher, decoding and training sources (`cache_key`: the
teacher's model signature and weights, the decoding, the engine, the teacher's parser and the sha256 of the sources),
appended to as each batch is done: a second run reuses them, a stopped run goes on where it stopped.
`check_teacher` runs before anything is written; `distill_training_targets` replaces the training split's targets.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from ..errors import UserError, file_error

logger = logging.getLogger(__name__)

#: the version of the cache file's layout (a header line, then one ``{"i": index, "t": translation}`` line each)
CACHE_FORMAT = 1
#: what decodes the teacher (the pipeline's `generate`); written into the key, the run file and the card
ENGINE = "generate (transformers)"
#: sentences per chunk written to the cache, as a multiple of the batch size
CHUNK_BATCHES = 8


def default_cache_dir() -> Path:
    """``$HF_SYNTAX_MT_CACHE/distill``, else ``$XDG_CACHE_HOME/hf_syntax_mt/distill`` (``~/.cache``): where the ONNX
    engine keeps its decoders too."""
    from ..decoding.onnx_engine import default_cache_dir as onnx_cache_dir

    return onnx_cache_dir().parent / "distill"


def check_teacher(data_args, training: bool) -> str | None:
    """``--distill_from``: the teacher's directory, checked before anything is written (None without the flag).

    Raises a `UserError` naming the flag and the fix: no training, a flag that gives reference-side data for the
    training pairs (target trees, word alignments: they would not match the teacher's outputs), a missing folder or
    one that is not a saved model (as ``translate --model`` checks it), a CTranslate2 folder, a document-level
    teacher, or a teacher whose languages differ from ``--source_lang`` / ``--target_lang``."""
    teacher = data_args.distill_from
    given = [f"--{name}" for name in ("distill_num_beams", "distill_max_length", "distill_cache_dir")
             if getattr(data_args, name) is not None]  # fmt: skip
    if teacher is None:
        if given:
            raise UserError(f"{given[0]} sets how the teacher of --distill_from translates, and no --distill_from "
                            "was given: add --distill_from TEACHER_DIR, or leave out the flag")  # fmt: skip
        return None
    if not training:
        raise UserError(f"--distill_from {teacher} replaces the training targets, and this run does not train: add "
                        "--do_train (or --max_steps), or leave out --distill_from")  # fmt: skip
    for flag, what in (("train_target_conllu", "target trees"), ("train_alignment_file", "word alignments")):
        if getattr(data_args, flag, None):
            raise UserError(f"--{flag} gives the {what} of the reference translations, and --distill_from trains on "
                            f"the teacher's translations instead: leave out --{flag}"
                            + (" and parse the teacher's outputs with --target_parser spacy|stanza"
                               if flag == "train_target_conllu" else ""))  # fmt: skip
    from ..export.serve import exported_kind

    if exported_kind(teacher) == "ctranslate2":
        raise UserError(f"--distill_from {teacher} is a CTranslate2 folder: give the model directory it was exported "
                        "from (a training run's --output_dir)")  # fmt: skip
    from ..model_files import _model_directory

    directory = _model_directory(teacher, "--distill_from")
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer

    import hf_syntax_mt  # noqa: F401  (registers syntax_mt)

    from ..languages import model_languages, primary_language
    from ..methods.registry import document_settings, document_window

    config = AutoConfig.from_pretrained(directory)
    if document_window(config):
        raise UserError(f"--distill_from {teacher} is a document-level model ({document_settings(config)}), which "
                        "distillation does not support yet: give a sentence-level teacher")  # fmt: skip
    known = model_languages(SimpleNamespace(config=config, name_or_path=directory),
                            AutoTokenizer.from_pretrained(directory))  # fmt: skip
    for flag, value, side in (("--source_lang", data_args.source_lang, "source"),
                              ("--target_lang", data_args.target_lang, "target")):  # fmt: skip
        if value and known[side] and primary_language(value) != primary_language(known[side]):
            raise UserError(f"--distill_from {teacher} translates {known['source']} -> {known['target']} (from "
                            f"{known['from']}), but {flag} is {value}: give a teacher of this language pair, or the "
                            "pair's own --source_lang / --target_lang")  # fmt: skip
    return directory


def _sources_sha256(sources: list[str]) -> str:
    """The sha256 of the sources, one a line (a plain UTF-8 source file with ``\\n`` line ends hashes the same)."""
    h = hashlib.sha256()
    for line in sources:
        h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()


def teacher_signature(directory: str) -> str:
    """The teacher's model signature: its run file's (seed, data, steps included), else the config's."""
    from transformers import AutoConfig

    from ..evaluation import RUN_INFO, model_signature

    run = Path(directory) / RUN_INFO
    try:
        recorded = json.loads(run.read_text(encoding="utf-8")).get("model_signature")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        recorded = None
    return (
        recorded if isinstance(recorded, str) and recorded else model_signature(AutoConfig.from_pretrained(directory))
    )


def _weights_sha256(directory: str) -> str:
    """One sha256 over the teacher's weight files (two teachers of one signature may differ in weights)."""
    from ..data.stanza_resources import file_sha256

    files = sorted(Path(directory).glob("*.safetensors"))
    return hashlib.sha256("".join(f"{f.name}:{file_sha256(f)}" for f in files).encode()).hexdigest()


def cache_key(signature: str, weights: str, decoding: str, parser: str | None, sources_sha256: str) -> dict:
    """What the teacher's translations depend on: its model signature and weights, the decoding, the engine, the
    parser of its inputs and the training sources. Equal keys share a cache file."""
    return {"format": CACHE_FORMAT, "teacher_signature": signature, "teacher_weights_sha256": weights,
            "decoding": decoding, "engine": ENGINE, "teacher_parser": parser, "sources_sha256": sources_sha256}  # fmt: skip


def cache_path(cache_dir: str | os.PathLike, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return Path(cache_dir).expanduser() / f"{digest[:24]}.jsonl"


def read_cache(path: Path, key: dict, n: int) -> dict[int, str]:
    """The translations a cache file holds (index -> text). A last line cut short by a stopped run is cut from the
    file, so that appending goes on after the last whole line; a file of another key or layout is a `UserError`."""
    if not path.is_file():
        return {}
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with open(path, "r+b") as f:  # the line a stopped run was writing
            f.truncate(len(whole))
    lines = whole.decode("utf-8").splitlines()
    if not lines:
        return {}
    header = json.loads(lines[0])
    if header.get("key") != key or header.get("sentences") != n:
        raise UserError(f"{path} is a distillation cache of other translations (its header differs from this run's "
                        "key): remove it, or give another --distill_cache_dir")  # fmt: skip
    done = {}
    for line in lines[1:]:
        row = json.loads(line)
        done[int(row["i"])] = row["t"]
    return done


def teacher_translations(directory: str, sources: list[str], *, num_beams: int | None = None,
                         max_length: int | None = None, batch_size: int = 32, cache_dir=None, parser=None,
                         device=None) -> tuple[list[str], dict]:  # fmt: skip
    """The teacher's translation of each source (`inference.translate_lines`: batched, longest first), read from the
    cache where it holds them, the rest translated and appended chunk by chunk, with a progress bar.

    Args:
        directory: the teacher's model directory.
        sources: the training sources.
        num_beams, max_length: the decoding (None: the teacher's generation config's).
        batch_size: sentences per `generate` call.
        cache_dir: the cache folder (`default_cache_dir` when None).
        parser: the parser of the sources, for a teacher that reads a parse (None: the one its config records).
        device: where the teacher runs.

    Returns:
        The translations, and a record of how they were made (teacher, signature, decoding, engine, counts, key).
    """
    from tqdm.auto import tqdm
    from transformers import pipeline

    from ..generation_defaults import decoding_of
    from ..inference import translate_lines

    generate = {} if num_beams is None else {"num_beams": num_beams}
    pipe = pipeline("syntax-translation", model=directory, parser=parser, device=device)
    if max_length is not None:  # the generation config's (a call's max_length would truncate the sources too)
        pipe.model.generation_config.max_length = max_length
    decoding = decoding_of(pipe.decoding_settings(**generate))
    recorded = getattr(pipe.model.config, "source_parser", None) if pipe.parser is not None else None
    parser_sig = (
        parser.signature() if parser is not None else (json.dumps(recorded, sort_keys=True) if recorded else None)
    )
    key = cache_key(teacher_signature(directory), _weights_sha256(directory), decoding, parser_sig,
                    _sources_sha256(sources))  # fmt: skip
    path = cache_path(cache_dir or default_cache_dir(), key)
    done = read_cache(path, key, len(sources))
    pending = sorted((i for i in range(len(sources)) if i not in done), key=lambda i: -len(sources[i]))
    if pending:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            cache = open(path, "a", encoding="utf-8")
        except OSError as e:
            raise file_error(e, path, "--distill_cache_dir", writing=True) from None
        with cache:
            if not done and cache.tell() == 0:
                cache.write(json.dumps({"key": key, "sentences": len(sources)}) + "\n")
            bar = tqdm(total=len(sources), initial=len(done), unit="sent", desc="Teacher translating", file=sys.stderr)
            step = CHUNK_BATCHES * batch_size
            for start in range(0, len(pending), step):
                chunk = pending[start : start + step]
                texts = translate_lines(pipe, [sources[i] for i in chunk], batch_size=batch_size, progress=False,
                                        **generate)  # fmt: skip
                cache.write("".join(json.dumps({"i": i, "t": t}, ensure_ascii=False) + "\n"
                                    for i, t in zip(chunk, texts, strict=True)))  # fmt: skip
                cache.flush()  # a stopped run keeps every chunk written so far
                done.update(zip(chunk, texts, strict=True))
                bar.update(len(chunk))
            bar.close()
    record = {
        "teacher": Path(directory).resolve().name, "teacher_signature": key["teacher_signature"],
        "decoding": decoding, "engine": ENGINE, "teacher_parser": parser_sig, "sentences": len(sources),
        "translated": len(pending), "reused": len(sources) - len(pending), "cache_file": path.name,
        "sources_sha256": key["sources_sha256"],
    }  # fmt: skip
    return [done[i] for i in range(len(sources))], record


def teacher_parser(data_args, directory: str):
    """The parser of the training sources for a teacher that reads a parse: the sources' own CoNLL-U, else the run's
    ``--parser`` (None: the parser the teacher's config records)."""
    from transformers import AutoConfig

    from .data import build_parser

    if not getattr(AutoConfig.from_pretrained(directory), "needs_source_parse", False):
        return None
    if data_args.train_source_conllu:
        from ..data.parsers import get_parser

        return get_parser("conllu", path=data_args.train_source_conllu)
    return build_parser(data_args)


def distill_training_targets(raw: dict, data_args, training_args, teacher: str) -> dict:
    """Replace the training split's targets with the teacher's translations of its sources (in ``raw``). Returns the
    record the run file and the model card show. The main process translates first; the others read its cache."""
    train = raw["train"]
    with training_args.main_process_first(desc="the teacher's translations", local=False):
        translations, record = teacher_translations(
            teacher, list(train["source"]), num_beams=data_args.distill_num_beams,
            max_length=data_args.distill_max_length, batch_size=data_args.distill_batch_size,
            cache_dir=data_args.distill_cache_dir, parser=teacher_parser(data_args, teacher),
            device=training_args.device,
        )  # fmt: skip
    empty = sum(not t.strip() for t in translations)
    if empty:
        logger.warning(f"--distill_from: the teacher translated {empty} of {len(translations)} training sources as "
                       "an empty line; those pairs train the student to output nothing")  # fmt: skip
    raw["train"] = train.remove_columns("target").add_column("target", translations)
    logger.warning(f"--distill_from {record['teacher']}: training on the teacher's translations of "
                   f"{record['sentences']} sources ({record['decoding']}, {record['engine']}; {record['reused']} "
                   f"from the cache {record['cache_file']})")  # fmt: skip
    return record


def distillation_text(record: dict | None) -> str:
    """The model card's sentence on the teacher (empty without distillation)."""
    if not record:
        return ""
    return (f" Distilled (sequence-level knowledge distillation, Kim and Rush 2016) from the teacher "
            f"`{record['teacher']}` (`{record['teacher_signature']}`): the training targets are its translations of "
            f"the {record['sentences']:,} training sources, decoded with `{record['decoding']}` by "
            f"{record['engine']}; the scores below are against the references.")  # fmt: skip
