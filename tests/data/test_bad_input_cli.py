"""Issue 49, the CLI side: user errors are `UserError`s printed as one line and everything else is a bug with its
traceback; every numeric flag has a range, checked by argparse before torch is imported; flags that would be
ignored and an output that is an input are refused; `train --help` and argparse errors answer without importing
transformers; the version check's upper bound; a train mistake does not block its own fix."""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hf_syntax_mt.cli import main
from hf_syntax_mt.cli_args import BUG_REPORT, build_parser
from hf_syntax_mt.errors import DependencyVersionError, UserError

ROOT = Path(__file__).resolve().parents[2]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def console(monkeypatch, capsys, *argv):
    """`hf-syntax-mt ARGV` as the console script runs it (main() reads sys.argv): (exit status, stderr)."""
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *argv])
    capsys.readouterr()
    status = main()
    return status, capsys.readouterr().err


def launcher(*argv, env=None, code=""):
    """`hf-syntax-mt ARGV` through the console script's launcher in a fresh interpreter: (status, stdout, stderr,
    the heavy modules it imported). ``code`` runs first (e.g. a faked installed version)."""
    script = (f"{code}\nimport sys, hf_syntax_mt_cli\nsys.argv = ['hf-syntax-mt', *sys.argv[1:]]\n"
              "try:\n    status = hf_syntax_mt_cli.main()\nexcept SystemExit as e:\n    status = e.code\n"
              "print('IMPORTED', sorted(m for m in ('torch', 'transformers') if m in sys.modules), file=sys.stderr)\n"
              "sys.exit(status)")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, cwd=ROOT)  # fmt: skip
    *err, imported = run.stderr.rstrip("\n").split("\n")
    return run.returncode, run.stdout, "\n".join(err), imported


# ------------------------------------------------------------------------------------------------------------------
# Numeric flags: one range helper, checked by argparse
# ------------------------------------------------------------------------------------------------------------------
def test_every_numeric_flag_has_a_range_type():
    """A flag typed plain `int`/`float` takes any number: `--batch-size 0`, `--max-sentences -2` went through."""
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    plain = [f"{name} {a.option_strings[0]}" for name, c in commands.items() for a in c._actions
             if a.type in (int, float)]  # fmt: skip
    assert plain == []
    typed = [a for c in commands.values() for a in c._actions if a.type is not None and a.type not in (str,)]
    assert len(typed) >= 30


