"""Issue 57, items 1 and 3: what a user caused is decided where the error is raised. Each kind of mistake the
adversarial pass found (a parser not installed, a full disk, a Hub id offline, ``~nobody``, an edited config.json,
a damaged tokenizer.json or generation_config.json, a mislabelled model, pickle weights, an extra / missing /
misshapen tensor, a bad ``pad_token_id``) is fed through the console script and ends in one ``error:`` line naming
the flag or file; a real defect still prints its traceback and the bug line."""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from hf_syntax_mt.cli import _is_user_error, main
from hf_syntax_mt.cli_args import BUG_REPORT
from hf_syntax_mt.data.parsers import ParserNotAvailableError
from hf_syntax_mt.errors import UserError, UserFileError
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

torch.set_num_threads(1)
SENTENCES = ["le chat dort .", "un chien court vite .", "le chien dort sur le canapé ."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    directory = tmp_path_factory.mktemp("plain")
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32), seed=0)
    model.generation_config.max_new_tokens = 4
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("le chat dort .\n", encoding="utf-8")
    return path


def console(monkeypatch, capsys, *argv):
    """`hf-syntax-mt ARGV` as the console script runs it: (exit status, stderr)."""
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *map(str, argv)])
    capsys.readouterr()
    status = main()
    return status, capsys.readouterr().err


def one_error_line(err: str) -> str:
    assert "Traceback" not in err and BUG_REPORT not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def edited(model_dir, tmp_path, change):
    """A copy of the model directory with ``change(directory)`` applied."""
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    change(copy)
    return copy


def edit_json(name, **fields):
    def change(directory):
        values = json.loads((directory / name).read_text())
        (directory / name).write_text(json.dumps({**values, **fields}))

    return change


def edit_weights(edit):
    def change(directory):
        tensors = load_file(directory / "model.safetensors")
        edit(tensors)
        save_file(tensors, directory / "model.safetensors")

    return change


