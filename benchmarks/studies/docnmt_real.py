"""Document-level translation on real documents (issue 27): Zhang et al. (2018)'s two steps on the shared en-de data,
against a control that trains as long without context, and the same document model given another document's
context (Li et al. 2020's control: a gain counts as context use only if it beats that run too).

Units (each one resumable and skipped once its JSON exists, as in `multi30k_study.py`):

- `step1-seed0`: the sentence-level model, trained from scratch on the shared training set
  (`ende_sentence_data.py`: Multi30k train + iwslt17.dev + europarl7.dev + bcontrast train, 55,399 pairs);
- `document-seedK` (K = 0, 1, 2): step 2, step 1's model with k = 2 previous source sentences as context, a 1-layer
  context encoder and context gates (`--context_sentences 2 --freeze_sentence_level`), only the document-level
  parameters trained, on the same sentences with their document ids;
- `control-seedK`: step 1's model trained as many steps again on the same sentences without context (every
  parameter trained, the same schedule);
- `unfrozen-seedK`: the document model with every parameter trained (no `--freeze_sentence_level`), so that it and
  the control differ only in the context: the frozen design gives the control more parameters to train.

Step 2 starts from step 1's model on disk. Only the unit files outlive a machine, so where step 1's unit file is
committed but its model is not on disk (a new machine), a step-2 unit first trains step 1 again from the same
recipe and seed and records its weights fingerprint (`weights_sha256`) beside the committed one: on the same commit,
precision and CPU kind they are equal, so every seed's step 2 starts from the weights step 1's unit scored.

Every unit translates the three test sets (`iwslt17.test`, `europarl7.test`, `bcontrast.test`), each document in
order with its own context, through the CLI's path (`translate_lines`: the same translations as `translate_document`
per document, with batches across documents; beam 4) and scores them (sacreBLEU BLEU and chrF), and scores the
contrastive pronoun items (`results/docnmt_real/pronoun_items.jsonl`, `pronoun_items.py`); a document unit does both
again with random context (each document given another document's sentences, `evaluation.pronouns.random_contexts`)
and the pronouns also with no context. Each test set's translations are kept in the model directory as they finish
(`cached`), so a unit cut off during its evaluation goes on from there. A unit writes `RESULTS/runs/<unit>.json` (with
the pronoun item file it scored: `pronoun_items`, its path, sha256 and count) and its hypotheses
(`<unit>.<test set>.txt`, `<unit>.<test set>.random.txt`). `--aggregate` (`docnmt_stats.py`) rebuilds
`RESULTS/results.md` from the unit files: per test set, step 1 and mean ± std over seeds; per seed the paired
bootstrap document vs control and document vs random context; a pooled bootstrap over the seeds' concatenated
hypotheses; the pronoun accuracies, labelled with the item set they were scored on, and the referential items' by
antecedent distance from `pronoun_items.rescored.json` where it exists.

    python benchmarks/studies/docnmt_real.py --list                  # which units are done
    python benchmarks/studies/docnmt_real.py --units step1-seed0     # one unit (the others need it)
    python benchmarks/studies/docnmt_real.py                         # every unit still missing, in PLAN order
    python benchmarks/studies/docnmt_real.py --aggregate
    python benchmarks/studies/docnmt_real.py --quick --results /tmp/quick --output-dir /tmp/quick-runs   # plumbing check

The recipe is the Multi30k study's (d_model 256, 3+3 layers, 4 heads, FFN 1024, dropout 0.1, joint BPE 8,000, token
batches of 2,500 padded tokens, Adam beta2 0.98, lr 7e-4 with 800 inverse-square-root warm-up steps, clipping 1.0,
label smoothing 0.1, the average of the last 5 checkpoints, beam 4) with Trainer `--bf16` where the hardware computes
bf16 natively (else fp32: `common.choose_precision`, recorded per unit), `attention_init=xavier`,
sentences up to 128 subwords and `STEP1_STEPS` steps. Step 2 (document and control alike) runs `STEP2_STEPS` steps
at the learning rate where step 1's schedule ended (constant after 200 warm-up steps), so the control is not thrown
off by a new warm-up and both start from the same averaged step-1 weights. Validation: the first 400 sentences of
newstest2015 (news, never used to pick a model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common
from benchmarks.arguments import POSITIVE  # noqa: E402
from benchmarks.common import parse_unit as _parse_unit
from benchmarks.data.ende_sentence_data import DEFAULT_CACHE, TEST_SETS, VALIDATION_SET
from benchmarks.studies.docnmt_setup import (  # noqa: F401 (STEPn_STEPS: re-exported; shared with docnmt_stats)
    CONTEXT_KINDS,
    ITEMS,
    KINDS,
    PLAN,
    QUICK,
    RECIPE,
    RESULTS,
    STEP1_STEPS,
    STEP2_STEPS,
    item_file,
)
from benchmarks.studies.docnmt_stats import aggregate


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, RESULTS, common.ROOT / "runs" / "docnmt_real", threads=2,
                        units_help="units to run, e.g. step1-seed0 document-seed0 (default: the PLAN)")  # fmt: skip
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="the shared en-de data set (ende_sentence_data.py)")
    p.add_argument("--items", default=str(ITEMS), help="the pronoun items (pronoun_items.py)")
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    args = p.parse_args(argv)
    common.refuse_quick_evidence(p, args)
    args.recipe = {**RECIPE, **(QUICK if args.quick else {})}
    if args.quick and Path(args.output_dir).resolve() == (common.ROOT / "runs" / "docnmt_real").resolve():
        args.output_dir = str(Path(args.results) / "models")
    return args


def parse_unit(name: str) -> tuple[str, int]:
    kind, seed = _parse_unit(name, KINDS)
    if kind == "step1" and seed != 0:
        raise SystemExit("there is one step 1 unit: step1-seed0 (step 2's seeds vary)")
    return kind, seed


# ------------------------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------------------------
def shared_data(args) -> dict:
    """The shared data set's file paths (built or checked by `ende_sentence_data.build`). With --quick the training
    set is the first `max_train` pairs of each part (so documents are in it), written beside the models."""
    from benchmarks.data.ende_sentence_data import build

    files = build(args.data, args.cache, progress=True)["files"]
    n = args.recipe["max_train"]
    if n is None:
        return files
    from hf_syntax_mt.data.readers import read_lines

    train = {key: read_lines(files["train"][key]) for key in ("en", "de", "docid", "part")}
    seen: dict[str, int] = {}
    keep = []
    for k, part in enumerate(train["part"]):
        seen[part] = seen.get(part, 0) + 1
        if seen[part] <= n // 4:
            keep.append(k)
    small = Path(args.output_dir) / "data"
    small.mkdir(parents=True, exist_ok=True)
    out = dict(files["train"])
    for key in ("en", "de", "docid"):
        out[key] = small / f"train.{key}"
        out[key].write_text("".join(train[key][k] + "\n" for k in keep), encoding="utf-8")
    return {**files, "train": out}


def documents(files: dict, name: str, max_documents: int | None = None, max_document_lines: int | None = None):
    """(sources, references, doc ids, line indices) of an evaluation set in document order: every line, or the first
    ``max_document_lines`` lines of each of the first ``max_documents`` documents (``--quick``)."""
    from hf_syntax_mt.data.readers import read_doc_ids, read_lines

    sources, references = read_lines(files[name]["en"]), read_lines(files[name]["de"])
    doc_ids = read_doc_ids(files[name]["docid"], len(sources), files[name]["en"])
    lines, seen = [], {}
    for k, doc in enumerate(doc_ids):
        if doc not in seen and max_documents is not None and len(seen) == max_documents:
            break
        seen[doc] = seen.get(doc, 0) + 1
        if max_document_lines is None or seen[doc] <= max_document_lines:
            lines.append(k)
    return [sources[k] for k in lines], [references[k] for k in lines], [doc_ids[k] for k in lines], lines


def shared_tokenizer(args, files) -> Path:
    """One joint BPE for every unit, trained once on the training set (deterministic)."""
    from hf_syntax_mt.data.readers import read_lines
    from hf_syntax_mt.training import train_tokenizer

    directory = Path(args.output_dir) / f"tokenizer-{args.recipe['vocab_size']}"
    if not (directory / "tokenizer.json").is_file():
        lines = read_lines(files["train"]["en"]) + read_lines(files["train"]["de"])
        train_tokenizer([line for line in lines if line], vocab_size=args.recipe["vocab_size"]).save_pretrained(
            directory
        )
    return directory


# ------------------------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------------------------
def step2_learning_rate(r: dict) -> float:
    """The learning rate where step 1's inverse-square-root schedule ended: lr * sqrt(warmup / steps)."""
    return r["learning_rate"] * math.sqrt(r["warmup_steps"] / max(r["step1_steps"], r["warmup_steps"]))


