"""Training on the device (issue 43): one bf16 Trainer step for every registered method; padded batches at the
sequence lengths of the known cuDNN SDPA bugs on H100 (NaN `grad_q` when seq_len % 128 == 64, pytorch #196678; a
bf16 query with a misread mask, #191612) for our model and transformers' plain `MarianMTModel`. The `cuda` cases
are marked `gpu`; the `cpu` cases run the same checks here (one method, one length)."""

import pytest
from device_checks import METHODS, SDPA_LENGTHS, check_padded_training, check_trainer_step


@pytest.mark.gpu
@pytest.mark.parametrize("name", METHODS)
def test_one_bf16_trainer_step_on_cuda(name, tmp_path):
    check_trainer_step(name, "cuda", tmp_path)


def test_one_bf16_trainer_step_on_the_cpu(tmp_path):
    check_trainer_step("pascal", "cpu", tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("length", SDPA_LENGTHS)
@pytest.mark.parametrize("kind", ["marian", "ours", "pascal"])
def test_padded_bf16_training_has_finite_gradients_on_cuda(kind, length):
    check_padded_training(kind, "cuda", length)


@pytest.mark.parametrize("kind", ["marian", "ours", "pascal"])
def test_padded_bf16_training_has_finite_gradients_on_the_cpu(kind):
    check_padded_training(kind, "cpu", SDPA_LENGTHS[0], steps=2)
