"""How closely do the alignment study's kept models reproduce eflomal's links on their own (Multi30k) training pairs?

The study scores AER on the Hansards gold, a domain the models never trained on, while eflomal aligns the Hansards
pairs together with its training data. This reads each kept model's alignments (`--keep-models`) on the first N
Multi30k en-fr training pairs and scores them against eflomal's grow-diag-final-and links of the same pairs (the
guided unit's supervision, cached by the study as `eflomal-train-*.gdfa`), every link counted as sure. In-sample
for every model: a check of how well attention matches eflomal in the domain the models know, not a held-out AER.

    python benchmarks/studies/alignment_in_domain.py --pairs 500    # -> benchmarks/results/alignment/in_domain.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE  # noqa: E402
from benchmarks.common import DATA, write_json  # noqa: E402
from benchmarks.studies import alignment_study as study  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=POSITIVE, default=500)
    p.add_argument("--output-dir", default=str(study.ROOT / "runs" / "alignment_study"))
    p.add_argument("--results", default=str(study.RESULTS))
    p.add_argument("--data", default=str(DATA))
    a = p.parse_args(argv)
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_syntax_mt  # noqa: F401
    from hf_syntax_mt.alignment import align_corpus, alignment_error_rate, parse_pharaoh

    args = study.parse_args(["--results", a.results, "--data", a.data, "--output-dir", a.output_dir])
    data = study.prepared_data(args)
    # the guided unit's supervision: cached by the study, computed here (eflomal, minutes) when missing
    reference = [parse_pharaoh(line) for line in study.eflomal_training_links(args, data)[: a.pairs]]
    src = [s.split() for s in data["train"][0][: a.pairs]]
    tgt = [t.split() for t in data["train"][1][: a.pairs]]
    units = {}
    for model_dir in sorted(Path(a.output_dir).glob("*-seed*/model")):
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager")
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        links = align_corpus(model, tokenizer, src, tgt, method="forward", progress=False)
        r = alignment_error_rate(links, reference)
        units[model_dir.parent.name] = {k: round(r[k], 4) for k in ("aer", "precision", "recall")}
        print(f"{model_dir.parent.name}: AER {100 * r['aer']:.1f} against eflomal gdfa on {a.pairs} training pairs "
              f"(P {100 * r['precision']:.1f}, R {100 * r['recall']:.1f})")  # fmt: skip
    words = {k: [statistics.mean(len(s.split()) for s in data[k][i]) for i in (0, 1)] for k in ("train", "hansards")}
    unseen = []  # the share of Hansards word tokens (en, fr) that never occur in Multi30k train
    for side in (0, 1):
        vocab = {w for s in data["train"][side] for w in s.split()}
        tokens = [w for s in data["hansards"][side] for w in s.split()]
        unseen.append(round(sum(w not in vocab for w in tokens) / len(tokens), 4))
    record = {"pairs": a.pairs, "reference": "eflomal grow-diag-final-and (alignment_study.eflomal_training_links)",
              "read": "forward, Naive-Att, align_corpus defaults", "units": units,
              "mean_words_en_fr": {k: [round(x, 1) for x in v] for k, v in words.items()},
              "hansards_unseen_token_share_en_fr": unseen,
              **study.software(), "commit": study.git_commit()}  # fmt: skip
    print(write_json(Path(a.results) / "in_domain.json", record, indent=1, newline=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
