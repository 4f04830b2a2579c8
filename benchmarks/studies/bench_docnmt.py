"""The document-level benchmark: the two-step training of Zhang et al. (2018, Section 2.4) on the
real documents of `docnmt-en-de` (en->de by default), with the same train script. That corpus has only dev and test
splits (see its PROVENANCE.md: the training sets were not available), so the benchmark makes its own, in flags:

- train (`--train-corpora`, default `iwslt17.dev europarl7.dev`): 12,554 sentences in 333 documents, TED talks and
  parliament debates, concatenated into `--output-dir`/data (with `--max-train N`, the first N/2 of each). Dev sets,
  so that no test set is trained on.
- validation (`--validation-corpus`, default `newstest2015`, first `--max-validation` sentences): a third domain
  (news), scored for each model, never used to choose one; `none` skips it.
- test (`--test-corpus`, default `iwslt17.test`, first `--max-test` sentences): TED talks of about 100 sentences
  each, in order, so every test sentence has its real previous sentences as context. `europarl7.test` stays unused
  (the newstest2016 test set is withheld and not in shared/).

Three models, one seed, one BPE (trained in step 1 on the training sentences, then loaded with the model):

1. `sentence`: a SyntaxMT model with no syntax heads and no context (= Marian), `--sentence-steps` steps.
2. `control`: `sentence` trained `--document-steps` more steps without context, every parameter trainable.
3. `document`: `sentence` + `--context_sentences K --freeze_sentence_level`, `--document-steps` steps on the same
   documents with their doc ids: only theta_d (context encoder, context attentions, gates) is trained.

`document` and `control` have the same number of training steps, so the paired bootstrap is `document` vs
`control`. Each model is scored on the test set (BLEU, chrF, RIBES with sacrebleu signatures); results go to
`--results` (`results.json`, `results.md`), and each model directory to `--output-dir`/{sentence,control,document}.
The JSON records every train-script argv, so each model can be rebuilt with `scripts/train.py`.

    python benchmarks/studies/bench_docnmt.py                        # about 15 minutes on 2 CPU cores
    python benchmarks/studies/bench_docnmt.py --quick                # about 1 minute, plumbing check
    python benchmarks/studies/bench_docnmt.py --help                 # the docnmt flags
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BATCH, BEAMS, NATURAL, POSITIVE, RATE, SECONDS, SEED, THREADS, apply_quick  # noqa: E402
from benchmarks.common import DATA, cpu_name, read_lines, write_json

#: (name, what it is) of the three docnmt models, in training order.
DOC_MODELS = [
    ("sentence", "step 1: sentence-level model (no context)"),
    ("control", "step 1 + the same extra steps without context (every parameter trained)"),
    ("document", "step 1 + step 2: context encoder and context attentions only (theta_s frozen)"),
]


def parse_docnmt_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["docnmt"], default="docnmt", help=argparse.SUPPRESS)  # bench_multi30k.py's flag
    p.add_argument("--data", default=str(DATA), help="the shared data directory (reads docnmt-en-de/)")
    p.add_argument("--direction", default="en-de", choices=["en-de", "de-en"])
    p.add_argument("--train-corpora", nargs="+", default=["iwslt17.dev", "europarl7.dev"],
                   help="training documents: docnmt-en-de file stems, concatenated in this order")  # fmt: skip
    p.add_argument("--validation-corpus", default="newstest2015", help="scored after each model; 'none' to skip")
    p.add_argument("--test-corpus", default="iwslt17.test")
    p.add_argument("--max-train", type=POSITIVE, default=None,
                   help="at most N training sentences, the first N/len(--train-corpora) of each corpus (default: all)")  # fmt: skip
    p.add_argument("--max-validation", type=POSITIVE, default=200, help="first N validation sentences")
    p.add_argument("--max-test", type=POSITIVE, default=500, help="first N test sentences (whole documents in order)")
    p.add_argument(
        "--context-sentences", type=POSITIVE, default=2, help="k, previous source sentences (paper best: 2)"
    )
    p.add_argument("--sentence-steps", type=POSITIVE, default=300, help="step 1: training steps of the sentence model")
    p.add_argument("--document-steps", type=POSITIVE, default=150,
                   help="step 2: training steps of the document model, and the extra steps of the control")  # fmt: skip
    p.add_argument(
        "--budget-seconds", type=SECONDS, default=None, help="also stop each training after this many seconds"
    )
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--batch-size", type=BATCH, default=32)
    p.add_argument("--learning-rate", type=RATE, default=1e-3)
    p.add_argument("--warmup-steps", type=NATURAL, default=100, help="for each training (step 1, step 2, control)")
    p.add_argument("--d-model", type=POSITIVE, default=128, help="the model's width")
    p.add_argument("--layers", type=POSITIVE, default=3, help="encoder and decoder layers, each")
    p.add_argument("--heads", type=POSITIVE, default=4, help="attention heads")
    p.add_argument("--vocab-size", type=POSITIVE, default=8000, help="the joint BPE's vocabulary (trained in step 1)")
    p.add_argument(
        "--max-length", type=POSITIVE, default=64, help="source/target truncation and generation, in tokens"
    )
    p.add_argument("--max-context-length", type=POSITIVE, default=128, help="most context tokens (most recent kept)")
    p.add_argument("--num-beams", type=BEAMS, default=1)
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    p.add_argument("--threads", type=THREADS, default=1, help="torch threads (1 is fastest on a shared 2-core CPU)")
    p.add_argument("--output-dir", default="runs/bench_docnmt", help="models, and the concatenated training files")
    p.add_argument("--results", default="benchmarks/results/docnmt")
    p.add_argument("--quick", action="store_true", help="plumbing check in 1-2 minutes: 2,000 training sentences, "
                   "40 + 20 steps, d_model 64, 100 test and 50 validation sentences (flags given explicitly win)")  # fmt: skip
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    quick = dict(max_train=2000, max_validation=50, max_test=100, sentence_steps=40, document_steps=20,
                 warmup_steps=20, d_model=64, vocab_size=2000, bootstrap_samples=200)  # fmt: skip
    apply_quick(p, args, argv, quick)
    return args


def docnmt_files(args, work: Path) -> dict[str, dict[str, Path]]:
    """Source, target and doc-id files of each split. The training corpora are concatenated (with
    ``--max-train``, the first sentences of each) into ``work``; the other splits are read in place."""
    src, tgt = args.direction.split("-")
    root = Path(args.data) / "docnmt-en-de"

    def corpus(stem: str) -> dict[str, Path]:
        out = {"src": root / f"{stem}.{src}", "tgt": root / f"{stem}.{tgt}", "docid": root / f"{stem}.docid"}
        for path in out.values():
            if not path.is_file():
                raise SystemExit(f"missing data file {path} (corpora: iwslt17.dev/test, europarl7.dev/test, "
                                 "newstest2015; see docnmt-en-de/PROVENANCE.md)")  # fmt: skip
        return out

    files = {"train": {k: work / f"train.{k}" for k in ("src", "tgt", "docid")}, "test": corpus(args.test_corpus)}
    if args.validation_corpus != "none":
        files["validation"] = corpus(args.validation_corpus)
    overlap = set(args.train_corpora) & {args.test_corpus, args.validation_corpus}
    if overlap:
        raise SystemExit(f"{sorted(overlap)} is both a training and an evaluation corpus")
    per_corpus = None if args.max_train is None else -(-args.max_train // len(args.train_corpora))
    work.mkdir(parents=True, exist_ok=True)
    for key in ("src", "tgt", "docid"):
        lines = []
        for stem in args.train_corpora:
            lines += read_lines(corpus(stem)[key])[:per_corpus]
        files["train"][key].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return files


def train_docnmt_model(args, name: str, files, start_from: Path | None, context: bool) -> dict:
    """One `training.script.run`: step 1 (``start_from=None``), the control or the document model."""
    from hf_syntax_mt.training.script import run
    from hf_syntax_mt.training.script_args import parse_args as train_args

    out = Path(args.output_dir) / name
    src, tgt = args.direction.split("-")
    steps = args.sentence_steps if start_from is None else args.document_steps
    argv = [
        "--output_dir",
        str(out),
        "--overwrite_output_dir",
        "--do_train",
        "--do_predict",
        "--source_lang",
        src,
        "--target_lang",
        tgt,
    ]  # a rerun replaces the previous run's model
    for split, f in files.items():
        argv += [f"--{split}_source_file", str(f["src"]), f"--{split}_target_file", str(f["tgt"])]
        if context:
            argv += [f"--{split}_docid_file", str(f["docid"])]
    if "validation" in files:
        argv += ["--do_eval", "--max_eval_samples", str(args.max_validation)]
    if start_from is None:
        argv += ["--d_model", str(args.d_model), "--encoder_layers", str(args.layers),
                 "--decoder_layers", str(args.layers), "--attention_heads", str(args.heads),
                 "--ffn_dim", str(4 * args.d_model), "--dropout", "0.1", "--vocab_size", str(args.vocab_size)]  # fmt: skip
    else:
        argv += ["--model_name_or_path", str(start_from)]  # size and tokenizer from step 1
    if context:
        argv += ["--context_sentences", str(args.context_sentences), "--freeze_sentence_level",
                 "--config_overrides", f"max_context_length={args.max_context_length}"]  # fmt: skip
    argv += [
        "--max_source_length", str(args.max_length), "--max_target_length", str(args.max_length),
        "--max_steps", str(steps), "--per_device_train_batch_size", str(args.batch_size),
        "--per_device_eval_batch_size", "128", "--learning_rate", str(args.learning_rate),
        "--warmup_steps", str(args.warmup_steps), "--lr_scheduler_type", "inverse_sqrt", "--weight_decay", "0",
        "--seed", str(args.seed), "--generation_num_beams", str(args.num_beams), "--logging_steps", "50",
        "--save_strategy", "no", "--report_to", "none", "--use_cpu", "--dataloader_num_workers", "0",
        "--max_predict_samples", str(args.max_test),
        "--data_description", f"docnmt-en-de {args.direction} (Maruf et al. 2019 splits; train "
        f"{'+'.join(args.train_corpora)}), research/non-commercial use only.",
        "--model_card_title", f"docnmt {args.direction} {name} (seed {args.seed}, CPU benchmark)",
    ]  # fmt: skip
    if args.budget_seconds:
        argv += ["--time_budget_seconds", str(args.budget_seconds)]
    start = time.perf_counter()
    metrics = run(*train_args(argv))
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    hypotheses = read_lines(out / "test_generations.txt")
    return {"name": name, "dir": str(out), "argv": argv, "seconds": round(time.perf_counter() - start, 1),
            "train_runtime": metrics.get("train_runtime"), "steps": info["global_step"], "scores": info["scores"],
            "model_signature": info["model_signature"], "hypotheses": hypotheses}  # fmt: skip


def parameter_counts(model_dir: str | Path) -> dict[str, int]:
    """Trainable weights saved in a model directory, split into theta_s (sentence level) and theta_d (document level).
    Shared embeddings count once; Marian's `final_logits_bias` is a buffer, never trained, and is left out."""
    from safetensors import safe_open

    from hf_syntax_mt.methods.document_context import is_document_parameter

    counts = {"sentence_level": 0, "document_level": 0}
    with safe_open(str(Path(model_dir) / "model.safetensors"), "pt") as f:
        for key in f.keys():  # noqa: SIM118 (safe_open is not a dict)
            if key == "final_logits_bias":
                continue
            size = math.prod(f.get_slice(key).get_shape())
            counts["document_level" if is_document_parameter(key) else "sentence_level"] += size
    return counts


