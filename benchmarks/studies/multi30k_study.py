"""The Multi30k en->de study: one recipe that translates, and every syntax method measured on it (issue 12).

Each (method, seed) is one *unit*: `scripts/train.py`'s `run` with the recipe below and the method's config options,
then the test set (test_2016_flickr, beam 4) and the attention-to-parent attachment of the best head on gold English
trees (UD English-EWT test) and, in the domain the syntax heads trained on, on the spaCy trees of the test sources
(units run before this was added have none). A unit writes `RESULTS/runs/<method>-seed<k>.json` (settings, steps,
minutes, tokens seen, validation curve, test scores with sacrebleu signatures, model signature) and its test
hypotheses beside it (`<method>-seed<k>.test.txt`). An invocation skips the units whose JSON exists, so the study
is completed over several invocations, and an interrupted unit resumes from its last checkpoint (every 200 steps,
under `--output-dir`, when that directory survived); `--aggregate` (also run after every unit) rebuilds the table
(`RESULTS/results.md`), the paired bootstrap tests against vanilla of the same seed (and against the method's
one-setting control in `CONTROLS`) and the curves (`RESULTS/curves.png`) from whatever unit files exist.
Commit the unit files: they are the evidence. Checkpoints stay under `--output-dir` (not committed).

    python benchmarks/studies/multi30k_study.py                       # every unit still missing, in PLAN order
    python benchmarks/studies/multi30k_study.py --units vanilla-seed0 # one unit
    python benchmarks/studies/multi30k_study.py --time-limit 150      # start no unit after 150 minutes
    python benchmarks/studies/multi30k_study.py --list                # which units are done
    python benchmarks/studies/multi30k_study.py --aggregate           # tables and plots only
    python benchmarks/studies/multi30k_study.py --quick --results /tmp/q  # plumbing check in a few minutes
    python benchmarks/studies/multi30k_study.py --speed 5 --threads 2 # training speed on free cores -> RESULTS/speed/

Units run with one thread each, two at a time on the two cores, so their minutes are not those of one run that has the
machine to itself. `--speed M` measures that: the unit's own training run (same data, batches and schedule) for M
minutes with no evaluation and no checkpoint, projected to the recipe's steps (`RESULTS/speed/<unit>-threads<k>.json`,
listed under the table).

The recipe (all methods: same steps, same token batches, same schedule): d_model 256, 3+3 layers, 4 heads, FFN 1024,
dropout 0.1, a joint BPE of 8,000 trained once on the training set (shared by all units), token batches of at most
2,500 padded tokens (about 110 pairs), 2,000 steps (about 8.6 epochs), Adam (beta2 0.98), learning rate 7e-4 with
800 inverse-square-root warm-up steps, clipping 1.0, label smoothing 0.1, the average of the last 5 checkpoints 100
steps apart (the last step alone is scored too), beam 4. The validation BLEU (first 400 val pairs, beam 4) is logged
every 400 steps.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common
from benchmarks.arguments import POSITIVE, SECONDS  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS
from benchmarks.common import parse_unit as _parse_unit

RESULTS = ALL_RESULTS / "multi30k"

#: method -> (SyntaxMTConfig overrides, None = a plain MarianMTModel; needs target trees; what it is)
METHODS: dict[str, tuple[str | None, bool, str]] = {
    "vanilla": (None, False, "MarianMTModel (transformers), no syntax"),
    "pascal": ("encoder_pascal_heads=[2,0,0]", False, "PASCAL: 2 of 4 heads of encoder layer 1 (the paper's layer)"),
    "lisa": ("encoder_lisa_heads=[1,0,0]", False, "LISA: 1 head of encoder layer 1 supervised by the parse"),
    "dbsa_sync": (
        "encoder_dbsa_heads=[1,0,0],decoder_dbsa_heads=[1,0,0],dbsa_loss_weight=0.5,sync_loss_weight=0.5",
        True,
        "DBSA (1 head, layer 1, encoder and decoder) + synchronous loss (lambda_dep 0.5, lambda_sync 0.5: paper En-De)",
    ),
    "dbsa_sync_full": (
        "encoder_dbsa_heads=[1,0,0],decoder_dbsa_heads=[1,0,0],dbsa_loss_weight=0.5,sync_loss_weight=0.5,"
        "decoder_dbsa_full_context=true",
        True,
        "dbsa_sync with decoder_dbsa_full_context: target arcs to later tokens supervised too",
    ),
    "features": (
        'input_features=["pos","deprel","subword_tag"]',
        False,
        "Sennrich & Haddow source features (UPOS, relation, B/I/E/O), summed into the embeddings",
    ),
    "alignment": (
        "alignment_bias_layers=[0,1,2]",
        False,
        "Cohn et al. position, Markov and fertility biases, every decoder layer's cross-attention",
    ),  # fmt: skip
    "vanilla_xavier": ("attention_init=xavier", False, "no syntax, fairseq's Xavier attention init (control)"),
    "pascal_xavier": (
        "encoder_pascal_heads=[2,0,0],attention_init=xavier",
        False,
        "PASCAL with fairseq's Xavier attention init (issue 12 item 5)",
    ),  # fmt: skip
}
#: method -> the control it differs from in one setting only, besides vanilla (same seed, paired bootstrap)
CONTROLS = {"pascal_xavier": "vanilla_xavier"}
#: the order units are run in: the 3-seed comparison first, then one seed of every other method, then a second seed
#: of the Xavier-init pair (vanilla_xavier-seed0 gave +1.17 BLEU over vanilla-seed0), then a second seed of the
#: methods whose one seed gained most over vanilla (features +0.51, LISA +0.31, alignment +0.28, DBSA full +0.18)
PLAN = [("vanilla", 0), ("pascal", 0), ("vanilla", 1), ("pascal", 1), ("vanilla", 2), ("pascal", 2),
        ("dbsa_sync", 0), ("dbsa_sync_full", 0), ("lisa", 0), ("features", 0), ("alignment", 0),
        ("vanilla_xavier", 0), ("pascal_xavier", 0),
        ("vanilla_xavier", 1), ("pascal_xavier", 1),
        ("features", 1), ("lisa", 1), ("alignment", 1), ("dbsa_sync_full", 1)]  # fmt: skip

RECIPE = dict(d_model=256, layers=3, heads=4, ffn_dim=1024, dropout=0.1, vocab_size=8000, max_tokens=2500,
              max_steps=2000, learning_rate=7e-4, warmup_steps=800, adam_beta2=0.98, max_grad_norm=1.0,
              label_smoothing=0.1, average_checkpoints=5, average_every=100, num_beams=4, eval_steps=400,
              max_eval_samples=400, max_length=64, max_test=None, max_train=None, save_steps=200)  # fmt: skip
QUICK = dict(d_model=64, ffn_dim=128, vocab_size=1000, max_tokens=600, max_steps=30, warmup_steps=10,
             eval_steps=15, max_eval_samples=20, max_test=40, max_train=600, average_every=5, average_checkpoints=2,
             num_beams=2, save_steps=10)  # fmt: skip


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, None, None, threads=2,
                        units_help="units to run, e.g. vanilla-seed0 pascal-seed1 (default: the PLAN)")  # fmt: skip
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    p.add_argument("--attention-sentences", type=POSITIVE, default=300,
                   help="sentences of each tree set (EWT gold, Multi30k test) for the attachment")  # fmt: skip
    p.add_argument("--keep-models", action="store_true", help="keep each unit's model directory")
    p.add_argument("--bf16", action="store_true", help="train and evaluate under bf16 autocast (Trainer --bf16); the "
                   "default --results and --output-dir become multi30k_bf16 (issue 26: the precision check)")  # fmt: skip
    p.add_argument("--speed", type=SECONDS, metavar="MINUTES", help="only measure training speed for MINUTES (of the "
                   "first --units, default vanilla-seed0) with --threads, and project it to the recipe's steps")  # fmt: skip
    args = p.parse_args(argv)
    args.recipe = {**RECIPE, **(QUICK if args.quick else {}), "bf16": args.bf16}
    suffix = "_bf16" if args.bf16 else ""
    args.results = args.results or str(RESULTS.parent / f"multi30k{suffix}")
    args.output_dir = args.output_dir or str(common.ROOT / "runs" / f"multi30k_study{suffix}")
    common.refuse_quick_evidence(p, args)
    return args


def parse_unit(name: str) -> tuple[str, int]:
    return _parse_unit(name, METHODS)


def files(data: Path, split: str) -> dict[str, Path]:
    out = {"src": data / "multi30k" / f"{split}.en", "tgt": data / "multi30k" / f"{split}.de",
           "src_conllu": data / "multi30k-parsed" / f"{split}.en.conllu.gz",
           "tgt_conllu": data / "multi30k-parsed" / f"{split}.de.conllu.gz"}  # fmt: skip
    for path in out.values():
        if not path.is_file():
            raise SystemExit(f"missing data file {path}: the study reads ../shared/data/multi30k{{,-parsed}}")
    return out


def shared_tokenizer(args) -> Path:
    """One joint BPE for every unit (trained once, deterministic), so that all units see the same subwords."""
    from hf_syntax_mt.training import train_tokenizer

    directory = Path(args.output_dir) / f"tokenizer-{args.recipe['vocab_size']}"
    if not (directory / "tokenizer.json").is_file():
        train = files(Path(args.data), "train")
        lines = []
        for key in ("src", "tgt"):
            lines += train[key].read_text(encoding="utf-8").split("\n")
        train_tokenizer([line for line in lines if line], vocab_size=args.recipe["vocab_size"]).save_pretrained(
            directory
        )
    return directory


def train_argv(args, method: str, seed: int, out: Path, tokenizer: Path, device: str, spec=None,
               split_files: dict[str, dict[str, Path]] | None = None, predict: bool = True) -> list[str]:  # fmt: skip
    """The train script's arguments of a unit; ``spec`` (overrides, target trees, about) and ``split_files`` (split
    -> the keys of `files`) replace the method's entry in `METHODS` and the Multi30k files of those splits (round
    two); ``predict=False`` leaves out the Trainer's test pass (and the test files)."""
    r, (overrides, target_trees, _) = args.recipe, spec or METHODS[method]
    data = Path(args.data)
    argv = ["--output_dir", str(out), "--do_train", "--do_eval", *(["--do_predict"] if predict else []),
            "--source_lang", "en", "--target_lang", "de", "--tokenizer_name", str(tokenizer)]  # fmt: skip
    splits = (("train", "train"), ("validation", "val"), ("test", "test_2016_flickr"))
    for split, name in splits if predict else splits[:2]:
        f = (split_files or {}).get(split) or files(data, name)
        argv += [f"--{split}_source_conllu", str(f["src_conllu"]), f"--{split}_target_file", str(f["tgt"])]
        if target_trees:
            argv += [f"--{split}_target_conllu", str(f["tgt_conllu"])]
    argv += [
        "--d_model", str(r["d_model"]), "--encoder_layers", str(r["layers"]), "--decoder_layers", str(r["layers"]),
        "--attention_heads", str(r["heads"]), "--ffn_dim", str(r["ffn_dim"]), "--dropout", str(r["dropout"]),
        "--max_source_length", str(r["max_length"]), "--max_target_length", str(r["max_length"]),
        "--max_steps", str(r["max_steps"]), "--max_tokens", str(r["max_tokens"]),
        "--learning_rate", str(r["learning_rate"]), "--warmup_steps", str(r["warmup_steps"]),
        "--lr_scheduler_type", "inverse_sqrt", "--weight_decay", "0", "--adam_beta2", str(r["adam_beta2"]),
        "--max_grad_norm", str(r["max_grad_norm"]), "--seed", str(seed),
        "--average_checkpoints", str(r["average_checkpoints"]), "--average_every", str(r["average_every"]),
        "--eval_strategy", "steps", "--eval_steps", str(r["eval_steps"]), "--max_eval_samples",
        str(r["max_eval_samples"]), "--per_device_eval_batch_size", "128", "--generation_num_beams", str(r["num_beams"]),
        "--logging_steps", "50", "--save_strategy", "steps", "--save_steps", str(r["save_steps"]),
        "--save_total_limit", "1", "--report_to", "none", "--dataloader_num_workers", "0",
        "--disable_tqdm", "true",
        "--parser_description", "spaCy 3.8.18 with en_core_web_sm 3.8.0 (multi30k-parsed/PROVENANCE.md)",
        "--data_description", "Multi30k en->de (Elliott et al. 2016), research use only.",
        "--model_card_title", f"Multi30k en->de {method} (seed {seed}, study recipe)",
    ]  # fmt: skip
    if device == "cpu":
        argv.append("--use_cpu")
    if r.get("bf16"):
        argv.append("--bf16")
    if r["max_train"]:
        argv += ["--max_train_samples", str(r["max_train"])]
    if r["max_test"] and predict:
        argv += ["--max_predict_samples", str(r["max_test"])]
    if overrides is None:
        argv += ["--vanilla_marian", "--label_smoothing_factor", str(r["label_smoothing"])]  # the Trainer's smoother
    else:
        argv += ["--label_smoothing", str(r["label_smoothing"]), "--config_overrides", overrides]  # in the model
    return argv


