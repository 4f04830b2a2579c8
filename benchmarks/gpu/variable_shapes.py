"""`bench_gpu.py`'s variable-shape phase (issue 48): training on token batches whose shapes change every step, as in
a real run, with evaluation steps between.

The pairs' lengths are Multi30k's (`multi30k_lengths.json`), cut into batches as the train script's `--max_tokens`
batches are (`hf_syntax_mt.training.batching.TokenBatchSampler`: length-sorted, at most `max_tokens` padded tokens,
shuffled), so every step has its own (B, S, T). Each model runs the same plan twice: the first pass pays for
whatever the model compiles (the fused kernels), the second is the steady state the ratios come from. Per model:
training tokens/s and its ratio to `MarianMTModel`, the evaluation time, the compiled graphs and recompiles counted
from dynamo's own counters (reset per model), every warning (a fallback to an uncompiled or eager path warns), and
the peak memory of a step as its own increase over what was allocated before it (CUDA only).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import time
import warnings
from pathlib import Path

LENGTHS = Path(__file__).with_name("multi30k_lengths.json")
#: the models of this phase (the issue's): vanilla Marian, ours, PASCAL, DBSA + sync, alignment biases
MODELS = ("marian", "none", "pascal", "synchronous", "alignment_bias")
FALLBACK = re.compile(r"fall(s|ing)? ?back|recompile_limit|cache_size_limit|uncompiled|eager path", re.I)


def token_batch_sampler():
    """`TokenBatchSampler` from its file: `hf_syntax_mt.training`'s `__init__` imports the Trainer and `datasets`,
    which this benchmark does without."""
    import hf_syntax_mt

    path = Path(hf_syntax_mt.__file__).parent / "training" / "batching.py"
    spec = importlib.util.spec_from_file_location("hf_syntax_mt.training.batching", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TokenBatchSampler


def plan(max_tokens: int, train_steps: int, eval_every: int, max_length: int, seed: int = 0) -> list[tuple]:
    """`[(kind, source lengths, target lengths)]`: `train_steps` training batches with an evaluation batch after
    every `eval_every`-th, from Multi30k's pairs (longer ones cut to `max_length`) bucketed by `max_tokens`."""
    table = json.loads(LENGTHS.read_text(encoding="utf-8"))["source_target_count"]
    pairs = [(min(s, max_length), min(t, max_length)) for s, t, n in table for _ in range(n)]
    sampler = token_batch_sampler()([max(s, t) for s, t in pairs], max_tokens=max_tokens, shuffle=True, seed=seed)
    batches = iter(sampler.batches())
    steps = []
    for step in range(1, train_steps + 1):
        for kind in ("train",) + (("eval",) if step % eval_every == 0 else ()):
            rows = next(batches)
            steps.append((kind, [pairs[i][0] for i in rows], [pairs[i][1] for i in rows]))
    return steps


class CompileWatch:
    """Counts what dynamo compiles inside the block (its caches reset first, so per model) and keeps every warning
    and every dynamo log warning (a recompile limit, a fallback)."""

    def __enter__(self):
        import torch._dynamo
        from torch._dynamo.utils import counters, get_compilation_metrics

        torch._dynamo.reset()
        counters.clear()
        self.counters, self.metrics = counters, get_compilation_metrics
        self.start = len(get_compilation_metrics())
        self.catcher = warnings.catch_warnings(record=True)
        self.caught = self.catcher.__enter__()
        warnings.simplefilter("always")
        self.logged = []
        watch = self

        class Keep(logging.Handler):
            def emit(self, record):
                watch.logged.append(f"{record.name}: {record.getMessage()}")

        self.handler = Keep(level=logging.WARNING)
        self.loggers = [logging.getLogger(name) for name in ("torch._dynamo", "torch._inductor", "hf_syntax_mt")]
        for logger in self.loggers:
            logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        for logger in self.loggers:
            logger.removeHandler(self.handler)
        self.catcher.__exit__(*exc)
        return False

    def report(self) -> dict:
        metrics = list(self.metrics())[self.start :]
        reasons = [m.recompile_reason for m in metrics if getattr(m, "recompile_reason", None)]
        messages = list(dict.fromkeys([f"{w.category.__name__}: {w.message}"[:300] for w in self.caught] +
                                      [m[:300] for m in self.logged]))  # fmt: skip
        return {
            "graphs": int(self.counters["stats"]["unique_graphs"]),
            "compiled_frames": int(self.counters["frames"]["total"]),
            "recompiles": len(reasons), "recompile_reasons": [r.splitlines()[0][:200] for r in reasons[:3]],
            "fallback": any(FALLBACK.search(m) for m in messages), "warnings": messages[:8],
        }  # fmt: skip


