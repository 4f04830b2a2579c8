#!/usr/bin/env python
"""Draw a fixed random subset of a line-aligned parallel corpus, as the studies' low-resource setting draws Multi30k's
5,000 pairs (`benchmarks/studies/study_round2.low_resource_files`: ``random.Random(SEED).sample`` of the line numbers,
line order kept): the same seed and size give the same lines of any language of Multi30k, so a language pair trained
from raw text here uses the round-two subset's sentences.

    python scripts/subset_pairs.py --pairs 5000 --seed 2026 --output-dir data/low \\
        ../shared/data/multi30k/train.fr ../shared/data/multi30k/train.en

writes ``data/low/train.fr``, ``data/low/train.en`` and ``data/low/subset.json`` (the pairs, the seed and the sha256
of the chosen line numbers, the record round two's unit files keep).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, SEED  # noqa: E402


def subset(paths: list[Path], pairs: int, seed: int, output_dir: Path) -> dict:
    """Write the subset of each file of ``paths`` (line aligned) into ``output_dir``; returns its record."""
    rows = [p.read_text(encoding="utf-8").split("\n") for p in paths]
    total = len(rows[0]) - 1  # the files end with a newline
    for path, lines in zip(paths, rows, strict=True):
        if len(lines) - 1 != total:
            raise SystemExit(f"{path} has {len(lines) - 1} lines, {paths[0]} {total}: the files must be line aligned")
    if not 0 < pairs <= total:
        raise SystemExit(f"--pairs {pairs}: give 1 to {total} (the lines of {paths[0]})")
    chosen = sorted(random.Random(seed).sample(range(total), pairs))
    output_dir.mkdir(parents=True, exist_ok=True)
    for path, lines in zip(paths, rows, strict=True):
        out = output_dir / path.name
        if out.resolve() == path.resolve():
            raise SystemExit(f"{out} is the input file {path}: give another --output-dir")
        out.write_text("".join(lines[i] + "\n" for i in chosen), encoding="utf-8")
    digest = hashlib.sha256(",".join(map(str, chosen)).encode()).hexdigest()
    info = {"pairs": pairs, "of": total, "subset_seed": seed, "line_numbers_sha256": digest}
    (output_dir / "subset.json").write_text(json.dumps(info) + "\n", encoding="utf-8")
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="line-aligned files (source, target, ...)")
    p.add_argument(
        "--pairs", type=POSITIVE, default=5000, help="lines to draw (default 5000, the studies' low setting)"
    )
    p.add_argument("--seed", type=SEED, default=2026, help="the draw's seed (default 2026, the studies')")
    p.add_argument("--output-dir", type=Path, required=True)
    args = p.parse_args(argv)
    print(json.dumps(subset(args.files, args.pairs, args.seed, args.output_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
