"""A tiny model using every method, saved before the method registry (issue 16), loads with today's code and gives
identical logits, loss terms, attentions and generations (`fixtures/make_pre_registry_model.py` wrote it)."""

from pathlib import Path

import torch
from safetensors.torch import load_file

from hf_syntax_mt import SyntaxMTForConditionalGeneration

FIXTURE = Path(__file__).parent / "fixtures" / "pre_registry_model"


def test_a_checkpoint_saved_before_the_registry_gives_identical_outputs():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE.parent / "make_pre_registry_model.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    model = SyntaxMTForConditionalGeneration.from_pretrained(FIXTURE)
    inputs = load_file(FIXTURE / "inputs.safetensors")
    expected = load_file(FIXTURE / "expected_outputs.safetensors")
    got = make.outputs(model, inputs)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        if value.is_floating_point():
            torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6, msg=name)
        else:
            assert torch.equal(got[name], value), name
    # the fixture exercises every auxiliary loss: none of them is zero
    for name in ("dbsa_loss", "lisa_loss", "sync_loss", "fertility_loss"):
        assert expected[name].item() > 0, name
