"""`bench_gpu.py`'s timing: a synchronised timer with the call's own peak memory, the run's time budget, callables
timed interleaved with the order rotating each round, and the medians with their ratio to `MarianMTModel`.

Standard library only (torch is imported by `Timer`), so that the bench runs on a bare GPU machine.
"""

from __future__ import annotations

import statistics
import time


class Timer:
    """Wall time of a callable on `device` (CUDA synchronised), and its peak memory where CUDA tells it."""

    def __init__(self, device: str):
        import torch

        self.torch, self.cuda = torch, device.startswith("cuda")

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def __call__(self, fn, repeat: int = 1) -> float:
        self.sync()
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        self.sync()
        return (time.perf_counter() - start) / repeat

    def peak(self, fn) -> int | None:
        """The call's own peak: the most allocated during it minus what was allocated before (the resident models,
        their optimiser states and gradients are not the step's)."""
        if not self.cuda:
            return None
        self.sync()
        self.torch.cuda.reset_peak_memory_stats()
        before = self.torch.cuda.memory_allocated()
        fn()
        self.sync()
        return int(self.torch.cuda.max_memory_allocated() - before)


class Budget:
    """`--budget`: the seconds the whole run may take, from `started`. `allows(seconds)`: whether work of that length
    still ends `MARGIN` seconds before the end (writing the JSON and exiting fit in it). What a phase left out for
    time is listed in `cut` (the run is then not complete)."""

    MARGIN = 10.0

    def __init__(self, seconds: float | None, started: float):
        self.seconds, self.started, self.cut = seconds, started, []

    def spent(self) -> float:
        return time.perf_counter() - self.started

    def allows(self, seconds: float) -> bool:
        return self.seconds is None or self.spent() + seconds <= self.seconds - min(self.MARGIN, self.seconds / 10)


def interleaved(fns: dict, rounds: int, repeat: int, timer: Timer, budget: Budget | None = None,
                what: str = "") -> dict[str, list[float]]:  # fmt: skip
    """Seconds per call of every callable, `rounds` rounds of `repeat` calls; the order rotates each round. With a
    `budget`, a round after the first starts only if one more (as long as the last) fits; a cut is noted there."""
    names = list(fns)
    start = time.perf_counter()
    for name in names:  # warm-up (kernels chosen, caches and optimizer state made)
        fns[name]()
    last = time.perf_counter() - start  # a round's length, for the budget: the warm-up's at first
    times = {name: [] for name in names}
    for r in range(rounds):
        if r and budget is not None and not budget.allows(last):
            budget.cut.append(f"{what}: {r} of {rounds} rounds (budget {budget.seconds:.0f} s)")
            break
        start = time.perf_counter()
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            times[name].append(timer(fns[name], repeat))
        last = time.perf_counter() - start
    return times


def summarise(times: dict[str, list[float]], units: float, unit: str) -> dict:
    """Median seconds per call, `units`/s, and the ratio to Marian: median(Marian) / median(model), i.e. how fast
    the model runs as a fraction of `MarianMTModel` (1.0 = as fast; the throughput ratio)."""
    med = {name: statistics.median(t) for name, t in times.items()}
    return {
        name: {"seconds": t, "median_seconds": med[name], f"{unit}_per_second": units / med[name],
               "ratio_to_marian": med["marian"] / med[name]}
        for name, t in times.items()
    }  # fmt: skip
