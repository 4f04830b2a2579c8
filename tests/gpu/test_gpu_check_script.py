"""`scripts/gpu_check.sh`: bad options are refused before anything runs; end to end (slow: three Python starts), on
a machine without CUDA the GPU parts are reported as skipped with the reason, the check passes, and the summary's
counts are pytest's for the tests it was given."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def gpu_check(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--python", sys.executable, "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [(["--parts", "fast,nonsense"], "unknown part 'nonsense'"), (["--wheels", "/no/such/folder"], "no such folder"),
     (["--frobnicate"], "unknown option --frobnicate")],
)  # fmt: skip
def test_bad_options_are_refused_before_anything_runs(tmp_path, args, message):
    run = gpu_check(tmp_path / "out", *args)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "out" / "gpu_check.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the check runs the GPU parts (the check itself)")
def test_without_cuda_the_gpu_parts_are_skipped_with_the_reason(tmp_path):
    fast = ["tests/gpu/test_bench_gpu.py::test_tiny_results_are_refused_under_benchmarks_results",
            "tests/gpu/test_bench_gpu.py::test_every_registered_method_has_a_setting"]  # fmt: skip
    gpu = "tests/gpu/test_translation_on_device.py::test_translate_document_leaves_a_cpu_model_on_the_cpu_where_cuda_is_visible"
    run = gpu_check(tmp_path, "--parts", "fast,gpu,bench", "--fast-args", " ".join(fast), "--gpu-args", gpu)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary["ok"] and list(summary["parts"]) == ["fast", "gpu", "bench"]
    assert summary["versions"]["torch"] == torch.__version__ and "CPU only" in summary["device"]
    fast_part, gpu_part, bench = (summary["parts"][p] for p in ("fast", "gpu", "bench"))
    assert fast_part["status"] == "passed" and fast_part["tests"]["passed"] == len(fast)
    assert gpu_part["status"] == "skipped" and gpu_part["tests"]["skipped"] == 1 and gpu_part["tests"]["passed"] == 0
    assert any("needs a CUDA device" in reason for reason in gpu_part["tests"]["skip_reasons"])
    assert bench["status"] == "skipped" and "CUDA" in bench["note"]
    assert "# GPU check: OK" in run.stdout and (tmp_path / "fast.log").exists()
