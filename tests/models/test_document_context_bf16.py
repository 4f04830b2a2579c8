"""Document context under CPU bf16 autocast (the Trainer's `--bf16`, issue 27's recipe): a batch whose contexts are
partly padding (the key/value projection of real context tokens only) trains and scores like fp32."""

import pytest
import torch
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration


def test_padded_context_trains_under_bf16_autocast_close_to_fp32():
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, "context_sentences": 2})).train()
    model.config.dropout = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    input_ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD], [13, 14, EOS, PAD, PAD, PAD]])
    # contexts of 5, 0 and 3 real tokens: the padded rows take the projection of real tokens only
    context = torch.tensor([[20, 21, EOS, 22, EOS], [PAD] * 5, [30, 31, EOS, PAD, PAD]])
    inputs = dict(input_ids=input_ids, attention_mask=(input_ids != PAD).long(), context_input_ids=context,
                  context_attention_mask=torch.tensor([[1, 1, 1, 1, 1], [0] * 5, [1, 1, 1, 0, 0]]),
                  labels=torch.tensor([[40, 41, 42, EOS], [43, 44, EOS, -100], [45, EOS, -100, -100]]))  # fmt: skip
    fp32 = model(**inputs).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = model(**inputs).loss
    bf16.backward()
    assert torch.isfinite(bf16) and bf16.item() == pytest.approx(fp32.item(), rel=0.02)
    grad = model.model.encoder.context_encoder.key_value_proj.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