def sentence_level_drift(step1_dir: str | Path, model_dir: str | Path) -> float:
    """Largest absolute difference between step 1's tensors and the same tensors of another model (0.0 for the
    document model: Section 2.4 keeps theta_s fixed)."""
    from safetensors.torch import load_file

    before = load_file(str(Path(step1_dir) / "model.safetensors"))
    after = load_file(str(Path(model_dir) / "model.safetensors"))
    missing = sorted(set(before) - set(after))
    if missing:
        raise ValueError(f"{model_dir} lacks step-1 tensors {missing[:5]}")
    return max(float((after[k].float() - before[k].float()).abs().max()) for k in before)


def docnmt_markdown(summary: dict) -> str:
    runs = {r["name"]: r for r in summary["runs"]}
    val = summary["validation_corpus"]
    decoding = "greedy decoding" if summary["num_beams"] == 1 else f"beam {summary['num_beams']}"
    lines = [
        f"docnmt-en-de {summary['direction']}: train {' + '.join(summary['train_corpora'])} "
        f"({summary['train_sentences']:,} sentences, {summary['train_documents']} documents), test "
        f"`{summary['test_corpus']}` (first {summary['test_size']} sentences, {summary['test_documents']} documents)"
        + (f", validation `{val}` (first {summary['validation_size']})" if val != "none" else "") + ". "
        f"d_model {summary['d_model']}, {summary['layers']}+{summary['layers']} layers, {summary['heads']} heads, "
        f"batch {summary['batch_size']}, seed {summary['seed']}, {decoding}; context k = "
        f"{summary['context_sentences']} previous source sentences. Total {summary['seconds']:.0f} s.",
        "",
        "| model | steps (total) | trained parameters | train s | "
        + (f"{val} BLEU | " if val != "none" else "") + "test BLEU | test chrF | test RIBES | "
        "BLEU p vs control | chrF p vs control |",
        "|---|---|---|---|" + ("---|" if val != "none" else "") + "---|---|---|---|---|",
    ]  # fmt: skip
    for name, _ in DOC_MODELS:
        r = runs[name]
        total = r["steps"] + (runs["sentence"]["steps"] if name != "sentence" else 0)
        sig = r.get("significance")
        p = [f"{sig[k]['p_value']:.3f}" if sig else "-" for k in ("bleu", "chrf")]
        t = r["scores"]["test"]
        cells = [name, f"{r['steps']} ({total})", f"{r['trained_parameters']:,}", f"{r['train_runtime']:.0f}"]
        if val != "none":
            cells.append(f"{r['scores']['validation']['bleu']:.2f}")
        cells += [f"{t['bleu']:.2f}", f"{t['chrf']:.2f}", f"{t['ribes']:.4f}", *p]
        lines.append("| " + " | ".join(cells) + " |")
    first = runs["sentence"]["scores"]["test"]
    lines += ["", f"Document model: sentence-level tensors vs step 1, max |difference| = "
              f"{runs['document']['sentence_level_drift']:g} (control: {runs['control']['sentence_level_drift']:g}).",
              "", f"BLEU: `{first['bleu_signature']}`", f"chrF: `{first['chrf_signature']}`",
              f"RIBES: `{first['ribes_signature']}`",
              f"Paired bootstrap: `{runs['document']['significance']['bleu']['signature']}`"]  # fmt: skip
    lines += [f"- {name}: `{runs[name]['model_signature']}`" for name, _ in DOC_MODELS]
    return "\n".join(lines)