def to_pickle(directory):
    torch.save(load_file(directory / "model.safetensors"), directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()


def drop_first_layer_norm(tensors):
    del tensors[next(k for k in sorted(tensors) if k.endswith("final_layer_norm.weight"))]


def reshape_bias(tensors):
    name = next(k for k in sorted(tensors) if k.endswith("fc1.bias"))
    tensors[name] = torch.zeros(tensors[name].numel() + 1)


MODEL_CASES = {
    # Why 1: transformers' own errors about a user's files, each named before transformers reads them
    "d_model edited": (edit_json("config.json", d_model=32), r"model\.safetensors holds .* of shape .*config\.json"),
    "vocab_size edited": (edit_json("config.json", vocab_size=61), r"holds \S+ of shape .*vocab_size=61"),
    "tokenizer.json {}": (lambda d: (d / "tokenizer.json").write_text("{}"), r"tokenizer\.json is not a tokenizer"),
    "num_beams 0": (edit_json("generation_config.json", num_beams=0), r"generation_config\.json sets num_beams=0"),
    "mislabelled model_type": (edit_json("config.json", model_type="syntax_mt_symmetric"), r"model\.safetensors"),
    "pickle weights": (to_pickle, r"pytorch_model\.bin is a pickle-format weight file.*safetensors only"),
    "pad_token_id past the vocabulary": (edit_json("config.json", pad_token_id=500), r"pad_token_id=500"),
    # an extra, missing or misshapen tensor translated with random weights, exit 0
    "extra tensor": (edit_weights(lambda t: t.update({"model.extra.weight": torch.zeros(2)})), r"model\.extra"),
    "missing tensor": (edit_weights(drop_first_layer_norm), r"lacks 1 tensor"),
    "misshapen tensor": (edit_weights(reshape_bias), r"fc1\.bias of shape \[33\]"),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_a_model_directory_is_checked_against_itself_before_transformers_reads_it(
    model_dir, source, tmp_path, monkeypatch, capsys, case
):
    """Failed before: each printed a traceback and the bug line, or (an extra, missing or misshapen tensor)
    translated with random weights and exit status 0."""
    change, message = MODEL_CASES[case]
    broken = edited(model_dir, tmp_path, change)
    output = tmp_path / "out.txt"
    status, err = console(monkeypatch, capsys, "translate", "--model", broken, "--input", source, "--output", output)
    line = one_error_line(err)
    assert status == 1 and line.startswith(f"error: --model {broken}"), line
    assert re.search(message, line), line
    assert not output.exists()


def test_the_unchanged_model_directory_translates(model_dir, source, tmp_path, monkeypatch, capsys):
    """The checks above refuse nothing a training run wrote."""
    output = tmp_path / "out.txt"
    status, err = console(
        monkeypatch, capsys, "translate", "--model", model_dir, "--input", source, "--output", output
    )
    assert status == 0, err
    assert len(output.read_text(encoding="utf-8").splitlines()) == 1


def test_a_parser_that_is_not_installed_is_one_error_line(tmp_path, source, monkeypatch, capsys):
    """Failed before: ParserNotAvailableError was an OSError without a filename, so a bug with its traceback."""
    assert issubclass(ParserNotAvailableError, UserError) and issubclass(ParserNotAvailableError, OSError)
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, encoder_pascal_heads=[2])
    build_model(config, seed=0).save_pretrained(tmp_path / "pascal")
    tokenizer.save_pretrained(tmp_path / "pascal")
    status, err = console(monkeypatch, capsys, "translate", "--model", tmp_path / "pascal", "--input", source, "--parser",
                          "spacy", "--parser-model", "xx_fake_pipeline")  # fmt: skip
    line = one_error_line(err)
    assert status == 1 and ("xx_fake_pipeline" in line or "pip install spacy" in line), line


def test_a_full_disk_names_the_output_flag(model_dir, source, monkeypatch, capsys):
    """Failed before: `--output /dev/full` was an OSError without a filename: a traceback and the bug line."""
    status, err = console(monkeypatch, capsys, "translate", "--model", model_dir, "--input", source, "--output",
                          "/dev/full")  # fmt: skip
    line = one_error_line(err)
    assert status == 1 and line.startswith("error: --output /dev/full: cannot be written (No space left on device)")
    assert "free some space" in line


def test_a_hub_id_offline_and_an_unknown_home_name_the_model_flag(source, monkeypatch, capsys):
    """Failed before: both printed a traceback and the bug line."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status, err = console(monkeypatch, capsys, "translate", "--model", "hf-syntax-mt-test/no-such-model", "--input",
                          source)  # fmt: skip
    line = one_error_line(err)
    assert status == 1 and line.startswith("error: --model hf-syntax-mt-test/no-such-model: no such local directory")
    status, err = console(monkeypatch, capsys, "translate", "--model", "~hf_syntax_mt_nobody/x", "--input", source)
    line = one_error_line(err)
    assert status == 1 and line.startswith("error: --model ~hf_syntax_mt_nobody/x:"), line


def test_a_folder_or_a_missing_file_is_named_where_it_is_opened(model_dir, tmp_path, monkeypatch, capsys):
    status, err = console(monkeypatch, capsys, "translate", "--model", model_dir, "--input", tmp_path)
    line = one_error_line(err)
    assert status == 1 and line == f"error: --input {tmp_path}: is a folder, not a file; give the file's path"
    status, err = console(monkeypatch, capsys, "aer", "--hyp", tmp_path / "no.txt", "--gold", tmp_path / "no.txt")
    line = one_error_line(err)
    assert status == 1 and line == f"error: --hyp {tmp_path / 'no.txt'}: no such file; check the path", line


@pytest.mark.parametrize(
    "error, user",
    [
        (UserFileError("--output x: cannot be written (No space left on device)", 28, "x"), True),
        (ParserNotAvailableError("spaCy pipeline 'xx' is not installed"), True),
        # an OSError the package did not turn into its user error is a defect now, file name or not
        (FileNotFoundError(2, "No such file or directory", "x.txt"), False),
        (OSError(28, "No space left on device", "out.txt"), False),
        (OSError("Can't load tokenizer for 'x'"), False),
        (ModuleNotFoundError("No module named 'spacy'", name="spacy"), True),
        (ModuleNotFoundError("No module named 'hf_syntax_mt.nope'", name="hf_syntax_mt.nope"), False),
        (ValueError("range() arg 3 must not be zero"), False),
        (UserError("--flag 0: give 1 or more"), True),
    ],
)
def test_the_rule_is_the_type_the_raising_place_chose(error, user):
    assert _is_user_error(error) is user
