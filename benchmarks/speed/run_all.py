"""Run every method's throughput/memory benchmark against vanilla Marian and write one table.

Every `benchmarks/speed/bench_*.py` is a throughput benchmark unless listed in `NOT_THROUGHPUT` (timings of
one component or of a precision rather than a method against vanilla).
So `bench_alignment.py`, `bench_dbsa.py`, `bench_context.py` added later plug in by following the protocol that
`bench_pascal.py` follows:

- accept `--output PATH` (write the JSON result there) and `--quick` (a short run);
- compare the method with a vanilla `MarianMTModel` of the same dims in one process, and write a JSON with
  `"method"`, `"ratios"` (`train_ratio` and `generate_ratio` = vanilla time / method time, `memory_ratio` = method
  peak / vanilla peak), and optionally `"train_tokens_per_second"`, `"generate_tokens_per_second"`,
  `"peak_train_step_memory_bytes"` (dicts with the keys `"vanilla"` and the method's name), `"targets"` and
  `"meets_targets"`.

Each benchmark runs in its own process (fixed thread count, nothing shared). Results go to
`benchmarks/results/{name}.json`, then `throughput.json` and `throughput.md` (one row per method).

    python benchmarks/speed/run_all.py                # full runs (make bench)
    python benchmarks/speed/run_all.py --quick        # short runs (make bench-quick)
    python benchmarks/speed/run_all.py --only pascal  # a subset, by the name after bench_
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent  # benchmarks/speed/
RESULTS = HERE.parent / "results"
NOT_THROUGHPUT = {"bench_bf16.py", "bench_context_sublayer.py", "bench_parsing.py"}


def discover() -> dict[str, Path]:
    """Benchmark name (`pascal` for `bench_pascal.py`) -> script, in name order."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py")) if p.name not in NOT_THROUGHPUT}


def _fmt_rate(result: dict, key: str, method: str) -> str:
    values = result.get(key) or {}
    if "vanilla" not in values or method not in values:
        return "-"
    return f"{values['vanilla']:,.0f} / {values[method]:,.0f}"


def markdown(results: dict[str, dict]) -> str:
    lines = [
        "| method | train step (vs vanilla) | generation (vs vanilla) | peak train memory (vs vanilla) | "
        "train tokens/s vanilla / method | generated tokens/s vanilla / method | meets targets | run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} | | | | | | |")
            continue
        method = r.get("method", name)
        ratios = r.get("ratios", {})
        cells = [
            f"{ratios[k]:.3f}x" if k in ratios else "-" for k in ("train_ratio", "generate_ratio", "memory_ratio")
        ]
        meets = r.get("meets_targets")
        meets = (
            "-"
            if meets is None
            else ("yes" if all(meets.values()) else "no: " + ", ".join(k for k, v in meets.items() if not v))
        )
        run = ("quick, " if r.get("quick") else "") + f"{r.get('_seconds', 0):.0f} s"
        lines.append(
            f"| {method} | {cells[0]} | {cells[1]} | {cells[2]} | {_fmt_rate(r, 'train_tokens_per_second', method)} | "
            f"{_fmt_rate(r, 'generate_tokens_per_second', method)} | {meets} | {run} |"
        )
    lines.append("")
    lines.append("Ratios: throughput of the method / throughput of vanilla Marian (>1 is faster); memory: method / "
                 "vanilla (<1 is smaller).")  # fmt: skip
    first = next((r for r in results.values() if "error" not in r), None)
    if first is not None:
        lines.append(
            f"Environment: torch {first.get('torch')}, {first.get('device')}, {first.get('threads')} threads."
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    p.add_argument("--only", nargs="+", help="benchmark names (after bench_) to run")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more arguments for every benchmark")
    args = p.parse_args(argv)
    scripts = discover()
    if args.only:
        unknown = set(args.only) - set(scripts)
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {sorted(unknown)}; available: {sorted(scripts)}")
        scripts = {k: v for k, v in scripts.items() if k in args.only}
    results_dir = Path(args.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    failed = False
    for i, (name, script) in enumerate(scripts.items(), start=1):
        output = results_dir / f"{name}.json"
        cmd = [sys.executable, str(script), "--output", str(output), *(["--quick"] if args.quick else []), *args.extra]
        print(f"[{i}/{len(scripts)}] {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd)
        seconds = time.perf_counter() - start
        if proc.returncode != 0 or not output.is_file():
            results[name] = {"error": f"exit code {proc.returncode}", "_seconds": seconds}
            failed = True
            continue
        results[name] = {**json.loads(output.read_text()), "_seconds": seconds}
    table = markdown(results)
    (results_dir / "throughput.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    (results_dir / "throughput.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"wrote {results_dir / 'throughput.json'} and {results_dir / 'throughput.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
