"""Every registered method against transformers' `MarianMTModel` (SDPA) on a GPU (issue 43, item 4).

At transformer-base (d_model 512, 6+6 layers, 8 heads, FFN 2048, vocab 8,000), under bf16 autocast, every model in
one process and timed interleaved (the order rotates each round), medians over rounds:

- a training step (forward, backward, AdamW) at two token-batch sizes: tokens/s (source + target tokens that are not
  padding) and the ratio to `MarianMTModel` on the same batch;
- beam-4 generation of a fixed length (`min_new_tokens = max_new_tokens`, so every model decodes the same number of
  steps) at two batch sizes: sentences/s and the ratio to `MarianMTModel`;
- peak GPU memory of each (a training step at each batch size, generation at each batch size), as the step's own
  increase over what was allocated before it (the resident models and optimiser states not counted);
- training on token batches whose shapes change every step, with evaluation steps between (`variable_shapes.py`:
  Multi30k's lengths bucketed as `--max_tokens` batches are), for Marian, ours, PASCAL, DBSA + sync and the
  alignment biases: tokens/s ratios, compiled graphs and recompiles per model, any fallback, a step's peak memory;
- `torch.compile` on against off for ours without a method and PASCAL (training step at the first batch size).

The phases run in that order but generation comes second (training, generation, changing shapes, compile), so that a
run cut short still has the issue's targets. `--budget S` (the GPU check passes its time limit) cuts the run at the
boundaries of its units (a timed round, a batch size, a model of the variable-shape phase) once the next one would
not end 10 s before S, and skips the compile phase unless about a minute per compiled model is left; a SIGINT or
SIGTERM (a time limit) stops it where it is. Either way the JSON is written with what was measured, what was cut
(`cut`), and `complete` false; an optional phase skipped for time (compile) is listed under `skipped` instead.

The batches are synthetic, built here with every method's columns (random sentences of 8-40 tokens; a random
tree per sentence (every head to the left) with one subword per word, so `parent_positions`, `word_index`/`word_heads`, the
LISA/DBSA targets and the features follow from it; the previous sentence as document context; label t aligned to
source t): the speed of a step depends on the shapes, not on the words. The issue's targets (ratios to
`MarianMTModel` in the same run) are recorded with `met` true/false.

    python benchmarks/gpu/bench_gpu.py                    # CUDA, full -> benchmarks/results/gpu/bench_gpu.{json,md}
    python benchmarks/gpu/bench_gpu.py --quick            # CUDA, fewer rounds, one generation size (the GPU check)
    python benchmarks/gpu/bench_gpu.py --device cpu --quick --output /tmp/b.json   # tiny sizes: plumbing only

Self-contained: it imports only `hf_syntax_mt`, `transformers`, `torch` and the standard library (no datasets, no
corpora: the length table `multi30k_lengths.json` is committed), so that it runs on a bare GPU machine. Results of the
tiny CPU size are refused under benchmarks/results. Numeric flags have ranges (`--beams 0` is refused, not divided
by).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
from benchmarks.arguments import float_range, int_range  # noqa: E402
from benchmarks.gpu import variable_shapes  # noqa: E402
from benchmarks.gpu.timing import Budget, Timer, interleaved, summarise  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gpu"

#: the sizes: transformer-base on a GPU (the issue's), a tiny one for CPU plumbing runs
SIZES = {
    "base": dict(d_model=512, layers=6, heads=8, ffn_dim=2048, vocab_size=8000, max_len=40),
    "tiny": dict(d_model=32, layers=2, heads=4, ffn_dim=64, vocab_size=200, max_len=12),
}
#: columns only the training loss reads (dropped for generation)
SUPERVISION = ("labels", "lisa_parents", "dbsa_heads", "decoder_dbsa_heads", "decoder_alignment")
#: read by the document-context model only (others warn that they ignore them)
CONTEXT = ("context_input_ids", "context_attention_mask")
#: the issue's targets: (model, measure, minimum ratio to MarianMTModel)
TARGETS = [("none", "train", 0.98), ("pascal", "train", 0.95), ("synchronous", "train", 0.90),
           ("alignment_bias", "train", 0.90)]  # fmt: skip
GENERATION_TARGET = 0.95  # every method but document context
#: what compiling one model's training step takes (Inductor, transformer-base): the compile phase needs this per model
COMPILE_SECONDS = 60


def method_configs(layers: int, heads: int) -> dict[str, dict]:
    """Every registered method's options at this size: the issue's settings where it names one, else the method's
    `tester_config` with its per-layer head counts (`encoder_..._heads`, `decoder_..._heads`) put in the first layer
    (so a new method needs no entry here)."""
    import re

    from hf_syntax_mt.methods import registered

    one = [0] * layers
    first = [1] + [0] * (layers - 1)
    pascal = list(one)
    pascal[min(1, layers - 1)] = heads // 2  # PASCAL: half the heads (4 of 8) in layer 1

    def sized(config: dict) -> dict:
        per_layer = re.compile(r"^(encoder|decoder)_\w+_heads$")
        return {k: [v[0], *[0] * (layers - 1)] if per_layer.match(k) and isinstance(v, list) else v
                for k, v in config.items()}  # fmt: skip

    derived = {m.name: sized(m.tester_config) for m in registered() if m.tester_config is not None}
    return {"none": {}, **derived} | {
        "none": {},
        "pascal": dict(encoder_pascal_heads=pascal),
        "tree": dict(encoder_tree_heads=first),
        "biaffine": dict(encoder_lisa_heads=first, encoder_dbsa_heads=first, decoder_dbsa_heads=first),
        "synchronous": dict(encoder_dbsa_heads=first, decoder_dbsa_heads=first, dbsa_loss_weight=0.5,
                            sync_loss_weight=0.5, decoder_dbsa_full_context=True),
        "input_features": dict(input_features=["pos", "deprel", "subword_tag"]),
        "alignment_bias": dict(alignment_bias_layers=list(range(layers))),
        "fertility": dict(global_fertility_weight=0.3),
        "document_context": dict(context_sentences=1),
        "guided_alignment": dict(guided_alignment_weight=0.5),
    }  # fmt: skip


def synthetic_batch(n_rows: int, vocab_size: int, max_len: int, seed: int = 0, lengths=None) -> dict:
    """`n_rows` random sentence pairs (source and target of 8..max_len tokens with `</s>`, right-padded; or of the
    given `lengths`, `(source lengths, target lengths)` of `n_rows` each, `</s>` included, >= 2) with every method's
    columns, on the CPU. One subword per word: token t is word t+1 (1-based), `</s>` and padding word 0."""
    import torch

    from hf_syntax_mt.vocabularies import DEPRELS, SUBWORD_TAGS, UPOS_TAGS

    g = torch.Generator().manual_seed(seed)
    pad, eos, first_id = 1, 0, 3  # MarianTokenizer's layout: </s> = 0, <unk> = 1 ... pad = 1 here, ids from 3

    def lengths_between(n):  # (n,) real tokens including </s>
        return torch.randint(min(8, max_len), max_len + 1, (n,), generator=g)

    if lengths is None:
        src_len, tgt_len = lengths_between(n_rows), lengths_between(n_rows)
    else:
        src_len, tgt_len = (torch.tensor(side, dtype=torch.long) for side in lengths)  # (n_rows,) each
    S, T = int(src_len.max()), int(tgt_len.max())
    pos_s, pos_t = torch.arange(S).expand(n_rows, S), torch.arange(T).expand(n_rows, T)  # (B, S), (B, T)
    real_s, real_t = pos_s < src_len[:, None], pos_t < tgt_len[:, None]
    words_s = pos_s < (src_len - 1)[:, None]  # real tokens but </s>
    ids = torch.randint(first_id, vocab_size, (n_rows, S), generator=g)
    ids = torch.where(words_s, ids, torch.where(real_s, eos, pad))
    labels = torch.randint(first_id, vocab_size, (n_rows, T), generator=g)
    labels = torch.where(pos_t < (tgt_len - 1)[:, None], labels, torch.where(real_t, eos, -100))

    def heads(positions, words):  # a tree: word t's head is a random earlier token (0-based), token 0 is the root
        h = (torch.rand(positions.shape, generator=g) * positions).long()  # (B, L) in [0, t)
        return torch.where(positions == 0, positions, h).where(words, positions)  # root and specials -> themselves

    src_heads, tgt_heads = heads(pos_s, words_s), heads(pos_t, pos_t < (tgt_len - 1)[:, None])
    word_index = torch.where(words_s, pos_s + 1, 0)  # (B, S) 1-based word of each token
    word_heads = torch.where(words_s & (pos_s > 0), src_heads + 1, 0)  # (B, W=S) 1-based heads, 0 = root
    supervised = torch.where(words_s, src_heads, -100)  # (B, S) LISA / DBSA targets: the head token
    decoder_heads = torch.where(pos_t < (tgt_len - 1)[:, None], tgt_heads, -100)  # (B, T)

    def feature(tags):
        return torch.where(words_s, torch.randint(1, len(tags) + 1, (n_rows, S), generator=g), 0)

    context_len = torch.roll(src_len, 1)  # the previous sentence as context (the first row: the last)
    context_ids = torch.roll(ids, 1, dims=0)
    aligned = pos_t.clone().where((labels != -100) & (pos_t < src_len[:, None]), -100)  # label t -> source t
    return {
        "input_ids": ids, "attention_mask": real_s.long(), "labels": labels,
        "parent_positions": src_heads.float(), "word_index": word_index, "word_heads": word_heads,
        "lisa_parents": supervised, "dbsa_heads": supervised.clone(), "decoder_dbsa_heads": decoder_heads,
        "pos_ids": feature(UPOS_TAGS), "deprel_ids": feature(DEPRELS), "subword_tag_ids": torch.where(words_s, SUBWORD_TAGS.index("O") + 1, 0),
        "context_input_ids": context_ids, "context_attention_mask": (pos_s < context_len[:, None]).long(),
        "decoder_alignment": aligned,
    }  # fmt: skip


def rows_for_tokens(tokens: int, max_len: int) -> int:
    """Rows whose source + target tokens come to about `tokens` (lengths uniform in 8..max_len on each side)."""
    mean = (min(8, max_len) + max_len) / 2
    return max(2, round(tokens / (2 * mean)))


def real_tokens(batch: dict) -> int:
    return int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum())


def build_models(names: list[str], size: dict, device: str) -> dict:
    """Ours with each method and `MarianMTModel` (SDPA), the same dims and dropout (0.1, attention dropout 0).

    Each is made on the `meta` device, given empty storage on `device` and initialised there once (`init_weights`):
    built on the CPU, transformers initialises every weight several times (each sub-model's `post_init`) and the first
    H200 run spent about 40 s of its 120 making 12 models; tests/gpu/test_bench_gpu.py checks this build against a
    plain one (buffers, constant initialisations, tied weights)."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

    base = dict(
        vocab_size=size["vocab_size"], d_model=size["d_model"], encoder_layers=size["layers"],
        decoder_layers=size["layers"], encoder_attention_heads=size["heads"], decoder_attention_heads=size["heads"],
        encoder_ffn_dim=size["ffn_dim"], decoder_ffn_dim=size["ffn_dim"], max_position_embeddings=256,
        pad_token_id=1, eos_token_id=0, decoder_start_token_id=1, forced_eos_token_id=None,
        dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
    )  # fmt: skip
    configs = method_configs(size["layers"], size["heads"])

    def make(cls, config):
        torch.manual_seed(0)
        with torch.device("meta"):
            model = cls(config)
        model.to_empty(device=device)
        model.init_weights()  # every weight and buffer, once, on the device; ties the embeddings
        return model

    marian = MarianConfig(**base)
    marian._attn_implementation = "sdpa"
    models = {"marian": make(MarianMTModel, marian)}
    for name in names:
        models[name] = make(SyntaxMTForConditionalGeneration, SyntaxMTConfig(**base, **configs[name]))
    return models


def inputs_for(name: str, batch: dict, train: bool) -> dict:
    """Marian gets what a plain sentence model reads; ours the whole batch (a model ignores other methods'
    columns) but the context, which only the document-context model reads; generation drops the training-only
    columns."""
    if name == "marian":
        keep = ("input_ids", "attention_mask", "labels") if train else ("input_ids", "attention_mask")
        return {k: batch[k] for k in keep}
    drop = (() if train else SUPERVISION) + (() if name == "document_context" else CONTEXT)
    return {k: v for k, v in batch.items() if k not in drop}


def train_phase(models, batch, args, timer, autocast, budget=None, what="train") -> dict:
    import torch

    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=1e-6) for n, m in models.items()}  # weights hardly move

    def step(name):
        model, inputs = models[name], inputs_for(name, batch, True)

        def run():
            model.train()
            with autocast():
                loss = model(**inputs).loss
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)

        return run

    fns = {name: step(name) for name in models}
    times = interleaved(fns, args.rounds, args.steps, timer, budget, what)
    out = summarise(times, real_tokens(batch), "tokens")
    for name in models:
        out[name]["peak_memory_bytes"] = timer.peak(fns[name])
    return out


