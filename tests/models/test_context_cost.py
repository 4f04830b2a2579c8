"""The FLOP count of the document context (issue 27, `hf_syntax_mt.methods.context_cost`) against
`torch.utils.flop_counter.FlopCounterMode` on tiny models: a training step and greedy decoding, for the sentence-level
Marian model and for the context model, with and without gating and with context in some layers only."""

import pytest
import torch
from tiny_config import TINY
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers import MarianConfig, MarianMTModel

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.methods.context_cost import ContextFlops, context_flops

B, S, T, M = 2, 7, 5, 11  # no padding: every token real


def counted(fn) -> int:
    # the math kernel: attention as batched matmuls, which the counter sees (it has no formula for the CPU kernels)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def inputs(generator):
    ids = lambda n: torch.randint(3, TINY["vocab_size"], (B, n), generator=generator)  # noqa: E731
    return ids(S), ids(T), ids(M)


def train_flops(model, **batch) -> int:
    model.train()

    def step():
        model(**batch).loss.backward()

    return counted(step)


def decode_flops(model, **batch) -> int:
    model.eval()
    with torch.no_grad():
        return counted(
            lambda: model.generate(**batch, max_new_tokens=T, min_new_tokens=T, num_beams=1, do_sample=False)
        )


def encoder_flops(model, **batch) -> int:
    model.eval()
    with torch.no_grad():
        return counted(lambda: model.get_encoder()(**batch))


@pytest.mark.parametrize(
    "options",
    [
        {},  # the paper's setting: N_c = 1, every layer, gating
        {"context_gating": False, "context_encoder_layers": 2},
        {"encoder_context_layers": [], "decoder_context_layers": [1]},
    ],
)
def test_flops_match_the_flop_counter(options):
    config = SyntaxMTConfig(**{**TINY, "context_sentences": 2, "max_position_embeddings": 64, **options})
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(config)
    vanilla = MarianMTModel(MarianConfig(**TINY))
    src, labels, context = inputs(torch.Generator().manual_seed(0))
    plain = {"input_ids": src}
    with_context = {**plain, "context_input_ids": context, "context_attention_mask": torch.ones_like(context)}
    expected = context_flops(config, S, T, M, batch=B)

    assert train_flops(vanilla, **plain, labels=labels) == expected.train_sentence
    assert train_flops(model, **with_context, labels=labels) == expected.train_sentence + expected.train_context
    assert decode_flops(vanilla, **plain) == expected.decode_sentence
    assert decode_flops(model, **with_context) == expected.decode_sentence + expected.decode_context
    # decoding's encoder pass alone (the phases the benchmark times apart)
    assert encoder_flops(vanilla, **plain) == expected.encode_sentence
    assert encoder_flops(model, **with_context) == expected.encode_sentence + expected.encode_context
    for bound in (expected.train_bound, expected.decode_bound, expected.encoder_bound, expected.step_bound):
        assert 0 < bound < 1


def test_phase_bound_weighs_each_phase_by_its_own_speed():
    """Hand-made phase FLOPs: encoder pass 10 + 10 (context), steps 8 + 2. With the sentence model's encoder pass
    taking 1 s and its steps 3 s, at their own speeds the context model needs 1 * 20/10 + 3 * 10/8 = 5.75 s."""
    flops = ContextFlops(train_sentence=1, train_context=1, decode_sentence=18, decode_context=12,
                         encode_sentence=10, encode_context=10, parts={})  # fmt: skip
    assert flops.encoder_bound == 0.5 and flops.step_bound == 0.8
    assert flops.phase_bound(1.0, 3.0) == pytest.approx(4.0 / 5.75)
    assert flops.decode_bound == pytest.approx(18 / 30)  # the FLOP-weighted bound: looser here


def test_hand_count_of_the_added_parts():
    """D = 16, F = 32, 2 + 2 layers, N_c = 1, gating, one sentence with S = 3, T = 2, M = 4, written out by hand."""
    config = SyntaxMTConfig(**{**TINY, "context_sentences": 1})
    parts = context_flops(config, 3, 2, 4).parts
    assert parts["context_encoder"] == 8 * 4 * 16 * 16 + 4 * 4 * 4 * 16 + 4 * 4 * 16 * 32  # one encoder layer
    assert parts["context_key_values"] == 4 * (2 * 2 * 4 * 16 * 16)  # W_K, W_V of 4 sublayers over 4 tokens
    assert parts["encoder_context_attention"] == 2 * (4 * 3 * 256 + 4 * 3 * 4 * 16 + 4 * 3 * 256)
    assert parts["decoder_context_attention"] == 2 * (4 * 2 * 256 + 4 * 2 * 4 * 16 + 4 * 2 * 256)
