"""The config's unknown-key rule needs no hand list of other projects' keys: the keys transformers itself writes or
takes out are read from the installed classes (`configuration_syntax_mt.transformers_keys`), so a key a new
transformers adds is accepted, while a typo of one of our options is still refused; the keys of an older file that
nothing reads load with one warning and are not written back."""

import json
import logging

import pytest
from tiny_config import TINY
from transformers import GenerationConfig, MarianConfig, PreTrainedConfig

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.configuration_syntax_mt import transformers_keys
from hf_syntax_mt.errors import UserError


@pytest.fixture
def fresh_keys():
    """`transformers_keys` recomputed for the test (it is cached) and again after it."""
    transformers_keys.cache_clear()
    yield
    transformers_keys.cache_clear()


def _remove_keys_not_serialized(self, d):  # a future transformers' version of the method, with one key more
    for key_to_remove in ["_is_quantized", "_auto_class", "a_key_a_new_transformers_drops"]:
        d.pop(key_to_remove, None)


def test_a_key_a_new_transformers_adds_is_accepted_and_a_typo_of_ours_is_still_refused(monkeypatch, fresh_keys):
    new_key, new_generation = "a_key_a_new_transformers_drops", "a_new_generation_parameter"
    for key in (new_key, new_generation):  # unknown to today's transformers: refused
        with pytest.raises(UserError, match=f"has no option '{key}'"):
            SyntaxMTConfig(**TINY, **{key: 1})
    # transformers learns the two keys: one the config machinery drops (read from its source), one generation
    # parameter (read from GenerationConfig); nothing here names them
    monkeypatch.setattr(PreTrainedConfig, "_remove_keys_not_serialized", _remove_keys_not_serialized)
    defaults = GenerationConfig._get_default_generation_params()
    monkeypatch.setattr(GenerationConfig, "_get_default_generation_params", lambda: {**defaults, new_generation: 1})
    transformers_keys.cache_clear()
    assert {new_key, new_generation} <= transformers_keys()
    config = SyntaxMTConfig(**TINY, **{new_key: 1, new_generation: 2})
    assert config.d_model == TINY["d_model"]
    # typos of our options, and a key no one writes, are still refused when a config is made
    for typo, meant in [("encoder_pscal_heads", "encoder_pascal_heads"), ("pascal_sigmma", "pascal_sigma"),
                        ("context_sentence", "context_sentences"), ("d_modle", "d_model")]:  # fmt: skip
        with pytest.raises(UserError, match=f"has no option '{typo}'. Did you mean '{meant}'"):
            SyntaxMTConfig(**TINY, **{typo: 1})
    with pytest.raises(UserError, match="has no option 'written_by_hand'"):
        SyntaxMTConfig(**TINY, written_by_hand=1)


def test_every_key_a_saved_config_holds_is_a_field_or_transformers_own(tmp_path):
    """Independent of how the keys are derived: what `save_pretrained` really writes (transformers' bookkeeping, the
    remote-code declarations, a dtype) is all accepted when the file is read back as keyword arguments."""
    from hf_syntax_mt import SyntaxMTForConditionalGeneration

    SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, encoder_pascal_heads=[1, 0])).save_pretrained(tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())
    assert {"transformers_version", "architectures", "auto_map", "custom_pipelines", "model_type"} <= set(stored)
    config = SyntaxMTConfig(**{**stored, "torch_dtype": "float32", "attn_implementation": "eager"})
    assert config.encoder_pascal_heads == [1, 0]


def test_an_old_files_unread_keys_load_with_one_warning_and_are_not_written_back(caplog):
    """An opus-mt conversion by transformers 4.x carries BART-era keys, some close to Marian's fields
    (`static_position_embeddings` / `max_position_embeddings`): loading keeps them with one warning; a config made
    from the loaded one's `to_dict` (fine-tuning from it, `load_with_options`) has none of them."""
    legacy = {"static_position_embeddings": True, "normalize_before": False, "add_bias_logits": False,
              "tie_encoder_decoder": False, "classif_dropout": 0.0}  # fmt: skip
    stored = {**MarianConfig(**TINY).to_dict(), **legacy}
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.configuration_syntax_mt"):
        loaded = SyntaxMTConfig.from_dict(stored)
    warnings = [r for r in caplog.records if "not options of this model" in r.getMessage()]
    assert len(warnings) == 1 and all(repr(k) in warnings[0].getMessage() for k in legacy)
    assert loaded.static_position_embeddings is True and loaded.d_model == TINY["d_model"]
    assert not set(legacy) & set(loaded.to_dict())
    again = SyntaxMTConfig(**loaded.to_dict())  # the saved keys transformers writes pass, the unread ones are gone
    assert again.to_dict() == loaded.to_dict()
    # a typo of one of our options in a stored file is still an error
    with pytest.raises(UserError, match="has no option 'decoder_dbsa_head'. Did you mean 'decoder_dbsa_heads'"):
        SyntaxMTConfig.from_dict({**stored, "decoder_dbsa_head": [1, 0]})
