"""The reference row of the alignment study (issue 14): eflomal, the aligner a user would pick instead, trained on the
same data as our models (Multi30k en-fr train, lower-cased, punctuation split as in the gold set) plus the 447
Hansards sentence pairs, and scored with AER on the Hansards gold (forward, reverse, and symmetrised).

    pip install eflomal            # an optional dependency: a C extension built from the sdist
    python benchmarks/data/eflomal_reference.py   # about a minute; writes benchmarks/results/alignment/eflomal.json

Tokenisation follows the gold files: lower case, punctuation split off, English clitics split to the right
("man 's"), French elisions kept on the left ("l' homme", "aujourd' hui").
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, refuse_overwriting  # noqa: E402
from benchmarks.common import DATA, RESULTS, ROOT, write_json

sys.path.insert(0, str(ROOT / "src"))

PATTERNS = {"en": re.compile(r"'\w+|\w+|[^\w\s]"), "fr": re.compile(r"\w+'|\w+|[^\w\s]")}


def tokenize(line: str, lang: str) -> str:
    return " ".join(PATTERNS[lang].findall(line.lower().replace("’", "'")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--results", default=str(RESULTS / "alignment"))
    p.add_argument("--max-train", type=POSITIVE, default=None, help="first N Multi30k pairs (default: all 29,000)")
    p.add_argument("--seed-runs", type=POSITIVE, default=1, help="eflomal samplers are random: repeat and report each")
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["results"], folders=["data"])
    try:
        import eflomal
    except ImportError:
        raise SystemExit("eflomal is not installed: pip install eflomal") from None
    from hf_syntax_mt.alignment import alignment_error_rate, format_pharaoh, read_pharaoh, symmetrize

    data = Path(args.data)
    gold_dir = data / "alignment-gold-en-fr"
    src = [tokenize(s, "en") for s in (data / "multi30k" / "train.en").read_text(encoding="utf-8").split("\n")[:-1]]
    tgt = [tokenize(s, "fr") for s in (data / "multi30k" / "train.fr").read_text(encoding="utf-8").split("\n")[:-1]]
    src, tgt = src[: args.max_train], tgt[: args.max_train]
    gold_src = (gold_dir / "hansards.en").read_text(encoding="utf-8").split("\n")[:-1]
    gold_tgt = (gold_dir / "hansards.fr").read_text(encoding="utf-8").split("\n")[:-1]
    gold = read_pharaoh(gold_dir / "hansards.gold", one_indexed=True)
    n = len(gold)
    runs = []
    for run in range(args.seed_runs):
        with tempfile.TemporaryDirectory() as tmp:
            fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
            start = time.perf_counter()
            eflomal.Aligner().align(src + gold_src, tgt + gold_tgt, links_filename_fwd=str(fwd),
                                    links_filename_rev=str(rev), quiet=True)  # fmt: skip
            seconds = time.perf_counter() - start
            f = [p.sure for p in read_pharaoh(fwd)[-n:]]
            # eflomal writes the reverse links as source-target too
            r = [p.sure for p in read_pharaoh(rev)[-n:]]
        links = {"forward": f, "reverse": r}
        for method in ("intersection", "grow-diag-final-and", "union"):
            links[method] = [symmetrize(set(a), set(b), method) for a, b in zip(f, r, strict=True)]
        scores = {method: alignment_error_rate(x, gold) for method, x in links.items()}
        runs.append({"run": run, "seconds": round(seconds, 1), "scores": scores})
        if run == 0:  # the links themselves, for the study's known/unseen-word split of AER
            Path(args.results).mkdir(parents=True, exist_ok=True)
            for method in ("forward", "grow-diag-final-and"):
                (Path(args.results) / f"eflomal.{method}.align.txt").write_text(
                    "".join(format_pharaoh(x) + "\n" for x in links[method]), encoding="utf-8"
                )
        print(
            f"run {run}: "
            + ", ".join(f"{k} AER {100 * v['aer']:.1f}" for k, v in scores.items())
            + f" ({seconds:.0f} s)"
        )
    out = Path(args.results)
    record = {"aligner": f"eflomal {getattr(eflomal, '__version__', '2.0.0')} (defaults: model 3, 3 samplers)",
              "training_pairs": len(src) + n, "data": "Multi30k en-fr train (lower-cased, punctuation split) + the "
              "447 Hansards pairs", "gold": "alignment-gold-en-fr/hansards.gold (1-indexed sure/possible)",
              "runs": runs}  # fmt: skip
    write_json(out / "eflomal.json", record, indent=1, newline=True)
    print(f"wrote {out / 'eflomal.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