@pytest.mark.parametrize(
    "argv, message",
    [
        (["uas", "--model", "m", "--conllu", "g", "--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
        (["evaluate", "--hyp", "h", "--ref", "r", "--max-sentences", "-2"], "argument --max-sentences: must be at least 1, got -2"),
        (["contrastive", "--model", "m", "--synthetic", "0"], "argument --synthetic: must be at least 1, got 0"),
        (["demo", "--train-size", "0"], "argument --train-size: must be at least 1, got 0"),
        (["evaluate", "--hyp", "h", "--ref", "r", "--arcs-layer-head", "0", "-1"], "argument --arcs-layer-head: must be at least 0, got -1"),
        (["evaluate", "--hyp", "h", "--ref", "r", "--arcs-layer-head", "1"], "argument --arcs-layer-head: expected 2 arguments"),
        (["align", "--model", "m", "--layer", "-1"], "argument --layer: must be at least 0, got -1"),
        (["demo", "--learning-rate", "0"], "argument --learning-rate: must be greater than 0, got 0"),
        (["demo", "--pascal-sigma", "nan"], "argument --pascal-sigma: must be a finite number, got nan"),
        (["translate", "--model", "m", "--random-context", "x"], "argument --random-context: 'x' is not an integer"),
        (["evaluate", "--hyp", "h", "--ref", "r", "--seed", "0"], "argument --seed: must be at least 1, got 0"),
    ],
)  # fmt: skip
def test_numeric_flags_out_of_range_are_argparse_errors_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {message}")


def test_argparse_errors_and_range_errors_come_before_torch():
    """`translate --nope` and `uas --batch-size 0` waited for the torch/transformers import (52-85 s loaded)."""
    for argv, message in ((["translate", "--model", "m", "--nope"], "unrecognized arguments: --nope"),
                          (["uas", "--model", "m", "--conllu", "g", "--batch-size", "0"], "--batch-size: must be at least 1, got 0")):  # fmt: skip
        status, _, err, imported = launcher(*argv)
        assert status == 2 and message in err.splitlines()[-1], err  # a typo's did-you-mean may follow
        assert imported == "IMPORTED []"


# ------------------------------------------------------------------------------------------------------------------
# Flags that would be ignored, outputs that are inputs
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--device", "cpu"], r"--device is about the attention scores .* add --model DIR and --gold-conllu FILE, or leave out --device\.$"),
        (["--bf16"], r"--bf16 is about the attention scores"),
        (["--bucket-chart", "{tmp}/b.png"], r"--bucket-chart draws BLEU by source length, .* add --src FILE .* or leave out --bucket-chart\.$"),
        (["--heatmap", "{tmp}/h.png"], r"--heatmap is about the attention scores"),
        (["--baseline-model", "{tmp}"], r"--baseline-model signs the --baseline system, and this call has none"),
        (["--json", "{ref}"], r"--json .*ref.txt is the file that --ref .*ref.txt names, which this command reads too"),
        (["--bucket-chart", "{tmp}/b.png", "--src", "{ref}", "--heatmap", "{tmp}/b.png"], r"--heatmap .*b.png is the file that --bucket-chart .* writes too"),
    ],
)  # fmt: skip
def test_evaluate_refuses_flags_it_would_ignore(tmp_path, monkeypatch, capsys, flags, message):
    """`evaluate --device/--bf16` without a model and `--bucket-chart` without `--src` were ignored without a
    word; `--json` equal to `--ref` overwrote the references."""
    import re

    paths = {
        "hyp": write(tmp_path / "hyp.txt", ["a b"]),
        "ref": write(tmp_path / "ref.txt", ["a b"]),
        "tmp": str(tmp_path),
    }
    status, err = console(monkeypatch, capsys, "evaluate", "--hyp", paths["hyp"], "--ref", paths["ref"],
                          *(f.format(**paths) for f in flags))  # fmt: skip
    assert status == 1 and err.count("\n") == 1 and re.search(message, err.rstrip("\n")), err
    assert (tmp_path / "ref.txt").read_text() == "a b\n" and not (tmp_path / "b.png").exists()


@pytest.mark.parametrize("how", ["same path", "relative path", "symbolic link", "linked folder"])
def test_translate_and_align_refuse_an_output_that_is_the_input(tmp_path, monkeypatch, capsys, how):
    """`translate --output` / `align --output` equal to `--input` overwrote the input."""
    text = write(tmp_path / "in.txt", ["le chat dort ||| the cat sleeps"])
    monkeypatch.chdir(tmp_path)
    output = {"same path": text, "relative path": "in.txt", "symbolic link": str(tmp_path / "link.txt"),
              "linked folder": str(tmp_path / "linked" / "in.txt")}[how]  # fmt: skip
    if how == "symbolic link":
        os.symlink(text, output)
    if how == "linked folder":
        os.symlink(tmp_path, tmp_path / "linked")
    for command in ("translate", "align"):
        status, err = console(
            monkeypatch, capsys, command, "--model", str(tmp_path), "--input", text, "--output", output
        )
        assert status == 1 and err == (f"error: --output {output} is the file that --input {text} names, which this "
                                       f"command reads too: give --output another file name.\n")  # fmt: skip
    assert Path(text).read_text() == "le chat dort ||| the cat sleeps\n"


