"""The attention code of this checkout against another checkout's, in one process, alternating every round: a
change that touches only `modeling_layers.py` (the spine's attention) timed without the noise of separate processes.

The baseline's `src/hf_syntax_mt/modeling_layers.py` is loaded beside this one, and before each timed call the
methods of `SyntaxMTAttention` are set to those of one tree's class (the layers and the model are the same code in
both). Every other file under `src/` must be the same in both trees, or the script refuses. The model and batch are
those of `bench_pascal.py` / `bench_alignment.py` (the same options); two copies of the method's model, one per tree,
each with its own AdamW, take training steps and greedy generations interleaved as the benchmarks do.

    git worktree add --detach ../base <commit>
    python benchmarks/speed/compare_attention.py --baseline ../base --bench pascal --threads 1
    python benchmarks/speed/compare_attention.py --baseline ../base --bench alignment --threads 1

Reported: the median of the per-round ratios (baseline seconds / this tree's: > 1 means this tree is faster) and the
ratio of the fastest calls, for a training step and for generation. Writes
benchmarks/results/spine/attention_<bench>.json.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.arguments import POSITIVE, apply_quick  # noqa: E402
from benchmarks.speed import bench_alignment, bench_pascal  # noqa: E402
from benchmarks.speed.compare_code import commit_of  # noqa: E402

LAYERS = Path("src/hf_syntax_mt/modeling_layers.py")


def other_differences(baseline: Path) -> list[str]:
    """Files under `src/` that differ between the trees, `modeling_layers.py` aside."""
    files = {p.relative_to(tree) for tree in (ROOT, baseline) for p in (tree / "src").rglob("*.py")}
    return sorted(
        str(f)
        for f in files - {LAYERS}
        if not (ROOT / f).is_file()
        or not (baseline / f).is_file()
        or (ROOT / f).read_bytes() != (baseline / f).read_bytes()
    )


def baseline_attention(baseline: Path) -> type:
    """The baseline tree's `SyntaxMTAttention` class, loaded beside this tree's."""
    spec = importlib.util.spec_from_file_location("hf_syntax_mt._baseline_modeling_layers", baseline / LAYERS)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)  # its relative imports resolve in this tree's package: the same code
    return old.SyntaxMTAttention


def with_attention(model, cls: type):
    """A copy of `model` whose attention modules are instances of `cls` (the same parameters and attributes)."""
    from hf_syntax_mt.modeling_layers import SyntaxMTAttention

    model = copy.deepcopy(model)
    for module in model.modules():
        if isinstance(module, SyntaxMTAttention):
            module.__class__ = cls
    return model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, type=Path, help="a checkout of the code to compare with")
    p.add_argument("--bench", required=True, choices=["pascal", "alignment"])
    p.add_argument("--device", default="cpu")
    common.add_common_arguments(p, None)
    p.add_argument("--pascal-heads", type=POSITIVE, default=4, help="(pascal) PASCAL heads in encoder layer 0")
    p.add_argument("--bias-layers", default="5", help="(alignment) comma-separated decoder layers, or 'all'")
    p.add_argument("--window", type=POSITIVE, default=2, help="(alignment) k of the Markov / local fertility windows")
    p.add_argument("--hidden", type=POSITIVE, default=16, help="(alignment) alignment_bias_hidden_size")
    p.add_argument("--kernel", choices=["auto", "eager", "fused"], default="auto", help="(alignment) its kernel")
    p.add_argument("--quick", action="store_true", help="small model, 4 rounds (checks that it runs)")
    args = p.parse_args()
    baseline = args.baseline.resolve()
    if not (baseline / LAYERS).is_file():
        raise SystemExit(f"--baseline {args.baseline}: no {LAYERS} there; give a checkout of this repository")
    differ = other_differences(baseline)
    if differ:
        raise SystemExit(
            f"the trees differ beyond {LAYERS.name}: {differ[:5]}; use compare_code.py (one process each)"
        )
    output = Path(args.output or ROOT / "benchmarks" / "results" / "spine" / f"attention_{args.bench}.json")
    common.refuse_quick_evidence(p, args, path=output, flag="--output")
    apply_quick(p, args, None, dict(d_model=128, layers=2, batch_size=8, rounds=4, warmup=1, new_tokens=16,
                                    bias_layers="1"))  # fmt: skip

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    bench = bench_pascal if args.bench == "pascal" else bench_alignment
    tokenizer, batch = bench.make_batch(args, args.device)
    built = bench.make_models(args, tokenizer, args.device)
    model = (built if args.bench == "pascal" else built[0])["pascal" if args.bench == "pascal" else "aligned"]
    models = {"baseline": with_attention(model, baseline_attention(baseline)), "this": model}
    with torch.no_grad():  # the two trees compute the same: equal logits before any timing
        logits = [m.eval()(**batch).logits for m in models.values()]
    torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=1e-5)
    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=1e-4) for n, m in models.items()}

    def train(which):
        common.train_step(models[which], optimizers[which], batch)

    def generate(which):
        common.generate(models[which], batch, args.new_tokens)

    for m in models.values():
        m.train()
    train_times = common.time_interleaved(
        {w: (lambda w=w: train(w)) for w in models}, args.rounds, args.warmup, args.device
    )
    for m in models.values():
        m.eval()
    with torch.inference_mode():
        gen_times = common.time_interleaved(
            {w: (lambda w=w: generate(w)) for w in models}, max(4, args.rounds // 2), 1, args.device
        )

    def ratios(times):
        per_round = [b / t for b, t in zip(times["baseline"], times["this"], strict=True)]
        return statistics.median(per_round), min(times["baseline"]) / min(times["this"])

    (train_median, train_best), (gen_median, gen_best) = ratios(train_times), ratios(gen_times)
    result = {
        "benchmark": f"{args.bench}: SyntaxMTAttention of this tree against the baseline's, in one process, alternating",
        "baseline_commit": commit_of(baseline),
        "this_commit": commit_of(ROOT),
        "cpu": common.cpu_name(),
        "torch": torch.__version__,
        "threads": args.threads,
        "config": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("output", "baseline")
        },
        "ratio_median_of_rounds": {"train": train_median, "generate": gen_median},
        "ratio_of_fastest": {"train": train_best, "generate": gen_best},
        "seconds": {"train": train_times, "generate": gen_times},
        "note": "ratio = baseline seconds / this tree's seconds: > 1 means this tree is faster",
    }
    out = common.write_json(output, result)
    print(json.dumps({k: result[k] for k in ("ratio_median_of_rounds", "ratio_of_fastest")}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
