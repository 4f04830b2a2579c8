"""Every registered method on the device (issue 43): forward/backward against the fp32 model on the CPU and cached
against uncached generation, in fp32 and under bf16 autocast. The `cuda` cases are marked `gpu` (run by
`scripts/gpu_check.sh`); the `cpu` cases run the same checks here, except forward/backward in fp32 on the CPU, which
would compare the reference with itself."""

import pytest
import torch
from device_checks import METHODS, check_cached_generation, check_forward_backward, devices

DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]


# (device, dtype) pairs that differ from the reference (fp32 on the CPU)
AGAINST_THE_REFERENCE = [
    pytest.param(device.values[0], dtype.values[0], id=f"{device.id}-{dtype.id}", marks=device.marks)
    for device in devices()
    for dtype in DTYPES
    if (device.values[0], dtype.values[0]) != ("cpu", torch.float32)
]


@pytest.mark.parametrize(("device", "dtype"), AGAINST_THE_REFERENCE)
@pytest.mark.parametrize("name", METHODS)
def test_forward_and_backward_on_the_device_match_the_cpu(name, device, dtype):
    check_forward_backward(name, device, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("name", METHODS)
def test_cached_generation_equals_uncached_on_the_device(name, device, dtype):
    check_cached_generation(name, device, dtype)
