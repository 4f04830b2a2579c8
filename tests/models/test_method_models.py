"""Every built-in method's tiny model saved by the code before the option system of issue 58 (commit e83dd2b:
`fixtures/make_method_models.py` wrote them, with options off their defaults) loads with today's code: each option
keeps its stored value, and the logits and every loss term equal the stored ones."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

FIXTURES = Path(__file__).parent / "fixtures"
MODELS = sorted(p.name for p in (FIXTURES / "method_models").iterdir())


def test_every_method_the_old_code_knew_has_a_stored_model():
    """Every registered method whose options the old code's config already held (its `config.json`, written with every
    field) has a stored model setting one of them; a method added since has no old code to be saved by."""
    from hf_syntax_mt.methods import owned_fields, registered

    stored = {key for name in MODELS for key in _fixture(name)["options"]}
    old_fields = set(json.loads((FIXTURES / "method_models" / MODELS[0] / "config.json").read_text()))
    old = [m for m in registered() if owned_fields(m) and set(owned_fields(m)) <= old_fields]
    assert len(old) >= len(MODELS) - 1  # one stored model per method, two for PASCAL's weightings
    for method in old:
        assert set(owned_fields(method)) & stored, f"no stored model sets an option of {method.name!r}"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / "method_models" / name / "fixture.json").read_text())


@pytest.mark.parametrize("name", MODELS)
def test_a_model_saved_before_the_option_system_loads_with_equal_options_and_outputs(name):
    directory = FIXTURES / "method_models" / name
    fixture = _fixture(name)
    stored = json.loads((directory / "config.json").read_text())
    config = SyntaxMTConfig.from_pretrained(directory)
    for key, value in fixture["options"].items():  # the options set off their defaults
        assert getattr(config, key) == value, key
    for key, value in stored.items():  # and every other stored field
        if hasattr(config, key) and key not in ("architectures", "auto_map", "custom_pipelines", "dtype"):
            assert getattr(config, key) == value, key
    model = SyntaxMTForConditionalGeneration.from_pretrained(directory).eval()
    inputs = load_file(FIXTURES / "method_models_inputs.safetensors")
    expected = load_file(directory / "expected_outputs.safetensors")
    with torch.no_grad():
        out = model(**{k: inputs[k] for k in fixture["inputs"]})
    got = {name: value for name, value in out.items() if name == "logits" or name.endswith("loss")}
    assert {k for k, v in got.items() if v is not None} == set(expected)
    for key, value in expected.items():
        torch.testing.assert_close(got[key].reshape(value.shape), value, rtol=1e-5, atol=1e-6, msg=key)