def test_arcs_layer_head_past_the_model_names_the_flag_and_the_range(tmp_path, monkeypatch, capsys):
    """`--arcs-layer-head 0 99` ended in an IndexError after the whole attention run."""
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    sentences = ["le chat dort", "il rêve de souris"]
    tokenizer = train_tokenizer(sentences * 10, vocab_size=60, min_frequency=1)
    build_model(model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32), seed=0).save_pretrained(
        tmp_path / "m"
    )
    tokenizer.save_pretrained(tmp_path / "m")
    rows = "".join(
        f"{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n" for i, w, h in ((1, "le", 2), (2, "chat", 3), (3, "dort", 0))
    )
    (tmp_path / "g.conllu").write_text(f"# text = le chat dort\n{rows}\n", encoding="utf-8")
    hyp = write(tmp_path / "hyp.txt", ["the cat sleeps"])
    status, err = console(monkeypatch, capsys, "evaluate", "--hyp", hyp, "--ref", hyp, "--model", str(tmp_path / "m"),
                          "--gold-conllu", str(tmp_path / "g.conllu"), "--arcs", str(tmp_path / "a.png"),
                          "--arcs-layer-head", "0", "99")  # fmt: skip
    assert status == 1 and err.splitlines()[-1] == (
        f"error: --arcs-layer-head 0 99: {tmp_path / 'm'} has encoder layers 0-1 with heads 0-3 each: give LAYER HEAD "
        "in that range (or leave the flag out to draw the best head)"
    ), err
    assert not (tmp_path / "a.png").exists()


def test_contrastive_without_examples_says_so(tmp_path, monkeypatch, capsys):
    """`--synthetic 1` can hold no pronoun sentence: say so (it ended in an IndexError like `--synthetic 0`)."""
    from hf_syntax_mt.demo.synthetic_corpus import contrastive_examples, generate_documents

    seed = next(s for s in range(100) if not list(contrastive_examples(generate_documents(1, seed=s))))
    status, err = console(monkeypatch, capsys, "contrastive", "--model", str(tmp_path), "--synthetic", "1",
                          "--seed", str(seed))  # fmt: skip
    assert status == 1 and err == (f"error: --synthetic 1 (seed {seed}) gives no contrastive example to score: give "
                                   "more documents (e.g. --synthetic 50)\n")  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# User errors and bugs
# ------------------------------------------------------------------------------------------------------------------
def test_a_plain_value_error_from_inside_the_package_is_a_bug_with_its_traceback(tmp_path, monkeypatch, capsys):
    """The CLI printed any ValueError raised in the package as a user error (`error: range() arg 3 must not be
    zero`), hiding a bug's traceback."""

    def bug(*args, **kwargs):
        return list(zip([1], [1, 2], strict=True))  # a ValueError from the package's own code

    monkeypatch.setattr("hf_syntax_mt.evaluation.evaluate_files", bug)
    hyp = write(tmp_path / "hyp.txt", ["a b"])
    status, err = console(monkeypatch, capsys, "evaluate", "--hyp", hyp, "--ref", hyp)
    assert status == 1 and "Traceback (most recent call last)" in err and "in bug" in err
    assert "ValueError: zip() argument 2 is longer than argument 1" in err
    assert err.rstrip("\n").splitlines()[-1] == BUG_REPORT and "issue tracker" in BUG_REPORT

    def user_error(*args, **kwargs):
        raise UserError("--hyp x: one line\nthat goes on")

    monkeypatch.setattr("hf_syntax_mt.evaluation.evaluate_files", user_error)
    status, err = console(monkeypatch, capsys, "evaluate", "--hyp", hyp, "--ref", hyp)
    assert (status, err) == (1, "error: --hyp x: one line that goes on\n")


# the rule for other errors (an OSError the package did not name is a defect): tests/data/test_user_error_rule.py