def train_argv(args, kind: str, seed: int, out: Path, files: dict, tokenizer: Path, device: str) -> list[str]:
    r = args.recipe
    train, validation = files["train"], files[VALIDATION_SET]
    argv = ["--output_dir", str(out), "--do_train", "--do_eval", "--source_lang", "en", "--target_lang", "de",
            "--train_source_file", str(train["en"]), "--train_target_file", str(train["de"]),
            "--validation_source_file", str(validation["en"]), "--validation_target_file", str(validation["de"]),
            "--max_source_length", str(r["max_length"]), "--max_target_length", str(r["max_length"]),
            "--max_tokens", str(r["max_tokens"]), "--adam_beta2", str(r["adam_beta2"]), "--weight_decay", "0",
            "--max_grad_norm", str(r["max_grad_norm"]), "--seed", str(seed),
            "--average_checkpoints", str(r["average_checkpoints"]), "--average_every", str(r["average_every"]),
            "--eval_strategy", "steps", "--eval_steps", str(r["eval_steps"]),
            "--max_eval_samples", str(r["max_eval_samples"]), "--per_device_eval_batch_size", "64",
            "--generation_num_beams", str(r["num_beams"]), "--logging_steps", "50", "--save_strategy", "steps",
            "--save_steps", str(r["save_steps"]), "--save_total_limit", "1", "--report_to", "none",
            "--dataloader_num_workers", "0", "--disable_tqdm", "true", "--label_smoothing", str(r["label_smoothing"]),
            "--data_description", "en->de: Multi30k train, IWSLT17 TED dev, Europarl v7 dev, BConTrasT train "
            "(benchmarks/data/ende_sentence_data.py); research use, TED CC BY-NC-ND",
            "--model_card_title", f"docnmt_real {kind} (seed {seed})"]  # fmt: skip
    if kind == "step1":
        argv += ["--tokenizer_name", str(tokenizer), "--d_model", str(r["d_model"]),
                 "--encoder_layers", str(r["layers"]), "--decoder_layers", str(r["layers"]),
                 "--attention_heads", str(r["heads"]), "--ffn_dim", str(r["ffn_dim"]), "--dropout", str(r["dropout"]),
                 "--max_position_embeddings", str(max(256, 2 * r["max_length"])),
                 "--config_overrides", "attention_init=xavier", "--max_steps", str(r["step1_steps"]),
                 "--learning_rate", str(r["learning_rate"]), "--warmup_steps", str(r["warmup_steps"]),
                 "--lr_scheduler_type", "inverse_sqrt"]  # fmt: skip
    else:
        step1 = step1_dir(args)
        if not (step1 / "config.json").is_file():
            raise RuntimeError(f"{common.unit_name(kind, seed)} starts from step 1's model, which is missing ({step1}): run "
                               "the unit step1-seed0 first (its model is kept under --output-dir)")  # fmt: skip
        argv += ["--model_name_or_path", str(step1), "--max_steps", str(r["step2_steps"]),
                 "--learning_rate", f"{step2_learning_rate(r):.6g}", "--warmup_steps", str(r["step2_warmup_steps"]),
                 "--lr_scheduler_type", "constant_with_warmup"]  # fmt: skip
    if kind in CONTEXT_KINDS:
        argv += ["--context_sentences", str(r["context_sentences"]),
                 "--config_overrides", f"context_encoder_layers={r['context_encoder_layers']},context_gating=true",
                 "--train_docid_file", str(train["docid"]), "--validation_docid_file", str(validation["docid"])]  # fmt: skip
    if kind == "document":
        argv.append("--freeze_sentence_level")  # the paper's step 2 (Section 2.4): only theta_d trains
    if (
        common.choose_precision(r["precision"], device) == "bf16"
    ):  # bf16 only where it is native (common.choose_precision)
        argv.append("--bf16")
    if device == "cpu":
        argv.append("--use_cpu")
    return argv


