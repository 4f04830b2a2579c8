"""The fused kernels of the method heads on CUDA (`syntax_attention_kernel`): compiled FlexAttention for PASCAL and
SDPA's memory-efficient kernel with the alignment bias as its mask, against the eager path, in fp32 (1e-4 absolute,
TF32 off) and under bf16 autocast (2e-2 on the loss, finite gradients), with gradients, padding and different
lengths, including lengths where cuDNN's SDPA has failed on H100 (seq_len % 128 == 64, pytorch #196678). The CPU
versions of these comparisons are in tests/models/test_fused_attention.py."""

import pytest
import torch
from bf16_gradients import assert_bf16_gradients_close
from kernel_calls import count_calls, count_compiled_calls
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt import flex as fused_kernels  # the opt-in FlexAttention: importing it switches it on

pytestmark = pytest.mark.gpu

# head_dim 16: FlexAttention's CUDA kernel needs at least 16
SMALL = {**TINY, "d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "max_position_embeddings": 256}
METHODS = {
    "pascal": dict(encoder_pascal_heads=[2, 1]),
    "pascal_dbsa": dict(encoder_pascal_heads=[2, 0], encoder_dbsa_heads=[1, 0]),
    "alignment_bias": dict(alignment_bias_layers=[0, 1]),
}


@pytest.fixture(autouse=True)
def no_tf32():
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def make_model(config, seed=0):
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**SMALL, **config)).cuda().train()
    with torch.no_grad():  # non-zero alignment biases (v starts at 0)
        for module in model.modules():
            if hasattr(module, "output_weight"):
                module.output_weight.normal_(0.0, 1.0)
    return model


def batch(source_lengths, target_lengths, seed=0):
    """Sources and targets of the given lengths, padded; parent positions inside each sentence; DBSA heads."""
    g = torch.Generator().manual_seed(seed)
    B, S, T = len(source_lengths), max(source_lengths), max(target_lengths)
    input_ids = torch.full((B, S), PAD)
    labels = torch.full((B, T), -100)
    parents = torch.zeros(B, S)
    heads = torch.full((B, S), -100)
    for b, (n, m) in enumerate(zip(source_lengths, target_lengths, strict=True)):
        input_ids[b, :n] = torch.randint(3, 99, (n,), generator=g)
        input_ids[b, n - 1] = EOS
        labels[b, :m] = torch.randint(3, 99, (m,), generator=g)
        labels[b, m - 1] = EOS
        parents[b, :n] = (torch.rand(n, generator=g) * (n - 1) * 2).round() / 2  # middle positions: x or x.5
        heads[b, :n] = torch.randint(0, n, (n,), generator=g)
    inputs = dict(input_ids=input_ids, attention_mask=(input_ids != PAD).long(), parent_positions=parents,
                  dbsa_heads=heads, labels=labels)  # fmt: skip
    return {k: v.cuda() for k, v in inputs.items()}


def step(model, inputs, kernel, bf16=False):
    """Loss, logits and every parameter's gradient of one training step with `kernel`."""
    model.config.syntax_attention_kernel = kernel
    model.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        out = model(**inputs)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), out.logits.detach().float(), grads


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("lengths", [([9, 5, 3], [8, 4, 2]), ([64, 40, 17], [64, 33, 5]), ([192, 100], [64, 70])])
def test_fused_training_step_equals_eager_fp32(method, lengths, monkeypatch):
    """`auto` on CUDA runs the fused kernel (checked by counting calls) and gives the eager path's loss, logits (on
    real target rows) and gradients in fp32."""
    calls = count_calls(monkeypatch)
    compiled = count_compiled_calls(monkeypatch)
    model = make_model(METHODS[method])
    inputs = batch(*lengths)
    eager_loss, eager_logits, eager_grads = step(model, inputs, "eager")
    assert calls == {"flex": 0, "bias": 0}
    loss, logits, grads = step(model, inputs, "auto")
    assert calls["flex" if method.startswith("pascal") else "bias"] > 0
    if method.startswith("pascal"):  # the compiled kernel ran, not the eager fallback
        assert compiled["calls"] == calls["flex"] and not fused_kernels._failed
    valid = inputs["labels"] != -100
    torch.testing.assert_close(loss, eager_loss, atol=1e-4, rtol=0)
    torch.testing.assert_close(logits[valid], eager_logits[valid], atol=1e-4, rtol=0)
    assert grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        assert torch.isfinite(grads[name]).all(), name
        torch.testing.assert_close(grads[name], grad, atol=1e-4, rtol=1e-3, msg=name)


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("lengths", [([9, 5, 3], [8, 4, 2]), ([192, 100], [64, 70])])
def test_fused_training_step_bf16_is_finite_and_close_to_eager(method, lengths):
    """Under bf16 autocast: the loss within 2e-2 of the eager path's, finite gradients within a tenth of the eager
    ones; key-projection biases (a zero gradient in every non-PASCAL head: bf16 rounding only) against the fp32
    gradient (`bf16_gradients.assert_bf16_gradients_close`)."""
    model = make_model(METHODS[method])
    inputs = batch(*lengths)
    _, _, reference = step(model, inputs, "eager")  # fp32, TF32 off
    eager_loss, _, eager_grads = step(model, inputs, "eager", bf16=True)
    loss, _, grads = step(model, inputs, "fused", bf16=True)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, eager_loss, atol=2e-2, rtol=2e-2)
    assert_bf16_gradients_close(grads, eager_grads, reference)