def run_phase(
    models: dict, args, size: dict, timer, autocast, make_batch, inputs_for, real_tokens, budget=None
) -> dict:
    """The phase for the models of `MODELS` that `models` has: `{"plan": ..., "models": {name: row}}`. With a
    `budget` (timing.Budget), a model starts only if as long a run as the longest so far still fits; the models
    left out are noted in its `cut`."""
    import torch

    cuda = args.device.startswith("cuda")
    steps = plan(args.variable_tokens, args.variable_steps, args.eval_every, max_length=250)  # 256 positions
    batches = []
    for i, (kind, src, tgt) in enumerate(steps):
        batch = make_batch(len(src), size["vocab_size"], size["max_len"], seed=1000 + i, lengths=(src, tgt))
        batches.append((kind, {k: v.to(args.device) for k, v in batch.items()}))
    train_tokens = sum(real_tokens(b) for kind, b in batches if kind == "train")
    shapes = {(kind, b["input_ids"].shape[0], b["input_ids"].shape[1], b["labels"].shape[1]) for kind, b in batches}
    out = {"plan": {"max_tokens": args.variable_tokens, "train_steps": args.variable_steps,
                    "eval_steps": sum(kind == "eval" for kind, _ in batches), "train_tokens": train_tokens,
                    "distinct_shapes": len(shapes), "passes": 2, "lengths": LENGTHS.name}, "models": {}}  # fmt: skip

    def one_pass(name, model, optimizer):
        seconds, peaks = {"train": 0.0, "eval": 0.0}, {"train": 0, "eval": 0}
        for kind, batch in batches:
            inputs = inputs_for(name, batch, True)  # evaluation reads the labels too (the loss), as the Trainer's
            timer.sync()
            before = torch.cuda.memory_allocated() if cuda else 0
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            if kind == "train":
                model.train()
                with autocast():
                    loss = model(**inputs).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            else:
                model.eval()
                with torch.no_grad(), autocast():
                    model(**inputs)
            timer.sync()
            seconds[kind] += time.perf_counter() - start
            if cuda:
                peaks[kind] = max(peaks[kind], torch.cuda.max_memory_allocated() - before)
        return seconds, peaks

    names, longest = [m for m in MODELS if m in models], 0.0
    for i, name in enumerate(names):
        if budget is not None and not budget.allows(longest):
            budget.cut.append(f"variable shapes: {', '.join(names[i:])} not run (budget {budget.seconds:.0f} s)")
            break
        started = time.perf_counter()
        model = models[name]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)  # weights hardly move
        with CompileWatch() as watch:
            first, _ = one_pass(name, model, optimizer)
            second, peaks = one_pass(name, model, optimizer)
        out["models"][name] = {
            "train_seconds": second["train"], "eval_seconds": second["eval"],
            "first_pass_seconds": first["train"] + first["eval"], "tokens_per_second": train_tokens / second["train"],
            "peak_step_memory_bytes": peaks["train"] if cuda else None,
            "peak_eval_memory_bytes": peaks["eval"] if cuda else None, **watch.report(),
        }  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        del optimizer
        longest = max(longest, time.perf_counter() - started)
    marian = out["models"].get("marian")
    for row in out["models"].values():
        if marian:
            row["ratio_to_marian"] = marian["train_seconds"] / row["train_seconds"]
            row["eval_ratio_to_marian"] = marian["eval_seconds"] / row["eval_seconds"]
            row["first_pass_ratio_to_marian"] = marian["first_pass_seconds"] / row["first_pass_seconds"]
    return out


def markdown(phase: dict) -> list[str]:
    p = phase["plan"]
    lines = ["## Training on batches of changing shapes (Multi30k lengths, `--max_tokens` buckets)", "",
             f"{p['train_steps']} training steps of at most {p['max_tokens']} padded tokens a side ({p['train_tokens']:,} "
             f"real tokens), an evaluation step after every few ({p['eval_steps']}), {p['distinct_shapes']} distinct "
             "shapes; the second of two passes (the first pays the compiles). Peak = a step's own increase over what "
             "was allocated before it.", "",
             "| model | tokens/s | ratio | eval ratio | first pass ratio | graphs | recompiles | fallback | peak step MiB |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in phase["models"].items():
        peak = "-" if row["peak_step_memory_bytes"] is None else f"{row['peak_step_memory_bytes'] / 2**20:,.0f}"
        lines.append(f"| {name} | {row['tokens_per_second']:,.0f} | {row.get('ratio_to_marian', 1):.2f}x | "
                     f"{row.get('eval_ratio_to_marian', 1):.2f}x | {row.get('first_pass_ratio_to_marian', 1):.2f}x | "
                     f"{row['graphs']} | {row['recompiles']} | {'yes' if row['fallback'] else 'no'} | {peak} |")  # fmt: skip
    return lines + [""]
