"""Translating on the device (issue 43): the pipeline on the device it was given; `model.translate_document` leaves
the model where the caller put it (a CPU model stays on the CPU on a machine with a GPU: the issue's bug); the CLI's
`translate --device ... [--bf16]`. The `cuda` cases are marked `gpu`; the `cpu` cases run the same checks here."""

import pytest
from device_checks import (
    check_cli_translate,
    check_pipeline_on,
    check_translate_document_leaves_the_model,
    devices,
    save_document_model,
)


@pytest.fixture(scope="module")
def document_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpu-doc")
    save_document_model(directory, context_sentences=1)
    return directory


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpu-sent")
    save_document_model(directory, context_sentences=0)
    return directory


@pytest.mark.parametrize("model", ["document_model", "sentence_model"])
@pytest.mark.parametrize("device", devices())
def test_the_pipeline_runs_on_the_device_it_was_given(device, model, request):
    check_pipeline_on(device, request.getfixturevalue(model))


@pytest.mark.parametrize("device", devices())
def test_translate_document_leaves_the_model_on_its_device(device, document_model):
    check_translate_document_leaves_the_model(device, document_model)


@pytest.mark.gpu
def test_translate_document_leaves_a_cpu_model_on_the_cpu_where_cuda_is_visible(document_model):
    """The issue's bug: with CUDA visible, a pipeline built without a device picks `cuda:0` and moved the caller's
    CPU model there; the caller's CPU tensors then failed in the embedding."""
    check_translate_document_leaves_the_model("cpu", document_model)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("device", devices())
def test_cli_translate_on_the_device(device, bf16, sentence_model, tmp_path, capsys):
    check_cli_translate(device, bf16, sentence_model, tmp_path, capsys)
