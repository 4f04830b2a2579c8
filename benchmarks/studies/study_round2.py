"""Study round two (issue 26): where syntax pays. Round one's recipe (`multi30k_study.py`) with the Xavier attention
init for every model, bf16 where the CPU computes it natively (else fp32: see `precision`; a seed's units all train in
the precision of its first unit, see `unit_precision`), and three settings:

- ``full``: the 29,000 Multi30k en->de training pairs, round one's joint BPE of 8,000;
- ``low``: one fixed random subset of `LOW_PAIRS` training pairs (subset seed `SUBSET_SEED`, recorded with the
  sha256 of the chosen line numbers), a joint BPE of `LOW_VOCAB` trained on the subset (smaller BPE vocabularies
  suit small data: Sennrich & Zhang 2019), the same subset, tokenizer and steps for every method and seed;
- ``long``: the PASCAL paper's headline claim (gains on long sentences): the en-de sentence pairs of Multi30k plus the
  docnmt and bcontrast training documents (`ende_sentence_data`, 55,399 pairs, the English sides parsed with the
  spaCy model multi30k-parsed names; issue 27's step 1 trains on the same data), sentences up to 128 subwords,
  `LONG` steps, tested on iwslt17.test and europarl7.test with length buckets; vanilla, PASCAL and DBSA+sync, whose
  German target trees come from multi30k-parsed's German parser rebuilt by `german_parser` (Multi30k's part keeps
  multi30k-parsed's trees; `ende_sentence_data.build_german`).

Methods: ``vanilla`` (no syntax), ``pascal`` (2 PASCAL heads, encoder layer 1), ``alignment`` (Cohn et al.'s biases
in every decoder layer), ``dbsa_sync_full`` (DBSA + synchronous loss, decoder full context); seeds 0-2. A unit is
``<setting>-<method>-seed<k>``: it trains with `scripts/train.py`'s `run`, then translates and scores its setting's
test sets (full and low: **all four** Multi30k test sets, test_2016_flickr, test_2017_flickr, test_2017_mscoco,
test_2018_flickr; beam 4, the sources' spaCy trees from `multi30k-parsed`) with the saved model's pipeline, and
writes ``RESULTS/runs/<unit>.json`` and ``RESULTS/runs/<unit>.<test set>.txt``. Units already written are skipped; an
interrupted unit resumes from its last checkpoint. ``--aggregate`` rebuilds ``RESULTS/results.md`` (and the plot
``RESULTS/deltas.png``, `round2_stats.plot`) from the unit files: per setting and test set, mean +- std over seeds,
the per-seed paired bootstrap against vanilla of the same seed, a pooled bootstrap over the concatenated hypotheses
of every seed the method and vanilla share, a sign test over seeds x test sets, ΔBLEU by source length, and the
statistics that count seeds (`seed_lines`: each seed's ΔBLEU over the setting's test sets pooled, tested over seeds;
``--mixed-machines`` compares pairs of different machine kinds too, as round three's results were built).

    python benchmarks/studies/study_round2.py --list
    python benchmarks/studies/study_round2.py --units full-vanilla-seed0 --threads 1 --no-aggregate
    python benchmarks/studies/study_round2.py --aggregate
    python benchmarks/studies/study_round2.py --quick --results /tmp/r2 --output-dir /tmp/r2runs --units low-pascal-seed0
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common, machine  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.studies import multi30k_study as round_one  # noqa: E402
from benchmarks.studies import seed_compare, seed_stats  # noqa: E402
from benchmarks.studies import units as unit_files  # noqa: E402
from benchmarks.studies.round2_stats import FairPair, bucket_deltas, format_p, length_gap, plot, sign_test  # noqa: E402

RESULTS = ALL_RESULTS / "round2"
MULTI30K_TESTS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
SETTINGS = ("full", "low", "long")
#: setting -> its test sets (long: the documents' sentences, with many more long sentences than Multi30k's)
TEST_SETS = {"full": MULTI30K_TESTS, "low": MULTI30K_TESTS, "long": ("iwslt17.test", "europarl7.test")}
XAVIER = "attention_init=xavier"
#: study method -> its recipe in `hf_syntax_mt.recipes` (the table `hf-syntax-mt train --recipe` reads)
RECIPE_OF = {"vanilla": "vanilla", "pascal": "pascal", "alignment": "alignment", "dbsa_sync_full": "dbsa_sync"}


def recipe_method(name: str, about: str) -> tuple[str, bool, str]:
    """`METHODS`' triple of recipe ``name`` at the study's shape: its ``--config_overrides`` text (what the unit files
    record), whether it trains on target trees, what it is."""
    from hf_syntax_mt.recipes import overrides_text, parses_read

    return overrides_text(name), "target" in parses_read(name, training=True), about


#: method -> (config overrides, needs target trees, what it is): the recipes of `hf_syntax_mt.recipes` at the study's
#: 3 + 3 layers of 4 heads, every model Xavier-initialised (round one's settings of each method)
METHODS = {
    "vanilla": recipe_method("vanilla", "no syntax (Marian's architecture), Xavier attention init"),
    "pascal": recipe_method("pascal", "PASCAL: 2 of 4 heads of encoder layer 1"),
    "alignment": recipe_method(
        "alignment", "Cohn et al. position, Markov and fertility biases in every decoder layer's cross-attention"
    ),
    "dbsa_sync_full": recipe_method(
        "dbsa_sync",
        "DBSA (1 head, layer 1, encoder and decoder) + synchronous loss, decoder full context (lambda_dep = "
        "lambda_sync = 0.5)",
    ),
}
SEEDS = (0, 1, 2)
#: vanilla first in every (setting, seed), so that each method's paired test can be made as soon as it is done
#: the long setting's methods (the alignment biases are not in it: issue 26 names these three)
LONG_METHODS = ("vanilla", "pascal", "dbsa_sync_full")
PLAN = [(setting, method, seed) for seed in SEEDS for setting in ("full", "low") for method in METHODS]
PLAN += [("long", method, seed) for seed in SEEDS for method in LONG_METHODS]
LOW_PAIRS, SUBSET_SEED, LOW_VOCAB = 5000, 2026, 4000
#: the long setting's recipe changes: sentences up to 128 subwords (not cut at 64); 6,000 steps, about the epochs of
#: round one's 2,000 steps on Multi30k (55,399 longer pairs, about 70 a batch); validation on newstest2015
LONG = dict(max_steps=6000, max_length=128, eval_steps=1000, save_steps=500)


def unit_name(setting: str, method: str, seed: int) -> str:
    return f"{setting}-{method}-seed{seed}"


def parse_unit(name: str) -> tuple[str, str, int]:
    setting, _, rest = name.partition("-")
    method, sep, seed = rest.rpartition("-seed")
    if setting == "long" and method not in LONG_METHODS:
        raise SystemExit(f"unit {name!r}: the long setting runs {list(LONG_METHODS)}")
    if setting not in SETTINGS or method not in METHODS or not sep or common.seed_number(seed) is None:
        raise SystemExit(f"unknown unit {name!r}: use SETTING-METHOD-seedK with SETTING in {list(SETTINGS)}, "
                         f"METHOD in {list(METHODS)} and K a number (0-9 digits)")  # fmt: skip
    return setting, method, int(seed)


def parse_args(
    argv=None,
    results: Path = RESULTS,
    output_dir: Path | None = None,
    description: str = __doc__,
    methods: dict | None = None,
    label: str = "round two",
    seed_results: tuple[Path, ...] = (),
):
    """The study's arguments; a later round (`study_round3`) gives its own ``results``, ``output_dir``, ``methods``
    (method -> `METHODS`' triple), ``label`` (in the model cards) and ``seed_results``: earlier rounds' results folders
    whose units of a (setting, seed) fix the precision of this round's units of it (`unit_precision`)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, results, output_dir or common.ROOT / "runs" / "round2", threads=1)
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="auto: bf16 where the device computes it natively (CUDA, AVX512-BF16/AMX CPUs), else fp32")  # fmt: skip
    p.add_argument("--ende-cache", default=None, help="the shared en-de sentence data of the long setting (default: "
                   "ende_sentence_data's runs/ende_sentence_data, shared with docnmt_real)")  # fmt: skip
    p.add_argument("--bootstrap-samples", type=common.POSITIVE, default=1000)
    p.add_argument("--mixed-machines", action="store_true", help="the aggregate compares units of different machine "
                   "kinds too (by default a pair whose unit files record different machines is left out, and counted; "
                   "`benchmarks.machine.same_kind`)")  # fmt: skip
    p.add_argument("--eval-batch-size", type=common.BATCH, default=64)
    args = p.parse_args(argv)
    common.refuse_quick_evidence(p, args)
    args.recipe = {**round_one.RECIPE, **(round_one.QUICK if args.quick else {})}
    args.methods, args.label, args.seed_results = methods or METHODS, label, [*map(Path, seed_results), args.results]
    args.attention_sentences = 0
    if args.ende_cache is None:
        from benchmarks.data import ende_sentence_data

        args.ende_cache = str(ende_sentence_data.DEFAULT_CACHE)
    return args