def step1_dir(args) -> Path:
    return Path(args.output_dir) / "step1-seed0" / "model"


def weights_sha256(model_dir: str | Path) -> str:
    """sha256 over a saved model's tensors (name, dtype, shape and bytes, in name order), not over the file: two
    trainings that end at the same weights give the same value whatever metadata the file carries."""
    import torch
    from safetensors import safe_open

    digest = hashlib.sha256()
    with safe_open(str(Path(model_dir) / "model.safetensors"), framework="pt") as f:
        for key in sorted(f.keys()):
            tensor = f.get_tensor(key).contiguous()
            digest.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


#: the recipe fields that make step 1's model: a rebuilt step 1 must have the committed unit's
STEP1_FIELDS = ("d_model", "layers", "heads", "ffn_dim", "dropout", "vocab_size", "max_tokens", "step1_steps",
                "learning_rate", "warmup_steps", "adam_beta2", "max_grad_norm", "label_smoothing",
                "average_checkpoints", "average_every", "max_length", "save_steps", "max_train", "precision")  # fmt: skip


def ensure_step1(args, files: dict, device: str) -> dict:
    """Step 1's model for a step-2 unit, and where it came from. Nothing but the unit files outlives a machine, so on
    a new machine step 1's model is not on disk while `step1-seed0.json` is committed: step 1 is then trained again
    from the same recipe and seed, and its weights fingerprint (`weights_sha256`) is compared with the committed
    one (the same commit, precision and CPU kind give the same weights; another CPU kind may not). Returns
    ``{"weights_sha256", "rebuilt", "matches_committed"}`` for the unit file (``matches_committed`` None where the
    committed unit has no fingerprint)."""
    committed_file = Path(args.results) / "runs" / f"{common.unit_name('step1', 0)}.json"
    committed = json.loads(committed_file.read_text(encoding="utf-8")) if committed_file.is_file() else None
    rebuilt = False
    if not (step1_dir(args) / "hf_syntax_mt_run.json").is_file():  # written once step 1 has finished
        if committed is None:
            raise RuntimeError(f"step 2 starts from step 1's model, which is neither on disk ({step1_dir(args)}) nor "
                               f"committed as a unit ({committed_file}): run the unit step1-seed0 first")  # fmt: skip
        differ = {k: (committed["recipe"].get(k), args.recipe.get(k)) for k in STEP1_FIELDS
                  if committed["recipe"].get(k) != args.recipe.get(k)}  # fmt: skip
        if differ:
            raise RuntimeError(f"step 1's model is not on disk, and the committed {committed_file.name} was trained "
                               f"with another recipe (committed, now: {differ}): train it with the same recipe")  # fmt: skip
        print(f"    step 1's model is not on this machine ({step1_dir(args)}): training it again from its recipe "
              f"and seed (commit {str(committed.get('commit'))[:10]})", flush=True)  # fmt: skip
        train(args, "step1", 0, files, device)
        rebuilt = True
    sha = weights_sha256(step1_dir(args))
    expected = (committed or {}).get("weights_sha256")
    if expected is not None and sha != expected:
        here = (common.choose_precision(args.recipe["precision"], device), common.cpu_name())
        print(f"    warning: step 1's weights here ({sha[:12]}, {here}) differ from the committed unit's ({expected[:12]}, "
              f"{(committed.get('precision'), committed.get('cpu'))}): the unit records it", flush=True)  # fmt: skip
    return {
        "weights_sha256": sha,
        "rebuilt": rebuilt,
        "matches_committed": None if expected is None else sha == expected,
    }