@pytest.mark.parametrize("method", ["pascal", "alignment_bias"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_fused_generation_equals_eager_generation_on_cuda(method, num_beams, monkeypatch):
    """`"fused"` runs the fused kernels in `generate` too (under `"auto"` PASCAL's no-grad calls take the eager path)."""
    calls = count_calls(monkeypatch)
    model = make_model(METHODS[method]).eval()
    inputs = {k: v for k, v in batch([9, 5, 3], [8, 4, 2]).items() if k in ("input_ids", "attention_mask",
                                                                              "parent_positions")}  # fmt: skip
    kw = dict(num_beams=num_beams, max_new_tokens=8, do_sample=False)
    runs = {}
    for kernel in ("eager", "fused"):
        model.config.syntax_attention_kernel = kernel
        runs[kernel] = model.generate(**inputs, **kw)
    assert calls["flex" if method == "pascal" else "bias"] > 0
    assert torch.equal(runs["fused"], runs["eager"])


def test_output_attentions_returns_every_head_under_auto():
    model = make_model(METHODS["pascal"]).eval()
    inputs = {k: v for k, v in batch([9, 5, 3], [8, 4, 2]).items() if k not in ("dbsa_heads",)}
    outs = {}
    for kernel in ("eager", "auto"):
        model.config.syntax_attention_kernel = kernel
        with torch.no_grad():
            outs[kernel] = model(**inputs, output_attentions=True)
    for a, b in zip(outs["eager"].encoder_attentions, outs["auto"].encoder_attentions, strict=True):
        assert a.shape[1] == SMALL["encoder_attention_heads"]
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("grad", [True, False])
def test_the_alignment_bias_runs_in_the_memory_efficient_sdpa_kernel(grad):
    """The profiler shows which SDPA kernel took the bias: the memory-efficient one (forward and, in training,
    backward), never cuDNN's or flash's, also with a source length that is not a multiple of 8 (the bias's rows are
    allocated aligned)."""
    from torch.profiler import ProfilerActivity, profile

    model = make_model(METHODS["alignment_bias"])
    inputs = batch([9, 5, 3], [8, 4, 2])  # S = 9
    model.config.syntax_attention_kernel = "auto"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with torch.set_grad_enabled(grad):
            out = model(**inputs)
            if grad:
                out.loss.backward()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    assert "aten::_efficient_attention_forward" in names, sorted(n for n in names if "attention" in n)
    assert not any("cudnn_attention" in n or "flash_attention" in n for n in names)
    if grad:
        assert "aten::_efficient_attention_backward" in names


def test_pascal_stays_compiled_through_changing_token_batches_on_cuda(monkeypatch):
    """The CPU test of tests/models/test_flex_compile.py with Inductor: 12 training batches of changing (B, S) with
    and without padding, no-grad evaluation between them: at most 2 graphs (Inductor may add a guard the CPU cannot
    show), no fallback warning, and every PASCAL call of a batch of several sentences ran compiled."""
    import warnings

    from torch._dynamo.utils import counters

    fused_kernels.reset()
    torch._dynamo.reset()
    counters.clear()
    compiled = count_compiled_calls(monkeypatch)
    model = make_model(METHODS["pascal"])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    shapes = [
        ([9, 5, 3], [8, 4, 2]),
        ([12, 12], [10, 11]),
        ([30, 28, 17, 5], [25, 20, 9, 4]),
        ([7, 7, 7], [6, 6, 6]),
        ([64, 40, 17], [64, 33, 5]),
        ([130, 100], [120, 90]),
        ([16] * 6, [15] * 6),
        ([200, 150], [190, 64]),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, lengths in enumerate(shapes + shapes[:4]):
            model.train()
            model(**batch(*lengths, seed=i)).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            model.eval()
            with torch.no_grad():
                model(**batch(*lengths, seed=i))
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert compiled["calls"] == 2 * 12 and not fused_kernels._failed
    assert counters["stats"]["unique_graphs"] <= 2
