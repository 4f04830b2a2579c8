"""The machine a study unit ran on (issue 66), and whether two units ran on one machine kind.

A device change alone moves a model's BLEU (round three's units, rerun on another CPU kind, left 7-8% of lines
identical and moved a model by up to 0.44 BLEU), so two units are a fair pair only on one machine *kind*: the same
device, CPU model, instruction sets that select kernels, torch's CPU dispatch, thread count and torch version.
`machine_record` is what a unit file stores under ``"machine"``; `same_kind` compares two unit records; `Pairing`
applies the rule in an aggregate (pairs of different kinds left out unless mixed machines are allowed) and counts
what it saw, for the results to say.

Units written before the record (rounds two and three) carry only ``device``, ``cpu_native_bf16`` and ``threads``:
where those differ the kinds differ; where they agree the kind is unknown, and said to be.

Like `benchmarks.common`, this module imports nothing else of ``benchmarks/`` and imports torch only inside functions.
"""

from __future__ import annotations

from pathlib import Path

#: the CPU flags (Linux /proc/cpuinfo names) that change which kernels torch and oneDNN run, hence the numbers
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
#: the fields of a machine record that make its kind (the rest, e.g. the GPU's name, are already in ``device``)
KIND_FIELDS = ("device", "cpu", "flags", "torch_cpu_capability", "threads", "torch")
#: `same_kind`'s answer in a word
RELATION = {True: "same", None: "unknown", False: "different"}


def cpu_info(path: str | Path = "/proc/cpuinfo") -> tuple[str | None, list[str]]:
    """The CPU's model name and its `KERNEL_FLAGS` (in that order) from Linux's cpuinfo; (None, []) without one."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None, []
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model is None:
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return model, [f for f in KERNEL_FLAGS if f in flags]


def machine_record(device: str = "cpu", cpuinfo: str | Path = "/proc/cpuinfo") -> dict:
    """What a unit file records of the machine that trained and translated it: ``{"device", "cpu", "flags",
    "torch_cpu_capability", "threads", "torch"}`` (`KIND_FIELDS`); ``device`` is "cpu" or "cuda (<GPU name>)".

    ``torch_cpu_capability`` is torch's CPU dispatch (`torch.backends.cpu.get_cpu_capability`: "AVX2", "AVX512", ...);
    ``threads`` the intra-op threads (`torch.get_num_threads`) at the time of the call."""
    import torch

    cpu, flags = cpu_info(cpuinfo)
    if device == "cuda":
        device = f"cuda ({torch.cuda.get_device_name()})"
    return {"device": device, "cpu": cpu, "flags": flags,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "torch": torch.__version__}  # fmt: skip


def kind(record: dict) -> tuple:
    """The machine kind of a machine record: its `KIND_FIELDS` values (flags as a tuple)."""
    return tuple(tuple(record.get(k) or ()) if k == "flags" else record.get(k) for k in KIND_FIELDS)


def describe(unit: dict) -> str:
    """A unit's machine in a few words: ``AMD EPYC [avx2,avx512f,avx512_bf16] AVX512, 1 thread(s), torch 2.13.0``, or
    what an older unit records (``not recorded (native bf16: True, 1 thread(s))``)."""
    m = unit.get("machine")
    if not m:
        return f"not recorded (native bf16: {unit.get('cpu_native_bf16', '?')}, {unit.get('threads', '?')} thread(s))"
    where = m["device"] if m.get("device", "cpu") != "cpu" else m.get("cpu") or "cpu"
    return (f"{where} [{','.join(m.get('flags') or [])}] {m.get('torch_cpu_capability')}, {m.get('threads')} "
            f"thread(s), torch {m.get('torch')}")  # fmt: skip


def _partial(unit: dict) -> dict:
    """What every unit records of its machine, old or new: device, native bf16 and threads (None: not recorded)."""
    m = unit.get("machine")
    if m:
        device = "cpu" if m.get("device") == "cpu" else "cuda"
        flags = m.get("flags") or []
        return {"device": device, "native bf16": "avx512_bf16" in flags or "amx_bf16" in flags,
                "threads": m.get("threads")}  # fmt: skip
    device = unit.get("device")
    return {"device": None if device is None else ("cpu" if device == "cpu" else "cuda"),
            "native bf16": unit.get("cpu_native_bf16"), "threads": unit.get("threads")}  # fmt: skip


def same_kind(a: dict, b: dict) -> tuple[bool | None, str]:
    """Whether two unit records ran on one machine kind: (True, ...) both record it and it is the same; (False,
    what differs); (None, why unknown) when one or both predate the record and what both do record agrees."""
    if a.get("machine") and b.get("machine"):
        ka, kb = kind(a["machine"]), kind(b["machine"])
        if ka == kb:
            return True, "one machine kind"
        differ = [f"{f} {x!r} vs {y!r}" for f, x, y in zip(KIND_FIELDS, ka, kb, strict=True) if x != y]
        return False, "different machine kinds: " + "; ".join(differ)
    pa, pb = _partial(a), _partial(b)
    differ = [f"{f} {pa[f]!r} vs {pb[f]!r}" for f in pa if None not in (pa[f], pb[f]) and pa[f] != pb[f]]
    if differ:
        return False, "different machine kinds: " + "; ".join(differ)
    missing = [u.get("unit", "?") for u in (a, b) if not u.get("machine")]
    return (
        None,
        f"machine kind unknown ({', '.join(missing)} record(s) no machine; device, native bf16 and threads agree)",
    )


class Pairing:
    """The machine rule of an aggregate: `ok` says whether two units may be compared (different kinds: no, unless
    ``mixed``) and counts each pair it is asked about once; `lines` says what it saw."""

    def __init__(self, mixed: bool = False):
        self.mixed = mixed
        self.seen: dict[tuple[str, str], tuple[bool | None, str]] = {}

    def ok(self, a: dict, b: dict) -> bool:
        first, second = sorted((a, b), key=lambda u: u.get("unit", "?"))  # a pair's reason reads in name order
        same, why = same_kind(first, second)
        self.seen.setdefault((first.get("unit", "?"), second.get("unit", "?")), (same, why))
        return same is not False or self.mixed

    def counts(self) -> dict[str, int]:
        values = [same for same, _ in self.seen.values()]
        return {"same": values.count(True), "unknown": values.count(None), "different": values.count(False)}

    def lines(self) -> list[str]:
        """One paragraph for the results: the rule, how many pairs of each relation, and every different pair."""
        c = self.counts()
        if self.mixed:
            rule = ("Machine kinds: **mixed machines allowed** (`--mixed-machines`): pairs of different kinds are "
                    "compared too")  # fmt: skip
        else:
            rule = ("Machine kinds: only units of one machine kind are compared (pairs of different kinds are left out; "
                    "`--mixed-machines` compares them)")  # fmt: skip
        out = [f"{rule}. Of {len(self.seen)} pairs looked at: {c['same']} on one recorded kind, {c['unknown']} of "
               f"unknown kind (a unit without a machine record, whose device, native bf16 and threads agree), "
               f"{c['different']} on different kinds" + (" (compared)" if self.mixed else " (left out)") + "."]  # fmt: skip
        different = sorted((pair, why) for pair, (same, why) in self.seen.items() if same is False)
        out += [f"- {a} / {b}: {why}" for (a, b), why in different]
        return out