def supervised_target_arcs(args, tokenizer_dir: Path) -> dict:
    """How many target arcs the decoder parse loss supervises on the training set, causal and full context."""
    import torch
    from transformers import AutoTokenizer

    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
    from hf_syntax_mt.methods.biaffine import decoder_dbsa_arcs
    from hf_syntax_mt.training.data import load_raw_datasets
    from hf_syntax_mt.training.script_args import DataArguments

    f = files(Path(args.data), "train")
    data_args = DataArguments(train_source_conllu=str(f["src_conllu"]), train_target_file=str(f["tgt"]),
                              train_target_conllu=str(f["tgt_conllu"]), max_train_samples=args.recipe["max_train"])  # fmt: skip
    ds = load_raw_datasets(data_args)["train"]
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    fn = SyntaxMTPreprocessor(tok, source_parse_column="source_parse", target_parse_column="target_parse",
                              max_source_length=args.recipe["max_length"], max_target_length=args.recipe["max_length"])  # fmt: skip
    ds = ds.map(fn, batched=True, remove_columns=ds.column_names, desc="target arcs")
    counts = {"arcs": 0, "causal": 0, "full_context": 0}
    for row_labels, row_heads in zip(ds["labels"], ds["decoder_dbsa_heads"], strict=True):
        heads = torch.tensor([row_heads])
        valid = torch.ones(1, len(row_labels), dtype=torch.bool)
        counts["arcs"] += sum(1 for h in row_heads if h >= 0)
        counts["causal"] += int(decoder_dbsa_arcs(heads, valid, False)[1].sum())
        counts["full_context"] += int(decoder_dbsa_arcs(heads, valid, True)[1].sum())
    return counts


