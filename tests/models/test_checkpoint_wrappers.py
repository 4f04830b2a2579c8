"""Issue 57, item 9: the document model's reentrant gradient checkpointing gives the plain model's gradients whatever
wraps the function each layer hands to the checkpoint (a test's mock, a profiler's wrapper): before, only
transformers' own `functools.partial` had its keyword tensors lifted, and any wrapper brought back "Trying to backward
through the graph a second time". The second test is transformers' `test_training_gradient_checkpointing_use_reentrant_true`
(`ModelTesterMixin.check_training_gradient_checkpointing`) for our two model classes, the layer function counted
through a mock as that test counts the layer's calls."""

import functools
from unittest import mock

import pytest
import torch
from test_document_context import batch, make_model
from test_document_context_compiled import assert_same, loss_and_grads
from transformers.modeling_layers import GradientCheckpointingLayer

torch.set_num_threads(1)


def wrap_layer_functions(model, wrapper):
    """Every checkpointing layer's checkpoint function, called with ``wrapper(function)`` instead of the function."""
    for layer in model.modules():
        if isinstance(layer, GradientCheckpointingLayer) and layer.gradient_checkpointing:
            checkpoint = layer._gradient_checkpointing_func
            layer._gradient_checkpointing_func = lambda f, *a, _c=checkpoint, **k: _c(wrapper(f), *a, **k)


WRAPPERS = {
    "lambda": lambda f: lambda *a, **k: f(*a, **k),
    "functools.wraps": lambda f: functools.wraps(f.func)(lambda *a, **k: f(*a, **k)),
    "mock": lambda f: mock.MagicMock(wraps=f),
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_reentrant_checkpointing_through_any_wrapper_has_the_plain_gradients(wrapper):
    model = make_model().train()
    reference = loss_and_grads(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    wrap_layer_functions(model, WRAPPERS[wrapper])
    assert_same(reference, loss_and_grads(model, use_cache=False))


def test_transformers_reentrant_checkpointing_test_with_our_classes():
    """ModelTesterMixin.check_training_gradient_checkpointing(use_reentrant=True): the parameters with non-zero
    gradients are the same with checkpointing, every trainable parameter has a gradient, and each layer runs more
    than once (the recomputation)."""
    model = make_model().train()
    for p in model.parameters():
        p.requires_grad_(True)
    inputs = dict(zip(("input_ids", "attention_mask", "context_input_ids", "context_attention_mask", "labels"),
                      batch(), strict=True))  # fmt: skip
    torch.manual_seed(42)
    model(**inputs).loss.backward()
    expected = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    non_zero = {n for n, p in expected if p.grad.abs().sum() > 0}
    model.zero_grad()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    calls = mock.MagicMock()

    def counted(f):
        calls()
        return mock.MagicMock(wraps=f, side_effect=lambda *a, **k: (calls(), f(*a, **k))[1])

    wrap_layer_functions(model, counted)
    torch.manual_seed(42)
    model(**inputs, use_cache=False).loss.backward()
    layers = sum(1 for m in model.modules() if isinstance(m, GradientCheckpointingLayer))
    assert calls.call_count > layers  # each layer's function ran again in the backward pass
    assert {n for n, p in expected if p.grad.abs().sum() > 0} == non_zero
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