# ------------------------------------------------------------------------------------------------------------------
# Data of a setting
# ------------------------------------------------------------------------------------------------------------------
def conllu_blocks(path: Path) -> list[str]:
    """The sentences of a (gzipped) CoNLL-U file as text blocks, comments included, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    return [block + "\n" for block in text.strip("\n").split("\n\n")]


def low_resource_files(args) -> tuple[dict[str, Path], dict]:
    """`LOW_PAIRS` training pairs drawn once with `SUBSET_SEED` (line order kept), as files of the keys of
    `round_one.files`, and what the record says of them."""
    full = round_one.files(Path(args.data), "train")
    n = args.recipe["max_train"] or LOW_PAIRS if args.quick else LOW_PAIRS
    directory = Path(args.output_dir) / "data" / f"low-{n}-seed{SUBSET_SEED}"
    out = {k: directory / (p.name.removesuffix(".gz")) for k, p in full.items()}
    total = len(full["tgt"].read_text(encoding="utf-8").split("\n")) - 1
    lines = sorted(random.Random(SUBSET_SEED).sample(range(total), n))
    digest = hashlib.sha256(",".join(map(str, lines)).encode()).hexdigest()
    info = {"pairs": n, "of": total, "subset_seed": SUBSET_SEED, "line_numbers_sha256": digest}
    stamp = directory / "subset.json"
    if not stamp.is_file() or json.loads(stamp.read_text()) != info:
        directory.mkdir(parents=True, exist_ok=True)
        for key in ("src", "tgt"):
            rows = full[key].read_text(encoding="utf-8").split("\n")
            out[key].write_text("".join(rows[i] + "\n" for i in lines), encoding="utf-8")
        for key in ("src_conllu", "tgt_conllu"):
            blocks = conllu_blocks(full[key])
            if len(blocks) != total:
                raise SystemExit(f"{full[key]} has {len(blocks)} sentences, {full['tgt']} {total} lines")
            out[key].write_text("\n".join(blocks[i] for i in lines) + "\n", encoding="utf-8")
        stamp.write_text(json.dumps(info))
    return out, info


def tokenizer_for(args, setting: str, train: dict[str, Path]) -> Path:
    """One joint BPE per setting, trained once on its training pairs (deterministic)."""
    from hf_syntax_mt.training import train_tokenizer

    vocab = args.recipe["vocab_size"] if setting != "low" or args.quick else LOW_VOCAB
    directory = Path(args.output_dir) / f"tokenizer-{setting}-{vocab}"
    if not (directory / "tokenizer.json").is_file():
        lines = [line for key in ("src", "tgt") for line in train[key].read_text(encoding="utf-8").split("\n") if line]
        train_tokenizer(lines, vocab_size=vocab).save_pretrained(directory)
    return directory


def long_files(args, build: bool = True, target_trees: bool = False) -> dict[str, dict[str, Path]]:
    """The shared en-de sentence-level data (`ende_sentence_data`, issue 27's step 1 trains on it too): split -> the
    keys of `round_one.files`; ``build`` builds or checks the cache first (a few minutes once); ``target_trees`` adds
    the German parses of the training and validation sets (`build_german`: the German parser is trained first if
    missing, 13-18 CPU minutes once, then the German lines parsed, a few minutes)."""
    from benchmarks.data import ende_sentence_data as ende

    cache = Path(args.ende_cache)
    if build:
        ende.build(Path(args.data), cache)
    if target_trees:
        ende.build_german(Path(args.data), cache, progress=True)
    paths = ende.file_paths(cache)

    def keys(name):
        out = {"src": paths[name]["en"], "tgt": paths[name]["de"], "src_conllu": paths[name]["conllu"]}
        return {**out, "tgt_conllu": paths[name]["de_conllu"]} if target_trees and name in ende.GERMAN_SETS else out

    return {"train": keys("train"), "validation": keys(ende.VALIDATION_SET), "test": keys("iwslt17.test"),
            **{name: keys(name) for name in TEST_SETS["long"]}}  # fmt: skip


def test_files(args, setting: str, name: str) -> dict[str, Path]:
    return long_files(args, build=False)[name] if setting == "long" else round_one.files(Path(args.data), name)


# ------------------------------------------------------------------------------------------------------------------
# A unit
# ------------------------------------------------------------------------------------------------------------------
def translate_test_sets(model_dir: Path, args, setting: str) -> dict[str, list[str]]:
    """Every test set translated by the saved model's pipeline (beam 4), its sources parsed by their CoNLL-U."""
    from transformers import pipeline

    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.inference import translate_lines

    out = {}
    for name in TEST_SETS[setting]:
        f = test_files(args, setting, name)
        sources = f["src"].read_text(encoding="utf-8").split("\n")[:-1][: args.recipe["max_test"] or None]
        pipe = pipeline("syntax-translation", model=str(model_dir), parser=get_parser("conllu", path=f["src_conllu"]))
        hyps = translate_lines(pipe, sources, batch_size=args.eval_batch_size, progress=False,
                               num_beams=args.recipe["num_beams"])  # batched longest first  # fmt: skip
        out[name] = [h.strip() for h in hyps]
    return out


def unit_precision(args, setting: str, seed: int, device: str) -> str:
    """The precision a unit trains in: that of the units of its (setting, seed) already written, so that every paired
    test against vanilla stays inside one precision, else `choose_precision`'s. A seed's units may run on different
    machines over several sessions; `--precision auto` follows the seed, and a precision the user names that differs
    from the seed's, or a bf16 seed on a CPU that would emulate bf16 (10-20x slower), stops with what to do."""
    hardware = common.choose_precision(args.precision, device)
    written = {}
    paths = [
        p
        for r in getattr(args, "seed_results", None) or [args.results]
        for p in (Path(r) / "runs").glob(f"{setting}-*-seed{seed}.json")
    ]
    for path in sorted(paths):  # this round's units of the seed and those of the rounds it compares with
        unit = common.load_unit(path, required=("unit", "precision"))
        written.setdefault(unit["precision"], []).append(unit["unit"])
    if not written:
        return hardware
    if len(written) > 1:
        raise SystemExit(f"setting {setting}, seed {seed}: its units ran in several precisions ({written}); the paired "
                         f"tests need one: delete the unit files of the precision you drop")  # fmt: skip
    ((seed_precision, units),) = written.items()
    if seed_precision == hardware:
        return hardware
    if args.precision != "auto":
        raise SystemExit(f"setting {setting}, seed {seed}: its units {units} ran in {seed_precision}, and "
                         f"--precision {args.precision} would train this one in {hardware}: pass --precision "
                         f"{seed_precision} (or auto), so that it is compared within one precision")  # fmt: skip
    if seed_precision == "bf16" and device == "cpu" and not common.cpu_has_native_bf16():
        raise SystemExit(f"setting {setting}, seed {seed}: its units {units} ran in bf16, which this CPU would emulate "
                         "(10-20x slower than fp32): run this seed's units on a CPU with AVX512-BF16/AMX or a GPU, or "
                         "a seed whose units run in fp32")  # fmt: skip
    print(f"setting {setting}, seed {seed}: training in {seed_precision} like its units {units}", flush=True)
    return seed_precision


def run_unit(args, setting: str, method: str, seed: int, device: str) -> Path:
    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    name, methods = unit_name(setting, method, seed), args.methods
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out = Path(args.output_dir) / "models" / name
    splits = {}
    if setting == "low":
        splits["train"], subset = low_resource_files(args)
    elif setting == "long":
        # no Trainer test pass: the pipeline translates both test sets (the Trainer's unsorted beam search over
        # iwslt17.test would add a fifth of the evaluation's time to check what round one already checked)
        files = long_files(args, target_trees=methods[method][1])
        splits, subset = {k: v for k, v in files.items() if k in ("train", "validation")}, None
        args = argparse.Namespace(**{**vars(args), "recipe": {**args.recipe, **({} if args.quick else LONG)}})
    else:
        splits["train"], subset = round_one.files(Path(args.data), "train"), None
    tokenizer = tokenizer_for(args, setting, splits["train"])
    precision = unit_precision(args, setting, seed, device)
    args.recipe["bf16"] = precision == "bf16"
    argv = round_one.train_argv(args, method, seed, out, tokenizer, device, spec=methods[method], split_files=splits,
                                predict="test" in splits)  # fmt: skip
    argv[argv.index("--model_card_title") + 1] = (
        f"Multi30k en->de {method}, {setting} data (seed {seed}, {args.label})"
    )
    checkpoint = common.resume_or_clear(out, argv)
    print(f"=== {name} on {device} ({precision}): {methods[method][2]}", flush=True)
    start = time.perf_counter()
    run(*train_args(argv))
    wall_train = time.perf_counter() - start
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    start = time.perf_counter()
    hypotheses = translate_test_sets(out, args, setting)
    files = {test_set: test_files(args, setting, test_set) for test_set in hypotheses}
    tests = unit_files.score_test_sets(runs, name, hypotheses, files)
    trainer_test = None
    if "test" in splits:
        trainer_test = (out / "test_generations.txt").read_text(encoding="utf-8").split("\n")[:-1]
    record = unit_files.unit_record(
        unit=(name, setting, method, seed), about=methods[method][2], extra={}, overrides=methods[method][0],
        args=args, precision=precision, subset=subset, tokenizer=tokenizer, info=info, wall_train=wall_train,
        test_start=start, tests=tests, trainer_test=trainer_test, hypotheses=hypotheses, device=device,
        first_test=TEST_SETS[setting][0],  # the Trainer's test set (test_2016_flickr, iwslt17.test)
        checkpoint=checkpoint, argv=argv,
    )  # fmt: skip
    return unit_files.write_unit(runs, record)


# ------------------------------------------------------------------------------------------------------------------
# Aggregate: reads only the unit files
# ------------------------------------------------------------------------------------------------------------------
#: the fields the aggregate reads, and their types (`common.check_fields`); ``tests`` is keyed by test set
TEST_FIELDS = unit_files.TEST_FIELDS
UNIT_FIELDS = {"unit": str, "setting": set(SETTINGS), "method": set(METHODS), "seed": int,
               "tests": {"*": TEST_FIELDS}, "precision": str, "device": str, "steps": int, "train_minutes": float,
               "subset": (dict, type(None)), "commit": (str, type(None))}  # fmt: skip


def load_units(results: Path, allow_unhashed: bool = False, methods: dict | None = None) -> list[dict]:
    """The unit files under ``results/runs`` with their hypotheses, each checked (`units.load_units`): the setting
    and method (of ``methods``, default `METHODS`) known, every test set of the setting scored."""
    fields = {**UNIT_FIELDS, "method": set(methods or METHODS)}
    return unit_files.load_units(results, fields, TEST_SETS.__getitem__, allow_unhashed)


def precision_by_seed(units: list[dict]) -> str:
    """``"0: fp32; 1: bf16"``: a study may run its seeds on different machines (each seed's units in one precision,
    so that every paired test is within one precision), but a seed with mixed precisions is named as such."""
    seeds = sorted({u["seed"] for u in units})
    return "; ".join(f"{s}: {'/'.join(sorted({u['precision'] for u in units if u['seed'] == s}))}" for s in seeds)


def trainer_agreement(unit: dict) -> str:
    agrees = unit.get("trainer_test_agrees", unit.get("trainer_test_2016_agrees"))
    if agrees is None:
        return "no Trainer test pass (the pipeline translated every test set, in batches sorted by length)"
    return f"trainer and pipeline agree on the first test set: {agrees}" + (
        " (the Trainer predicted under bf16 autocast, the pipeline in fp32)" if unit["precision"] == "bf16" else ""
    )


def seed_lines(by_key: dict, seeds_of: dict[tuple[str, str], list[int]], refs: dict, samples: int,
               mixed: bool) -> list[str]:  # fmt: skip
    """Statistics that count seeds (issue 66): per setting and method, each seed's ΔBLEU against vanilla of the seed
    over every test set of the setting concatenated, tested over seeds (round four's `compare`: `seed_stats`'
    tests, the sentence-cluster and the line bootstrap of the pooled ΔBLEU, each pair's machine relation).

    Args:
        by_key: (setting, method, seed) -> unit.
        seeds_of: (setting, method) -> the seeds whose pairs with vanilla the tables above compare on every test set.
        mixed: pairs of different machine kinds were compared (``--mixed-machines``): a comparison with such a pair
            is given again on the seeds of one (or unknown) kind only.
    """
    seed_compare.POOLED.clear()  # its line bootstraps are cached by unit name: once an aggregate
    lines = ["## Seed-level statistics", "",
             "Each seed is one observation (issue 66): ΔBLEU of a seed = corpus BLEU of the method's test sets of the "
             "setting concatenated (full and low: the four Multi30k test sets; long: iwslt17.test and "
             "europarl7.test) minus vanilla's of the same seed, over the seeds the tables above compare. Paired t "
             "over seeds with the 95% t interval of the mean; exact Wilcoxon signed-rank and sign tests (with 3 seeds "
             "neither can go below p = 0.25); the unpaired t-test of the two methods' per-seed BLEU (for pairs whose "
             "units ran on different machines, which weakens the pairing); the sentence-cluster bootstrap of the "
             f"pooled ΔBLEU ({samples} resamples of the source sentences, each carrying every seed's lines of both "
             "systems); and the line bootstrap of the same pooled ΔBLEU (the seeds' lines concatenated, each line "
             "resampled on its own, as the tables above resample each test set), which measures test-sentence noise "
             "only.", "",
             "Machines: round two's units predate the machine record (issue 66); each records its device, whether "
             "its CPU computes bf16 natively and its threads, not the CPU. By issue 66 and the study page, the `low` "
             "units of seed 0 ran on an AVX2 EPYC (DBSA + sync's on a Xeon) and those of seeds 1-2 on a Xeon. A pair "
             "is of different kinds only where those three fields differ, else of unknown kind and compared (round "
             "three's rule, `benchmarks.machine.same_kind`), so an unknown pair may still span two CPU kinds. The "
             "machines column gives each seed's relation; "
             + ("pairs of different kinds are compared (`--mixed-machines`), and a comparison with one is given "
                "again without it (*one kind only*)" if mixed else "pairs of different kinds are left out")
             + "; *Machine kinds* below names every such pair.", "", *seed_stats.SEED_TABLE_HEADER]  # fmt: skip
    for (setting, method), seeds in seeds_of.items():
        one_kind = [s for s in seeds if machine.same_kind(by_key[(setting, "vanilla", s)],
                                                          by_key[(setting, method, s)])[0] is not False]  # fmt: skip
        for name, chosen in ((f"`{setting}` {method} - vanilla", seeds),
                             (f"`{setting}` {method} - vanilla, one kind only", one_kind)):  # fmt: skip
            if not chosen or (chosen is one_kind and one_kind == seeds):
                continue
            c = seed_compare.compare(by_key, setting, chosen, method, "vanilla", refs, samples, TEST_SETS[setting])
            lines.append(seed_stats.seed_row(name, chosen, c["deltas"], c["stats"], c["cluster"], c["line_p"],
                                             c["machines"]))  # fmt: skip
    return [*lines, ""]


def aggregate(args) -> str | None:
    from hf_syntax_mt.evaluation import bucket_scores, paired_bootstrap

    allow_unhashed = getattr(args, "allow_unhashed", False)
    if not (units := common.aggregated_units(args.results, lambda r: load_units(r, allow_unhashed=allow_unhashed))):
        return None
    refs, lengths = {}, {}
    for setting in {u["setting"] for u in units}:
        for t in TEST_SETS[setting]:
            f = test_files(args, setting, t)
            refs[t] = f["tgt"].read_text(encoding="utf-8").split("\n")[:-1]
            lengths[t] = [len(s.split()) for s in f["src"].read_text(encoding="utf-8").split("\n")[:-1]]
    for u in units:  # a cut hypothesis file (--allow-unhashed checks no sha256) is named, with its references
        for t, hypotheses in u["hypotheses"].items():
            if t in refs and len(hypotheses) != len(refs[t]):
                path = Path(args.results) / "runs" / f"{u['unit']}.{t}.txt"
                raise SystemExit(f"{path}: {len(hypotheses)} lines, but the {t} references "
                                 f"{test_files(args, u['setting'], t)['tgt']} have {len(refs[t])}: the file was cut "
                                 "or replaced; restore it, or delete the unit's files to run it again")  # fmt: skip
    by_key = {(u["setting"], u["method"], u["seed"]): u for u in units}
    pairing = machine.Pairing(getattr(args, "mixed_machines", False))
    summary = {}  # setting -> what `plot` draws
    mixed = " --mixed-machines" if pairing.mixed else ""
    seeds_of: dict[tuple[str, str], list[int]] = {}  # (setting, method) -> the seeds compared on every test set
    lines = ["# Study round two: results", "", "Built by `python benchmarks/studies/study_round2.py "
             f"--aggregate{mixed}` from `runs/*.json` ({len(units)} units). The ΔBLEU columns are drawn in "
             "`deltas.png` beside this file.", ""]  # fmt: skip
    for setting in SETTINGS:
        su = [u for u in units if u["setting"] == setting]
        if not su:
            continue
        first = su[0]
        lines += [f"## Setting `{setting}`", "",
                  f"Precision by seed: {precision_by_seed(su)}; devices: {sorted({u['device'] for u in su})}; "
                  f"steps {first['steps']}" + (f"; subset {first['subset']}" if first.get("subset") else "") + ".", "",
                  "| method | test set | seeds | BLEU | chrF | ΔBLEU vs vanilla per seed (p) | pooled ΔBLEU (p) |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        fair: dict[str, list[FairPair]] = {}  # method -> its same-seed pairs with vanilla, every test set
        by_seed: dict[str, dict[int, list[FairPair]]] = {}  # the same pairs: method -> seed -> one a test set
        summary[setting] = {"runs": {}, "buckets": {}}
        runs = summary[setting]["runs"]  # method -> [(seed, test set, ΔBLEU)]
        for method in METHODS:
            mu = sorted((u for u in su if u["method"] == method), key=lambda u: u["seed"])
            if not mu:
                continue
            for t in TEST_SETS[setting]:
                per_seed = []
                for u in mu:
                    base = by_key.get((setting, "vanilla", u["seed"]))
                    if method == "vanilla" or base is None:
                        continue
                    if (base["precision"], base["device"]) != (u["precision"], u["device"]):  # not a fair pair
                        per_seed.append(f"not compared (vanilla {base['precision']} on {base['device']}, "
                                        f"{method} {u['precision']} on {u['device']})")  # fmt: skip
                        continue
                    if not pairing.ok(base, u):  # units of one seed on different machine kinds
                        per_seed.append(f"not compared (different machines: vanilla {machine.describe(base)}, "
                                        f"{method} {machine.describe(u)})")  # fmt: skip
                        continue
                    n = len(u["hypotheses"][t])
                    b = paired_bootstrap(
                        base["hypotheses"][t], u["hypotheses"][t], refs[t][:n], args.bootstrap_samples
                    )
                    delta = b["bleu"]["system"] - b["bleu"]["baseline"]
                    per_seed.append(f"{delta:+.2f} ({b['bleu']['p_value']:.3f})")
                    runs.setdefault(method, []).append((u["seed"], t, delta))
                    pair = FairPair(t, base["hypotheses"][t], u["hypotheses"][t], refs[t][:n], lengths[t][:n])
                    fair.setdefault(method, []).append(pair)
                    by_seed.setdefault(method, {}).setdefault(u["seed"], []).append(pair)
                pooled, pairs = "-", [p for p in fair.get(method, []) if p.test_set == t]
                if len(pairs) > 1:  # the concatenated hypotheses of every seed the method and vanilla share
                    b = paired_bootstrap(*([x for p in pairs for x in getattr(p, k)] for k in ("base", "system", "refs")),
                                         args.bootstrap_samples)  # fmt: skip
                    pooled = f"{b['bleu']['system'] - b['bleu']['baseline']:+.2f} ({b['bleu']['p_value']:.3f})"
                lines.append(f"| {method} | {t} | {','.join(str(u['seed']) for u in mu)} "
                             f"| {common.mean_std([u['tests'][t]['bleu'] for u in mu])} "
                             f"| {common.mean_std([u['tests'][t]['chrf'] for u in mu])} | {', '.join(per_seed) or '-'} "
                             f"| {pooled} |")  # fmt: skip
        if runs:
            lines += [
                "",
                "Sign test over seeds x test sets (ΔBLEU against vanilla of the same seed; ties left out):",
                "",
            ]
            for m, points in runs.items():
                better, worse = sum(d > 0 for _, _, d in points), sum(d < 0 for _, _, d in points)
                lines.append(
                    f"- {m}: {better} better, {worse} worse, two-sided p = {format_p(sign_test(better, worse))}"
                )
            lines += ["", "Each training run as one observation: mean ΔBLEU over the test sets, by seed (a sign test over "
                      "3 seeds cannot go below p = 0.25):", ""]  # fmt: skip
            for m, points in runs.items():
                means = {
                    seed: statistics.mean(d for s, _, d in points if s == seed)
                    for seed in sorted({s for s, _, _ in points})
                }
                lines.append(f"- {m}: " + ", ".join(f"seed {seed} {d:+.2f}" for seed, d in means.items())
                             + f" ({sum(d > 0 for d in means.values())} of {len(means)} seeds ahead)")  # fmt: skip
            for method, pairs in by_seed.items():
                seeds = sorted(s for s, p in pairs.items() if [q.test_set for q in p] == list(TEST_SETS[setting]))
                if seeds:
                    seeds_of[(setting, method)] = seeds
        lines += ["", "BLEU by source length (words), every test set and seed pooled:", ""]
        table = {}
        for method in METHODS:
            mu = [u for u in su if u["method"] == method]
            if mu:
                hyps = [h for u in mu for t in TEST_SETS[setting] for h in u["hypotheses"][t]]
                rs = [r for u in mu for t in TEST_SETS[setting] for r in refs[t][: len(u["hypotheses"][t])]]
                ls = [x for u in mu for t in TEST_SETS[setting] for x in lengths[t][: len(u["hypotheses"][t])]]
                table[method] = bucket_scores(ls, hyps, rs)
        labels = [b["bucket"] for b in next(iter(table.values()))]
        lines += ["| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
        for method, buckets in table.items():
            cells = {b["bucket"]: f"{b['bleu']:.2f} (n={b['count']})" for b in buckets}
            lines.append(f"| {method} | " + " | ".join(cells.get(label, "-") for label in labels) + " |")
        if fair:
            lines += ["", "ΔBLEU against vanilla by source length (words): same-seed pairs of the same precision and "
                      "device, every test set pooled; paired bootstrap p:", "",
                      "| method | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]  # fmt: skip
            for method, pairs in fair.items():
                summary[setting]["buckets"][method] = bucket_deltas(pairs, args.bootstrap_samples)
                cells = {b["bucket"]: f"{b['delta']:+.2f} ({b['p']:.3f}, n={b['count']})"
                         for b in summary[setting]["buckets"][method]}  # fmt: skip
                lines.append(f"| {method} | " + " | ".join(cells.get(label, "-") for label in labels) + " |")
            lines += ["", "Does the gain grow with length? ΔBLEU on sources of 31+ words minus ΔBLEU on 1-10 words, the "
                      "same pairs pooled (stratified paired bootstrap over source sentences, a sentence's copies from "
                      "every seed drawn together; 95% interval; the PASCAL paper's released outputs give about +2.3 "
                      "and -0.8, a gap of about 3):", ""]  # fmt: skip
            lines += [f"- {method}: {length_gap(pairs, args.bootstrap_samples)}"
                      for method, pairs in fair.items()]  # fmt: skip
        lines.append("")
    if seeds_of:
        lines += seed_lines(by_key, seeds_of, refs, args.bootstrap_samples, pairing.mixed)
    lines += [*pairing.lines(), ""]
    lines += ["Units:", ""] + [
        f"- {u['unit']}: {u['device']}, {u['precision']}, {u['train_minutes']} training min, "
        f"machine {machine.describe(u)}, "
        f"commit {(u.get('commit') or '?')[:10]}, " + trainer_agreement(u)
        for u in units
    ]

    def draw():
        plot(summary, Path(args.results) / "deltas.png", TEST_SETS, list(METHODS))

    return common.write_results(args.results, lines, draw if any(s["runs"] for s in summary.values()) else None)


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, parse_unit, run_unit, aggregate, name=unit_name)


if __name__ == "__main__":
    sys.exit(main())
