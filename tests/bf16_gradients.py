"""How the fused kernels' bf16 gradients are compared with the eager path's (tests/gpu/test_fused_gpu.py; the key-bias
rule and the math behind it are checked on the CPU in tests/models/test_fused_attention.py)."""

import torch

#: the key projections' biases: compared with the fp32 gradient, not with the other bf16 path's (see below)
KEY_BIAS = "k_proj.bias"


def assert_key_bias_gradients_close(grads: dict, eager_grads: dict, reference: dict) -> None:
    """The key projections' bias gradients of the fused path (bf16) against the fp32 eager gradient `reference`.

    Such a gradient is zero in every head whose scores the bias only shifts (it adds q_t . b_k to every score of row
    t, and softmax(s + c) = softmax(s)), additive masks and biases included, and small in a PASCAL head (the shift is
    multiplied by the weight d_tj, Eq. 2). In bf16 both paths' values there are rounding noise (~1e-3 of the largest
    gradient entry, CPU and H200 alike), so a ratio of the two paths' values says nothing. Each path is compared with
    the fp32 gradient instead: the fused path's error must be at most twice the eager path's plus 1e-3 of the largest
    fp32 gradient entry (a PASCAL head's key-bias gradient is ~2e-2 of it on the tests' models, so a kernel that lost
    it fails)."""
    floor = 1e-3 * max(g.abs().max() for g in reference.values())
    names = [name for name in reference if name.endswith(KEY_BIAS)]
    assert names, "no key-projection bias among the gradients"
    for name in names:
        fused_error = (grads[name] - reference[name]).abs().max()
        eager_error = (eager_grads[name] - reference[name]).abs().max()
        assert fused_error <= 2 * eager_error + floor, (name, fused_error, eager_error, floor)


def assert_bf16_gradients_close(grads: dict, eager_grads: dict, reference: dict) -> None:
    """`grads` (fused, bf16 autocast) against `eager_grads` (eager, bf16 autocast): the same parameters, every gradient
    finite and within a tenth of the eager gradient's largest entry (at least 1e-3), except the key projections'
    biases, compared with `reference` (fp32 eager) by `assert_key_bias_gradients_close`."""
    assert grads.keys() == eager_grads.keys() == reference.keys()
    for name, grad in grads.items():
        assert torch.isfinite(grad).all(), name
        if not name.endswith(KEY_BIAS):
            scale = eager_grads[name].abs().max().clamp_min(1e-3)
            assert (grad - eager_grads[name]).abs().max() <= 0.1 * scale, name
    assert_key_bias_gradients_close(grads, eager_grads, reference)
