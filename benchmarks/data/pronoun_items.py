"""Build the contrastive pronoun test of issue 27 from the real test documents: `it`/`its` aligned to a German
3rd-person pronoun in the reference of iwslt17.test, europarl7.test and bcontrast test
(`hf_syntax_mt.evaluation.pronouns`), into `benchmarks/results/docnmt_real/pronoun_items.jsonl` (committed) with a
summary (`pronoun_items.summary.json`).

    pip install eflomal                       # optional dependency (a C extension built from the sdist)
    python benchmarks/data/pronoun_items.py        # a few minutes: the shared data set (cached), eflomal, the items
    python benchmarks/data/pronoun_items.py --links runs/pronoun_links.json      # keep the links: a rebuild aligns no more
    git show d1dba77:benchmarks/results/docnmt_real/pronoun_items.jsonl > runs/old_pronoun_items.jsonl
    python benchmarks/data/pronoun_items.py --rescore runs/old_pronoun_items.jsonl   # the units' outcomes on the new kinds
    python benchmarks/data/pronoun_items.py --refilter   # no alignment: a new drop rule applied to the committed items

Each item carries its kind (`pronoun_kinds.py`, beside this script): referential, with the antecedent noun and its
distance in sentences, or fixed by the construction (expletive, cleft, clausal, impersonal), or no antecedent found;
items whose case the German word order contradicts and plural `sie` are left out (counted in the summary).

Alignment: eflomal 2.0 (defaults: model 3, 3 samplers; its samplers are random, so a rebuild can differ slightly)
on the English words of the spaCy parses and the German words and punctuation of `german_tokens`, both lower-cased,
trained on the test sets together with the whole shared training set (`ende_sentence_data`, 55k pairs) for better
statistics; the forward and reverse links are intersected (precision over recall: a pronoun item needs exactly one
aligned German pronoun). German noun genders and number (`german_nouns.py`, beside this script): the NOUN tokens of
the UD German treebanks in ../shared/data/ud (GSD dev+test, PUD test, LIT test; FEATS Gender and Number), then, for
words they lack, the determiners before capitalised words in the German side of the training set and of the test
references; compounds by their longest known final part.
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
from benchmarks.arguments import POSITIVE, refuse_overwriting  # noqa: E402
from benchmarks.common import DATA, RESULTS, relative_path, sha256_file, write_json
from benchmarks.data.ende_sentence_data import DEFAULT_CACHE, TEST_SETS, build

OUT = RESULTS / "docnmt_real"
UD_GERMAN = ("UD_German-GSD/de_gsd-ud-dev.conllu", "UD_German-GSD/de_gsd-ud-test.conllu",
             "UD_German-PUD/de_pud-ud-test.conllu", "UD_German-LIT/de_lit-ud-test.conllu")  # fmt: skip


def _tokens(files: dict) -> tuple:
    """English lines, words, relations; German lines and lower-cased tokens; English heads and UPOS of one split of
    the shared data set."""
    from benchmarks.data.german_nouns import german_tokens
    from hf_syntax_mt.data.readers import read_conllu, read_lines

    parses = read_conllu(files["conllu"])
    german = read_lines(files["de"])
    if len(parses) != len(german):
        raise ValueError(f"{files['conllu']} has {len(parses)} sentences but {files['de']} has {len(german)} lines")
    return ([p.text for p in parses], [p.words for p in parses], [p.deprels for p in parses], german,
            [[t.lower() for t, _, _ in german_tokens(line)] for line in german], [p.heads for p in parses],
            [p.upos for p in parses])  # fmt: skip


def align(source_words: list[list[str]], target_tokens: list[list[str]]) -> tuple[list[set], float]:
    """Intersected eflomal links (English word, German token) per pair, and the seconds eflomal took."""
    import eflomal

    from hf_syntax_mt.alignment import read_pharaoh

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
    p.add_argument("--max-train", type=POSITIVE, default=None, help="extra alignment data: the first N training pairs")
    p.add_argument(
        "--links",
        help="a JSON file (outside git) keeping the test sets' links: read when it exists, "
        "else written after eflomal, so that a rebuild with other rules aligns no more",
    )
    p.add_argument(
        "--antecedent-sentences", type=POSITIVE, default=3, help="previous sentences searched for antecedents"
    )
    p.add_argument(
        "--rescore",
        metavar="OLD_ITEMS",
        help="no build: score the committed units' per-item outcomes "
        "(made on OLD_ITEMS) on the items of --out that OLD_ITEMS holds too, into pronoun_items.rescored.json",
    )
    p.add_argument(
        "--refilter",
        action="store_true",
        help="no build: drop from the items of --out those that the drop rules read from an item alone now leave out "
        "(`sein_predicate`, issue 59), and update the summary; the same items a rebuild from the same links gives",
    )
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["out"], ["cache"], ["data"])
    if args.rescore:
        return rescore(Path(args.rescore), Path(args.out))
    if args.refilter:
        return refilter(Path(args.out))
    try:
        import eflomal  # noqa: F401
    except ImportError:
        raise SystemExit("eflomal is not installed: pip install eflomal") from None
    from benchmarks.data.pronoun_builder import NounGenders, build_pronoun_items
    from hf_syntax_mt.evaluation.pronouns import write_pronoun_items

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
    cache = Path(args.links) if args.links else None
    if cache is not None and cache.is_file():  # links of an earlier run (the rules change, the alignment need not)
        saved = json.loads(cache.read_text(encoding="utf-8"))
        if saved["pairs"] != len(words):
            raise SystemExit(f"{cache} holds links for {saved['pairs']} pairs, not {len(words)}: delete it")
        links = [set()] * n_train + [{tuple(x) for x in line} for line in saved["tests"]]
        eflomal_seconds = saved["seconds"]
    else:
        links, eflomal_seconds = align(words, german)
        if cache is not None:
            tests_links = [sorted(x) for x in links[n_train:]]
            write_json(cache, {"pairs": len(words), "seconds": eflomal_seconds, "tests": tests_links})
    # the lexicon: the treebanks' FEATS, then the determiners before capitalised words in the German side of the
    # training set and the test references (raw text; no label of the test is read)
    texts = train[3] + [line for t in tests.values() for line in t[3]]
    lexicon = NounGenders.from_sources([Path(args.data) / "ud" / path for path in UD_GERMAN], texts)
    from hf_syntax_mt.data.readers import read_doc_ids

    items, dropped, offset = [], {}, n_train
    for name, (sources, source_words, deps, references, _, heads, upos) in tests.items():
        doc_ids = read_doc_ids(files[name]["docid"], len(sources))
        found, reasons = build_pronoun_items(name, sources, source_words, deps, references, doc_ids,
                                             links[offset : offset + len(sources)], lexicon, source_heads=heads,
                                             source_upos=upos, antecedent_sentences=args.antecedent_sentences)  # fmt: skip
        offset += len(sources)
        items += found
        dropped[name] = dict(reasons.most_common())
        print(f"{name}: {len(found)} items; left out: {dict(reasons.most_common())}")
    out = Path(args.out)
    path = write_pronoun_items(out / "pronoun_items.jsonl", items)
    summary = {
        "items": len(items), "bytes": path.stat().st_size, "counts": item_counts(items), "left_out": dropped,
        "alignment": {"aligner": "eflomal 2.0.0 (model 3, 3 samplers), forward and reverse intersected",
                      "pairs": len(words), "training_pairs": n_train, "seconds": round(eflomal_seconds, 1)},
        "antecedent_sentences": args.antecedent_sentences,
        "lexicon": {"words": len(lexicon), "readings": dict(Counter(lexicon.readings.values()).most_common()),
                    "sources": [f"../shared/data/ud/{u}" for u in UD_GERMAN]
                    + ["determiners in the German side of the training set and the test references"]},
        "data_manifest": {"parser": data["parser"], "cache": relative_path(str(Path(args.cache).resolve()))},
        "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    write_json(out / "pronoun_items.summary.json", summary, indent=1, newline=True)
    print(json.dumps({k: summary[k] for k in ("items", "bytes", "counts", "seconds")}, indent=1))
    return 0


def item_counts(items: list[dict]) -> dict:
    """The summary's counts of an item set."""
    from hf_syntax_mt.evaluation.pronouns import distance_bucket, pronoun_key

    return {
        "by_corpus": dict(Counter(it["corpus"] for it in items).most_common()),
        "by_pronoun": dict(Counter(it["pronoun"].lower() for it in items).most_common()),
        "by_case": dict(Counter(it["case"] for it in items).most_common()),
        "by_case_evidence": dict(Counter(it["case_evidence"].split(":")[0] + (":" + it["case_evidence"].split(":")[1]
                                                                                if "english_dep" in it["case_evidence"]
                                                                                else "")
                                         for it in items).most_common()),
        "noun_in_context": dict(Counter(str(it["noun_in_context"]).lower() for it in items).most_common()),
        "by_kind": dict(Counter(it["kind"] for it in items).most_common()),
        "by_kind_evidence": dict(Counter(it["kind_evidence"].split(" (")[0] for it in items).most_common()),
        "referential_by_distance": dict(sorted(Counter(distance_bucket(it["antecedent_distance"]) for it in items
                                                       if it["kind"] == "referential").items())),
        "referential_by_pronoun": dict(Counter(pronoun_key(it) for it in items
                                               if it["kind"] == "referential").most_common()),
        "first_sentence_of_document": sum(it["sentence_in_document"] == 0 for it in items),
    }  # fmt: skip