def train(args, kind: str, seed: int, files: dict, device: str) -> tuple[Path, dict, list[str], float]:
    """Train the unit's model (resuming from its last checkpoint); returns (model dir, run info, argv, wall s)."""
    from transformers.trainer_utils import get_last_checkpoint

    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    out = Path(args.output_dir) / common.unit_name(kind, seed) / "model"
    argv = train_argv(args, kind, seed, out, files, shared_tokenizer(args, files), device)
    if (out / "hf_syntax_mt_run.json").is_file() and (not out.is_dir() or get_last_checkpoint(str(out)) is None):
        print(f"    {out} is trained already: evaluating it", flush=True)
        return out, json.loads((out / "hf_syntax_mt_run.json").read_text()), argv, 0.0
    common.resume_or_clear(out, argv)
    start = time.perf_counter()
    run(*train_args(argv))
    for old in out.glob("checkpoint-*"):  # the model is saved; a finished unit needs no checkpoint
        shutil.rmtree(old, ignore_errors=True)
    return out, json.loads((out / "hf_syntax_mt_run.json").read_text()), argv, time.perf_counter() - start


# ------------------------------------------------------------------------------------------------------------------
# Evaluation
# ------------------------------------------------------------------------------------------------------------------
def translate_with_contexts(model, tokenizer, sentences: list[str], contexts: list[list[str]], batch_size: int = 32,
                            **generate_kwargs) -> list[str]:  # fmt: skip
    """Translate ``sentences``, sentence i with the source sentences ``contexts[i]`` as its document context, through
    the pipeline's ``contexts=`` (the steps `translate_document` takes with the contexts it computes itself)."""
    from hf_syntax_mt.pipeline_syntax_mt import SyntaxTranslationPipeline

    if len(sentences) != len(contexts):
        raise ValueError(f"{len(sentences)} sentences but {len(contexts)} contexts")
    pipe = SyntaxTranslationPipeline(model=model, tokenizer=tokenizer)
    if pipe.parser is not None:
        raise ValueError("translate_with_contexts feeds no parses: use a model without syntax inputs")
    results = pipe(list(sentences), contexts=[list(c) for c in contexts], batch_size=batch_size, **generate_kwargs)
    return [r["translation_text"] for r in results] if sentences else []


