"""Issue 65, item 3: the engines refuse what they do not implement. An allow-list per engine (the fields its search
reads, and the fields that change no token of a greedy or beam search); every other field of `GenerationConfig` set
to a value other than its default is refused, naming it. The tests enumerate `GenerationConfig().to_dict()`, so an
option a later transformers adds is refused (and shown here), never ignored. A token id that is not the model's is a
user error naming the field and the file, not an `IndexError`."""

import pytest
import torch
from transformers import GenerationConfig
from transformers.generation import WatermarkingConfig

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.decoding.marian_step import TorchDecoder
from hf_syntax_mt.decoding.search import IMPLEMENTED, resolve_search
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.export.serve import CTRANSLATE2_IMPLEMENTS
from hf_syntax_mt.generation_defaults import INERT_GENERATION_FIELDS, refused_generation_options

FIELDS = sorted(GenerationConfig().to_dict())
#: a value other than transformers' default, for the fields where a generic one would not read as an option
NON_DEFAULT = {
    "do_sample": True, "num_return_sequences": 2, "encoder_repetition_penalty": 1.5, "repetition_penalty": 1.2,
    "watermarking_config": {"greenlist_ratio": 0.25}, "num_beam_groups": 2, "diversity_penalty": 0.5,
    "early_stopping": True, "low_memory": True, "output_scores": True, "return_dict_in_generate": True,
    "renormalize_logits": True, "remove_invalid_values": True, "stop_strings": ["."], "sequence_bias": {(5,): 1.0},
    "exponential_decay_length_penalty": (3, 1.5), "cache_implementation": "static", "token_healing": True,
}  # fmt: skip
PAD, EOS = 0, 1
#: the options the ONNX search refused before the allow-list (a deny-list: every other field was ignored)
DENIED_BEFORE = (
    "do_sample", "num_return_sequences", "repetition_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "sequence_bias", "begin_suppress_tokens", "exponential_decay_length_penalty", "num_beam_groups",
    "diversity_penalty", "constraints", "force_words_ids", "guidance_scale", "output_scores", "output_logits",
    "return_dict_in_generate", "output_attentions", "output_hidden_states", "penalty_alpha", "renormalize_logits",
    "remove_invalid_values", "max_time", "stop_strings",
)  # fmt: skip


def non_default(name: str):
    return NON_DEFAULT.get(name, 7)  # 7: no field's default, a valid count or token id for the rest


def config_with(name: str) -> GenerationConfig:
    config = GenerationConfig()
    setattr(config, name, non_default(name))  # set directly: `validate` would refuse some combinations first
    return config


def test_the_allow_lists_name_existing_fields():
    """An allow-list entry transformers no longer has would hide nothing, but it is stale: say so."""
    for allowed in (IMPLEMENTED, CTRANSLATE2_IMPLEMENTS, INERT_GENERATION_FIELDS):
        assert set(allowed) <= set(FIELDS), sorted(set(allowed) - set(FIELDS))


@pytest.mark.parametrize(
    "engine, implemented", [("onnxruntime", IMPLEMENTED), ("ctranslate2", CTRANSLATE2_IMPLEMENTS)]
)
def test_every_field_an_engine_does_not_implement_is_refused_by_name(engine, implemented):
    """Every field of `GenerationConfig().to_dict()`: refused with a non-default value unless implemented or inert;
    none is refused at its default (the count is printed, so a new transformers field shows here)."""
    assert refused_generation_options(GenerationConfig(), implemented) == []
    refused = []
    for name in FIELDS:
        found = refused_generation_options(config_with(name), implemented)
        if name in implemented or name in INERT_GENERATION_FIELDS:
            assert found == [], name
        else:
            assert found == [f"{name}={non_default(name)!r}"], name
            refused.append(name)
    # the issue's two examples, and the deny-list the search had before (less its sampling-only settings, which
    # change nothing without sampling: `test_the_inert_fields_change_no_token`)
    assert {"encoder_repetition_penalty", "watermarking_config"} <= set(refused)
    assert set(DENIED_BEFORE) - {"repetition_penalty", "no_repeat_ngram_size"} <= set(refused)
    if engine == "onnxruntime":
        assert set(DENIED_BEFORE) <= set(refused)
    print(f"{engine}: {len(refused)} of {len(FIELDS)} fields refused: {', '.join(refused)}")


def tiny_model() -> SyntaxMTForConditionalGeneration:
    config = SyntaxMTConfig(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=2, encoder_attention_heads=2,
                            decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
                            max_position_embeddings=32, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD,
                            forced_eos_token_id=EOS, bos_token_id=None, init_std=0.3, dropout=0.0)  # fmt: skip
    torch.manual_seed(0)
    return SyntaxMTForConditionalGeneration(config).eval()


def test_the_onnx_search_refuses_the_issues_options_from_a_call_and_from_the_model():
    model = tiny_model()
    with pytest.raises(UserError, match=r"encoder_repetition_penalty=1\.5.*engine='generate'"):
        resolve_search(model, "onnxruntime", {"encoder_repetition_penalty": 1.5})
    model.generation_config.watermarking_config = WatermarkingConfig(greenlist_ratio=0.25)
    with pytest.raises(UserError, match="watermarking_config=.*generation_config.json"):
        resolve_search(model, "onnxruntime", {})


def test_the_inert_fields_change_no_token():
    """Independent check of the inert list: sampling-only settings (without sampling), caching and assistant settings
    given to `generate` and to the engine's search leave the ids as they are without them."""
    model = tiny_model()
    ids = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    mask = (ids != PAD).long()
    inert = dict(temperature=0.3, top_k=2, top_p=0.5, typical_p=0.5, epsilon_cutoff=0.1, use_cache=False,
                 num_assistant_tokens=3)  # fmt: skip
    decoder = TorchDecoder(model)
    for beams in (1, 3):
        with torch.no_grad():
            plain = model.generate(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=8)
            assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=8,
                                              **inert), plain)  # fmt: skip
            assert torch.equal(decoder.generate(ids, mask, num_beams=beams, max_new_tokens=8, **inert), plain)


@pytest.mark.parametrize("field, value", [("decoder_start_token_id", 99999), ("forced_bos_token_id", 30),
                                          ("bad_words_ids", [[3, -1]])])  # fmt: skip
def test_a_token_id_outside_the_vocabulary_is_a_user_error(field, value, tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    saved = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path)
    setattr(saved.generation_config, field, value)  # as a hand-edited generation_config.json reads
    ids = torch.tensor([[5, 6, EOS]])
    with pytest.raises(UserError, match=rf"{field}=.*{tmp_path}/generation_config.json.*30 tokens"):
        saved.generate(input_ids=ids)
    with pytest.raises(UserError, match=field):
        TorchDecoder(saved).generate(ids)
