"""PASCAL vs vanilla `MarianMTModel` of the same dims: training-step and generation throughput, peak memory.

Both models are built from the same weights and timed interleaved in one process (alternating order every round)
with a fixed thread count; the report gives medians and PASCAL/vanilla ratios. Peak memory of a training step is
measured in a fresh child process per model (CPU: peak RSS above the pre-step baseline; CUDA: max allocated).

    python benchmarks/speed/bench_pascal.py                    # writes benchmarks/results/pascal.json
    python benchmarks/speed/bench_pascal.py --quick            # a short run (what `make bench-quick` runs)
    python benchmarks/speed/bench_pascal.py --device cuda --d-model 512 --layers 6 --heads 8

Targets (issue 2): training >= 0.95x, generation >= 0.97x, peak memory <= 1.05x vanilla.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
from pathlib import Path

import torch
from transformers import MarianMTModel

from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.demo.synthetic_grammar import generate_corpus
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.arguments import POSITIVE, apply_quick  # noqa: E402

TARGETS = {"train_ratio": 0.95, "generate_ratio": 0.97, "memory_ratio": 1.05}


def make_batch(args, device):
    """A batch of real synthetic sentences with gold parent positions, padded on the right."""
    pairs = generate_corpus(
        max(400, args.batch_size), seed=args.seed, min_words=args.min_words, max_words=args.max_words
    )
    tokenizer = train_tokenizer([p.source for p in pairs] + [p.target for p in pairs], vocab_size=args.vocab_size)
    rows = [align_parse(tokenizer, p.source_tree.to_parsed(p.source), text=p.source) for p in pairs[: args.batch_size]]
    labels = [tokenizer(text_target=p.target)["input_ids"] for p in pairs[: args.batch_size]]
    S, T = max(len(r["input_ids"]) for r in rows), max(len(x) for x in labels)
    batch = {
        "input_ids": torch.full((len(rows), S), tokenizer.pad_token_id),
        "attention_mask": torch.zeros(len(rows), S, dtype=torch.long),
        "parent_positions": torch.arange(S, dtype=torch.float).repeat(len(rows), 1),
        "labels": torch.full((len(rows), T), -100),
    }
    for i, (r, y) in enumerate(zip(rows, labels, strict=True)):
        n = len(r["input_ids"])
        batch["input_ids"][i, :n] = torch.tensor(r["input_ids"])
        batch["attention_mask"][i, :n] = 1
        batch["parent_positions"][i, :n] = torch.tensor(r["parent_positions"])
        batch["labels"][i, : len(y)] = torch.tensor(y)
    return tokenizer, {k: v.to(device) for k, v in batch.items()}


def make_models(args, tokenizer, device):
    dims = dict(d_model=args.d_model, layers=args.layers, heads=args.heads, ffn_dim=4 * args.d_model, dropout=0.1)
    pascal_heads = [args.pascal_heads] + [0] * (args.layers - 1)
    pascal = build_model(model_config(tokenizer, encoder_pascal_heads=pascal_heads, **dims), seed=args.seed)
    vanilla = MarianMTModel(model_config(tokenizer, marian=True, **dims))
    vanilla.load_state_dict(pascal.state_dict())
    return {"vanilla": vanilla.to(device), "pascal": pascal.to(device)}


def inputs_for(name, batch):
    return batch if name == "pascal" else {k: v for k, v in batch.items() if k != "parent_positions"}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _memory_child(args, name, queue):
    torch.set_num_threads(args.threads)
    tokenizer, batch = make_batch(args, args.device)
    model = make_models(args, tokenizer, args.device)[name].train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    common.train_step(model, optimizer, inputs_for(name, batch))  # optimizer state allocated
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        common.train_step(model, optimizer, inputs_for(name, batch))
        queue.put(torch.cuda.max_memory_allocated() - base)
        return
    base = _rss_bytes()
    common.train_step(model, optimizer, inputs_for(name, batch))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    queue.put(peak - base)


def peak_step_memory(args, name) -> int:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_memory_child, args=(args, name, queue))
    proc.start()
    value = queue.get(timeout=1800)
    proc.join()
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    common.add_common_arguments(p, "benchmarks/results/pascal.json")
    p.add_argument("--pascal-heads", type=POSITIVE, default=4, help="PASCAL heads in encoder layer 0")
    p.add_argument("--quick", action="store_true", help="a short run: d_model 128, 2 layers, batch 8, 4 rounds")
    args = p.parse_args()
    apply_quick(p, args, None, dict(d_model=128, layers=2, batch_size=8, rounds=4, warmup=1, new_tokens=16,
                                    vocab_size=500))  # fmt: skip

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokenizer, batch = make_batch(args, args.device)
    models = make_models(args, tokenizer, args.device)
    n_src, n_tgt = int(batch["attention_mask"].sum()), int((batch["labels"] != -100).sum())

    inputs = {name: inputs_for(name, batch) for name in models}
    train_times = common.time_training(models, inputs, args, args.device)
    gen_times = common.time_generation(
        models, inputs, args, max(2 if args.quick else 5, args.rounds // 2), args.device
    )
    memory = {name: peak_step_memory(args, name) for name in models}

    med, gmed = common.medians(train_times), common.medians(gen_times)
    result = {
        **common.result_header(args, "pascal_vs_vanilla_marian", "pascal", n_src, n_tgt),
        "train_step_seconds_median": med,
        "train_tokens_per_second": {k: (n_src + n_tgt) / v for k, v in med.items()},
        "generate_seconds_median": gmed,
        "generate_tokens_per_second": {k: args.batch_size * args.new_tokens / v for k, v in gmed.items()},
        "peak_train_step_memory_bytes": memory,
        "ratios": {
            "train_ratio": med["vanilla"] / med["pascal"],
            "generate_ratio": gmed["vanilla"] / gmed["pascal"],
            "memory_ratio": memory["pascal"] / max(memory["vanilla"], 1),
        },
        "targets": TARGETS,
    }
    result["meets_targets"] = {
        "train_ratio": result["ratios"]["train_ratio"] >= TARGETS["train_ratio"],
        "generate_ratio": result["ratios"]["generate_ratio"] >= TARGETS["generate_ratio"],
        "memory_ratio": result["ratios"]["memory_ratio"] <= TARGETS["memory_ratio"],
    }
    out = common.write_json(args.output, result)
    print(json.dumps({"ratios": result["ratios"], "meets_targets": result["meets_targets"]}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