def refilter(out: Path) -> int:
    """Drop the committed items that `build_pronoun_items`'s item-level drop rule now leaves out: a nominative
    ``er``/``sie`` subject of *sein* with a predicate noun (`sein_predicate`, read from the reference and the span
    alone, so a rebuild from the same links drops exactly these); the summary's counts are rebuilt and the dropped
    items added to ``left_out`` under the builder's reason."""
    from benchmarks.data.pronoun_kinds import sein_predicate
    from hf_syntax_mt.evaluation.pronouns import german_tokens, load_pronoun_items, write_pronoun_items

    path, summary_path = out / "pronoun_items.jsonl", out / "pronoun_items.summary.json"
    items, summary = load_pronoun_items(path), json.loads(summary_path.read_text(encoding="utf-8"))
    kept, dropped = [], []
    for it in items:
        tokens = german_tokens(it["reference"])
        j = next(k for k, (_, s, e) in enumerate(tokens) if [s, e] == it["span"])
        cased = [t for t, _, _ in tokens]
        if it["case"] == "nom" and sein_predicate([t.lower() for t in cased], j, cased) is not None:
            dropped.append(it)
        else:
            kept.append(it)
    before = sha256_file(path)
    write_pronoun_items(path, kept)
    for it in dropped:
        reasons = summary["left_out"].setdefault(it["corpus"], {})
        reason = f"it -> {it['pronoun'].lower()}: subject of sein + predicate noun, es right too"
        reasons[reason] = reasons.get(reason, 0) + 1
    summary.update(items=len(kept), bytes=path.stat().st_size, counts=item_counts(kept))
    summary["refiltered"] = {"from_items_sha256": before, "from_items": len(items), "dropped": [it["id"] for it in dropped],
                             "rule": "benchmarks/data/pronoun_kinds.py: sein_predicate (issue 59)"}  # fmt: skip
    write_json(summary_path, summary, indent=1, newline=True)
    print(f"{len(items)} items -> {len(kept)}; dropped {[it['id'] for it in dropped]}")
    return 0