def run_unit(args, method: str, seed: int, device: str) -> Path:
    import torch

    from hf_syntax_mt.evaluation import attention_report
    from hf_syntax_mt.training.script import run
    from hf_syntax_mt.training.script_args import parse_args as train_args

    name = common.unit_name(method, seed)
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out = Path(args.output_dir) / name
    tokenizer = shared_tokenizer(args)
    argv = train_argv(args, method, seed, out, tokenizer, device)
    checkpoint = common.resume_or_clear(
        out, argv
    )  # an interrupted unit goes on from its last checkpoint (every 200 steps)
    print(f"=== {name} on {device}: {METHODS[method][2]}", flush=True)
    start = time.perf_counter()
    run(*train_args(argv))
    wall = time.perf_counter() - start
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    hypotheses = (out / "test_generations.txt").read_text(encoding="utf-8")
    (runs / f"{name}.test.txt").write_text(hypotheses, encoding="utf-8")

    def attachment(trees: Path) -> dict | None:
        """The best head's attention-to-parent attachment on ``trees`` and each layer's mean over its heads."""
        if not trees.is_file() or not args.attention_sentences:
            return None
        a = attention_report(out, trees, None, None, None, 0, None, args.attention_sentences, info["model_signature"])
        return {**{k: a[k] for k in ("best", "count", "signature")},
                "layer_means": [round(statistics.mean(row), 4) for row in a["scores"]]}  # fmt: skip

    # gold UD English-EWT trees (web text), and the spaCy trees of the test sources (the domain the heads trained on)
    attention = attachment(Path(args.data) / "ud" / "UD_English-EWT" / "en_ewt-ud-test.conllu")
    attention_in_domain = attachment(files(Path(args.data), "test_2016_flickr")["src_conllu"])
    train_seconds = info["train_runtime"] or 0.0
    curve_minutes = info.get("train_seconds", train_seconds) / 60  # across resumed runs
    record = {
        "unit": name, "method": method, "seed": seed, "about": METHODS[method][2], "overrides": METHODS[method][0],
        "recipe": args.recipe, "quick": args.quick, "steps": info["global_step"],
        "train_minutes": round(curve_minutes, 2), "wall_minutes": round(wall / 60, 2),
        "tokens_seen": info["num_input_tokens_seen"],
        "tokens_per_second": round(info["num_input_tokens_seen"] / max(curve_minutes * 60, 1e-9), 1),
        "curve": info["curve"], "averaged_steps": info["averaged_steps"],
        "test": info["scores"]["test"], "test_last_step": info["scores"].get("test_last_step"),
        "validation": info["scores"].get("validation"), "buckets": info["buckets"]["test"],
        "model_signature": info["model_signature"], "attention": attention,
        "attention_in_domain": attention_in_domain,
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})",
        "threads": torch.get_num_threads(), "load_average_at_end": os.getloadavg(), "resumed_from": checkpoint and
        Path(checkpoint).name, **common.software(), "commit": common.git_commit(), "train_argv": [common.relative_path(a) for a in argv],
        "hypotheses_sha256": hashlib.sha256(hypotheses.encode()).hexdigest(),
    }  # fmt: skip
    if METHODS[method][1]:
        record["target_arcs"] = supervised_target_arcs(args, tokenizer)
    path = common.save_unit(runs, record, None if args.keep_models else out)
    print(f"=== {name}: test BLEU {record['test']['bleu']:.2f} chrF {record['test']['chrf']:.2f} "
          f"({record['train_minutes']:.1f} training minutes) -> {path}", flush=True)  # fmt: skip
    return path


