"""Unit files for step-2 units whose models were lost with a device machine but whose evaluation came back: the
translations and pronoun scores that `docnmt_real.evaluate` caches in ``<unit>/model/evaluation/`` (returned by
`docnmt_units.sh` in ``logs.tar.gz``) and the unit's training log.

Every cache is checked against what `evaluate` would compute here (the same test-set lines and sources, the same random
contexts, the same pronoun items, the recorded generation settings); the scores are computed again from the cached
translations; what the lost model would still have had to compute is listed under ``partial.missing``, and what only
the model directory held (its signature, its curve) is marked as not recorded. The aggregate reads these files like
any other unit's.

    python benchmarks/gpu/docnmt_from_caches.py /work/gpu8 --commit 430e81d... --device "cuda (NVIDIA H200)" \\
        --translate-batch-size 128 --precision bf16 --software torch=2.11.0+cu130 transformers=5.24.0 datasets=5.2.0 --cache DIR
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # the package, and `import benchmarks.*`
from benchmarks.arguments import BATCH  # noqa: E402
from benchmarks.common import software, write_json  # noqa: E402
from benchmarks.studies import docnmt_real as d  # noqa: E402

PRONOUN_CONTEXTS = ("document", "random", "none")


def log_metrics(log: str) -> dict:
    """The trainer's final ``***** train metrics *****`` and ``***** validation metrics *****`` blocks of a log."""
    out = {}
    for block in ("train", "validation"):
        match = re.search(rf"\*\*\*\*\* {block} metrics \*\*\*\*\*\n((?:  \S+ +=.*\n)+)", log)
        if match is None:
            raise SystemExit(f"the log has no '{block} metrics' block: was the unit trained to the end?")
        out[block] = {k: v.strip() for k, v in re.findall(r"  (\S+) += (.*)", match.group(1))}
    return out


def seconds(value: str) -> float:
    h, m, s = value.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def load_cache(directory: Path, key: str, settings: dict):
    path = directory / f"{key}.json"
    if not path.is_file():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    if saved["settings"] != settings:
        raise SystemExit(f"{path}: computed with other settings than this data and recipe give: {saved['settings']}")
    return saved["value"]


def unit_record(args, name: str, returned: Path, step1: dict) -> tuple[dict, dict]:
    from hf_syntax_mt.evaluation import corpus_scores
    from hf_syntax_mt.evaluation.pronouns import load_pronoun_items, random_contexts

    kind, seed = d.parse_unit(name)
    if kind not in d.CONTEXT_KINDS:
        raise SystemExit(f"{name}: only units of a context kind ({', '.join(d.CONTEXT_KINDS)}) are rebuilt here")
    study = d.parse_args(["--units", name, "--cache", args.cache])
    study.recipe["translate_batch_size"] = args.translate_batch_size
    r, files = study.recipe, d.shared_data(study)
    done = returned / "runs" / "docnmt_real" / name / "model" / "evaluation"
    scores, hypotheses, missing = {"tests": {}, "random_context": {}, "pronouns": {}}, {}, []
    for test in d.TEST_SETS:
        sources, references, doc_ids, lines = d.documents(files, test)
        own = load_cache(done, test, d.translation_settings(r, sources, lines))
        contexts = random_contexts(doc_ids, sources, r["context_sentences"], seed=seed + 1)
        other = load_cache(done, f"{test}.random", d.translation_settings(r, sources, lines, contexts))
        for key, value, field in ((test, own, "tests"), (f"{test}.random", other, "random_context")):
            if value is None:
                missing.append(key)
                continue
            hypotheses[key] = value["hypotheses"]
            scores[field][test] = {**corpus_scores(value["hypotheses"], references), "sentences": len(lines)}
            if "minutes" in value:
                scores[field][test]["minutes"] = value["minutes"]
    items = load_pronoun_items(study.items)
    for context in PRONOUN_CONTEXTS:
        value = load_cache(done, f"pronouns.{context}", d.pronoun_settings(items, seed))
        if value is None:
            missing.append(f"pronouns.{context}")
        else:
            scores["pronouns"][context] = value
    log = (returned / "logs" / f"{name}.log").read_text(encoding="utf-8", errors="replace")
    metrics = log_metrics(log)
    train, validation = metrics["train"], metrics["validation"]
    record = {
        "unit": name, "kind": kind, "seed": seed, "about": d.KINDS[kind], "recipe": r, "quick": False,
        "steps": int(train["global_step"]), "train_minutes": round(seconds(train["train_runtime"]) / 60, 2),
        "tokens_seen": int(train["num_input_tokens_seen"]),
        "validation": {k.removeprefix("validation_"): float(v) for k, v in validation.items()
                       if k.removeprefix("validation_") in ("bleu", "chrf", "loss", "ribes")},
        **scores,
        "model_signature": "not recorded: the model was lost with the device machine before its unit file was written",
        "device": args.device, "precision": args.precision, "step1": step1, "threads": 2, **args.software,
        "package": software()["package"], "commit": args.commit,
        "partial": {"source": "evaluation caches and training log returned from the device machine "
                              "(benchmarks/gpu/docnmt_from_caches.py)", "missing": missing},
    }  # fmt: skip
    return record, hypotheses


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("returned", type=Path, help="where logs.tar.gz was unpacked (holds logs/ and runs/docnmt_real/)")
    p.add_argument("--units", nargs="+", default=[f"document-seed{s}" for s in range(3)])
    p.add_argument("--commit", required=True, help="the commit the device ran (.dev/COMMIT)")
    p.add_argument("--device", required=True, help='as a unit file writes it, e.g. "cuda (NVIDIA H200)"')
    p.add_argument("--translate-batch-size", type=BATCH, required=True)
    p.add_argument("--precision", choices=["bf16", "fp32"], required=True, help="what the device trained in (a GPU "
                   "with bf16: bf16, as `common.choose_precision` picks there)")  # fmt: skip
    p.add_argument("--software", nargs="+", default=[], help="NAME=VERSION of the device machine, e.g. torch=2.11.0")
    p.add_argument("--cache", default=str(d.DEFAULT_CACHE), help="the shared en-de data set")
    p.add_argument("--results", type=Path, default=d.RESULTS)
    args = p.parse_args(argv)
    args.software = dict(s.split("=", 1) for s in args.software)
    step1_dir = ROOT / "runs" / "docnmt_real" / "step1-seed0" / "model"  # the model carried to the device
    committed = json.loads((args.results / "runs" / "step1-seed0.json").read_text())["weights_sha256"]
    sha = d.weights_sha256(step1_dir)
    step1 = {"weights_sha256": sha, "rebuilt": False, "matches_committed": sha == committed}
    runs = args.results / "runs"
    for name in args.units:
        record, hypotheses = unit_record(args, name, args.returned, step1)
        record["hypotheses_sha256"] = d.write_hypotheses(runs, name, hypotheses)
        path = write_json(runs / f"{name}.json", record, indent=1, newline=True)
        tests = ", ".join(f"{t} {s['bleu']:.2f}" for t, s in record["tests"].items())
        print(f"{name}: BLEU {tests}; missing {record['partial']['missing'] or 'nothing'} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
