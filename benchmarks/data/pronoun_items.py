"""Build the contrastive pronoun test of issue 27 from the real test documents: `it`/`its` aligned to a German
3rd-person pronoun in the reference of iwslt17.test, europarl7.test and bcontrast test
(`hf_syntax_mt.evaluation.pronouns`), into `benchmarks/results/docnmt_real/pronoun_items.jsonl` (committed) with a
summary (`pronoun_items.summary.json`).

    pip install eflomal                       # optional dependency (a C extension built from the sdist)
    python benchmarks/data/pronoun_items.py        # a few minutes: the shared data set (cached), eflomal, the items

Alignment: eflomal 2.0 (defaults: model 3, 3 samplers; its samplers are random, so a rebuild can differ slightly)
on the English words of the spaCy parses and the German words and punctuation of `german_tokens`, both lower-cased,
trained on the test sets together with the whole shared training set (`ende_sentence_data`, 55k pairs) for better
statistics; the forward and reverse links are intersected (precision over recall: a pronoun item needs exactly one
aligned German pronoun). German noun genders: the NOUN tokens of the UD German treebanks in ../shared/data/ud (GSD
dev+test, PUD test, LIT test; FEATS Gender), compounds by their longest known final part.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.common import DATA, RESULTS, relative_path, write_json
from benchmarks.data.ende_sentence_data import DEFAULT_CACHE, TEST_SETS, build

OUT = RESULTS / "docnmt_real"
UD_GERMAN = ("UD_German-GSD/de_gsd-ud-dev.conllu", "UD_German-GSD/de_gsd-ud-test.conllu",
             "UD_German-PUD/de_pud-ud-test.conllu", "UD_German-LIT/de_lit-ud-test.conllu")  # fmt: skip


def _tokens(files: dict) -> tuple[list[str], list[list[str]], list[list[str]], list[str], list[list[str]]]:
    """English lines, words, relations; German lines and lower-cased tokens of one split of the shared data set."""
    from hf_syntax_mt.data.readers import read_conllu, read_lines
    from hf_syntax_mt.evaluation.pronouns import german_tokens

    parses = read_conllu(files["conllu"])
    german = read_lines(files["de"])
    if len(parses) != len(german):
        raise ValueError(f"{files['conllu']} has {len(parses)} sentences but {files['de']} has {len(german)} lines")
    return ([p.text for p in parses], [p.words for p in parses], [p.deprels for p in parses], german,
            [[t.lower() for t, _, _ in german_tokens(line)] for line in german])  # fmt: skip


def align(source_words: list[list[str]], target_tokens: list[list[str]]) -> tuple[list[set], float]:
    """Intersected eflomal links (English word, German token) per pair, and the seconds eflomal took."""
    import eflomal

    from hf_syntax_mt.word_alignment import read_pharaoh

    src = [" ".join(w.lower() for w in words) for words in source_words]
    tgt = [" ".join(tokens) for tokens in target_tokens]
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
        start = time.perf_counter()
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
        seconds = time.perf_counter() - start
        forward = [a.sure for a in read_pharaoh(fwd)]
        reverse = [a.sure for a in read_pharaoh(rev)]  # eflomal writes both directions as source-target
    if len(forward) != len(src) or len(reverse) != len(src):
        raise RuntimeError(f"eflomal returned {len(forward)} / {len(reverse)} alignment lines for {len(src)} pairs")
    return [set(a) & set(b) for a, b in zip(forward, reverse, strict=True)], seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="the shared data set (ende_sentence_data.py)")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--max-train", type=int, default=None, help="extra alignment data: the first N training pairs")
    args = p.parse_args(argv)
    try:
        import eflomal  # noqa: F401
    except ImportError:
        raise SystemExit("eflomal is not installed: pip install eflomal") from None
    from hf_syntax_mt.evaluation.pronouns import NounGenders, build_pronoun_items, write_pronoun_items

    start = time.perf_counter()
    data = build(args.data, args.cache, progress=True)
    files = data["files"]
    train = _tokens(files["train"])
    n_train = len(train[0]) if args.max_train is None else min(args.max_train, len(train[0]))
    tests = {name: _tokens(files[name]) for name in TEST_SETS}
    words = train[1][:n_train] + [w for t in tests.values() for w in t[1]]
    german = train[4][:n_train] + [g for t in tests.values() for g in t[4]]
    print(
        f"aligning {len(words):,} pairs ({n_train:,} training + {len(words) - n_train:,} test) with eflomal",
        flush=True,
    )
    links, eflomal_seconds = align(words, german)
    lexicon = NounGenders.from_conllu([Path(args.data) / "ud" / path for path in UD_GERMAN])
    from hf_syntax_mt.data.readers import read_doc_ids

    items, dropped, offset = [], {}, n_train
    for name, (sources, source_words, deps, references, _) in tests.items():
        doc_ids = read_doc_ids(files[name]["docid"], len(sources))
        found, reasons = build_pronoun_items(name, sources, source_words, deps, references, doc_ids,
                                             links[offset : offset + len(sources)], lexicon)  # fmt: skip
        offset += len(sources)
        items += found
        dropped[name] = dict(reasons.most_common())
        print(f"{name}: {len(found)} items; left out: {dict(reasons.most_common())}")
    out = Path(args.out)
    path = write_pronoun_items(out / "pronoun_items.jsonl", items)
    counts = {
        "by_corpus": dict(Counter(it["corpus"] for it in items).most_common()),
        "by_pronoun": dict(Counter(it["pronoun"].lower() for it in items).most_common()),
        "by_case": dict(Counter(it["case"] for it in items).most_common()),
        "by_case_evidence": dict(Counter(it["case_evidence"].split(":")[0] + (":" + it["case_evidence"].split(":")[1]
                                                                                if "english_dep" in it["case_evidence"]
                                                                                else "")
                                         for it in items).most_common()),
        "noun_in_context": dict(Counter(str(it["noun_in_context"]).lower() for it in items).most_common()),
        "first_sentence_of_document": sum(it["sentence_in_document"] == 0 for it in items),
    }  # fmt: skip
    summary = {
        "items": len(items), "bytes": path.stat().st_size, "counts": counts, "left_out": dropped,
        "alignment": {"aligner": "eflomal 2.0.0 (model 3, 3 samplers), forward and reverse intersected",
                      "pairs": len(words), "training_pairs": n_train, "seconds": round(eflomal_seconds, 1)},
        "lexicon": {"nouns": len(lexicon), "sources": [f"../shared/data/ud/{u}" for u in UD_GERMAN]},
        "data_manifest": {"parser": data["parser"], "cache": relative_path(str(Path(args.cache).resolve()))},
        "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    write_json(out / "pronoun_items.summary.json", summary, indent=1, newline=True)
    print(json.dumps({k: summary[k] for k in ("items", "bytes", "counts", "seconds")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