def generate_phase(models, batch, args, timer, autocast, budget=None, what="generate") -> dict:
    import torch

    def gen(name):
        model, inputs = models[name], inputs_for(name, batch, False)

        def run():
            model.eval()
            with torch.inference_mode(), autocast():
                out = model.generate(**inputs, num_beams=args.beams, do_sample=False, min_new_tokens=args.new_tokens,
                                     max_new_tokens=args.new_tokens, early_stopping=False)  # fmt: skip
            assert out.shape[1] == args.new_tokens + 1, out.shape  # fixed length: start token + new tokens

        return run

    fns = {name: gen(name) for name in models}
    times = interleaved(fns, args.generate_rounds, 1, timer, budget, what)
    out = summarise(times, batch["input_ids"].shape[0], "sentences")
    for name in models:
        out[name]["peak_memory_bytes"] = timer.peak(fns[name])
    return out


def compile_phase(models, batch, args, timer, autocast) -> dict:
    """Training step of each of `args.compile` with the model eager and under `torch.compile`, interleaved."""
    import torch

    fns = {}
    for name in args.compile:
        if name not in models:
            continue
        for compiled in (False, True):
            model = models[name]
            forward = torch.compile(model) if compiled else model
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
            inputs = inputs_for(name, batch, True)

            def run(forward=forward, optimizer=optimizer, inputs=inputs, model=model):
                model.train()
                with autocast():
                    loss = forward(**inputs).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            fns[f"{name}/{'compiled' if compiled else 'eager'}"] = run
    if not fns:
        return {}
    start = time.perf_counter()  # the whole phase: warm-up (compiling) and every timed round
    try:
        times = interleaved(fns, args.rounds, args.steps, timer)
    except Exception as error:  # a compiler failure is a result too
        return {"error": f"{type(error).__name__}: {str(error)[:500]}"}
    out = {"phase_seconds": time.perf_counter() - start}
    for name in args.compile:
        if f"{name}/eager" not in times:
            continue
        eager, compiled = (statistics.median(times[f"{name}/{k}"]) for k in ("eager", "compiled"))
        out[name] = {"eager_seconds": times[f"{name}/eager"], "compiled_seconds": times[f"{name}/compiled"],
                     "speedup": eager / compiled}  # fmt: skip
    return out


