"""`benchmarks/machine.py`: what a unit file records of its machine, read from a hand-written cpuinfo and torch, and
whether two units ran on one machine kind (recorded, older units' partial record, unknown), and the aggregate's rule."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks import machine  # noqa: E402

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni
processor\t: 1
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni
"""


def test_the_record_names_the_cpu_its_kernel_flags_and_torchs_dispatch(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    assert machine.cpu_info(info) == ("AMD EPYC 9R14 96-Core Processor", ["avx2", "avx512f", "avx512_bf16"])
    record = machine.machine_record("cpu", info)
    assert record == {"device": "cpu", "cpu": "AMD EPYC 9R14 96-Core Processor",
                      "flags": ["avx2", "avx512f", "avx512_bf16"],
                      "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                      "threads": torch.get_num_threads(), "torch": torch.__version__}  # fmt: skip
    assert machine.cpu_info(tmp_path / "missing") == (None, [])


def _unit(name: str, **machine_fields) -> dict:
    base = {"device": "cpu", "cpu": "AMD EPYC", "flags": ["avx2"], "torch_cpu_capability": "AVX2", "threads": 1,
            "torch": "2.13.0+cpu"}  # fmt: skip
    return {"unit": name, "device": "cpu", "machine": {**base, **machine_fields}}


def test_units_share_a_kind_only_when_every_kind_field_agrees():
    a = _unit("a")
    assert machine.same_kind(a, _unit("b")) == (True, "one machine kind")
    same, why = machine.same_kind(
        a, _unit("b", flags=["avx2", "avx512f", "avx512_bf16"], torch_cpu_capability="AVX512")
    )
    assert same is False and "flags" in why and "torch_cpu_capability 'AVX2' vs 'AVX512'" in why
    assert machine.same_kind(a, _unit("b", threads=2))[0] is False
    assert machine.same_kind(a, _unit("b", torch="2.12.0"))[0] is False


def test_units_without_a_record_are_unknown_unless_what_they_record_differs():
    old_avx2 = {"unit": "old0", "device": "cpu", "cpu_native_bf16": False, "threads": 1}
    old_bf16 = {"unit": "old1", "device": "cpu", "cpu_native_bf16": True, "threads": 1}
    same, why = machine.same_kind(old_bf16, {**old_bf16, "unit": "old2"})
    assert same is None and "unknown" in why and "old1, old2" in why
    same, why = machine.same_kind(old_avx2, old_bf16)
    assert same is False and "native bf16 False vs True" in why
    assert machine.same_kind(old_bf16, {**old_bf16, "threads": 2})[0] is False
    # a recorded unit against an older one: only what both say is compared
    assert machine.same_kind(_unit("new"), old_avx2)[0] is None  # AVX2, 1 thread, no native bf16: agrees
    assert machine.same_kind(_unit("new"), old_bf16)[0] is False
    assert "not recorded (native bf16: False" in machine.describe(old_avx2)
    assert machine.describe(_unit("a")) == "AMD EPYC [avx2] AVX2, 1 thread(s), torch 2.13.0+cpu"


def test_the_pairing_leaves_out_different_kinds_unless_mixed_and_counts_each_pair_once():
    a, b, c = _unit("a"), _unit("b"), _unit("c", threads=4)
    old = {"unit": "old", "device": "cpu", "cpu_native_bf16": False, "threads": 1}
    strict = machine.Pairing()
    assert strict.ok(a, b) and not strict.ok(a, c) and not strict.ok(c, a) and strict.ok(a, old)
    assert strict.counts() == {"same": 1, "unknown": 1, "different": 1}
    text = "\n".join(strict.lines())
    assert (
        "Of 3 pairs looked at: 1 on one recorded kind, 1 of unknown kind" in text
        and "1 on different kinds (left out)" in text
    )
    assert "- a / c: different machine kinds: threads 1 vs 4" in text
    mixed = machine.Pairing(mixed=True)
    assert mixed.ok(a, c) and "mixed machines allowed" in mixed.lines()[0] and "(compared)" in mixed.lines()[0]
