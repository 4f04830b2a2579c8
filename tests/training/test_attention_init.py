"""The init of models built from scratch (issue 26): the train script, `model_config` and the demo start a
`SyntaxMTConfig` from fairseq's Xavier attention init unless Marian's is asked for; a hand-built `SyntaxMTConfig`
keeps Marian's (parity with `MarianMTModel`); a checkpoint, including one saved before the change, loads unchanged."""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.training import model_config, train_tokenizer
from hf_syntax_mt.training.prepare import build_config_and_model
from hf_syntax_mt.training.script_args import ModelArguments

FIXTURE = Path(__file__).resolve().parents[1] / "models" / "fixtures" / "pre_registry_model"
SIZE = dict(d_model=32, encoder_layers=2, decoder_layers=2, attention_heads=4, ffn_dim=64)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(["a small corpus of words", "ein kleiner Korpus aus Wörtern"] * 10, vocab_size=60,
                           min_frequency=1)  # fmt: skip


def q_proj(model) -> torch.Tensor:
    return model.model.encoder.layers[0].self_attn.q_proj.weight.detach()


def is_xavier(weight: torch.Tensor) -> bool:
    """fairseq's q/k/v init: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)), gain 1/sqrt(2): every entry within b,
    and the largest close to b (a uniform's max over 1,024 draws); Marian's N(0, 0.02) stays far below b = 0.217."""
    fan_out, fan_in = weight.shape
    bound = math.sqrt(6 / (fan_in + fan_out)) / math.sqrt(2)
    return bool(weight.abs().max() <= bound) and bool(weight.abs().max() > 0.9 * bound)


def test_the_train_script_builds_a_new_model_with_the_xavier_init_unless_asked_for_marians(tokenizer):
    config, model = build_config_and_model(ModelArguments(**SIZE), tokenizer, seed=0, source_parser=None)
    assert config.attention_init == "xavier" and is_xavier(q_proj(model))
    config, model = build_config_and_model(ModelArguments(**SIZE, attention_init="normal"), tokenizer, 0, None)
    assert config.attention_init == "normal" and not is_xavier(q_proj(model))
    assert abs(q_proj(model).std().item() - config.init_std) < 0.1 * config.init_std  # Marian's N(0, init_std)
    # --config_overrides wins over the default, as over every other flag
    config, _ = build_config_and_model(ModelArguments(**SIZE, config_overrides="attention_init=normal"), tokenizer, 0,
                                       None)  # fmt: skip
    assert config.attention_init == "normal"


def test_model_config_and_the_demo_start_from_xavier_and_a_hand_built_config_from_marians(tokenizer):
    from hf_syntax_mt.demo.run import DemoSettings, _configs

    assert model_config(tokenizer).attention_init == "xavier"
    assert model_config(tokenizer, attention_init="normal").attention_init == "normal"
    assert SyntaxMTConfig().attention_init == "normal"  # SyntaxMTConfig() with no option is MarianMTModel exactly
    configs = _configs(DemoSettings(), tokenizer, Path("test.src.conllu"))
    assert {name: c.attention_init for name, c in configs.items()} == {name: "xavier" for name in configs}
    with pytest.raises(ValueError, match=r"takes no syntax option, got \['attention_init'\]"):
        model_config(tokenizer, marian=True, attention_init="xavier")


@pytest.mark.parametrize(
    "extra, message",
    [
        (dict(vanilla_marian=True), "not with --vanilla_marian"),
        (dict(model_name_or_path=str(FIXTURE)), "not with --model_name_or_path"),
    ],
)
def test_attention_init_is_refused_where_it_cannot_apply(tokenizer, extra, message):
    size = {} if "model_name_or_path" in extra else SIZE
    with pytest.raises(ValueError, match=message):
        build_config_and_model(ModelArguments(**size, **extra, attention_init="xavier"), tokenizer, 0, None)


@pytest.mark.parametrize("drop_the_field", [False, True])
def test_a_model_saved_before_the_change_loads_unchanged(tokenizer, tmp_path, drop_the_field):
    """The stored pre-registry checkpoint (Marian's init, `attention_init` "normal" in its config), and the same
    directory with the field removed (saved before the option existed), continue through the train script with their
    own weights bit for bit and keep "normal" in the config."""
    directory = tmp_path / "old"
    shutil.copytree(FIXTURE, directory)
    if drop_the_field:
        config = json.loads((directory / "config.json").read_text())
        del config["attention_init"]
        (directory / "config.json").write_text(json.dumps(config))
    config, model = build_config_and_model(ModelArguments(model_name_or_path=str(directory)), tokenizer, 0, None)
    assert config.attention_init == "normal"
    saved = load_file(directory / "model.safetensors")
    state = model.state_dict()
    for name, value in saved.items():
        assert torch.equal(state[name], value), name
    direct = SyntaxMTForConditionalGeneration.from_pretrained(directory)
    assert all(torch.equal(p, q) for p, q in zip(direct.state_dict().values(), state.values(), strict=True))