def run_docnmt(args) -> int:
    """Step 1, control and step 2 on docnmt-en-de (see the module docstring); writes results.json/results.md."""
    import torch
    from transformers.utils import logging as hf_logging

    from hf_syntax_mt.evaluation import paired_bootstrap

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    files = docnmt_files(args, Path(args.output_dir) / "data")
    train_ids = read_lines(files["train"]["docid"])
    test_ids = read_lines(files["test"]["docid"])[: args.max_test]
    references = read_lines(files["test"]["tgt"])[: args.max_test]
    print(f"train: {len(train_ids):,} sentences in {len(set(train_ids))} documents ({' + '.join(args.train_corpora)}); "
          f"test: {len(references)} sentences in {len(set(test_ids))} documents ({args.test_corpus})", flush=True)  # fmt: skip

    runs: dict[str, dict] = {}
    step1 = Path(args.output_dir) / "sentence"
    for name, what in DOC_MODELS:
        print(f"[{time.perf_counter() - t0:6.0f} s] training {name}: {what} ...", flush=True)
        start_from = None if name == "sentence" else step1
        run = train_docnmt_model(args, name, files, start_from, context=name == "document")
        counts = parameter_counts(run["dir"])
        run["trained_parameters"] = counts["document_level"] if name == "document" else counts["sentence_level"]
        run["parameters"] = counts
        if name != "sentence":
            run["sentence_level_drift"] = sentence_level_drift(step1, run["dir"])
        t = run["scores"]["test"]
        print(f"    {run['steps']} steps in {run['train_runtime']:.0f} s: test BLEU {t['bleu']:.2f}, "
              f"chrF {t['chrf']:.2f}", flush=True)  # fmt: skip
        runs[name] = run
    runs["document"]["significance"] = paired_bootstrap(
        runs["control"]["hypotheses"], runs["document"]["hypotheses"], references, args.bootstrap_samples,
        seed=12345, names=("control", "document"),
    )  # fmt: skip
    summary = {
        "benchmark": "docnmt", "direction": args.direction, "train_corpora": args.train_corpora,
        "train_sentences": len(train_ids), "train_documents": len(set(train_ids)),
        "validation_corpus": args.validation_corpus, "validation_size": args.max_validation,
        "test_corpus": args.test_corpus, "test_size": len(references), "test_documents": len(set(test_ids)),
        "context_sentences": args.context_sentences, "max_context_length": args.max_context_length,
        "sentence_steps": args.sentence_steps, "document_steps": args.document_steps,
        "budget_seconds": args.budget_seconds, "seed": args.seed, "batch_size": args.batch_size,
        "learning_rate": args.learning_rate, "warmup_steps": args.warmup_steps, "d_model": args.d_model,
        "layers": args.layers, "heads": args.heads, "vocab_size": args.vocab_size, "max_length": args.max_length,
        "num_beams": args.num_beams, "quick": args.quick, "threads": args.threads, "torch": torch.__version__,
        "cpu": cpu_name(), "seconds": round(time.perf_counter() - t0, 1),
        "runs": [{k: v for k, v in runs[name].items() if k != "hypotheses"} for name, _ in DOC_MODELS],
    }  # fmt: skip
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    write_results(results, summary, docnmt_markdown(summary))
    return 0


def write_results(directory: Path, summary: dict, table: str) -> None:
    """`results.json` (everything) and `results.md` (the table) in `directory`; prints the table."""
    write_json(directory / "results.json", summary, default=str)
    (directory / "results.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"\nwrote {directory / 'results.json'} and {directory / 'results.md'} ({summary['seconds']:.0f} s)")


def main(argv=None) -> int:
    return run_docnmt(parse_docnmt_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