def speed_check(args, method: str, seed: int, device: str) -> Path:
    """The unit's training run for `--speed` minutes (same data, batches and schedule; no evaluation, no checkpoint),
    its steps/s and tokens/s, and the minutes the recipe's steps would take at that speed."""
    import tempfile

    import torch

    from hf_syntax_mt.training.script import run
    from hf_syntax_mt.training.script_args import parse_args as train_args

    name, load_before = common.unit_name(method, seed), os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / name
        argv = train_argv(args, method, seed, out, shared_tokenizer(args), device)
        argv = [a for a in argv if a not in ("--do_eval", "--do_predict")]
        for option in ("--eval_strategy", "--save_strategy"):
            argv[argv.index(option) + 1] = "no"
        argv += ["--time_budget_seconds", str(args.speed * 60)]
        print(f"=== speed of {name} on {device}, {torch.get_num_threads()} thread(s), {args.speed:g} min", flush=True)
        run(*train_args(argv))
        info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    steps, seconds, tokens = info["global_step"], info["train_seconds"], info["num_input_tokens_seen"]
    record = {
        "unit": name, "device": device, "threads": torch.get_num_threads(), "load_average_before": load_before,
        "load_average_after": os.getloadavg(), "steps": steps, "train_seconds": seconds, "tokens_seen": tokens,
        "tokens_per_second": round(tokens / seconds, 1), "seconds_per_step": round(seconds / steps, 4),
        "recipe_steps": args.recipe["max_steps"],
        "projected_train_minutes": round(args.recipe["max_steps"] * seconds / steps / 60, 1),
        **common.software(), "commit": common.git_commit(), "cpu": common.cpu_name(),
    }  # fmt: skip
    unit = Path(args.results) / "runs" / f"{name}.json"
    if unit.is_file():  # the finished unit's own token count at this speed
        record["unit_tokens_seen"] = json.loads(unit.read_text())["tokens_seen"]
        record["projected_unit_minutes"] = round(record["unit_tokens_seen"] / record["tokens_per_second"] / 60, 1)
    path = common.write_json(Path(args.results) / "speed" / f"{name}-threads{record['threads']}.json", record, indent=1,
                      newline=True)  # fmt: skip
    print(f"=== {name}: {record['tokens_per_second']:.0f} tokens/s, {record['seconds_per_step']:.2f} s/step -> "
          f"{record['projected_train_minutes']} min for {record['recipe_steps']} steps -> {path}", flush=True)  # fmt: skip
    return path


