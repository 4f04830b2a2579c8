"""Study round three (issue 59): do the syntax priors stack? Round two's low-resource setting (`study_round2`: the
same recipe, 2,000 steps, the fixed 5,000-pair subset of seed 2026, its joint BPE of 4,000, the four Multi30k test
sets, beam 4, the same precision rule and unit files with hypothesis hashes), with two combinations of round two's
methods, seeds 0-2:

- ``pascal_dbsa_sync``: round two's PASCAL (2 PASCAL heads in encoder layer 1) plus its DBSA + synchronous loss (1
  DBSA head in layer 1 of the encoder and of the decoder, lambda_dep = lambda_sync = 0.5, decoder full context);
- ``all3``: the same plus round two's alignment biases (Cohn et al.'s position, Markov and fertility biases in every
  decoder layer's cross-attention);
- ``dbsa_sync_align``: ``all3`` without PASCAL (DBSA + sync and the alignment biases), to tell which of ``all3``'s
  parts pays (its DBSA heads are head 0 of encoder and decoder layer 1, as in round two's DBSA + sync units).

Heads: the methods' heads never share a head. `methods.head_layout` gives each method of a layer a block of
consecutive heads in registry order, so encoder layer 1 (index 0) of the combinations with PASCAL has heads 0-1 PASCAL,
head 2 DBSA and head 3 plain (`HEAD_LAYOUTS`; round two's PASCAL units had heads 0-1 PASCAL, its DBSA units head 0 DBSA: the
DBSA head moves from index 0 to 2, which changes nothing, heads being interchangeable at initialisation), and decoder
layer 1 has head 0 DBSA. The alignment biases take no head: they add to the cross-attention logits of every head, in
every decoder layer, so in ``all3`` the synchronous loss reads a biased cross-attention (decoder layer 2 of 3, l_sync).

A unit is ``low-<combination>-seed<k>``, written to ``RESULTS/runs/`` as in round two; a seed's units train in the
precision of round two's units of that seed (seed 0: fp32, seed 1: bf16, seed 2: fp32; `study_round2.unit_precision`
reads both rounds' unit files). ``--aggregate`` rebuilds ``RESULTS/results.md`` from round three's unit files and
round two's ``low-*`` unit files (every hypothesis file checked against its sha256): each combination against vanilla
of the same seed (paired bootstrap per seed and pooled over seeds), against the best single method of round two on
each test set (the one with the largest pooled gain over vanilla over round two's three seeds, compared on the seeds
the combination has), validation BLEU by step against round two's units of the same seed, and the cost.

    python benchmarks/studies/study_round3.py --list
    python benchmarks/studies/study_round3.py --units low-pascal_dbsa_sync-seed0 --threads 1 --no-aggregate
    python benchmarks/studies/study_round3.py --aggregate
    python benchmarks/studies/study_round3.py --quick --results /tmp/r3 --output-dir /tmp/r3runs --units low-all3-seed0
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.machine import RELATION, Pairing, describe, same_kind  # noqa: E402
from benchmarks.studies import seed_stats  # noqa: E402
from benchmarks.studies import study_round2 as round_two  # noqa: E402
from benchmarks.studies.round2_stats import format_p, sign_test  # noqa: E402
from benchmarks.studies.seed_compare import POOLED, concat, corpus_bleu, pooled, references  # noqa: E402

RESULTS = ALL_RESULTS / "round3"
ROUND_TWO = round_two.RESULTS
SETTING = "low"
TESTS = round_two.TEST_SETS[SETTING]
SINGLE = ("pascal", "dbsa_sync_full", "alignment")  # round two's single methods


#: combination -> (config overrides, needs target trees, what it is): the recipes of `hf_syntax_mt.recipes` (round two's
#: options of each method, joined) at the study's shape
METHODS = {
    "pascal_dbsa_sync": round_two.recipe_method(
        "pascal_dbsa_sync",
        "PASCAL (2 heads, encoder layer 1) + DBSA (1 head, layer 1, encoder and decoder) + synchronous loss, "
        "decoder full context; Xavier attention init",
    ),
    "all3": round_two.recipe_method(
        "all3",
        "PASCAL + DBSA + synchronous loss as pascal_dbsa_sync, plus Cohn et al.'s alignment biases in every "
        "decoder layer's cross-attention",
    ),
    "dbsa_sync_align": round_two.recipe_method(
        "dbsa_sync_align",
        "all3 without PASCAL: DBSA + synchronous loss and the alignment biases (which of all3's parts pays)",
    ),
}
#: combination -> (site, layer) -> the heads of each kind (of 4), as `methods.head_kinds` lays them out
_WITH_PASCAL = {("encoder", 0): {"pascal": (0, 2), "dbsa": (2, 3)}, ("decoder", 0): {"dbsa": (0, 1)}}
HEAD_LAYOUTS = {"pascal_dbsa_sync": _WITH_PASCAL, "all3": _WITH_PASCAL,
                "dbsa_sync_align": {("encoder", 0): {"dbsa": (0, 1)}, ("decoder", 0): {"dbsa": (0, 1)}}}  # fmt: skip
#: (system, base, what the system adds to the base): pairs that differ by one method; a base in `SINGLE` is round two's
PARTS = [("all3", "pascal_dbsa_sync", "alignment biases"), ("dbsa_sync_align", "dbsa_sync_full", "alignment biases"),
         ("all3", "dbsa_sync_align", "PASCAL"), ("pascal_dbsa_sync", "dbsa_sync_full", "PASCAL")]  # fmt: skip
SEEDS = round_two.SEEDS
PLAN = [(SETTING, method, seed) for seed in SEEDS for method in METHODS]  # seed 0's units first


def parse_unit(name: str) -> tuple[str, str, int]:
    setting, _, rest = name.partition("-")
    method, sep, seed = rest.rpartition("-seed")
    if setting != SETTING or method not in METHODS or not sep or common.seed_number(seed) is None:
        raise SystemExit(f"unknown unit {name!r}: use low-METHOD-seedK with METHOD in {list(METHODS)} and K a "
                         "number (0-9 digits)")  # fmt: skip
    return setting, method, int(seed)


def parse_args(argv=None):
    return round_two.parse_args(
        argv, RESULTS, common.ROOT / "runs" / "round3", __doc__, METHODS, "round three", seed_results=(ROUND_TWO,)
    )


# ------------------------------------------------------------------------------------------------------------------
# Aggregate: reads only the unit files of both rounds
# ------------------------------------------------------------------------------------------------------------------
def best_single(two: dict, refs: dict, tests) -> tuple[str, float]:
    """Round two's single method with the largest pooled ΔBLEU over vanilla of the same seed on ``tests`` (corpus
    BLEU of every seed's hypotheses concatenated, the seeds each method shares with vanilla): (method, ΔBLEU)."""
    out = {}
    for method in SINGLE:
        seeds = sorted(s for s in SEEDS if (method, s) in two and ("vanilla", s) in two)
        if seeds:
            system, base = [two[(method, s)] for s in seeds], [two[("vanilla", s)] for s in seeds]
            r = references(refs, system, tests)
            out[method] = corpus_bleu(concat(system, tests), r) - corpus_bleu(concat(base, tests, system), r)
    method = max(out, key=out.get)
    return method, out[method]


