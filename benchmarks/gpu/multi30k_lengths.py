"""The length distribution behind `bench_gpu.py`'s variable-shape phase: the (source, target) lengths of Multi30k's
training pairs (en -> de, 29,000 pairs), as a table of `[source, target, count]` in `multi30k_lengths.json`, so that
the benchmark needs no corpus on a GPU machine.

A length is the sentence's words and punctuation marks (`\\w+|[^\\w\\s]`) plus one for `</s>`: about what a subword
vocabulary of 8,000 gives on this corpus (a word piece more per rare word); the shape of the distribution, not its
exact token counts, is what the benchmark needs.

    python benchmarks/gpu/multi30k_lengths.py ../shared/data/multi30k   # -> benchmarks/gpu/multi30k_lengths.json
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).with_name("multi30k_lengths.json")
TOKEN = re.compile(r"\w+|[^\w\s]")


def lengths(path: Path) -> list[int]:
    return [len(TOKEN.findall(line)) + 1 for line in path.read_text(encoding="utf-8").splitlines()]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not (Path(argv[0]) / "train.en").is_file():
        print("usage: multi30k_lengths.py MULTI30K_DIR (with train.en and train.de)", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    pairs = collections.Counter(zip(lengths(folder / "train.en"), lengths(folder / "train.de"), strict=True))
    table = [[s, t, n] for (s, t), n in sorted(pairs.items())]
    OUT.write_text(json.dumps({
        "corpus": "Multi30k task 1 train, en -> de (29,000 pairs)",
        "length": "words and punctuation marks (\\w+|[^\\w\\s]) + 1 for </s>",
        "made_by": "python benchmarks/gpu/multi30k_lengths.py MULTI30K_DIR",
        "pairs": sum(pairs.values()), "source_target_count": table,
    }, separators=(",", ":")) + "\n", encoding="utf-8")  # fmt: skip
    print(f"{OUT.name}: {len(table)} distinct (source, target) lengths of {sum(pairs.values())} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