# ------------------------------------------------------------------------------------------------------------------
# Aggregate: everything below reads only the unit files
# ------------------------------------------------------------------------------------------------------------------
#: the fields the aggregate reads, and their types (`common.check_fields`)
SCORES = {"bleu": float, "chrf": float, "ribes": float}
UNIT_FIELDS = {"unit": str, "method": str, "seed": int, "test": SCORES, "test_last_step": (dict, type(None)),
               "buckets": [{"bucket": str, "count": int, "bleu": float}], "train_minutes": float,
               "tokens_per_second": float, "device": str, "model_signature": str, "curve": list,
               "attention": (dict, type(None)), "attention_in_domain": (dict, type(None)),
               "hypotheses_sha256": str}  # fmt: skip


def load_units(results: Path, allow_unhashed: bool = False) -> list[dict]:
    """The unit files under ``results/runs`` with their test translations, each checked: the fields the aggregate
    reads and their types, and the translations against the sha256 (required unless ``allow_unhashed``) and the
    sentence count the unit records (`UnitFileError` naming the file, and for translations both files)."""
    units = []
    for path in sorted((results / "runs").glob("*.json")):
        unit = common.load_unit(path, ("unit", "method", "seed", "test", "buckets", "train_minutes", "tokens_per_second"),
                         UNIT_FIELDS)  # fmt: skip
        hypotheses = path.parent / f"{unit['unit']}.test.txt"
        lines = sum(b["count"] for b in unit["buckets"])
        common.require_hash(path, unit.get("hypotheses_sha256"), "its test hypotheses", allow_unhashed)
        unit["hypotheses"] = common.read_hypotheses(path, hypotheses, unit.get("hypotheses_sha256"), lines)
        units.append(unit)
    order = list(METHODS)
    return sorted(units, key=lambda u: (order.index(u["method"]) if u["method"] in order else 99, u["seed"]))