def translate_documents(model, tokenizer, sources, doc_ids, batch_size: int, **generate_kwargs) -> list[str]:
    """Every document in order with its own previous sentences as context, through the CLI's path
    (`inference.translate_lines`): whole documents go to the pipeline together, so a batch holds sentences of several
    documents (each sentence's context is its own document's); the same translations as `translate_document` one
    document at a time (tested), in fewer `generate()` calls."""
    from hf_syntax_mt.data.documents import id_spans
    from hf_syntax_mt.inference import translate_lines
    from hf_syntax_mt.pipeline_syntax_mt import SyntaxTranslationPipeline

    pipe = SyntaxTranslationPipeline(model=model, tokenizer=tokenizer)
    return translate_lines(pipe, sources, id_spans(doc_ids), batch_size=batch_size, progress=False, **generate_kwargs)


def cached(directory: Path, key: str, settings: dict, compute):
    """``compute()``, or what it returned before for the same ``settings`` (a JSON file per key in ``directory``):
    a unit cut off during its evaluation goes on from the test sets it has finished."""
    path = directory / f"{key}.json"
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("settings") == settings:
            print(f"    {key}: from {path}", flush=True)
            return saved["value"]
    value = compute()
    directory.mkdir(parents=True, exist_ok=True)
    common.write_json(path, {"settings": settings, "value": value})
    return value


