"""Issue 56: a model saved the README Quickstart's way (`SyntaxMTConfig` + `Seq2SeqTrainer` + `save_model`) generated
with transformers' model-agnostic 20-token default and its warning on every call. Every model the package builds or
loads now carries a length limit within its positions and a beam size (`generation_defaults`)."""

import json
import warnings

import pytest
import torch
from datasets import Dataset
from transformers import GenerationConfig, MarianConfig, Seq2SeqTrainer, Seq2SeqTrainingArguments, pipeline
from transformers.generation.utils import logger as generation_logger
from transformers.testing_utils import CaptureLogger

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.generation_defaults import DEFAULT_NUM_BEAMS, decoding, fill_generation_defaults, model_decoding
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.factory import build_model

DEFAULT_LENGTH_WARNING = "model-agnostic default `max_length`"
SOURCES = ["le chat dort", "le chien court", "un oiseau chante", "la maison est grande"] * 4
TARGETS = ["the cat sleeps", "the dog runs", "a bird sings", "the house is big"] * 4


@pytest.fixture(scope="module")
def quickstart_model(tmp_path_factory):
    """The README Quickstart, tiny and without a parser (the spine alone): two optimizer steps, `save_model`."""
    out = tmp_path_factory.mktemp("quickstart") / "final"
    tokenizer = train_tokenizer(SOURCES + TARGETS, vocab_size=60)
    train = Dataset.from_dict(dict(tokenizer(SOURCES, text_target=TARGETS)))  # no parser: the spine alone
    config = SyntaxMTConfig(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=48,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    model = SyntaxMTForConditionalGeneration(config)
    args = Seq2SeqTrainingArguments(str(out.parent / "run"), max_steps=2, report_to="none", use_cpu=True,
                                    save_strategy="no", disable_tqdm=True)  # fmt: skip
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                             data_collator=DataCollatorForSyntaxMT(tokenizer, model=model))  # fmt: skip
    trainer.train()
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def test_the_quickstart_models_generation_config_has_beams_and_generate_a_length_within_the_positions(
    quickstart_model,
):
    saved = json.loads((quickstart_model / "generation_config.json").read_text())
    assert saved["num_beams"] == DEFAULT_NUM_BEAMS
    # the length limit is added per call where nothing sets one (in the file, transformers would warn whenever a
    # call passes max_new_tokens): max_position_embeddings=48
    assert "max_length" not in saved and "max_new_tokens" not in saved
    model = SyntaxMTForConditionalGeneration.from_pretrained(quickstart_model)
    kwargs = {}
    fill_generation_defaults(model, kwargs)
    assert kwargs == {"max_length": 48} and model_decoding(model) == "beams:4|max_length:48"
    for given in ({"max_new_tokens": 5}, {"max_length": 10}, {"generation_config": GenerationConfig(max_length=9)}):
        call = dict(given)
        fill_generation_defaults(model, call)
        assert call == given  # a length the call sets is kept
    with warnings.catch_warnings(record=True) as caught, CaptureLogger(generation_logger) as logged:
        warnings.simplefilter("always")
        out = model.generate(torch.tensor([[5, 6, model.config.eos_token_id]]), max_new_tokens=3, num_beams=1)
    assert out.shape[-1] <= 4 and not caught and "seem to have been set" not in logged.out


def test_the_quickstart_model_translates_without_the_default_length_warning(quickstart_model):
    translate = pipeline("translation", model=str(quickstart_model), trust_remote_code=True, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        translate(["le chat dort", "un oiseau"])
        model = translate.model
        ids = translate.tokenizer(["le chat"], return_tensors="pt")["input_ids"]
        # no end of sentence before the limit: the output runs to it, past transformers' 20 tokens
        out = model.generate(ids, min_new_tokens=60, num_beams=1)
    assert not [w for w in caught if DEFAULT_LENGTH_WARNING in str(w.message)]
    assert out.shape[-1] == 48


def test_a_model_saved_before_the_defaults_gets_them_when_it_generates(quickstart_model, tmp_path):
    """A generation_config.json without max_length / num_beams (what the Quickstart saved before)."""
    model = SyntaxMTForConditionalGeneration.from_pretrained(quickstart_model)
    model.generation_config.num_beams = None
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "generation_config.json").read_text())
    assert "max_length" not in saved and "num_beams" not in saved
    old = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path)
    old.generation_config.max_length = old.generation_config.num_beams = None  # as transformers read the file
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old.generate(torch.tensor([[5, 6, old.config.eos_token_id]]))
    assert not [w for w in caught if DEFAULT_LENGTH_WARNING in str(w.message)]
    assert model_decoding(old) == decoding(DEFAULT_NUM_BEAMS, 48) == "beams:4|max_length:48"


def test_a_vanilla_marian_the_package_builds_has_the_defaults_and_a_checkpoints_own_are_kept():
    config = MarianConfig(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
                          max_position_embeddings=40, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)  # fmt: skip
    marian = build_model(config)
    assert (marian.generation_config.max_length, marian.generation_config.num_beams) == (40, DEFAULT_NUM_BEAMS)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{k: v for k, v in config.to_dict().items()
                                                               if k not in ("model_type", "transformers_version")}))  # fmt: skip
    model.generation_config.num_beams, model.generation_config.max_length = 6, 512  # an opus-mt checkpoint's own
    kwargs = {}
    fill_generation_defaults(model, kwargs)
    assert (model.generation_config.max_length, model.generation_config.num_beams, kwargs) == (512, 6, {})


def test_a_decoding_field_may_not_break_the_signature():
    with pytest.raises(ValueError, match="must not contain"):
        decoding(4, 128, weights="a|b")