def best_heads(units: list[dict], key: str) -> str:
    """Each unit's best head under ``key`` (``attention`` or ``attention_in_domain``): "UAS (layer,head)", ..."""
    return ", ".join(f"{a['best']['score']:.3f} ({a['best']['layer']},{a['best']['head']})"
                     for u in units if (a := u.get(key)))  # fmt: skip


def paired_tests(units: list[dict], references: list[str], samples: int) -> dict[tuple[str, str], tuple[dict, dict]]:
    """(unit, control method) -> (the control's unit of the same seed, paired bootstrap of the unit against it), for
    vanilla and the method's entry in CONTROLS."""
    from hf_syntax_mt.evaluation import paired_bootstrap

    by_key = {(u["method"], u["seed"]): u for u in units}
    tests = {}
    for u in units:
        for control in {"vanilla", CONTROLS.get(u["method"])} - {None, u["method"]}:
            if (base := by_key.get((control, u["seed"]))) is not None:
                refs = references[: len(u["hypotheses"])]
                tests[u["unit"], control] = base, paired_bootstrap(base["hypotheses"], u["hypotheses"], refs, samples)
    return tests


def aggregate(args) -> str | None:
    results = Path(args.results)
    allow_unhashed = getattr(args, "allow_unhashed", False)
    if not (units := common.aggregated_units(results, lambda r: load_units(r, allow_unhashed=allow_unhashed))):
        return None
    references = files(Path(args.data), "test_2016_flickr")["tgt"].read_text(encoding="utf-8").split("\n")[:-1]
    tests = paired_tests(units, references, args.bootstrap_samples)
    methods = [m for m in METHODS if any(u["method"] == m for u in units)]
    lines = [
        "| method | seeds | BLEU | chrF | RIBES | BLEU last step | ΔBLEU vs vanilla (p) per seed | best head UAS "
        "(layer, head), EWT gold | same, Multi30k test spaCy trees | train min | tokens/s | device |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        us = [u for u in units if u["method"] == m]
        boots = [test[1] for u in us if (test := tests.get((u["unit"], "vanilla")))]
        deltas = [b["bleu"]["system"] - b["bleu"]["baseline"] for b in boots]
        boot = ", ".join(f"{d:+.2f} ({b['bleu']['p_value']:.3f})" for d, b in zip(deltas, boots, strict=True))
        if len(deltas) > 1:  # the per-seed differences' own mean and spread
            boot += f"; mean {statistics.mean(deltas):+.2f} ± {statistics.stdev(deltas):.2f}"
        uas, uas_in_domain = (best_heads(us, key) for key in ("attention", "attention_in_domain"))
        last = [u["test_last_step"]["bleu"] for u in us if u.get("test_last_step")]
        lines.append(
            f"| {m} | {','.join(str(u['seed']) for u in us)} | {common.mean_std([u['test']['bleu'] for u in us])} "
            f"| {common.mean_std([u['test']['chrf'] for u in us])} | {common.mean_std([u['test']['ribes'] * 100 for u in us])} "
            f"| {common.mean_std(last)} | {boot or '-'} | {uas or '-'} | {uas_in_domain or '-'} "
            f"| {common.mean_std([u['train_minutes'] for u in us])} | {statistics.mean(u['tokens_per_second'] for u in us):.0f} "
            f"| {us[0]['device']} |"
        )  # fmt: skip
    units_by_name = {u["unit"]: u for u in units}
    controlled = [(units_by_name[name], base, b)
                  for (name, control), (base, b) in tests.items() if control != "vanilla"]  # fmt: skip
    if controlled:
        lines += ["", "Against their own control (the same seed, paired bootstrap):", ""]
        lines += [f"- {u['unit']} against {base['unit']}: ΔBLEU {b['bleu']['system'] - b['bleu']['baseline']:+.2f} "
                  f"(p {b['bleu']['p_value']:.3f}), ΔchrF {u['test']['chrf'] - base['test']['chrf']:+.2f}"
                  for u, base, b in controlled]  # fmt: skip
    labels = [b["bucket"] for b in units[0]["buckets"]]
    lines += ["", "BLEU by source length (words), mean over seeds:", "",
              "| method | " + " | ".join(f"{b['bucket']} (n={b['count']})" for b in units[0]["buckets"]) + " |",
              "|---|" + "---|" * len(labels)]  # fmt: skip
    for m in methods:
        us = [u for u in units if u["method"] == m]
        cells = [statistics.mean(next(b["bleu"] for b in u["buckets"] if b["bucket"] == lab) for u in us)
                 for lab in labels]  # fmt: skip
        lines.append(f"| {m} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    arcs = [u for u in units if u.get("target_arcs")]
    if arcs:
        a = arcs[0]["target_arcs"]
        lines += ["", f"Target arcs the decoder parse loss supervises on the training set: {a['causal']:,} of "
                  f"{a['arcs']:,} ({a['causal'] / a['arcs']:.1%}) by default (arcs to later tokens left out), "
                  f"{a['full_context']:,} ({a['full_context'] / a['arcs']:.1%}) with decoder_dbsa_full_context."]  # fmt: skip
    for speed_file in sorted((results / "speed").glob("*.json")):
        s = json.loads(speed_file.read_text(encoding="utf-8"))
        lines += ["", f"Training speed of {s['unit']}'s recipe with {s['threads']} thread(s) on {s['device']} "
                  f"(`--speed`, load average {s['load_average_before'][0]:.2f} before): {s['tokens_per_second']:.0f} "
                  f"tokens/s, {s['seconds_per_step']:.2f} s/step over {s['steps']} steps, so {s['recipe_steps']} steps "
                  f"take {s['projected_train_minutes']} min."]  # fmt: skip
    first = units[0]
    lines += ["", f"BLEU: `{first['test']['bleu_signature']}`", f"chrF: `{first['test']['chrf_signature']}`"]
    if tests:
        lines.append(f"Paired bootstrap: `{next(iter(tests.values()))[1]['bleu']['signature']}`")
    lines += ["", "Units (model signatures):", ""] + [f"- {u['unit']} ({u['device']}, commit "
              f"{(u.get('commit') or '?')[:10]}): `{u['model_signature']}`" for u in units]  # fmt: skip
    return common.write_results(results, lines, lambda: plot_curves(units, results / "curves.png"))


def plot_curves(units: list[dict], path: Path) -> None:
    from hf_syntax_mt.evaluation import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}
    for u in units:
        points = [p for p in u["curve"] if "eval_bleu" in p]
        if not points:
            continue
        style = dict(color=colors.get(u["method"], "k"), alpha=0.8, marker=".",
                     label=u["method"] if u["seed"] == min(v["seed"] for v in units if v["method"] == u["method"]) else None)  # fmt: skip
        axes[0].plot([p["step"] for p in points], [p["eval_bleu"] for p in points], **style)
        axes[1].plot([p["train_minutes"] for p in points], [p["eval_bleu"] for p in points], **style)
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("training minutes (evaluation time left out; see each unit's device)")
    for ax in axes:
        ax.set_ylabel("validation BLEU (first 400 val pairs, beam 4)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Multi30k en->de: validation BLEU during training, one line per unit")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    plan = [parse_unit(u) for u in args.units] if args.units else PLAN
    done = common.done_units(args.results)
    if args.list:
        common.list_units([common.unit_name(*u) for u in PLAN], done)
        return 0
    if args.aggregate:
        aggregate(args)
        return 0
    import torch

    device = common.study_device(args)
    if device == "cuda":  # full fp32 matmuls, as on the CPU
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.speed:
        speed_check(args, *(plan[0] if args.units else ("vanilla", 0)), device)
        aggregate(args)
        return 0
    common.run_plan(plan, done, lambda method, seed: run_unit(args, method, seed, device), args.time_limit, args.max_units,
             after=None if args.no_aggregate else lambda: aggregate(args))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