def targets(result: dict) -> list[dict]:
    """The issue's targets against this run's ratios (every batch size must meet a training target)."""
    rows = []
    for model, measure, target in TARGETS:
        for label, phase in result["train"].items():
            if model in phase:
                ratio = phase[model]["ratio_to_marian"]
                rows.append(dict(model=model, measure=measure, batch=label, target=target, ratio=ratio,
                                 met=ratio >= target))  # fmt: skip
    for label, phase in result["generate"].items():
        for model, row in phase.items():
            if model not in ("marian", "document_context"):
                rows.append(dict(model=model, measure="generate", batch=label, target=GENERATION_TARGET,
                                 ratio=row["ratio_to_marian"], met=row["ratio_to_marian"] >= GENERATION_TARGET))  # fmt: skip
    return rows


def environment(device: str) -> dict:
    import torch
    import transformers

    import hf_syntax_mt

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = None
    commit = commit or os.environ.get("HF_SYNTAX_MT_COMMIT")  # a copy without .git names the commit it was sent at
    cuda = device.startswith("cuda")
    return {
        "device": device, "device_name": torch.cuda.get_device_name(device) if cuda else platform.processor() or
        platform.machine(), "torch": torch.__version__, "cuda": torch.version.cuda, "transformers":
        transformers.__version__, "hf_syntax_mt": getattr(hf_syntax_mt, "__version__", None), "python":
        platform.python_version(), "commit": commit, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip


def markdown(result: dict) -> str:
    env, size = result["environment"], result["size"]
    lines = [f"# bench_gpu: {env['device_name']} ({env['device']})", "",
             f"torch {env['torch']} (CUDA {env['cuda']}), transformers {env['transformers']}, commit {env['commit']}, "
             f"{env['date']}; d_model {size['d_model']}, {size['layers']}+{size['layers']} layers, {size['heads']} "
             f"heads, FFN {size['ffn_dim']}, vocab {size['vocab_size']}; {'bf16 autocast' if result['bf16'] else 'fp32'}"
             f"; medians of {result['rounds']} interleaved rounds of {result['steps']} steps"
             f"{' (quick)' if result['quick'] else ''}.", "",
             "Ratio = `MarianMTModel`'s median time / the model's (1.00 = as fast as plain Marian).", ""]  # fmt: skip
    for kind, unit in (("train", "tokens"), ("generate", "sentences")):
        phases = result[kind]
        if not phases:
            continue
        head = " | ".join(f"{label}: {unit}/s, ratio, peak MiB" for label in phases)
        lines += [f"## {'Training step' if kind == 'train' else 'Beam-4 generation, fixed length'}", "",
                  f"| model | {head} |", "|---" * (1 + len(phases)) + "|"]  # fmt: skip
        for model in next(iter(phases.values())):
            cells = []
            for phase in phases.values():
                row = phase[model]
                mem = "-" if row["peak_memory_bytes"] is None else f"{row['peak_memory_bytes'] / 2**20:,.0f}"
                cells.append(f"{row[f'{unit}_per_second']:,.0f}, {row['ratio_to_marian']:.2f}x, {mem}")
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    if result.get("variable"):
        lines += variable_shapes.markdown(result["variable"])
    if result.get("compile"):
        lines += ["## torch.compile (training step, first batch)", ""]
        for key in ("error", "skipped"):
            if key in result["compile"]:
                lines.append(f"{key}: {result['compile'][key]}")
        for name, row in result["compile"].items():
            if isinstance(row, dict):
                lines.append(f"- {name}: compiled {row['speedup']:.2f}x the eager step")
        lines.append("")
    if result.get("cut"):
        lines += ["## Cut (the run is incomplete)", ""] + [f"- {cut}" for cut in result["cut"]] + [""]
    for name, why in (result.get("skipped") or {}).items():
        lines += [f"Skipped: {name}: {why}", ""]
    if result["targets"]:
        lines += ["## The issue's targets", "", "| model | measure | batch | ratio | target | met |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for t in result["targets"]:
            lines.append(f"| {t['model']} | {t['measure']} | {t['batch']} | {t['ratio']:.2f} | >= {t['target']:.2f} | "
                         f"{'yes' if t['met'] else 'no'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write(result: dict, output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    output.with_suffix(".md").write_text(markdown(result), encoding="utf-8")


def ranged(kind, low, high=None):
    """An argparse type: `kind` (int or float) in [low, high] (the CLI's rule, `benchmarks.arguments`)."""
    return (int_range if kind is int else float_range)(low, high)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda where torch sees one)")
    p.add_argument("--size", choices=list(SIZES), help="default: base on CUDA, tiny on the CPU")
    p.add_argument("--quick", action="store_true", help="3 rounds of 5 steps, generation at the first size only, "
                   "6 variable-shape steps")  # fmt: skip
    p.add_argument("--only", nargs="+", help="methods to run (default: every registered one)")
    p.add_argument("--train-tokens", type=ranged(int, 16), nargs=2, metavar=("SMALL", "LARGE"), help="source+target "
                   "tokens of the two training batches (default: 5000 20000; tiny: 200 400)")  # fmt: skip
    p.add_argument("--generate-rows", type=ranged(int, 1), nargs="+", help="sentences per generation batch "
                   "(default: 64 256)")  # fmt: skip
    p.add_argument("--new-tokens", type=ranged(int, 1), default=None, help="fixed generation length (default: 40; "
                   "tiny: 4)")  # fmt: skip
    p.add_argument("--beams", type=ranged(int, 1), default=4)
    p.add_argument("--rounds", type=ranged(int, 1), default=None, help="default: 5 (quick: 3; tiny: 2)")
    p.add_argument("--steps", type=ranged(int, 1), default=None, help="training steps per timed round (default: "
                   "10; quick: 5; tiny: 1)")  # fmt: skip
    p.add_argument("--variable-steps", type=ranged(int, 0), default=None, help="training steps of the variable-shape "
                   "phase (default: 40; quick: 6; tiny: 6; 0: skip the phase)")  # fmt: skip
    p.add_argument("--variable-tokens", type=ranged(int, 64), default=None, help="the phase's --max_tokens: padded "
                   "tokens per batch (default: 5000; tiny: 300; Multi30k's longest pair has 46 tokens)")  # fmt: skip
    p.add_argument("--eval-every", type=ranged(int, 1), default=3, help="an evaluation step after every N training "
                   "steps of the variable-shape phase")  # fmt: skip
    p.add_argument("--compile", nargs="*", default=None, help="models timed with torch.compile on and off "
                   "(default: none pascal on CUDA, none on the CPU; give no name to skip)")  # fmt: skip
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    p.add_argument("--budget", type=ranged(float, 1), help="seconds the run may take (the GPU check passes its time "
                   "limit): rounds, batch sizes and models of the variable-shape phase that would end later are cut "
                   f"(listed in the JSON's `cut`), the compile phase needs about {COMPILE_SECONDS} s per model")  # fmt: skip
    p.add_argument("--output", default=None, help="JSON path (default: benchmarks/results/gpu/bench_gpu[-quick].json;"
                   " a .md beside it)")  # fmt: skip
    args = p.parse_args(argv)
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        p.error(f"--device {args.device}: torch {torch.__version__} sees no CUDA device; use --device cpu")
    args.size = args.size or ("base" if cuda else "tiny")
    tiny = args.size == "tiny"

    def default(value, tiny_value, quick_value, full_value):  # a flag given is kept as given (never replaced)
        return value if value is not None else tiny_value if tiny else quick_value if args.quick else full_value

    args.train_tokens = default(args.train_tokens, [200, 400], [5000, 20000], [5000, 20000])
    args.generate_rows = default(args.generate_rows, [4, 8], [64, 256], [64, 256])
    if args.quick:
        args.generate_rows = args.generate_rows[:1]
    args.new_tokens = default(args.new_tokens, 4, 40, 40)
    args.rounds = default(args.rounds, 2, 3, 5)
    args.steps = default(args.steps, 1, 5, 10)
    args.variable_steps = default(args.variable_steps, 6, 6, 40)
    args.variable_tokens = default(args.variable_tokens, 300, 5000, 5000)
    args.generate_rounds = max(2, args.rounds)
    if args.compile is None:
        args.compile = ["none", "pascal"] if cuda else []
    registered = list(method_configs(2, 4))
    args.only = args.only or registered
    unknown = sorted(set(args.only) - set(registered))
    if unknown:
        p.error(f"--only: unknown method(s) {unknown}; choose from {registered}")
    default = RESULTS / f"bench_gpu{'-quick' if args.quick else ''}.json"
    args.output = Path(args.output) if args.output else default
    if tiny and RESULTS.parent in args.output.resolve().parents:
        p.error(f"--output {args.output}: the tiny size is a plumbing check, not a result; write it outside "
                "benchmarks/results")  # fmt: skip
    return args


class Interrupted(Exception):
    """A SIGTERM (a time limit's first signal may be SIGINT or SIGTERM): stop where the run is and write it."""


def _interrupted(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv=None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    import contextlib

    import torch

    import hf_syntax_mt.flex  # noqa: F401  (opt in: PASCAL's heads in the compiled FlexAttention, as measured before)
    from hf_syntax_mt.methods import registered

    missing = sorted({m.name for m in registered()} - set(method_configs(2, 4)))
    if missing:  # a method registered after this file was written: say so rather than skip it silently
        print(f"bench_gpu: no setting for registered method(s) {missing}; add them to method_configs", file=sys.stderr)
    size = SIZES[args.size]
    bf16 = not args.fp32

    def autocast():
        device_type = "cuda" if args.device.startswith("cuda") else "cpu"
        return torch.autocast(device_type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    timer = Timer(args.device)
    budget = Budget(args.budget, started)
    result = {
        "benchmark": "bench_gpu", "environment": environment(args.device), "size": {**size, "name": args.size},
        "bf16": bf16, "quick": args.quick, "rounds": args.rounds, "steps": args.steps, "beams": args.beams,
        "new_tokens": args.new_tokens, "methods": args.only, "missing_methods": missing, "budget_seconds": args.budget,
        "batches": {}, "train": {}, "variable": {}, "generate": {}, "compile": {}, "targets": [], "cut": budget.cut,
        "skipped": {}, "complete": False,
    }  # fmt: skip
    previous = signal.signal(signal.SIGTERM, _interrupted)
    # a SIGINT stops the run too, even where the shell that started it made background jobs ignore SIGINT
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    phase, last = "building the models", 0.0
    try:
        models = build_models(args.only, size, args.device)
        for i, tokens in enumerate(args.train_tokens):
            batch = synthetic_batch(rows_for_tokens(tokens, size["max_len"]), size["vocab_size"], size["max_len"],
                                    seed=i)  # fmt: skip
            label = f"{real_tokens(batch)} tokens"
            if i and not budget.allows(last):  # as long as the batch before it (a larger batch takes longer)
                budget.cut.append(f"train {label}: not run (budget {args.budget:.0f} s)")
                continue
            start = time.perf_counter()
            phase = f"train {label}"
            result["batches"][label] = {"rows": batch["input_ids"].shape[0], "tokens": real_tokens(batch),
                                        "padded": int(batch["input_ids"].numel() + batch["labels"].numel())}  # fmt: skip
            batch = {k: v.to(args.device) for k, v in batch.items()}
            result["train"][label] = train_phase(models, batch, args, timer, autocast, budget, phase)
            print(f"bench_gpu: {phase}: " + ", ".join(f"{n} {r['ratio_to_marian']:.2f}x" for n, r in
                                                       result["train"][label].items()), file=sys.stderr)  # fmt: skip
            write(result, args.output)  # a run cut off by a time limit keeps what it measured
            last = time.perf_counter() - start
        for i, rows in enumerate(args.generate_rows):
            label = f"{rows} sentences"
            if not budget.allows(0):
                budget.cut.append(f"generate {label}: not run (budget {args.budget:.0f} s)")
                continue
            phase = f"generate {label}"
            batch = synthetic_batch(rows, size["vocab_size"], size["max_len"], seed=100 + i)
            batch = {k: v.to(args.device) for k, v in batch.items()}
            result["generate"][label] = generate_phase(models, batch, args, timer, autocast, budget, phase)
            print(f"bench_gpu: {phase}: " + ", ".join(f"{n} {r['ratio_to_marian']:.2f}x" for n, r in
                                                       result["generate"][label].items()), file=sys.stderr)  # fmt: skip
            write(result, args.output)
        if args.variable_steps and not budget.allows(0):
            budget.cut.append(f"variable shapes: not run (budget {args.budget:.0f} s)")
        elif args.variable_steps:
            phase = "variable shapes"
            result["variable"] = variable_shapes.run_phase(models, args, size, timer, autocast, synthetic_batch,
                                                           inputs_for, real_tokens, budget)  # fmt: skip
            print("bench_gpu: variable shapes: " + ", ".join(
                f"{n} {r.get('ratio_to_marian', 1):.2f}x ({r['graphs']} graphs, {r['recompiles']} recompiles"
                f"{', FALLBACK' if r['fallback'] else ''})" for n, r in result["variable"]["models"].items()),
                file=sys.stderr)  # fmt: skip
            write(result, args.output)
        compiled = [name for name in args.compile if name in models]
        if compiled and not budget.allows(COMPILE_SECONDS * len(compiled)):
            result["skipped"]["compile"] = (f"about {COMPILE_SECONDS} s per compiled model did not fit in --budget "
                                            f"{args.budget:.0f} s ({budget.spent():.0f} s spent)")  # fmt: skip
        elif compiled:
            phase = "compile"
            rows = rows_for_tokens(args.train_tokens[0], size["max_len"])
            batch = synthetic_batch(rows, size["vocab_size"], size["max_len"])
            batch = {k: v.to(args.device) for k, v in batch.items()}
            result["compile"] = compile_phase(models, batch, args, timer, autocast)
    except (KeyboardInterrupt, Interrupted) as stop:
        name = "SIGINT" if isinstance(stop, KeyboardInterrupt) else str(stop)
        budget.cut.append(f"{phase}: interrupted by {name} after {budget.spent():.0f} s; the phases after it not run")
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    result["targets"] = targets(result)
    result["seconds"] = time.perf_counter() - started
    result["complete"] = not budget.cut
    write(result, args.output)
    met = sum(t["met"] for t in result["targets"])
    print(f"bench_gpu: {met} of {len(result['targets'])} targets met; {args.output} ({result['seconds']:.0f} s)"
          + ("" if result["complete"] else f"; INCOMPLETE: {'; '.join(budget.cut)}"), file=sys.stderr)  # fmt: skip
    if any("interrupted" in cut for cut in budget.cut):
        return 130
    return 0 if all(math.isfinite(r["median_seconds"]) for p in result["train"].values() for r in p.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
