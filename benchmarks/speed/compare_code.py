"""One throughput benchmark of this checkout against another checkout of the package (the code before a change),
run alternately in one run: pair k runs the benchmark once on each tree, the baseline first in even pairs and last in
odd ones, each in a fresh process with that tree's `src/` first on the path and the same arguments.

    git worktree add ../base <commit>
    python benchmarks/speed/compare_code.py --baseline ../base --bench pascal --pairs 4 -- --threads 1
    python benchmarks/speed/compare_code.py --baseline ../base --bench alignment --pairs 4 -- --threads 1

Each benchmark times the method's model and a vanilla `MarianMTModel` interleaved in its process. Reported, for the
method's model, per pair: baseline seconds / this tree's seconds (> 1: this tree is faster) for a training step and
for generation; their medians over pairs; and the same of the vanilla-normalised ratios (the benchmark's own
method/vanilla throughput ratio, this tree's over the baseline's), which cancel load that changes between processes;
and the best-of ratio (the fastest run of each tree), as load only ever slows a run.
Writes benchmarks/results/spine/compare_<bench>.json (no absolute paths: the trees are named by their commits).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.arguments import POSITIVE  # noqa: E402

BENCHES = {"pascal": ("bench_pascal.py", "pascal"), "alignment": ("bench_alignment.py", "aligned")}


def commit_of(tree: Path) -> str:
    """`tree`'s commit, with ``+changes`` when its `src/` has uncommitted changes."""
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--", "src"], capture_output=True, text=True
    )
    return (common.git_commit(tree) or "?") + ("+changes" if dirty.stdout.strip() else "")


def run_once(tree: Path, bench: str, extra: list[str], output: Path) -> dict:
    """One run of the benchmark (this checkout's script) on `tree`'s package: its JSON result."""
    script = ROOT / "benchmarks" / "speed" / BENCHES[bench][0]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    subprocess.run([sys.executable, str(script), *extra, "--output", str(output)], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return json.loads(output.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", required=True, type=Path, help="a checkout of the code to compare with")
    p.add_argument("--bench", required=True, choices=sorted(BENCHES))
    p.add_argument("--pairs", type=POSITIVE, default=4, help="runs of each tree, alternating (default: 4)")
    p.add_argument("--output", type=Path, default=None, help="default: benchmarks/results/spine/compare_BENCH.json")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: the benchmark's own arguments")
    args = p.parse_args()
    if args.pairs < 1:
        raise SystemExit(f"--pairs {args.pairs}: give 1 or more")
    if not (args.baseline / "src" / "hf_syntax_mt").is_dir():
        raise SystemExit(f"--baseline {args.baseline}: no src/hf_syntax_mt there; give a checkout of this repository")
    extra = [a for a in args.bench_args if a != "--"]
    output = args.output or ROOT / "benchmarks" / "results" / "spine" / f"compare_{args.bench}.json"
    common.refuse_quick_evidence(p, args, quick="--quick" in extra, path=output, flag="--output")
    name = BENCHES[args.bench][1]
    trees = {"baseline": args.baseline.resolve(), "this": ROOT}
    runs: dict[str, list[dict]] = {"baseline": [], "this": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.pairs):
            for which in ("baseline", "this") if k % 2 == 0 else ("this", "baseline"):
                result = run_once(trees[which], args.bench, extra, Path(tmp) / f"{which}-{k}.json")
                runs[which].append(result)
                print(f"pair {k} {which}: train {result['train_step_seconds_median'][name]:.4f} s, generate "
                      f"{result['generate_seconds_median'][name]:.4f} s", flush=True)  # fmt: skip

    def per_pair(field: str, normalised: bool) -> list[float]:
        out = []
        for base, this in zip(runs["baseline"], runs["this"], strict=True):
            if normalised:  # method throughput / vanilla throughput, this tree's over the baseline's
                out.append((base[field][name] / base[field]["vanilla"]) / (this[field][name] / this[field]["vanilla"]))
            else:
                out.append(base[field][name] / this[field][name])
        return out

    fields = {"train": "train_step_seconds_median", "generate": "generate_seconds_median"}
    ratios = {part: per_pair(field, False) for part, field in fields.items()}
    normalised = {part: per_pair(field, True) for part, field in fields.items()}
    result = {
        "benchmark": f"{args.bench} ({BENCHES[args.bench][0]}): this tree against the baseline, alternately",
        "baseline_commit": commit_of(trees["baseline"]),
        "this_commit": commit_of(ROOT),
        "bench_args": extra,
        "pairs": args.pairs,
        "cpu": common.cpu_name(),
        "speed_ratio_per_pair": ratios,
        "speed_ratio_median": {part: statistics.median(v) for part, v in ratios.items()},
        "vanilla_normalised_ratio_per_pair": normalised,
        "vanilla_normalised_ratio_median": {part: statistics.median(v) for part, v in normalised.items()},
        # the fastest run of each tree: load only ever slows a run, so the minimum is the least disturbed figure
        "best_of_ratio": {
            part: min(r[f][name] for r in runs["baseline"]) / min(r[f][name] for r in runs["this"])
            for part, f in fields.items()
        },  # fmt: skip
        "seconds": {
            which: {part: [r[f][name] for r in rs] for part, f in fields.items()} for which, rs in runs.items()
        },
        "note": "ratio = baseline seconds / this tree's seconds: > 1 means this tree is faster",
    }
    out = common.write_json(output, result)
    shown = ("speed_ratio_median", "vanilla_normalised_ratio_median", "best_of_ratio")
    print(json.dumps({k: result[k] for k in shown}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
