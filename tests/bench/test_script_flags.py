"""Issue 65, item 6: the flags of every script under ``benchmarks/`` and ``scripts/``, by construction.

Every script's parser is read by running the script as ``__main__`` until its first ``parse_args`` (the call is
stopped there and the parser kept): a script added tomorrow is covered without a case written here. Every number flag
must have a range (`benchmarks.arguments`, the CLI's `int_range` / `float_range`): a plain ``type=int`` fails, and
each flag's first value out of range (below its minimum, and NaN for a float) must be an argparse error naming the
flag. Then the known failures of the issue, one by one: an output over the model's files, ``--beams 0``, ``--limit
-1``, ``--repeats 0``, and ``--quick`` overriding a flag the user gave."""

from __future__ import annotations

import argparse
import math
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
from benchmarks import arguments  # noqa: E402

#: not a script with flags of its own: shared modules, and the train script (its flags are `train_help`'s, checked by
#: tests/test_bad_input_coverage.py)
NOT_SCRIPTS = {"benchmarks/__init__.py", "benchmarks/common.py", "benchmarks/arguments.py", "scripts/train.py"}


class _Parsed(Exception):
    def __init__(self, parser):
        self.parser = parser


def scripts() -> list[str]:
    found = []
    for folder in ("benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if "/results/" in name or name in NOT_SCRIPTS:
                continue
            text = path.read_text(encoding="utf-8")
            if "parse_args(" in text and '__name__ == "__main__"' in text:
                found.append(name)
    return found


def parser_of(script: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``script`` builds, stopped at its first ``parse_args`` / ``parse_known_args``."""

    def stop(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", stop)
    monkeypatch.setattr(sys, "argv", [str(ROOT / script)])
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
    except _Parsed as parsed:
        return parsed.parser
    raise AssertionError(f"{script} ran to its end without parsing its arguments")


SCRIPTS = scripts()


def test_the_scripts_are_found():
    assert {"benchmarks/studies/deploy_quality.py", "benchmarks/speed/bench_deploy.py", "scripts/subset_pairs.py",
            "benchmarks/speed/bench_parsing.py", "benchmarks/studies/study_round3.py"} <= set(SCRIPTS)  # fmt: skip
    assert len(SCRIPTS) >= 35, SCRIPTS


def out_of_range(action) -> list[str]:
    """The first values out of ``action``'s range: one below its minimum (the bound itself for a float's open
    bound), one past its maximum, and NaN for a float."""
    low, high = action.type.minimum, action.type.maximum
    is_float = action.type.__name__ == "float"
    values = [str(low - (1 if not is_float else 1e-9 * max(1.0, abs(low)))) if low else str(low - 1)]
    if is_float:
        values.append("nan")
        try:
            action.type(str(low))
        except argparse.ArgumentTypeError:
            values.append(str(low))  # an open bound: the bound itself is refused
    if high is not None:
        values.append(str(high + 1))
    return values


def test_every_number_flag_of_every_script_has_a_range_and_refuses_a_value_out_of_it(monkeypatch, capsys):
    plain, unbounded, flags = [], [], 0
    for script in SCRIPTS:
        parser = parser_of(script, monkeypatch)
        monkeypatch.undo()
        for action in parser._actions:
            if not action.option_strings:
                continue
            flag = action.option_strings[0]
            if action.type in (int, float):
                plain.append(f"{script} {flag}")
                continue
            if not hasattr(action.type, "minimum"):
                continue
            flags += 1
            if action.type.minimum is None:
                unbounded.append(f"{script} {flag}")
            for value in out_of_range(action):
                nargs = action.nargs if isinstance(action.nargs, int) else 1
                with pytest.raises(SystemExit) as stop:
                    parser.parse_known_args([flag, *[value] * nargs])
                err = capsys.readouterr().err.strip().splitlines()[-1]
                assert stop.value.code == 2 and f"argument {flag}" in err, (script, flag, value, err)
    assert not plain, f"number flags without a range (use benchmarks.arguments' types): {plain}"
    assert not unbounded, f"number flags without a lower bound: {unbounded}"
    assert flags >= 100, flags  # the scripts' number flags were all read


@pytest.mark.parametrize(
    "script, argv, message",
    [
        ("benchmarks/studies/deploy_quality.py", ["--beams", "0"], "argument --beams: must be at least 1, got 0"),
        ("benchmarks/studies/deploy_quality.py", ["--limit", "-1"], "argument --limit: must be at least 1, got -1"),
        ("benchmarks/speed/bench_parsing.py", ["--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
        ("benchmarks/speed/bench_deploy.py", ["--threads", "1", "0"], "argument --threads: must be at least 1, got 0"),
        ("benchmarks/speed/bench_deploy.py", ["--time-budget", "inf"], "argument --time-budget: must be a finite"),
        ("scripts/synthetic_document_demo.py", ["--pronoun-probability", "1.5"], "must be at most 1, got 1.5"),
        ("benchmarks/probes/decode_paths.py", ["--settings", "8x0"], "argument --settings: must be at least 1, got 0"),
        ("benchmarks/probes/decode_paths.py", ["--settings", "8"], "argument --settings: '8' is not BATCHxBEAMS"),
    ],
)
def test_the_issues_number_flags_are_refused(script, argv, message, monkeypatch, capsys):
    parser = parser_of(script, monkeypatch)
    monkeypatch.undo()
    with pytest.raises(SystemExit) as stop:
        parser.parse_known_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_deploy_quality_refuses_an_output_over_the_models_config(tmp_path, capsys):
    from benchmarks.studies import deploy_quality

    model, data = tmp_path / "model", tmp_path / "data"
    model.mkdir(), data.mkdir()
    config = model / "config.json"
    config.write_text('{"model_type": "syntax_mt"}')
    for output in (config, model / "model.safetensors", data):
        with pytest.raises(SystemExit) as stop:
            deploy_quality.arguments(["--model", str(model), "--data", str(data), "--output", str(output)])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"--output {output} is a file of the folder" in err, err
    assert config.read_text() == '{"model_type": "syntax_mt"}'
    run_file = tmp_path / "unit.json"
    run_file.write_text("{}")
    with pytest.raises(SystemExit) as stop:
        deploy_quality.arguments(["--model", str(model), "--data", str(data), "--run-file", str(run_file),
                                  "--output", str(run_file)])  # fmt: skip
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"--output {run_file} is the file that --run-file {run_file} names" in err, err
    assert run_file.read_text() == "{}"
    fine = deploy_quality.arguments(["--model", str(model), "--data", str(data), "--output", str(tmp_path / "q.json")])
    assert fine.output == str(tmp_path / "q.json")


def test_the_rule_is_the_clis(tmp_path):
    """The scripts' rule and the CLI's are one function: the same refusal, word for word, for the same paths."""
    from hf_syntax_mt.cli_args import build_parser, refuse_overwriting
    from hf_syntax_mt.errors import UserError

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    target = str(model / "config.json")
    with pytest.raises(UserError) as cli:
        refuse_overwriting(build_parser().parse_args(["translate", "--model", str(model), "--output", target]))
    with pytest.raises(SystemExit) as script:
        arguments.refuse_overwriting(None, argparse.Namespace(model=str(model), output=target), ["output"],
                                     folders=["model"])  # fmt: skip
    assert str(script.value) == f"error: {cli.value}"


@pytest.mark.parametrize(
    "argv, threads, sentences",
    [
        (["--quick"], [1], 12),  # the quick values
        (["--quick", "--threads", "2"], [2], 12),  # a flag given is kept
        (["--quick", "--threads", "1", "2", "--sentences=200"], [1, 2], 200),  # given with its default value: kept
        (["--quick", "--thr", "4"], [4], 12),  # an abbreviation argparse accepts
        (["--threads", "2"], [2], 200),  # no --quick: nothing set
    ],
)
def test_quick_keeps_the_flags_given(argv, threads, sentences, capsys):
    from benchmarks.speed import bench_deploy

    args = bench_deploy.arguments(["--data", "d", *argv])
    assert (args.threads, args.sentences) == (threads, sentences)
    assert args.new_tokens == (8 if "--quick" in argv else 20)  # a flag left out gets --quick's value
    err = capsys.readouterr().err
    assert ("--quick keeps the flags given" in err) == ("--quick" in argv and len(argv) > 1), err


def test_given_flags_reads_what_argparse_read():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=arguments.POSITIVE, default=3)
    p.add_argument("--seed", type=arguments.SEED, default=0)
    p.add_argument("--quick", action="store_true")
    assert arguments.given_flags(p, ["--rounds", "3"]) == {"rounds"}  # the default's value, given
    assert arguments.given_flags(p, ["--rou=5", "--quick"]) == {"rounds", "quick"}
    assert arguments.given_flags(p, []) == set()
    assert math.isclose(arguments.SECONDS("0.5"), 0.5)