def fair(a: dict, b: dict, pairing: Pairing | None = None) -> bool:
    """Same precision and device, and (given ``pairing``) a machine kind `pairing` allows."""
    same = (a["precision"], a["device"]) == (b["precision"], b["device"])
    return same and (pairing is None or pairing.ok(a, b))


def verdict(delta: float, p: float) -> str:
    """The line bootstrap's reading only (test sentences, not seeds): the seed-level table below decides."""
    if delta > 0 and p < 0.05:
        return "ahead (line p < 0.05)"
    return "ahead, not significant" if delta > 0 else "no"


def parts_lines(
    three: list[dict], two: dict, refs: dict, scopes, samples: int, pairing: Pairing | None = None
) -> list[str]:
    """What each part of ``all3`` adds: every pair of `PARTS` (the system has one method more than the base), pooled
    over the seeds both have in the same precision and device."""
    units = {**two, **{(u["method"], u["seed"]): u for u in three}}
    rows = []
    for system, base, added in PARTS:
        seeds = [s for s in SEEDS if (system, s) in units and (base, s) in units
                 and fair(units[(system, s)], units[(base, s)], pairing)]  # fmt: skip
        if not seeds:
            continue
        sys_units, base_units = [units[(system, s)] for s in seeds], [units[(base, s)] for s in seeds]
        cells = [f"{d:+.2f} ({p:.3f})" for d, p in
                 (pooled(base_units, sys_units, refs, tests, samples) for _, tests in scopes)]  # fmt: skip
        rows.append(f"| + {added} | {system} vs {base} | {','.join(map(str, seeds))} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", "What each part adds: ΔBLEU of a combination against the one without that part, same seeds pooled "
            "(p); a base without a round-three unit is round two's:", "",
            "| adds | system vs base | seeds | " + " | ".join(name for name, _ in scopes) + " |",
            "|---|---|---|" + "---|" * len(scopes), *rows]  # fmt: skip


