"""What a user gets from serving a trained model (issue 55, item 6): test BLEU and chrF of one trained model translated
by `generate` (the package's pipeline, as `hf-syntax-mt translate`), by its CTranslate2 export in float32 (the same
hypotheses expected: identical lines are counted) and in int8 (the difference is said), with the speed of each.

The model: round two's low-resource DBSA + synchronous-loss recipe (`benchmarks/studies/study_round2.py`, unit
``low-dbsa_sync_full-seed0``: d_model 256, 3+3 layers), or any exportable model directory (``--model``). Every test
set is translated with beam 4 (the unit's setting), 32 sentences per batch, longest first (`translate_lines`), one
thread (``--threads``); the three engines run one after the other on each test set and the load average is recorded
around each.

    python benchmarks/studies/deploy_quality.py --model RUNS/models/low-dbsa_sync_full-seed0 --data MULTI30K_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BATCH, BEAMS, POSITIVE, THREADS, refuse_overwriting  # noqa: E402
from benchmarks.common import RESULTS, cpu_name, git_commit, relative_path, software, write_json  # noqa: E402

TEST_SETS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
OUT = RESULTS / "deploy" / "deploy_quality.json"


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a trained model directory whose config exports (check_exportable)")
    p.add_argument("--data", required=True, help="a folder with Multi30k's {test set}.{en,de}")
    p.add_argument("--run-file", help="the unit's JSON (study_round2's runs/NAME.json): its own test scores are "
                   "copied beside these for comparison")  # fmt: skip
    p.add_argument("--test-sets", nargs="+", default=list(TEST_SETS))
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--beams", type=BEAMS, default=4)
    p.add_argument("--batch-size", type=BATCH, default=32)
    p.add_argument("--threads", type=THREADS, default=1)
    p.add_argument("--limit", type=POSITIVE, default=None, help="the first N sentences of each test set (a smoke run)")
    p.add_argument("--output", default=str(OUT))
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["output"], ["run_file"], ["model", "data"])
    return args


def translate(pipe, lines: list[str], args) -> tuple[list[str], float]:
    from hf_syntax_mt.inference import translate_lines

    start = time.perf_counter()
    hyps = translate_lines(pipe, lines, batch_size=args.batch_size, progress=False, num_beams=args.beams)
    return [h.strip() for h in hyps], time.perf_counter() - start


def main(argv=None) -> int:
    args = arguments(argv)
    own = unit_scores(args.run_file, Path(args.model)) if args.run_file else None  # checked before any translating
    import torch
    from transformers import AutoTokenizer, pipeline

    import hf_syntax_mt  # noqa: F401  (registers the pipeline task)
    from hf_syntax_mt.evaluation import corpus_scores
    from hf_syntax_mt.export import export_to_ctranslate2
    from hf_syntax_mt.export.serve import CTranslate2Pipeline

    torch.set_num_threads(args.threads)
    commit = git_commit()  # the commit the run starts from
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    engines = {}
    with tempfile.TemporaryDirectory(prefix="deploy-quality-") as tmp:
        exported = {}
        for quantization in ("float32", "int8"):
            start = time.perf_counter()
            directory = export_to_ctranslate2(args.model, Path(tmp) / quantization, quantization=quantization)
            exported[quantization] = {"export_s": round(time.perf_counter() - start, 1),
                                      "model_bin_bytes": (directory / "model.bin").stat().st_size}  # fmt: skip
            engines[f"ctranslate2_{quantization}"] = CTranslate2Pipeline(directory, threads=args.threads)
        engines = {"generate": pipeline("syntax-translation", model=args.model, device="cpu"), **engines}
        results = {}
        for test_set in args.test_sets:
            data = Path(args.data)
            sources = (data / f"{test_set}.{args.src}").read_text(encoding="utf-8").split("\n")[:-1][: args.limit]
            refs = (data / f"{test_set}.{args.tgt}").read_text(encoding="utf-8").split("\n")[: len(sources)]
            by_engine, hypotheses = {}, {}
            for name, pipe in engines.items():
                load = os.getloadavg()[0]
                hyps, seconds = translate(pipe, sources, args)
                tokens = sum(len(tokenizer(h)["input_ids"]) for h in hyps)  # target subwords, </s> included
                hypotheses[name] = hyps
                by_engine[name] = {**corpus_scores(hyps, refs), "seconds": round(seconds, 2),
                                   "sentences_per_s": round(len(sources) / seconds, 2),
                                   "target_tokens_per_s": round(tokens / seconds, 1),
                                   "load_average_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}  # fmt: skip
            for name in engines:
                same = sum(a == b for a, b in zip(hypotheses[name], hypotheses["generate"], strict=True))
                by_engine[name]["identical_to_generate"] = same
                by_engine[name]["speed_vs_generate"] = round(
                    by_engine[name]["sentences_per_s"] / by_engine["generate"]["sentences_per_s"], 2
                )
                for metric in ("bleu", "chrf"):
                    by_engine[name][f"{metric}_minus_generate"] = round(
                        by_engine[name][metric] - by_engine["generate"][metric], 2
                    )
            results[test_set] = {"sentences": len(sources), "engines": by_engine}
            print(test_set, json.dumps({n: {k: e[k] for k in ("bleu", "chrf", "identical_to_generate",
                                         "sentences_per_s")} for n, e in by_engine.items()}), flush=True)  # fmt: skip
    config = json.loads((Path(args.model) / "config.json").read_text(encoding="utf-8"))
    report = {
        "what": "test BLEU/chrF and speed of one trained model: generate vs its CTranslate2 export (issue 55 item 6)",
        "model": Path(args.model).resolve().name, "model_signature": _signature(Path(args.model)),
        "model_type": config.get("model_type"),
        "dims": {k: config.get(k) for k in ("d_model", "encoder_layers", "decoder_layers", "vocab_size")},
        "methods": {k: config.get(k) for k in ("encoder_dbsa_heads", "decoder_dbsa_heads", "dbsa_loss_weight",
                                               "sync_loss_weight", "decoder_dbsa_full_context")},  # fmt: skip
        "generation": {"num_beams": args.beams, "batch_size": args.batch_size, "threads": args.threads},
        "exported": exported, "tests": results, "unit_scores": own, "argv": [relative_path(a) for a in sys.argv[1:]],
        "commit": commit, "machine": {"cpu": cpu_name(), "cpus": os.cpu_count()}, "versions": _versions(),
    }  # fmt: skip
    print(f"wrote {write_json(args.output, report, newline=True)}", file=sys.stderr)
    return 0


def unit_scores(run_file: str, model_dir: Path) -> dict:
    """The unit's own test BLEU/chrF from its run file, refused unless the file is the model's own run: its
    `model_signature` must be the one the model directory's `hf_syntax_mt_run.json` records (two runs of one recipe,
    say round two's unit and its replay, have different signatures and scores)."""
    unit = json.loads(Path(run_file).read_text(encoding="utf-8"))
    mine, theirs = _signature(model_dir), unit.get("model_signature")
    if mine is None or mine != theirs:
        raise SystemExit(
            f"--run-file {run_file}: its model_signature is not the model's ({model_dir / 'hf_syntax_mt_run.json'})"
            f"\n  run file: {theirs}\n  model:    {mine}\npass the run file of the run that trained this model, or "
            "leave --run-file out"
        )
    return {k: {m: v.get(m) for m in ("bleu", "chrf")} for k, v in unit.get("tests", {}).items()}


def _signature(model_dir: Path) -> str | None:
    """The training run's model signature (`hf_syntax_mt_run.json`), if the directory has one."""
    run = model_dir / "hf_syntax_mt_run.json"
    return json.loads(run.read_text(encoding="utf-8")).get("model_signature") if run.is_file() else None


def _versions() -> dict:
    import importlib.metadata

    out = software()
    for name in ("transformers", "ctranslate2", "sacrebleu"):
        out[name] = importlib.metadata.version(name)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