# ------------------------------------------------------------------------------------------------------------------
# Versions
# ------------------------------------------------------------------------------------------------------------------
def test_transformers_6_is_refused_as_pyproject_pins_below_it():
    """transformers 6.0.0 passed the import-time check although pyproject pins `<6`."""
    import re

    from hf_syntax_mt.compat import MAX_VERSIONS, check_versions

    versions = lambda tf: lambda name: {"transformers": tf, "torch": "2.13.0"}[name]  # noqa: E731
    for found in ("6.0.0", "6.0.0.dev0", "6.1.2"):
        with pytest.raises(DependencyVersionError, match=rf"supports transformers below 6 .* but transformers "
                           rf"{re.escape(found)} is installed: pip install 'transformers>=5\.17\.0,<6'$"):  # fmt: skip
            check_versions(versions(found))
    check_versions(versions("5.99.1"))
    declared = re.search(r'"transformers>=[0-9.]+,<([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert MAX_VERSIONS == {"transformers": declared}


def test_a_too_old_transformers_is_one_line_from_the_console_script(tmp_path):
    """The CLI printed a 14-line traceback before the clear one-line message."""
    fake = ("import importlib.metadata as m; real = m.version; "
            "m.version = lambda name: '5.3.0' if name == 'transformers' else real(name)")  # fmt: skip
    src = write(tmp_path / "in.txt", ["x"])
    status, out, err, _ = launcher("translate", "--model", str(tmp_path), "--input", src, code=fake)
    assert (status, out) == (1, "")
    assert err == ("error: hf-syntax-mt needs transformers 5.17.0 or newer, but transformers 5.3.0 is installed: pip "
                   "install 'transformers>=5.17.0,<6'")  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# train: a fast --help equal to HfArgumentParser's, unknown flags named
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("columns", ["60", "100", "200"])
def test_the_kept_train_help_equals_the_real_parsers(monkeypatch, columns):
    from hf_syntax_mt import train_help
    from hf_syntax_mt.training.script_args import train_parser

    monkeypatch.setenv("COLUMNS", columns)
    real = train_parser()
    real.prog = "hf-syntax-mt"
    rebuilt = train_help.parser_from_spec(json.loads(json.dumps(train_help.spec_of(real))), "hf-syntax-mt")
    assert rebuilt.format_help() == real.format_help()
    assert "--time_budget_seconds" in real.format_help() and "--per_device_train_batch_size" in real.format_help()
    kept, key = json.loads(train_help.SPEC.read_text()), train_help.source_key()
    # a change to the train script's flags must write the kept help again (else `train --help` is slow again)
    assert kept["key"]["script_args"] == key["script_args"], "run: python -m hf_syntax_mt.train_help"
    if kept["key"] == key:  # made from this transformers too
        assert train_help.fast_help("hf-syntax-mt") == real.format_help()
    else:  # another transformers release: the kept help is not used
        assert train_help.fast_help("hf-syntax-mt") is None


def test_train_help_from_the_console_script_imports_no_transformers():
    """`train --help` took 41 s: HfArgumentParser imports transformers and torch."""
    from hf_syntax_mt import train_help

    kept = json.loads(train_help.SPEC.read_text())
    status, out, err, imported = launcher("train", "--help", env={"COLUMNS": "120"})
    assert status == 0 and out.startswith("usage: ")
    assert ("--time_budget_seconds TIME_BUDGET_SECONDS" in out) and ("--encoder_pascal_heads" in out)
    assert imported == (
        "IMPORTED []" if kept["key"] == train_help.source_key() else "IMPORTED ['torch', 'transformers']"
    )


def test_train_names_an_unknown_flag_and_the_close_one():
    """An unknown train flag was HfArgumentParser's ValueError, a bug's traceback under the new rule."""
    with pytest.raises(UserError, match=r"^train: unrecognized arguments: --time_budgt_seconds 60; did you mean "
                                        r"--time_budget_seconds"):  # fmt: skip
        main(["train", "--output_dir", "x", "--time_budgt_seconds", "60"])
    with pytest.raises(UserError, match=r"^train: .*--load_best_model_at_end"):  # TrainingArguments' own check
        main(["train", "--output_dir", "x", "--load_best_model_at_end", "--eval_strategy", "steps", "--save_strategy",
              "epoch"])  # fmt: skip


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--vocab_size", "0"], "--vocab_size must be at least 1, got 0"),
        (["--max_source_length", "0"], "--max_source_length must be at least 2, got 0"),
        (["--max_train_samples", "-5"], "--max_train_samples must be at least 1, got -5"),
        # a method's flag is checked by its option's own check, as the config is
        (
            ["--context_sentences", "-1"],
            "context_sentences=-1 must be an int in 0..64 (the number of previous source "
            "sentences read as context; the paper's best is 2; 0 switches document "
            "context off).",
        ),
        (["--time_budget_seconds", "0"], "--time_budget_seconds must be a positive number of seconds, got 0.0"),
    ],
)
def test_train_numeric_flags_out_of_range_name_the_flag(flags, message):
    """The train script's own numeric flags had no range of their own: each is named before any work."""
    with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
        main(["train", "--output_dir", "never-written", *flags])
    assert not Path("never-written").exists()