#: the comparisons tested over seeds: each combination against vanilla, all3 against DBSA + sync (the decision rule's),
#: then what each part adds (`PARTS`); a base in `SINGLE` or vanilla is round two's unit of the seed
SEED_COMPARISONS = list(dict.fromkeys([*((m, "vanilla") for m in METHODS), ("all3", "dbsa_sync_full"),
                                       *((s, b) for s, b, _ in PARTS)]))  # fmt: skip
#: the comparison the decision rule reads ("stacks": its seed-level 95% interval excludes 0)
DECISION = ("all3", "dbsa_sync_full")


def seed_lines(three: list[dict], two: dict, refs: dict, samples: int, pairing: Pairing) -> list[str]:
    """Statistics that count seeds (issue 66): per comparison of `SEED_COMPARISONS`, each seed's ΔBLEU over every test
    set pooled (corpus BLEU of the four test sets concatenated), the paired t-test over seeds and its 95% interval,
    the Wilcoxon and sign tests, the unpaired t-test of the per-seed BLEU, the sentence-cluster bootstrap of the pooled
    ΔBLEU, and beside them the line bootstrap reported before; then the decision rule on `DECISION`."""
    units = {**two, **{(u["method"], u["seed"]): u for u in three}}
    lines = ["", "## Seed-level statistics", "",
             "Each seed is one observation: ΔBLEU of a seed = corpus BLEU of the system's four test sets concatenated "
             "minus the base's (a base without a round-three unit is round two's unit of the seed). Paired t over "
             "seeds with the 95% t interval of the mean; exact Wilcoxon signed-rank and sign tests (with 3 seeds "
             "neither can go below p = 0.25); the unpaired t-test of the two methods' per-seed BLEU (for pairs whose "
             "units ran on different machines, which weakens the pairing); the sentence-cluster bootstrap of the "
             f"pooled ΔBLEU ({samples} resamples of the source sentences, each carrying every seed's lines of both "
             "systems); and the line bootstrap reported before (the seeds' lines concatenated, each line resampled "
             "on its own), which measures test-sentence noise only.", "", *seed_stats.SEED_TABLE_HEADER]  # fmt: skip
    results = {}
    for system, base in SEED_COMPARISONS:
        seeds = [s for s in SEEDS if (system, s) in units and (base, s) in units
                 and fair(units[(system, s)], units[(base, s)], pairing)]  # fmt: skip
        if not seeds:
            continue
        sys_units, base_units = [units[(system, s)] for s in seeds], [units[(base, s)] for s in seeds]
        r = references(refs, sys_units[:1], TESTS)
        if any(references(refs, [u], TESTS) != r for u in sys_units):
            raise SystemExit(f"{system}: its units translated different numbers of test sentences; compare full units")
        sys_lines = [concat([u], TESTS) for u in sys_units]
        base_lines = [concat([b], TESTS, [u]) for b, u in zip(base_units, sys_units, strict=True)]
        sys_bleu, base_bleu = [corpus_bleu(h, r) for h in sys_lines], [corpus_bleu(h, r) for h in base_lines]
        deltas = [a - b for a, b in zip(sys_bleu, base_bleu, strict=True)]
        stats = seed_stats.seed_level(deltas, sys_bleu, base_bleu)
        cluster = seed_stats.cluster_bootstrap(base_lines, sys_lines, r, samples)
        line_p = pooled(base_units, sys_units, refs, TESTS, samples)[1]
        kinds = [RELATION[same_kind(b, u)[0]] for b, u in zip(base_units, sys_units, strict=True)]
        machines = "; ".join(f"{','.join(str(s) for s, k in zip(seeds, kinds, strict=True) if k == kind)}: {kind}"
                             for kind in dict.fromkeys(kinds))  # fmt: skip
        lines.append(seed_stats.seed_row(f"{system} - {base}", seeds, deltas, stats, cluster, line_p, machines))
        results[(system, base)] = stats
    if DECISION in results:
        s = results[DECISION]
        decided = seed_stats.excludes_zero(s)
        interval = seed_stats.format_interval(s["ci"])
        lines += ["", f"Decision rule (\"stacks\" means the seed-level 95% interval of {DECISION[0]} - DBSA + sync "
                  f"excludes 0), over {s['n']} seeds: mean {s['mean']:+.2f}, interval {interval}: "
                  + ("**stacks**" if decided and s["mean"] > 0 else "does not stack (it is worse)" if decided else
                     "**not shown to stack** (the interval includes 0)")]  # fmt: skip
    return [*lines, ""]


