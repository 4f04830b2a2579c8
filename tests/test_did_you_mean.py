"""Issue 65, item 8: a mistyped name is refused with the closest known one. `forward` refused nothing: a
``parent_postions=`` tensor was silently dropped (the PASCAL heads then ran on the default positions); the CLI's
argparse (Python 3.11: no suggestions before 3.14) said only "unrecognized arguments"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_config import TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.cli_args import build_parser
from hf_syntax_mt.errors import UserTypeError
from hf_syntax_mt.methods import input_names
from hf_syntax_mt.suggest import closest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, encoder_pascal_heads=[2, 0])).eval()


def batch():
    ids = torch.tensor([[5, 6, 7, 8, 2]])
    return ids, torch.tensor([[1.0, 1.0, 1.0, 3.0, 4.0]])


def test_a_mistyped_method_input_is_refused_naming_the_declared_one(model):
    ids, parents = batch()
    with pytest.raises(
        UserTypeError, match=r"unexpected keyword argument parent_postions=.*did you mean parent_positions="
    ):
        model(input_ids=ids, labels=ids, parent_postions=parents)
    with pytest.raises(
        UserTypeError, match=r"SyntaxMTModel.forward\(\) .*parent_postions=.*did you mean parent_positions="
    ):
        model.model(input_ids=ids, decoder_input_ids=ids, parent_postions=parents)
    with pytest.raises(UserTypeError, match="did you mean decoder_input_ids="):
        model(input_ids=ids, decoder_inputs_ids=ids)  # a forward argument of its own


def test_the_declared_names_and_transformers_own_still_pass(model):
    """The right name changes the output (the keyword is read, not dropped); transformers' own keywords pass."""
    ids, parents = batch()
    with torch.no_grad():
        given_parents = model(input_ids=ids, labels=ids, parent_positions=parents, output_attentions=True,
                              output_hidden_states=True, return_dict=True)  # fmt: skip
        other = model(input_ids=ids, labels=ids, parent_positions=parents.flip(-1))
    assert given_parents.encoder_attentions is not None and given_parents.loss is not None
    assert not torch.allclose(given_parents.logits, other.logits)  # parent_positions reaches the PASCAL heads
    out = model.generate(input_ids=ids, parent_positions=parents, max_new_tokens=3, num_beams=2)
    assert out.shape[0] == 1


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_one_letter_slip_of_a_method_input_names_it(model, data):
    """A deleted, doubled or swapped letter of a declared input (at least 8 letters long) is refused naming it."""
    name = data.draw(st.sampled_from([n for n in input_names() if len(n) >= 8]))
    k = data.draw(st.integers(1, len(name) - 2))
    slip = data.draw(st.sampled_from([name[:k] + name[k + 1 :], name[:k] + name[k] + name[k:],
                                      name[:k] + name[k + 1] + name[k] + name[k + 2 :]]))  # fmt: skip
    if slip == name:
        return  # a swap of two equal letters
    ids, _ = batch()
    with pytest.raises(UserTypeError) as refused:
        model(input_ids=ids, labels=ids, **{slip: None})
    assert f"argument {slip}=" in str(refused.value) and "did you mean" in str(refused.value)
    assert closest(slip, input_names()) == name  # among the methods' inputs, the one slipped is the closest


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["translate", "--model", "m", "--nume-beams", "4"], "--nume-beams: did you mean --num-beams?"),
        (
            ["evaluate", "--hyp", "h", "--ref", "r", "--baseline-nme", "b"],
            "--baseline-nme: did you mean --baseline-name?",
        ),
        (["translate", "--model", "m", "--devise=cpu"], "--devise: did you mean --device?"),
    ],
)
def test_a_mistyped_cli_flag_gets_the_closest_flag_of_its_subcommand(argv, hint, capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and "unrecognized arguments" in err and hint in err, err


def test_a_flag_far_from_every_flag_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["translate", "--model", "m", "--zzzzzz"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("unrecognized arguments: --zzzzzz"), err


def test_the_console_script_suggests_without_importing_torch():
    script = ("import sys, hf_syntax_mt_cli\nsys.argv = ['hf-syntax-mt', 'translate', '--model', 'm', '--nume-beams',"
              " '4']\ntry:\n    hf_syntax_mt_cli.main()\nexcept SystemExit as e:\n    status = e.code\n"
              "print('IMPORTED', 'torch' in sys.modules, status, file=sys.stderr)")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})  # fmt: skip
    assert "did you mean --num-beams?" in run.stderr and run.stderr.rstrip().endswith("IMPORTED False 2"), run.stderr