def _sha(lines) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def translation_settings(recipe: dict, sources: list[str], lines: list[int], contexts=None) -> dict:
    """What a test set's cached translations depend on (`cached`'s settings): the generation settings, the lines and
    their sources, and for a run with random context those contexts."""
    settings = {"num_beams": recipe["num_beams"], "batch_size": recipe["translate_batch_size"], "lines": len(lines),
                "sources": _sha(sources)}  # fmt: skip
    return settings if contexts is None else {**settings, "contexts": _sha(map(repr, contexts))}


def pronoun_settings(items: list, seed: int) -> dict:
    """What a unit's cached pronoun scores depend on: the items, and the seed that draws their random contexts."""
    return {"items": _sha(map(repr, items)), "seed": seed + 1}


def write_hypotheses(runs: Path, name: str, hypotheses: dict[str, list[str]]) -> dict[str, str]:
    """``runs/<unit>.<key>.txt`` per hypothesis list; returns their sha256 (the unit file records them)."""
    sha = {}
    for key, hyps in hypotheses.items():
        text = "".join(h + "\n" for h in hyps)
        (runs / f"{name}.{key}.txt").write_text(text, encoding="utf-8")
        sha[key] = hashlib.sha256(text.encode()).hexdigest()
    return sha


def evaluate(args, kind: str, seed: int, model_dir: Path, files: dict, device: str) -> tuple[dict, dict]:
    """(scores, hypotheses): every test set translated (and with random context for a document model), and the
    pronoun items scored."""
    import torch
    from transformers import AutoTokenizer

    from hf_syntax_mt.evaluation import corpus_scores
    from hf_syntax_mt.evaluation.pronouns import load_pronoun_items, random_contexts, score_pronoun_items
    from hf_syntax_mt.modeling_syntax_mt import SyntaxMTForConditionalGeneration

    r = args.recipe
    model = SyntaxMTForConditionalGeneration.from_pretrained(model_dir).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    gen = dict(num_beams=r["num_beams"])  # outputs up to the max_length (128) the train script saved in the model
    k = model.config.context_sentences
    done = model_dir / "evaluation"  # inside the model directory: a new training clears it
    scores, hypotheses = {"tests": {}, "random_context": {}, "pronouns": {}}, {}
    for name in TEST_SETS:
        sources, references, doc_ids, lines = documents(files, name, r["max_test_documents"], r["max_document_lines"])
        settings = translation_settings(r, sources, lines)

        def own(sources=sources, doc_ids=doc_ids):
            start = time.perf_counter()
            with torch.inference_mode():
                hyps = translate_documents(model, tokenizer, sources, doc_ids, r["translate_batch_size"], **gen)
            return {"hypotheses": hyps, "minutes": round((time.perf_counter() - start) / 60, 2)}

        result = cached(done, name, settings, own)
        hyps = result["hypotheses"]
        scores["tests"][name] = {**corpus_scores(hyps, references), "sentences": len(hyps),
                                 "minutes": result["minutes"]}  # fmt: skip
        if r["max_test_documents"] or r["max_document_lines"]:
            scores["tests"][name]["lines"] = lines  # a subset (--quick): the aggregate scores these references
        hypotheses[name] = hyps
        if k:
            contexts = random_contexts(doc_ids, sources, k, seed=seed + 1)

            def random(sources=sources, contexts=contexts):
                with torch.inference_mode():
                    hyps = translate_with_contexts(model, tokenizer, sources, contexts, r["translate_batch_size"],
                                                   **gen)  # fmt: skip
                return {"hypotheses": hyps}

            hyps = cached(done, f"{name}.random", translation_settings(r, sources, lines, contexts), random)
            hyps = hyps["hypotheses"]
            scores["random_context"][name] = {**corpus_scores(hyps, references), "sentences": len(hyps)}
            hypotheses[f"{name}.random"] = hyps
        print(f"    {name}: BLEU {scores['tests'][name]['bleu']:.2f}" + (
            f", random context {scores['random_context'][name]['bleu']:.2f}" if k else ""), flush=True)  # fmt: skip
    if Path(args.items).is_file():
        items = load_pronoun_items(args.items)[: r["max_items"]]
        for context in ("document", "random", "none") if k else ("none",):
            result = cached(done, f"pronouns.{context}", pronoun_settings(items, seed),
                            lambda context=context: score_pronoun_items(model, tokenizer, items, context=context,
                                                                        seed=seed + 1))  # fmt: skip
            scores["pronouns"][context] = result
            print(f"    pronouns, {context} context: {result['accuracy']:.3f} of {result['n']}", flush=True)
    else:
        print(f"    no pronoun items at {args.items}: run benchmarks/data/pronoun_items.py", flush=True)
    return scores, hypotheses