def validation_lines(three: list[dict], two: dict) -> list[str]:
    """Validation BLEU (the Trainer's, 400 sentences) by step of each combination against round two's units of the
    same seed."""
    lines = []
    for seed in sorted({u["seed"] for u in three}):
        units = [two[(m, seed)] for m in ("vanilla", *SINGLE) if (m, seed) in two]
        units += [u for u in three if u["seed"] == seed]
        steps = sorted({p["step"] for u in units for p in u.get("curve") or []})
        lines += [f"Seed {seed}, validation BLEU by step (the last column: the averaged model's):", "",
                  "| unit | " + " | ".join(map(str, steps)) + " | averaged |", "|---|" + "---|" * (len(steps) + 1)]  # fmt: skip
        for u in units:
            cells = {p["step"]: f"{p['eval_bleu']:.2f}" for p in u.get("curve") or [] if "eval_bleu" in p}
            final = (u.get("validation") or {}).get("bleu")
            lines.append(f"| {u['unit']} | " + " | ".join(cells.get(s, "-") for s in steps)
                         + f" | {'-' if final is None else f'{final:.2f}'} |")  # fmt: skip
        lines.append("")
    return lines


def aggregate(args) -> str | None:
    allow_unhashed = getattr(args, "allow_unhashed", False)
    three = common.aggregated_units(args.results, lambda r: round_two.load_units(r, allow_unhashed, METHODS))
    if not three:
        return None
    two = {(u["method"], u["seed"]): u for u in round_two.load_units(ROUND_TWO, allow_unhashed)
           if u["setting"] == SETTING}  # fmt: skip
    refs = {}
    for t in TESTS:
        f = round_two.test_files(args, SETTING, t)
        refs[t] = f["tgt"].read_text(encoding="utf-8").split("\n")[:-1]
    pairing = Pairing(getattr(args, "mixed_machines", False))
    mixed = " --mixed-machines" if pairing.mixed else ""
    POOLED.clear()
    every = ("every test set", TESTS)  # the four test sets concatenated
    scopes = [(t, (t,)) for t in TESTS] + [every]
    best = {name: best_single(two, refs, tests) for name, tests in scopes}
    lines = ["# Study round three: results", "",
             f"Built by `python benchmarks/studies/study_round3.py --aggregate{mixed}` from round three's `runs/*.json` "
             f"({len(three)} of {len(PLAN)} units) and round two's `low-*` units ({len(two)}), every hypothesis file "
             "checked against its sha256. Setting `low`: 5,000 pairs, 2,000 steps. "
             f"Precision by seed: {round_two.precision_by_seed(three)}. The p-values of the tables below resample test "
             "sentences only (the paired bootstrap over the seeds' lines concatenated); the seed-level statistics "
             "(section *Seed-level statistics*) count the seeds, and the decision rule reads them.", "",
             "Round two's best single method on each test set (largest pooled ΔBLEU over vanilla, corpus BLEU of its "
             "three seeds concatenated): " + "; ".join(f"{n}: {m} {d:+.2f}" for n, (m, d) in best.items()) + ".", "",
             "| combination | test set | seeds | BLEU | ΔBLEU vs vanilla per seed (p) | pooled ΔBLEU vs vanilla (p) "
             "| best single (round two) | ΔBLEU vs best single, same seeds pooled (p) | ahead of best single? (line "
             "bootstrap) |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    signs = {}  # (combination, against) -> [ΔBLEU per seed x test set]
    for method in METHODS:
        mu = sorted((u for u in three if u["method"] == method), key=lambda u: u["seed"])
        for name, tests in scopes:
            if not mu:
                continue
            single = best[name][0]
            per_seed, pairs, against = [], [], []
            for u in mu:
                base, other = two.get(("vanilla", u["seed"])), two.get((single, u["seed"]))
                if base is None or not fair(base, u, pairing):
                    per_seed.append(f"seed {u['seed']}: no vanilla of its precision, device and machine kind")
                    continue
                d, p = pooled([base], [u], refs, tests, args.bootstrap_samples)
                per_seed.append(f"{d:+.2f} ({p:.3f})")
                pairs.append((base, u))
                if len(tests) == 1:
                    signs.setdefault((method, "vanilla"), []).append(d)
                if other is not None and fair(other, u, pairing):
                    against.append((other, u))
                    if len(tests) == 1:
                        signs.setdefault((method, "best single"), []).append(
                            pooled([other], [u], refs, tests, args.bootstrap_samples)[0]
                        )
            cells = ["-", "-", "-"]
            if pairs:
                d, p = pooled([b for b, _ in pairs], [u for _, u in pairs], refs, tests, args.bootstrap_samples)
                cells[0] = f"{d:+.2f} ({p:.3f})"
            if against:
                d, p = pooled([o for o, _ in against], [u for _, u in against], refs, tests, args.bootstrap_samples)
                cells[1:] = [f"{d:+.2f} ({p:.3f})", verdict(d, p)]
            bleu = common.mean_std([corpus_bleu(concat([u], tests), references(refs, [u], tests)) for u in mu])
            lines.append(f"| {method} | {name} | {','.join(str(u['seed']) for u in mu)} | {bleu} | "
                         f"{', '.join(per_seed)} | {cells[0]} | {single} ({best[name][1]:+.2f}) | {cells[1]} | "
                         f"{cells[2]} |")  # fmt: skip
    lines += ["", "Sign test over seeds x test sets (ties left out):", ""]
    for (method, against), deltas in signs.items():
        better, worse = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
        lines.append(f"- {method} against {against}: {better} better, {worse} worse, two-sided p = "
                     f"{format_p(sign_test(better, worse))}")  # fmt: skip
    lines += parts_lines(three, two, refs, scopes, args.bootstrap_samples, pairing)
    lines += seed_lines(three, two, refs, args.bootstrap_samples, pairing)
    lines += pairing.lines()
    lines += ["", "Cost: training time and throughput (tokens/s of the training inputs) against vanilla of the same "
              "seed. Units that ran in different sessions of a shared machine differ by its load as much as by the "
              "method (round two's vanilla ran at 771 to 2,584 tokens/s), so read the ratio as indicative only:", "",
              "| unit | precision | training min | tokens/s | vanilla training min | vanilla tokens/s | tokens/s ratio "
              "| load average at end |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for u in three:
        base = two.get(("vanilla", u["seed"]), {})
        tps, btps = u.get("tokens_per_second"), base.get("tokens_per_second")
        ratio = f"{tps / btps:.2f}" if tps and btps else "-"
        load = ", ".join(f"{x:.1f}" for x in u.get("load_average_at_end") or []) or "-"
        lines.append(f"| {u['unit']} | {u['precision']} | {u['train_minutes']} | {tps} | "
                     f"{base.get('train_minutes', '-')} | {btps or '-'} | {ratio} | {load} |")  # fmt: skip
    lines += ["", *validation_lines(three, two), "Units:", ""] + [
        f"- {u['unit']}: {u['device']}, {u['precision']}, {u['train_minutes']} training min, "
        f"{u.get('wall_minutes_train', '?')} + {u.get('wall_minutes_test', '?')} wall min (train + test), "
        f"machine {describe(u)}, commit {(u.get('commit') or '?')[:10]}, " + round_two.trainer_agreement(u)
        for u in three
    ]
    mean_delta = {m: statistics.mean(d) for (m, a), d in signs.items() if a == "vanilla"}
    if mean_delta:
        lines += ["", "Mean ΔBLEU vs vanilla over seeds x test sets: "
                  + "; ".join(f"{m} {d:+.2f}" for m, d in mean_delta.items()) + "."]  # fmt: skip
    return common.write_results(args.results, lines)


def main(argv=None) -> int:
    return common.run_study(
        parse_args(argv), PLAN, parse_unit, round_two.run_unit, aggregate, name=round_two.unit_name
    )


if __name__ == "__main__":
    sys.exit(main())
