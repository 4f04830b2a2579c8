"""Structural alignment biases (+ global fertility) vs vanilla `MarianMTModel` of the same dims: training-step and
greedy-generation throughput.

Both models start from the same weights and are timed interleaved in one process (alternating order every round)
with a fixed thread count; the report gives medians and aligned/vanilla throughput ratios. The aligned model has
all three local biases (position, Markov, local fertility) in the chosen decoder layers and the global-fertility
loss switched on (weight 0.1, from step 0) in training. Its biases get random weights, so that no term is zero.

    python benchmarks/speed/bench_alignment.py                       # bias in the last decoder layer
    python benchmarks/speed/bench_alignment.py --bias-layers all     # bias in every decoder layer
    python benchmarks/speed/bench_alignment.py --device cuda --d-model 512 --layers 6 --heads 8
    python benchmarks/speed/bench_alignment.py --kernel fused --output /tmp/fused.json   # the biases in SDPA's mask

Writes benchmarks/results/alignment.json. Targets (issue 4): generation >= 0.90x, training >= 0.85x vanilla.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from transformers import MarianMTModel

from hf_syntax_mt.alignment import StructuralAlignmentBias
from hf_syntax_mt.demo.synthetic_grammar import generate_corpus
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE  # noqa: E402
from benchmarks.common import add_common_arguments, medians, result_header, time_generation, time_training, write_json  # noqa: E402

TARGETS = {"train_ratio": 0.85, "generate_ratio": 0.90}


def make_batch(args, device):
    """A batch of real synthetic sentence pairs, padded on the right."""
    pairs = generate_corpus(
        max(400, args.batch_size), seed=args.seed, min_words=args.min_words, max_words=args.max_words
    )
    tokenizer = train_tokenizer([p.source for p in pairs] + [p.target for p in pairs], vocab_size=args.vocab_size)
    sources = [tokenizer(p.source)["input_ids"] for p in pairs[: args.batch_size]]
    targets = [tokenizer(text_target=p.target)["input_ids"] for p in pairs[: args.batch_size]]
    S, T = max(map(len, sources)), max(map(len, targets))
    batch = {
        "input_ids": torch.full((len(sources), S), tokenizer.pad_token_id),
        "attention_mask": torch.zeros(len(sources), S, dtype=torch.long),
        "labels": torch.full((len(sources), T), -100),
    }
    for i, (x, y) in enumerate(zip(sources, targets, strict=True)):
        batch["input_ids"][i, : len(x)] = torch.tensor(x)
        batch["attention_mask"][i, : len(x)] = 1
        batch["labels"][i, : len(y)] = torch.tensor(y)
    return tokenizer, {k: v.to(device) for k, v in batch.items()}


def make_models(args, tokenizer, device):
    dims = dict(d_model=args.d_model, layers=args.layers, heads=args.heads, ffn_dim=4 * args.d_model, dropout=0.1)
    bias_layers = (
        list(range(args.layers)) if args.bias_layers == "all" else [int(x) for x in args.bias_layers.split(",")]
    )
    options = dict(
        alignment_bias_layers=bias_layers, alignment_window=args.window, alignment_bias_hidden_size=args.hidden,
        global_fertility_weight=0.1, syntax_attention_kernel=args.kernel,
    )  # fmt: skip
    aligned = build_model(model_config(tokenizer, **options, **dims), seed=args.seed)
    g = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for m in aligned.modules():
            if isinstance(m, StructuralAlignmentBias):
                for p in m.parameters():
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    vanilla = MarianMTModel(model_config(tokenizer, marian=True, **dims))
    missing, unexpected = vanilla.load_state_dict(aligned.state_dict(), strict=False)
    assert not missing, missing
    return {"vanilla": vanilla.to(device), "aligned": aligned.to(device)}, bias_layers


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    add_common_arguments(p, "benchmarks/results/alignment.json")
    p.add_argument("--bias-layers", default="5", help="comma-separated decoder layers, or 'all'")
    p.add_argument("--window", type=POSITIVE, default=2, help="k of the Markov / local fertility windows")
    p.add_argument("--hidden", type=POSITIVE, default=16, help="alignment_bias_hidden_size")
    p.add_argument("--kernel", choices=["auto", "eager", "fused"], default="auto",
                   help="syntax_attention_kernel of the aligned model (fused: its biases folded into SDPA's mask)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="small model, 5 rounds (checks that it runs)")
    args = p.parse_args()
    if args.quick:  # layers kept: --bias-layers names them
        args.d_model, args.rounds, args.warmup, args.batch_size = 128, 5, 1, 16

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokenizer, batch = make_batch(args, args.device)
    models, bias_layers = make_models(args, tokenizer, args.device)
    n_src, n_tgt = int(batch["attention_mask"].sum()), int((batch["labels"] != -100).sum())

    inputs = dict.fromkeys(models, batch)
    train_times = time_training(models, inputs, args, args.device)
    gen_times = time_generation(models, inputs, args, max(5, args.rounds // 2), args.device)
    med, gmed = medians(train_times), medians(gen_times)
    result = {
        **result_header(args, "alignment_biases_vs_vanilla_marian", "aligned", n_src, n_tgt),
        "alignment_bias_layers": bias_layers,
        "train_step_seconds_median": med,
        "train_tokens_per_second": {k: (n_src + n_tgt) / v for k, v in med.items()},
        "generate_seconds_median": gmed,
        "generate_tokens_per_second": {k: args.batch_size * args.new_tokens / v for k, v in gmed.items()},
        "raw_seconds": {"train": train_times, "generate": gen_times},
        "ratios": {
            "train_ratio": med["vanilla"] / med["aligned"],
            "generate_ratio": gmed["vanilla"] / gmed["aligned"],
        },
        "targets": TARGETS,
    }
    # The CPU is shared and contention comes in bursts that slow a call 10x or more; the two calls of a round run
    # back to back, so the median of per-round ratios and the ratio of the fastest calls are robust to them.
    result["paired_ratios_median"] = {
        "train_ratio": statistics.median(
            v / a for v, a in zip(train_times["vanilla"], train_times["aligned"], strict=True)
        ),
        "generate_ratio": statistics.median(
            v / a for v, a in zip(gen_times["vanilla"], gen_times["aligned"], strict=True)
        ),
    }
    result["best_of_ratios"] = {
        "train_ratio": min(train_times["vanilla"]) / min(train_times["aligned"]),
        "generate_ratio": min(gen_times["vanilla"]) / min(gen_times["aligned"]),
    }
    result["meets_targets"] = {k: result["ratios"][k] >= TARGETS[k] for k in TARGETS}
    out = write_json(args.output, result)
    print(json.dumps({"ratios": result["ratios"], "paired_ratios_median": result["paired_ratios_median"],
                      "best_of_ratios": result["best_of_ratios"], "medians": {"train": med, "generate": gmed},
                      "meets_targets": result["meets_targets"]}, indent=2))  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
