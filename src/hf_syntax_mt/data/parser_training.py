"""Train a spaCy dependency parser on UD treebanks: ``hf-syntax-mt train-parser``.

A parser for a language that no spaCy or stanza model covers offline: spaCy's CPU "efficiency" pipeline (tok2vec +
morphologizer + parser) trained with spaCy's own commands on CoNLL-U treebanks, a dev treebank choosing the
checkpoint, one thread by default:

    spacy init config -l LANG -p morphologizer,parser -o efficiency OUTPUT/config.cfg
    spacy convert TRAIN.conllu OUTPUT/corpus/train --converter conllu -n 10        (each --train file; --dev likewise)
    spacy train OUTPUT/config.cfg --output OUTPUT --paths.train OUTPUT/corpus/train --paths.dev OUTPUT/corpus/dev
    spacy evaluate OUTPUT/model-best OUTPUT/corpus/dev/DEV.spacy --output OUTPUT/dev_eval.json

``spacy train`` stops by itself (spaCy's patience: 1,600 steps without a better dev score) or after ``max_seconds``
(SIGINT: spaCy keeps ``model-best``, the best checkpoint so far). The model is ``OUTPUT/model-best``, a spaCy pipeline
folder that ``get_parser("spacy", model=...)``, ``--parser spacy --parser_model OUTPUT/model-best`` (train, parse,
translate) load; ``OUTPUT/train_parser.json`` records its dev scores (UAS, LAS, POS, morphology, percent), the seconds
of each step, the training steps, the spaCy version and the sha256 of every treebank file.

On UD German-GSD test + German-PUD test (GSD dev choosing the checkpoint) this is the parser of ``multi30k-parsed``,
rebuilt bit for bit by ``benchmarks/data/german_parser.py`` (which calls `train_spacy_parser`): dev UAS 74.53, LAS
66.39, 776 s of training on one thread here (`benchmarks/results/german_parser/german_parser.json`).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..errors import MissingFileError, UserError, UserFileError
from .readers import iter_conllu
from .stanza_resources import file_sha256

__all__ = ["train_spacy_parser", "training_steps"]

#: the spaCy components trained (the CPU "efficiency" config): POS and morphology, then the parser
COMPONENTS = "morphologizer,parser"
#: sentences per spaCy doc when a treebank is converted (`spacy convert -n`)
SENTENCES_PER_DOC = 10
#: the record written beside the model
RECORD = "train_parser.json"


def _spacy_version() -> dict[str, str]:
    """spaCy's and thinc's versions, or a `UserError` saying how to install spaCy (an optional dependency)."""
    try:
        import spacy
        import thinc
    except ImportError as e:
        raise UserError(f"train-parser trains a spaCy pipeline and spaCy is not installed ({e}): pip install "
                        "'hf-syntax-mt[spacy]' (or pip install spacy)") from None  # fmt: skip
    return {"spacy": spacy.__version__, "thinc": thinc.__version__}


def _check_lang(lang: str) -> None:
    from spacy.util import get_lang_class

    try:
        get_lang_class(lang)
    except (ImportError, KeyError):
        raise UserError(f"--lang {lang}: spaCy has no language {lang!r} (its codes: https://spacy.io/usage/models#"
                        "languages, e.g. de, fr, en; 'xx' for any other language)") from None  # fmt: skip


def _check_treebank(path: str | os.PathLike, flag: str) -> int:
    """The number of sentences of a CoNLL-U file, read whole (errors name the file and line), or a `UserError`."""
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"{flag} {path!r}: give the path of a CoNLL-U file")
    if not os.path.exists(path):
        raise MissingFileError(f"{flag} {path}: no such file; check the path", errno.ENOENT, str(path))
    if os.path.isdir(path):
        raise UserFileError(f"{flag} {path}: is a folder; give a CoNLL-U file (a UD treebank's *.conllu)",
                            errno.EISDIR, str(path))  # fmt: skip
    try:
        n = sum(1 for sentence in iter_conllu(path) if sentence.words)
    except UserError as e:  # the file and line are in the message; the flag too, then
        raise UserError(f"{flag} {e}; give a UD treebank's CoNLL-U file") from None
    if n == 0:
        raise UserError(f"{flag} {path}: holds no sentence with words; give a UD treebank's CoNLL-U file")
    return n


def training_steps(output: str | os.PathLike) -> dict:
    """The last and the best step of ``OUTPUT/train.log`` (spaCy's table: E, #, ..., SCORE): ``epochs``,
    ``last_step``, ``best_step``, ``best_score``; ``{}`` when no evaluation row was logged."""
    rows = []
    log = Path(output) / "train.log"
    if not log.is_file():
        raise MissingFileError(f"{output}: has no train.log; give the folder that train-parser (spacy train) wrote",
                               errno.ENOENT, str(log))  # fmt: skip
    text = log.read_text(encoding="utf-8", errors="replace")
    for line in text.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[0].isdigit() and cells[1].isdigit():
            try:
                rows.append((int(cells[0]), int(cells[1]), float(cells[-1])))
            except ValueError:
                continue
    if not rows:
        return {}
    best = max(rows, key=lambda r: r[2])
    return {"epochs": rows[-1][0], "last_step": rows[-1][1], "best_step": best[1], "best_score": best[2]}


def _prepare_output(output: Path, overwrite: bool, inputs: list[Path]) -> None:
    if output.exists() and not output.is_dir():
        raise UserFileError(f"--output {output}: is a file; give a new (or empty) folder for the parser",
                            errno.ENOTDIR, str(output))  # fmt: skip
    if output.is_dir() and any(output.iterdir()):
        if not overwrite:
            raise UserError(f"--output {output}: the folder is not empty; give a new (or empty) folder, or delete "
                            "this one first")  # fmt: skip
        root = output.resolve()
        for path in inputs:
            if root in path.resolve().parents:
                raise UserError(f"{path} lies inside --output {output}, which training empties first: move the "
                                "treebank out of it, or give another --output")  # fmt: skip
        shutil.rmtree(output)
    try:
        (output / "corpus" / "train").mkdir(parents=True, exist_ok=True)
        (output / "corpus" / "dev").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from ..errors import file_error

        raise file_error(e, output, "--output", writing=True) from None


def _plain_conllu(path: Path, folder: Path) -> Path:
    """``path`` itself, or for a ``.gz`` file its text written to ``folder`` (spaCy's converter reads plain text)."""
    if not path.name.endswith(".gz"):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    plain = folder / path.name[:-3]
    with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return plain


def train_spacy_parser(
    lang: str,
    train: list[str | os.PathLike],
    dev: str | os.PathLike,
    output: str | os.PathLike,
    max_seconds: float = 1200.0,
    max_steps: int | None = None,
    eval_frequency: int | None = None,
    threads: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    config_overrides: dict[str, int | float | str] | None = None,
) -> dict:
    """Train a spaCy tagger + parser on CoNLL-U treebanks with spaCy's commands (see the module docstring) into
    ``output``; returns the record also written to ``output/train_parser.json``.

    Args:
        lang: spaCy's language code (``de``, ``fr``; ``xx`` for a language spaCy has no tokenizer rules for).
        train: the training treebanks (CoNLL-U, ``.gz`` ok), in this order.
        dev: the treebank that chooses the checkpoint and is scored at the end.
        output: a new or empty folder; the model lands in ``output/model-best``.
        max_seconds: stop ``spacy train`` after this many seconds (it keeps the best checkpoint so far).
        max_steps: spaCy's ``training.max_steps`` (default: the config's 20,000; patience usually stops it first).
        eval_frequency: spaCy's ``training.eval_frequency`` (default: the config's 200 steps).
        threads: ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` of the spaCy processes.
        overwrite: empty a non-empty ``output`` first (default: refuse it).
        progress: print each spaCy command before it runs.
        config_overrides: more ``spacy train`` config values by their dotted names, e.g.
            ``{"components.parser.min_action_freq": 1}`` (a treebank of a few sentences: spaCy's 30 leaves the parser
            no gold transition, error E1031).
    """
    if not isinstance(lang, str) or not lang:
        raise UserError(f"--lang {lang!r}: give spaCy's language code, e.g. de")
    if isinstance(train, (str, os.PathLike)) or not isinstance(train, (list, tuple)) or not train:
        raise UserError(f"--train {train!r}: give a list of CoNLL-U files (one or more)")
    for name, value in (("max_steps", max_steps), ("eval_frequency", eval_frequency), ("threads", threads)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10**8):
            raise UserError(f"--{name.replace('_', '-')} {value!r}: give a whole number from 1 to 100,000,000")
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or not 0 < max_seconds <= 10**7:
        raise UserError(f"--max-seconds {max_seconds!r}: give a positive number of seconds (at most 10,000,000)")
    overrides = []
    if max_steps is not None:
        overrides += ["--training.max_steps", str(max_steps)]
    if eval_frequency is not None:
        overrides += ["--training.eval_frequency", str(eval_frequency)]
    if config_overrides is not None and not isinstance(config_overrides, dict):
        raise UserError(f"config_overrides={config_overrides!r}: give a dict of spaCy config names and values")
    for key, value in (config_overrides or {}).items():
        if not isinstance(key, str) or not key or key.startswith("-") or not isinstance(value, (int, float, str)):
            raise UserError(f"config_overrides {key!r}: {value!r}: give spaCy config names (training.patience) and "
                            "numbers or strings")  # fmt: skip
        overrides += [f"--{key}", str(value)]
    sizes = {"train": [], "dev": None}
    train_paths = [Path(p) if isinstance(p, (str, os.PathLike)) else p for p in train]
    for path in train_paths:
        sizes["train"].append(_check_treebank(path, "--train"))
    sizes["dev"] = _check_treebank(dev, "--dev")
    dev = Path(dev)
    versions = _spacy_version()
    _check_lang(lang)
    output = Path(output)
    _prepare_output(output, overwrite, [*train_paths, dev])

    spacy = [sys.executable, "-m", "spacy"]
    corpus = output / "corpus"
    commands = [("init", spacy + ["init", "config", "-l", lang, "-p", COMPONENTS, "-o", "efficiency",
                                  str(output / "config.cfg")])]  # fmt: skip
    for k, path in enumerate(train_paths):  # numbered: the given order, and two files of one name stay apart
        folder = corpus / "train" / f"{k:03d}"
        folder.mkdir(parents=True, exist_ok=True)  # spacy convert writes into an existing folder only
        plain = _plain_conllu(path, corpus / "conllu" / f"{k:03d}")
        commands.append(("convert", spacy + ["convert", str(plain), str(folder), "--converter", "conllu",
                                             "-n", str(SENTENCES_PER_DOC)]))  # fmt: skip
    plain_dev = _plain_conllu(dev, corpus / "conllu" / "dev")
    dev_spacy = corpus / "dev" / (Path(plain_dev.name).stem + ".spacy")
    commands.append(("convert", spacy + ["convert", str(plain_dev), str(corpus / "dev"), "--converter", "conllu",
                                         "-n", str(SENTENCES_PER_DOC)]))  # fmt: skip
    commands.append(("train", spacy + ["train", str(output / "config.cfg"), "--output", str(output),
                                       "--paths.train", str(corpus / "train"), "--paths.dev", str(corpus / "dev"),
                                       *overrides]))  # fmt: skip
    commands.append(("evaluate", spacy + ["evaluate", str(output / "model-best"), str(dev_spacy), "--output",
                                          str(output / "dev_eval.json")]))  # fmt: skip

    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    seconds: dict[str, float] = {}
    stopped = "spacy (patience or max_steps)"
    for step, command in commands:
        if progress:
            print("$ spacy " + " ".join(command[3:]), file=sys.stderr, flush=True)
        start = time.perf_counter()
        log = output / f"{step}.log"
        returncode, timed_out = run_logged(command, log, env, max_seconds if step == "train" else None)
        if timed_out:
            stopped = f"max_seconds ({max_seconds:g} s)"
        seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - start
        if returncode != 0 and not (step == "train" and (output / "model-best").is_dir()):
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            hint = ""
            if "E1031" in tail:  # a label rarer than min_action_freq (30) becomes "dep": too few sentences
                hint = ("; the treebanks are too small for spaCy's parser settings (labels seen fewer than 30 times "
                        "are merged): give more sentences, or in Python config_overrides="
                        "{'components.parser.min_action_freq': 1}")  # fmt: skip
            raise UserError(f"spacy {step} failed (exit {returncode}){hint}; its log {log} ends:\n{tail}")
    scores = json.loads((output / "dev_eval.json").read_text(encoding="utf-8"))
    percent = lambda key: None if scores.get(key) is None else round(scores[key] * 100, 2)  # noqa: E731
    record = {
        "about": "a spaCy tagger + parser trained on UD treebanks by hf-syntax-mt train-parser",
        "lang": lang, **versions, "components": COMPONENTS, "model": str(output / "model-best"),
        "train": [{"path": str(p), "sha256": file_sha256(p), "sentences": n}
                  for p, n in zip(train_paths, sizes["train"], strict=True)],
        "dev": {"path": str(dev), "sha256": file_sha256(dev), "sentences": sizes["dev"]},
        "dev_scores": {"uas": percent("dep_uas"), "las": percent("dep_las"), "pos": percent("pos_acc"),
                       "morph": percent("morph_acc")},
        "seconds": {k: round(v, 1) for k, v in seconds.items()}, "threads": threads, "stopped_by": stopped,
        **training_steps(output),
    }  # fmt: skip
    (output / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


#: seconds a command interrupted at ``max_seconds`` gets to save and stop before it is terminated
GRACE_SECONDS = 60.0


def _default_sigint() -> None:  # pragma: no cover (runs in the child, between fork and exec)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_logged(command: list[str], log: Path, env: dict, timeout: float | None) -> tuple[int, bool]:
    """Run ``command`` with its output appended to ``log``: ``(exit code, whether timeout ran out)``. Past ``timeout``
    seconds it is interrupted as Ctrl-C would (``spacy train`` then saves model-last; model-best is on disk already)
    and terminated if it has not stopped `GRACE_SECONDS` later. The child gets SIGINT's default action back: a job
    started in the background inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so the
    interrupt did nothing and ``max_seconds`` never stopped the training."""
    posix = os.name == "posix"
    with open(log, "a", encoding="utf-8") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=_default_sigint if posix else None)  # fmt: skip
        try:
            proc.wait(timeout=timeout)
            return proc.returncode, False
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait()
            return proc.returncode, True
        except BaseException:
            proc.kill()
            proc.wait()
            raise
