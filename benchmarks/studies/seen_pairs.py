"""Test pairs that occur verbatim in the training data, and the scores without them.

The document study (`docnmt_real.py`) trains on the shared en-de training set (`ende_sentence_data.TRAIN_PARTS`:
Multi30k train, IWSLT17 dev, Europarl v7 dev, BConTrasT train). Some test pairs (English source and German reference,
both to the letter) are in it: mostly BConTrasT's stock customer-support turns ("Thank you!", "Is there anything else I
can help you with?"). A model that has memorised them scores them well without translating, so `docnmt_real
--aggregate` reports, per test set, how many pairs were seen in training and each model's BLEU and chrF on the unseen
pairs beside its score on all of them (`table`). Run alone, this script prints the counts:

    python benchmarks/studies/seen_pairs.py                 # per test set: pairs seen in training, sources seen
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.common import DATA  # noqa: E402
from benchmarks.data.ende_sentence_data import EVAL_SETS, TEST_SETS, TRAIN_PARTS, read_part  # noqa: E402


def have_training_data(data: str | Path) -> bool:
    """Whether ``data`` holds every training part (an aggregate on a copy of the test sets alone has none)."""
    return all((Path(data) / f).is_file() for part in TRAIN_PARTS for f in (part.source, part.target))


def training_pairs(data: str | Path) -> set[tuple[str, str]]:
    """The (source, target) pairs of the shared training set (its empty pairs dropped, as `ende_sentence_data.build`
    drops them)."""
    pairs = set()
    for part in TRAIN_PARTS:
        rows = read_part(Path(data), part)
        pairs |= {(s, t) for s, t in zip(rows["source"], rows["target"], strict=True) if s.strip() and t.strip()}
    return pairs


def seen_lines(data: str | Path, names=TEST_SETS, pairs: set[tuple[str, str]] | None = None) -> dict[str, set[int]]:
    """Test set -> the 0-based lines whose (source, reference) pair occurs verbatim in the training set."""
    pairs = training_pairs(data) if pairs is None else pairs
    out = {}
    for name in names:
        rows = read_part(Path(data), EVAL_SETS[name])
        out[name] = {k for k, pair in enumerate(zip(rows["source"], rows["target"], strict=True)) if pair in pairs}
    return out


def unseen_scores(unit: dict, name: str, references: list[str], seen: set[int]) -> dict | None:
    """BLEU and chrF of a unit's translations of test set ``name`` on the lines not in ``seen`` (its hypotheses are
    the test set's first lines, or the lines its scores list for a --quick subset); None without hypotheses."""
    from hf_syntax_mt.evaluation import corpus_scores

    hyps = unit["hypotheses"].get(name)
    if hyps is None:
        return None
    lines = unit["tests"][name].get("lines") or range(len(hyps))
    keep = [(h, references[k]) for h, k in zip(hyps, lines, strict=True) if k not in seen]
    return corpus_scores([h for h, _ in keep], [r for _, r in keep]) if keep else None


def table(units: list[dict], references: dict[str, list[str]], seen: dict[str, set[int]], kinds) -> list[str]:
    """Markdown lines: per test set, the pairs seen in training, and per model kind (mean over seeds) BLEU and chrF
    on every pair and on the unseen pairs only."""
    lines = ["Test pairs seen in training: a test pair (source and reference) that occurs verbatim in the training "
             "set, and BLEU / chrF without those pairs beside the score on every pair (mean over seeds).", "",
             "| test set | pairs seen in training | model | seeds | BLEU, all | BLEU, unseen pairs | chrF, all "
             "| chrF, unseen pairs |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, lines_seen in seen.items():
        n = len(references[name])
        count = f"{len(lines_seen):,} of {n:,} ({len(lines_seen) / n:.1%})"
        for kind in kinds:
            us = [u for u in units if u["kind"] == kind and name in u["hypotheses"]]
            unseen = [s for u in us if (s := unseen_scores(u, name, references[name], lines_seen))]
            if not us or len(unseen) != len(us):
                continue
            cells = [statistics.mean(u["tests"][name][m] for u in us) if i == 0 else statistics.mean(s[m] for s in unseen)
                     for m in ("bleu", "chrf") for i in (0, 1)]  # fmt: skip
            lines.append(f"| {name} | {count} | {kind} | {','.join(str(u['seed']) for u in us)} | "
                         + " | ".join(f"{c:.2f}" for c in cells) + " |")  # fmt: skip
    return lines


def main(argv=None) -> int:
    from hf_syntax_mt.data.readers import read_lines

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA), help="the shared data directory")
    args = p.parse_args(argv)
    pairs = training_pairs(args.data)
    for name, lines in seen_lines(args.data, pairs=pairs).items():
        part = EVAL_SETS[name]
        sources = read_lines(Path(args.data) / part.source)
        trained = {s for s, _ in pairs}
        n_sources = sum(s in trained for s in sources)
        print(f"{name}: {len(lines):,} of {len(sources):,} pairs ({len(lines) / len(sources):.1%}) seen in training; "
              f"{n_sources:,} sources ({n_sources / len(sources):.1%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