def _key(item: dict) -> str:
    """What a scored outcome depends on: the sentence pair, the variants and the context."""
    return json.dumps([item[f] for f in ("id", "source", "reference", "span", "variants", "context")])


def rescore(old_path: Path, out: Path) -> int:
    """The committed units' pronoun outcomes (``results``, one per item of the old item file they were scored on),
    regrouped on the new items that the old file holds too (same id, sentences, span, variants and context), with the
    paired tests of `studies/pronoun_paired.py` (McNemar per seed, a pooled bootstrap over seeds)."""
    from hf_syntax_mt.evaluation.pronouns import load_pronoun_items, pronoun_breakdown

    old = load_pronoun_items(old_path)
    new = load_pronoun_items(out / "pronoun_items.jsonl")
    position = {_key(it): k for k, it in enumerate(old)}
    common = [(it, position[_key(it)]) for it in new if _key(it) in position]
    from benchmarks.studies.pronoun_paired import paired_tests

    units, outcomes = {}, {}
    for path in sorted(out.glob("runs/*.json")) + sorted(out.glob("replicates/*.json")):
        unit = json.loads(path.read_text(encoding="utf-8"))
        for context, scores in unit.get("pronouns", {}).items():
            outcome = scores.get("results")
            if outcome is None or len(outcome) != len(old):
                print(f"{path.name} {context}: {len(outcome or [])} outcomes, not the {len(old)} old items: skipped")
                continue
            grouped = pronoun_breakdown([it for it, _ in common], [outcome[k] for _, k in common])
            grouped.pop("results")
            name = f"{path.parent.name}/{path.stem}"
            outcomes.setdefault(name, {})[context] = [bool(outcome[k]) for _, k in common]
            units.setdefault(name, {})[context] = {"old_items_accuracy": scores["accuracy"], **grouped}
            print(f"{name} {context}: old set {scores['accuracy']:.3f} of {scores['n']}; common {grouped['accuracy']:.3f} "
                  f"of {grouped['n']}; referential {grouped['referential']['accuracy']:.3f} of "
                  f"{grouped['referential']['n']}")  # fmt: skip
    summary = {"old_items_sha256": sha256_file(old_path), "old_item_count": len(old),
               "new_items_sha256": sha256_file(out / "pronoun_items.jsonl"), "new_item_count": len(new),
               "common_items": len(common), "units": units,
               "paired": paired_tests([it for it, _ in common], outcomes, samples=1000, seed=0)}  # fmt: skip
    write_json(out / "pronoun_items.rescored.json", summary, indent=1, newline=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
