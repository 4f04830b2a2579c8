"""The document model (issue 48, item 6) in a compiled and in a checkpointed training run: `torch.compile(...,
fullgraph=True)` traces its forward and backward without a break (no Python branch over the context mask's values,
which was also a host sync per forward), and reentrant gradient checkpointing gives the gradients of the model
without it (the context keys and values, read by every layer, reached the checkpoints as keyword arguments and
were walked twice)."""

import pytest
import torch
from test_document_context import batch, make_model

from hf_syntax_mt.methods import document_context


def loss_and_grads(model, forward=None, **extra):
    input_ids, attention_mask, context, context_mask, labels = batch()
    model.zero_grad(set_to_none=True)
    loss = (model if forward is None else forward)(input_ids=input_ids, attention_mask=attention_mask, context_input_ids=context,
                              context_attention_mask=context_mask, labels=labels, **extra).loss  # fmt: skip
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same(reference, other, atol=1e-5):
    (loss, grads), (other_loss, other_grads) = reference, other
    torch.testing.assert_close(other_loss, loss, atol=atol, rtol=1e-5)
    assert other_grads.keys() == grads.keys()
    assert any(name.startswith("model.encoder.context_encoder") for name in grads)  # the context path is trained
    for name, grad in grads.items():
        torch.testing.assert_close(other_grads[name], grad, atol=atol, rtol=1e-4, msg=name)


def test_the_branch_free_path_equals_the_cpu_shortcuts(monkeypatch):
    """On CUDA and under compile the context path takes no branch over the mask's values: every token projected, both
    masks tensors. Same loss and gradients as the eager CPU path's shortcuts (real tokens projected only)."""
    model = make_model().train()
    reference = loss_and_grads(model)
    monkeypatch.setattr(document_context, "reads_values", lambda tensor: False)
    masks = document_context.context_masks(batch()[3])
    assert masks.attend is not None and masks.rows is not None  # tensors, not a value-dependent None
    assert_same(reference, loss_and_grads(model))


def test_fullgraph_compile_traces_the_document_model():
    """`fullgraph=True` raises on any graph break; `aot_eager` also traces the backward. Same loss and gradients."""
    model = make_model().train()
    reference = loss_and_grads(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    assert_same(reference, loss_and_grads(model, compiled))


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_training_has_the_gradients_of_the_plain_model(reentrant):
    model = make_model().train()
    reference = loss_and_grads(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    assert all(layer.gradient_checkpointing for layer in model.model.encoder.layers)
    assert_same(reference, loss_and_grads(model, use_cache=False))
