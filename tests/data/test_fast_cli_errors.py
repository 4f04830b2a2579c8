"""`train`'s argument errors and `--device`'s answer before torch and transformers are imported (issue 56: they came
after the full import, 11-117 s), with the words the real parser and `resolve_device` use."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hf_syntax_mt import train_help
from hf_syntax_mt.cli import main
from hf_syntax_mt.cli_args import check_device
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.inference import resolve_device

ROOT = Path(__file__).resolve().parents[2]
KEPT = train_help._kept() is not None  # the kept parser is this installation's (else the real parser answers)


def launcher(*argv):
    """`hf-syntax-mt ARGV` through the console script in a fresh interpreter: (status, stderr, heavy imports)."""
    script = ("import sys, hf_syntax_mt_cli\nsys.argv = ['hf-syntax-mt', *sys.argv[1:]]\n"
              "try:\n    status = hf_syntax_mt_cli.main()\nexcept SystemExit as e:\n    status = e.code\n"
              "print('IMPORTED', sorted(m for m in ('torch', 'transformers') if m in sys.modules), file=sys.stderr)\n"
              "sys.exit(status)")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    *err, imported = run.stderr.rstrip("\n").split("\n")
    return run.returncode, "\n".join(err), imported


def slow_message(argv) -> str:
    """The error of the real parser (HfArgumentParser and the dataclasses' checks), in-process."""
    with pytest.raises(UserError) as caught:
        main(["train", *argv])
    return f"error: {caught.value}"


@pytest.mark.skipif(not KEPT, reason="train_help.json was made from another transformers: run python -m "
                    "hf_syntax_mt.train_help")  # fmt: skip
@pytest.mark.parametrize(
    "argv",
    [
        ["--output_dir", "never-written", "--nope"],
        ["--output_dir", "never-written", "--time_budgt_seconds", "60"],
        ["--output_dir", "never-written", "--vocab_size", "0"],
        ["--output_dir", "never-written", "--max_source_length", "1"],
    ],
)
def test_train_flag_errors_come_before_the_import_with_the_real_parsers_words(argv):
    status, err, imported = launcher("train", *argv)
    assert (status, imported) == (1, "IMPORTED []")
    assert err == slow_message(argv)
    assert not (ROOT / "never-written").exists()


@pytest.mark.skipif(not KEPT, reason="train_help.json was made from another transformers")
@pytest.mark.parametrize(
    "argv, words",
    [
        (["--max_steps", "x"], "argument --max_steps/--max-steps: invalid int value: 'x'"),
        (["--do_train", "maybe"], "argument --do_train/--do-train: Truthy value expected: got maybe"),
        (["--parser", "udpipe"], "argument --parser: invalid choice: 'udpipe'"),
    ],
)
def test_train_value_errors_are_argparses_before_the_import(argv, words):
    status, err, imported = launcher("train", "--output_dir", "never-written", *argv)
    assert (status, imported) == (2, "IMPORTED []")
    assert words in err and err.splitlines()[0].startswith("usage: hf-syntax-mt train")
    with pytest.raises(SystemExit):  # the real parser refuses it too
        main(["train", "--output_dir", "never-written", *argv])


def test_a_valid_train_command_line_passes_the_early_check():
    train_help.check_train_args(["--output_dir", "x", "--max_steps", "5", "--encoder_pascal_heads", "2", "0",
                                 "--do_train", "--disable_tqdm", "true", "--learning_rate", "3e-3"])  # fmt: skip
    train_help.check_train_args(["args.json"])  # a file of arguments: left to the real parser


@pytest.mark.skipif(torch.version.cuda is not None or torch.version.hip is not None, reason="torch is a CUDA build")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_device_cuda_on_a_cpu_torch_is_refused_before_the_import(tmp_path, device):
    (tmp_path / "in.txt").write_text("x\n", encoding="utf-8")
    status, err, imported = launcher("translate", "--model", str(tmp_path), "--input", str(tmp_path / "in.txt"),
                                     "--device", device)  # fmt: skip
    assert (status, imported) == (1, "IMPORTED []")
    assert err.startswith(f"error: --device {device}: the installed torch is built without CUDA")
    with pytest.raises(UserError, match="torch sees no CUDA device"):  # what torch itself says, after the import
        resolve_device(device)


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cpu:1", "tpu"])
def test_a_name_that_is_no_device_is_refused_as_resolve_device_refuses_it(name):
    with pytest.raises(UserError, match=f"--device {name}: not a device") as early:
        check_device(name)
    with pytest.raises(UserError) as late:
        resolve_device(name)
    assert str(early.value) == str(late.value)


@pytest.mark.parametrize("name", [None, "cpu", "cpu:0", "mps:0" if sys.platform == "darwin" else "cpu"])
def test_devices_torch_accepts_pass_the_early_check(name):
    check_device(name)
    resolve_device(name)