def run_unit(args, kind: str, seed: int, device: str) -> Path:
    import torch

    name = common.unit_name(kind, seed)
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    files = shared_data(args)
    print(f"=== {name} on {device}: {KINDS[kind]}", flush=True)
    step1 = ensure_step1(args, files, device) if kind != "step1" else None
    model_dir, info, argv, wall = train(args, kind, seed, files, device)
    start = time.perf_counter()
    scores, hypotheses = evaluate(args, kind, seed, model_dir, files, device)
    hypotheses_sha256 = write_hypotheses(runs, name, hypotheses)
    train_seconds = info.get("train_seconds") or info.get("train_runtime") or 0.0
    record = {
        "unit": name, "kind": kind, "seed": seed, "about": KINDS[kind], "recipe": args.recipe, "quick": args.quick,
        "steps": info["global_step"], "train_minutes": round(train_seconds / 60, 2), "wall_minutes": round(wall / 60, 2),
        "evaluation_minutes": round((time.perf_counter() - start) / 60, 2),
        "tokens_seen": info["num_input_tokens_seen"], "curve": info["curve"], "averaged_steps": info["averaged_steps"],
        "validation": info["scores"].get("validation"), **scores, "model_signature": info["model_signature"],
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})",
        "precision": common.choose_precision(args.recipe["precision"], device), "cpu": common.cpu_name(),
        **({"weights_sha256": weights_sha256(model_dir)} if kind == "step1" else {"step1": step1}),
        "threads": torch.get_num_threads(), **common.software(), "commit": common.git_commit(),
        "train_argv": [common.relative_path(a) for a in argv],
        "hypotheses_sha256": hypotheses_sha256,
        **({"pronoun_items": item_file(args.items)} if scores["pronouns"] else {}),
    }  # fmt: skip
    path = common.write_json(runs / f"{name}.json", record, indent=1, newline=True)
    if kind != "step1":  # step 1's model is what step 2 starts from: keep it
        shutil.rmtree(model_dir.parent, ignore_errors=True)
    tests = ", ".join(f"{t} {s['bleu']:.2f}" for t, s in scores["tests"].items())
    print(f"=== {name}: BLEU {tests} ({record['train_minutes']:.1f} training minutes) -> {path}", flush=True)
    return path


def main(argv=None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return common.run_study(parse_args(argv), PLAN, parse_unit, run_unit, aggregate)


if __name__ == "__main__":
    sys.exit(main())
