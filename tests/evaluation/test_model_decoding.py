"""Issue 65, leftover: the decoding `evaluate` reports for a saved model (`evaluation.files.model_decoding_of`) is the
one its `generate` runs, read by the single resolver (`generation_defaults.resolve_generation`). It read
``generation_config.json`` itself and knew only beams and length: a saved ``length_penalty`` or
``no_repeat_ngram_size`` was left out of the signature, and a ``max_new_tokens`` limit was not seen."""

from __future__ import annotations

import pytest
import torch
from tiny_config import TINY
from transformers import GenerationMixin

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.evaluation.files import model_decoding_of
from hf_syntax_mt.generation_defaults import decoding_of


def generate_decoding(directory, monkeypatch) -> str:
    """The decoding line of the `GenerationConfig` that the loaded model's `generate` hands transformers."""
    seen = {}

    def spy(self, *args, generation_config=None, **kwargs):
        seen["config"] = generation_config
        return torch.zeros(1, 2, dtype=torch.long)

    monkeypatch.setattr(GenerationMixin, "generate", spy)
    model = SyntaxMTForConditionalGeneration.from_pretrained(directory)
    model.generate(input_ids=torch.tensor([[5, 6, 2]]))
    monkeypatch.undo()
    return decoding_of(seen["config"])


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({}, "beams:4|max_length:64"),  # nothing saved: the model's own beams and length (its positions)
        ({"num_beams": 2, "max_length": 20, "length_penalty": 0.6, "no_repeat_ngram_size": 3},
         "beams:2|max_length:20|length_penalty:0.6|no_repeat_ngram_size:3"),
        ({"num_beams": 1, "max_new_tokens": 9}, "beams:1|max_length:10"),  # 9 new tokens after the start token
        ({"max_length": 500}, "beams:4|max_length:65"),  # capped where the decoder runs out of positions
    ],
)  # fmt: skip
def test_the_reported_decoding_is_the_one_generate_runs(settings, expected, tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY))
    for name, value in settings.items():
        setattr(model.generation_config, name, value)
    model.save_pretrained(tmp_path)
    if not settings:
        (tmp_path / "generation_config.json").unlink()  # a model saved without one (e.g. by another tool)
    reported = model_decoding_of(tmp_path)
    assert reported == generate_decoding(tmp_path, monkeypatch)
    assert reported == expected  # by hand: the saved settings, else the defaults (beams 4, max_position_embeddings)