# ------------------------------------------------------------------------------------------------------------------
# train: a first run a mistake cannot block
# ------------------------------------------------------------------------------------------------------------------
TRAIN = ["--d_model", "16", "--encoder_layers", "2", "--decoder_layers", "1", "--attention_heads", "2", "--ffn_dim",
         "32", "--max_position_embeddings", "64", "--vocab_size", "120", "--report_to", "none", "--use_cpu",
         "--disable_tqdm", "true", "--per_device_train_batch_size", "8", "--do_train", "--save_strategy", "no"]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from hf_syntax_mt.demo.synthetic_corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("corpus"), splits={"train": 32}, seed=3, max_words=6)


def test_a_train_mistake_does_not_block_the_corrected_command(corpus, tmp_path):
    """`--encoder_pascal_heads 2 0` without parses wrote OUTPUT_DIR/tokenizer/ before its error, and the corrected
    command was then refused without --overwrite_output_dir."""
    out = tmp_path / "run"
    src, tgt, conllu = (str(corpus["train"][k]) for k in ("src", "tgt", "src_conllu"))
    with pytest.raises(UserError, match=r"pascal trains on source trees: give --train_source_conllu .* or --parser"):
        main(["train", "--output_dir", str(out), "--train_source_file", src, "--train_target_file", tgt,
              "--encoder_pascal_heads", "2", "0", *TRAIN, "--max_steps", "1"])  # fmt: skip
    assert not out.exists()  # as it found it
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="give --train_source_conllu"):  # a directory that was there keeps what it held
        main(["train", "--output_dir", str(tmp_path / "kept"), "--train_source_file", src, "--train_target_file",
              tgt, "--encoder_pascal_heads", "2", "0", *TRAIN, "--max_steps", "1", "--overwrite_output_dir"])  # fmt: skip
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]
    # a run killed before training (no cleanup) leaves tokenizer/ only: the rerun recognises it
    from hf_syntax_mt.training import train_tokenizer

    train_tokenizer(["a b c"] * 5, vocab_size=30, min_frequency=1).save_pretrained(out / "tokenizer")
    assert main(["train", "--output_dir", str(out), "--train_source_conllu", conllu, "--train_target_file", tgt,
                 "--encoder_pascal_heads", "2", "0", *TRAIN, "--max_steps", "1"]) == 0  # fmt: skip
    assert json.loads((out / "hf_syntax_mt_run.json").read_text())["global_step"] == 1


def test_a_time_budget_stop_is_logged_and_recorded(corpus, tmp_path, caplog):
    """`--time_budget_seconds` stopped training without a word (the bar stopped at 238/300)."""
    import logging

    out = tmp_path / "run"
    src, tgt = str(corpus["train"]["src"]), str(corpus["train"]["tgt"])
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.training.callbacks"):
        assert main(["train", "--output_dir", str(out), "--train_source_file", src, "--train_target_file", tgt,
                     *TRAIN, "--max_steps", "5", "--time_budget_seconds", "1e-9"]) == 0  # fmt: skip
    warned = [r.getMessage() for r in caplog.records if "--time_budget_seconds" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("--time_budget_seconds 1e-09: training stopped at step 1 of 5")
    run = json.loads((out / "hf_syntax_mt_run.json").read_text())
    assert run["global_step"] == 1
    assert run["time_budget"] == {"seconds": 1e-9, "stopped": True, "stopped_at_step": 1, "max_steps": 5}


def test_argparse_type_helpers_accept_their_bounds():
    from hf_syntax_mt.cli_args import float_range, int_range

    assert int_range(1, 3)("3") == 3 and int_range(0)("0") == 0 and float_range(above=0)("1e-9") == 1e-9
    for parse, text in ((int_range(1, 3), "4"), (int_range(0), "1.5"), (float_range(0.001), "0.0001")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
