"""The distillation study's analysis (`study_distill.py --aggregate`; the rules are those of
``docs/studies/distill.md``, written before any unit ran), from the unit files only: the study's own
(``RESULTS/runs/``: the German parser, the students, the serving units) and round four's ``low-{all3,
dbsa_sync_full,vanilla}-seedK`` (the teacher and the two models trained on the references), over the seeds whose
five models all exist.

- BLEU of each system per seed and pooled (corpus BLEU of the four test sets concatenated; pooled: every seed too);
- the comparisons of `COMPARISONS`, each over seeds: ΔBLEU per seed with the paired bootstrap of the test sentences of
  that seed, the pooled ΔBLEU, the mean with the 95% t interval over seeds and the paired t p
  (`seed_stats.seed_level`), the sentence-cluster bootstrap, and the machine relation of each seed's pair;
- the decision rule on the student-teacher gap (`gap_verdict`), the other comparisons by round four's rule
  (`study_round4.verdict`);
- the serving units' CTranslate2 BLEU (float32, int8) against the student's ``generate`` and their speed.

A teacher retrained for this study because round four's model was lost (seed 5: docs/studies/distill.md, "Seed 5
rebuilt") is a round-four unit file under ``RESULTS/rebuilt/runs/``; where one exists it is that seed's teacher (the
model the students learned from), in place of round four's unit. The German parser trained for a rebuilt seed is the
``german-parser`` unit of the study results folder ``RESULTS/rebuilt/seedK/``, the ``--results`` its students ran
with (their unit files are then moved to ``RESULTS/runs/``).

``RESULTS/progress.md`` (`progress_text`) lists the planned units, done or not, and the units added by the rebuild,
from the unit files alone; the study page includes it.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import common
from benchmarks.machine import RELATION, describe, same_kind
from benchmarks.studies import seed_compare, seed_stats
from benchmarks.studies import study_round2 as round_two
from benchmarks.studies import study_round4 as round_four

TESTS = round_two.MULTI30K_TESTS
#: the decision rule's margin: the student is "within" its teacher when it is at most this many BLEU behind
MARGIN = 0.3
#: system -> (where its unit is: "round4" or "distill", method); the order of the tables
SYSTEMS = {"teacher (all3)": ("round4", "all3"), "DBSA + sync student": ("distill", "dbsa_sync_full"),
           "vanilla student": ("distill", "vanilla"), "DBSA + sync on references": ("round4", "dbsa_sync_full"),
           "vanilla on references": ("round4", "vanilla")}  # fmt: skip
TEACHER_METHOD = SYSTEMS["teacher (all3)"][1]
#: (system, base, what it answers); the first is the decision rule's
COMPARISONS = [
    ("DBSA + sync student", "teacher (all3)", "the student-teacher gap (the decision rule)"),
    ("vanilla student", "vanilla on references", "distillation alone"),
    ("DBSA + sync student", "DBSA + sync on references", "what distillation gives the exportable recipe"),
    ("DBSA + sync student", "vanilla student", "the syntax part, both students distilled"),
    ("vanilla student", "teacher (all3)", "the vanilla student's gap (descriptive)"),
]
ENGINES = ("ct2_float32", "ct2_int8")
#: the folder under RESULTS of a rebuilt seed: retrained teachers (a round-four results folder, ``runs/low-all3-seedK``)
#: and each rebuilt seed's own study results folder, ``seedK/`` (its ``german-parser`` unit)
REBUILT = "rebuilt"
SPEED_ROWS = ("teacher_generate+parse", "student_generate", "ct2_float32", "ct2_int8", "parse")


def gap_verdict(pooled: float, ci) -> str:
    """The decision rule of docs/studies/distill.md on the student - teacher gap: ``pooled`` (BLEU of every seed's
    lines concatenated) and ``ci``, the 95% t interval over seeds of the mean gap (None: fewer than two seeds or no
    spread)."""
    if ci is not None and ci[0] >= -MARGIN and pooled >= -MARGIN:
        return f"met, shown over seeds (the whole interval lies above -{MARGIN})"
    if ci is not None and ci[1] < -MARGIN:
        return f"missed, shown over seeds (the whole interval lies below -{MARGIN})"
    met = "met" if pooled >= -MARGIN else "missed"
    if ci is None:
        return f"{met} on the pooled figure (no interval: fewer than two seeds, or no spread)"
    return f"{met} on the pooled figure, not shown over seeds (the interval reaches across -{MARGIN})"


def _hypotheses(path: Path, name: str, tests: dict, allow_unhashed: bool) -> dict[str, list[str]]:
    out = {}
    for t, scores in tests.items():
        common.require_hash(path, scores.get("hypotheses_sha256"), f"its {t} hypotheses", allow_unhashed)
        lines = sum(b["count"] for b in scores["buckets"]) if "buckets" in scores else None
        out[t] = common.read_hypotheses(path, path.parent / f"{name}.{t}.txt", scores.get("hypotheses_sha256"), lines)
    return out


def load_units(results: Path, allow_unhashed: bool = False) -> dict[str, dict]:
    """The study's unit files (name -> record), each checked: the fields read and their types, every test set scored
    and each hypothesis file against its sha256 and sentence count; anything wrong stops with one line."""
    test_fields = round_two.TEST_FIELDS
    specs = {"distill": ({"unit": str, "method": {"dbsa_sync_full", "vanilla"}, "seed": int, "commit": str,
                          "tests": {"*": test_fields}, "precision": str, "device": str}, ("unit", "method", "seed")),
             "serve": ({"unit": str, "seed": int, "commit": str, "tests": {"*": {"*": test_fields}}, "speed": list},
                       ("unit", "seed", "tests", "speed")),
             "german": ({"unit": str, "dev_scores": dict, "commit": str}, ("unit", "dev_scores"))}  # fmt: skip
    units = {}
    for path in sorted((Path(results) / "runs").glob("*.json")):
        kind = "german" if path.stem == "german-parser" else path.stem.split("-")[0]
        if kind not in specs:
            raise SystemExit(f"{path}: not a unit of this study (german-parser, distill-*, serve-*): move it away")
        fields, required = specs[kind]
        try:
            unit = common.load_unit(path, required, fields)
            if kind == "distill":
                common.check_unit_tests(path, unit["tests"], TESTS)
                unit["hypotheses"] = _hypotheses(path, unit["unit"], unit["tests"], allow_unhashed)
            elif kind == "serve":
                common.check_unit_tests(path, unit["tests"], ENGINES, "its engines")
                unit["hypotheses"] = {}
                for engine, tests in unit["tests"].items():
                    common.check_unit_tests(path, tests, TESTS, f"field 'tests.{engine}'")
                    unit["hypotheses"][engine] = _hypotheses(path, f"{unit['unit']}.{engine}", tests, allow_unhashed)
        except common.UnitFileError as e:
            raise SystemExit(str(e)) from None
        units[unit["unit"]] = unit
    return units


def seed_units(study: dict[str, dict], four: list[dict], rebuilt: list[dict] = ()) -> dict[tuple[str, int], dict]:
    """(system of `SYSTEMS`, seed) -> its unit: round four's en->de units and the study's students; a teacher in
    ``rebuilt`` (retrained for this study, `REBUILT`) replaces round four's of its seed and is marked ``rebuilt``."""
    for r in rebuilt:
        if (r["setting"], r["method"]) != ("low", TEACHER_METHOD):
            raise SystemExit(f"{r['unit']} under {REBUILT}/: only a teacher (low-{TEACHER_METHOD}) is retrained for "
                             "this study; move it away")  # fmt: skip
    four = [*four, *({**r, "rebuilt": True} for r in rebuilt)]  # after round four's: a retrained teacher replaces
    out = {}
    for system, (where, method) in SYSTEMS.items():
        for u in four if where == "round4" else study.values():
            if where == "round4" and (u["setting"], u["method"]) == ("low", method):
                out[(system, u["seed"])] = u
            elif where == "distill" and u["unit"].startswith("distill-") and u["method"] == method:
                out[(system, u["seed"])] = u
    return out


def complete_seeds(units: dict, seeds) -> list[int]:
    """The seeds whose five systems all have a unit (a seed with one missing is left out whole)."""
    return [s for s in seeds if all((system, s) in units for system in SYSTEMS)]


def compare(units: dict, seeds: list[int], system: str, base: str, refs: dict, samples: int) -> dict:
    """One comparison over ``seeds``: per seed ΔBLEU (four test sets concatenated) with its paired bootstrap p, the
    pooled ΔBLEU, `seed_stats.seed_level`, the sentence-cluster bootstrap, and each pair's machine relation."""
    from hf_syntax_mt.evaluation import paired_bootstrap

    sys_units, base_units = [units[(system, s)] for s in seeds], [units[(base, s)] for s in seeds]
    r, sys_lines, base_lines, sys_bleu, base_bleu, deltas = seed_compare.seed_lines(
        sys_units, base_units, refs, round_four.TESTS
    )
    per_seed_p = [paired_bootstrap(b, h, r, samples)["bleu"]["p_value"] for b, h in zip(base_lines, sys_lines,
                                                                                        strict=True)]  # fmt: skip
    pooled = (seed_compare.corpus_bleu([x for h in sys_lines for x in h], r * len(seeds))
              - seed_compare.corpus_bleu([x for h in base_lines for x in h], r * len(seeds)))  # fmt: skip
    kinds = [RELATION[same_kind(b, u)[0]] for b, u in zip(base_units, sys_units, strict=True)]
    return {"system": system, "base": base, "seeds": seeds, "deltas": deltas, "per_seed_p": per_seed_p,
            "pooled": pooled, "stats": seed_stats.seed_level(deltas, sys_bleu, base_bleu),
            "cluster": seed_stats.cluster_bootstrap(base_lines, sys_lines, r, samples),
            "machines": "; ".join(f"{','.join(str(s) for s, k in zip(seeds, kinds, strict=True) if k == kind)}: {kind}"
                                  for kind in dict.fromkeys(kinds))}  # fmt: skip


def _pooled_bleu(units: list[dict], refs: dict, engine: str | None = None) -> float:
    """Corpus BLEU of ``units``' lines (an engine's, for a serving unit) over the four test sets, concatenated."""
    lines = [x for u in units for t in TESTS for x in (u["hypotheses"][engine] if engine else u["hypotheses"])[t]]
    r = [x for u in units for t in TESTS
         for x in refs[t][: len((u["hypotheses"][engine] if engine else u["hypotheses"])[t])]]  # fmt: skip
    return seed_compare.corpus_bleu(lines, r)


def _p(p) -> str:
    return "-" if p is None else round_two.format_p(p)


def serve_lines(serve: list[dict], students: dict[int, dict], refs: dict) -> tuple[list[str], list[dict]]:
    """The CTranslate2 tables: BLEU of each engine against the student's ``generate`` (identical lines counted) and
    the speed rows with their ratios, one line a seed and setting."""
    if not serve:
        return [], []
    lines = ["## Served by CTranslate2", "", "BLEU of the four test sets concatenated (beam 4, batch 64): the DBSA + sync "
             "student by `generate` (its unit) and by its CTranslate2 exports; identical lines: of the exports' lines, "
             "how many equal `generate`'s.", "",
             "| seed | generate | CT2 float32 | identical | CT2 int8 | identical |", "|---|---|---|---|---|---|"]  # fmt: skip
    out = []
    for u in serve:
        student = students[u["seed"]]
        total = sum(len(student["hypotheses"][t]) for t in TESTS)
        row = {"seed": u["seed"], "generate": _pooled_bleu([student], refs)}
        for e in ENGINES:
            row[e] = _pooled_bleu([u], refs, e)
            row[f"{e}_identical"] = sum(u["identical_to_generate"][e].values()) / max(total, 1)
        out.append(row)
        lines.append(f"| {u['seed']} | {row['generate']:.2f} | " + " | ".join(
            f"{row[e]:.2f} | {row[f'{e}_identical']:.1%}" for e in ENGINES) + " |")  # fmt: skip
    if len(serve) > 1:
        pooled = {"generate": _pooled_bleu([students[u["seed"]] for u in serve], refs),
                  **{e: _pooled_bleu(serve, refs, e) for e in ENGINES}}  # fmt: skip
        lines.append(
            f"| pooled | {pooled['generate']:.2f} | {pooled['ct2_float32']:.2f} | | {pooled['ct2_int8']:.2f} | |"
        )
        out.append({"seed": "pooled", **pooled})
    lines += ["", "Speed: sentences/s, raw test_2016_flickr sources to text, one thread, median of the rounds "
              "(the teacher parses its input with spaCy's English pipeline; `parse`: that alone); ratios of the "
              "medians.", "",
              "| seed | beams | batch | teacher + parse | student generate | CT2 float32 | CT2 int8 | parse | "
              "CT2 float32 / generate | CT2 int8 / generate | CT2 int8 / teacher + parse | load (1 min) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for u in serve:
        for s in u["speed"]:
            rate = {k: s["rows"][k]["sentences_per_s"] for k in SPEED_ROWS}
            ratios = [rate["ct2_float32"] / rate["student_generate"], rate["ct2_int8"] / rate["student_generate"],
                      rate["ct2_int8"] / rate["teacher_generate+parse"]]  # fmt: skip
            loads = [x for pair in s["load_average_1min"] for x in pair]
            lines.append(f"| {u['seed']} | {s['beams']} | {s['batch_size']} | "
                         + " | ".join(f"{rate[k]:.1f}" for k in SPEED_ROWS) + " | "
                         + " | ".join(f"{x:.2f}x" for x in ratios) + f" | {min(loads):.1f}-{max(loads):.1f} |")  # fmt: skip
    return [*lines, ""], out


def aggregate(args, plan: list[tuple], name) -> str | None:
    """``results.md`` and ``results.json`` from the unit files (None, writing nothing, before any complete seed)."""
    allow_unhashed = getattr(args, "allow_unhashed", False)
    study = load_units(Path(args.results), allow_unhashed)
    write_progress(args.results, plan, name)
    four = round_four.load_units(Path(args.round4_results), allow_unhashed)
    rebuilt_dir = Path(args.results) / REBUILT
    rebuilt = round_four.load_units(rebuilt_dir, allow_unhashed) if (rebuilt_dir / "runs").is_dir() else []
    units = seed_units(study, four, rebuilt)
    planned = sorted({seed for _, _, seed in plan if seed is not None})
    seeds = complete_seeds(units, planned)
    if not seeds:
        print("no complete seed yet (the teacher, the two models on references and the two students): no results.md")
        return None
    refs = round_four.references(args, "low")
    samples = args.bootstrap_samples
    parsers = {"german-parser": study.get("german-parser")}
    for folder in sorted(rebuilt_dir.glob("seed*/")):  # a rebuilt seed's own parser
        parsers[f"german-parser` of `{REBUILT}/{folder.name}"] = load_units(folder, allow_unhashed).get(
            "german-parser"
        )
    lines = ["# Distillation study: results", "",
             f"Built by `python benchmarks/studies/study_distill.py --aggregate` from the study's unit files and round "
             f"four's `low-*` units, every hypothesis file checked against its sha256; the rules are those of "
             f"`docs/studies/distill.md`, written before the units. Complete seeds: {','.join(map(str, seeds))} of "
             f"{','.join(map(str, planned))}.", ""]  # fmt: skip
    for n, parser in ((n, u) for n, u in parsers.items() if u):
        dev = parser["dev_scores"]
        lines += [f"The students' German target parser (`{n}`): GSD dev UAS {dev['uas']}, LAS {dev['las']}; "
                  f"weights identical to multi30k-parsed's: {parser.get('identical_to_multi30k_parsed_weights')}.", ""]  # fmt: skip
    retrained = sorted(s for s in seeds if units[("teacher (all3)", s)].get("rebuilt"))
    if retrained:
        lines += [f"The teacher of seed {','.join(map(str, retrained))} was retrained for this study (round four's "
                  f"model was lost; `{REBUILT}/runs/`): its BLEU and lines below are the retrained model's, the one "
                  "the students learned from.", ""]  # fmt: skip
    lines += ["## BLEU per seed and pooled", "", "Corpus BLEU of the four Multi30k test sets concatenated (pooled: "
              "every complete seed's lines too).", "",
              "| system | " + " | ".join(f"seed {s}" for s in seeds) + " | pooled |", "|---|" + "---|" * (len(seeds) + 1)]  # fmt: skip
    bleu = {}
    for system in SYSTEMS:
        per = {s: _pooled_bleu([units[(system, s)]], refs) for s in seeds}
        bleu[system] = {**{str(s): v for s, v in per.items()},
                        "pooled": _pooled_bleu([units[(system, s)] for s in seeds], refs)}  # fmt: skip
        lines.append(
            f"| {system} | " + " | ".join(f"{per[s]:.2f}" for s in seeds) + f" | {bleu[system]['pooled']:.2f} |"
        )
    lines += ["", "## The comparisons over seeds", "",
              "ΔBLEU per seed with the paired bootstrap p of that seed's test sentences; the pooled ΔBLEU; the mean "
              "over seeds with its 95% t interval and the paired t p; the sentence-cluster bootstrap of the pooled "
              f"ΔBLEU ({samples} resamples).", "",
              "| comparison | what it answers | seeds | ΔBLEU per seed (p) | pooled ΔBLEU | mean [95% interval] | "
              "paired t p | cluster bootstrap [95%] p | machines | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    results = []
    for k, (system, base, what) in enumerate(COMPARISONS):
        c = compare(units, seeds, system, base, refs, samples)
        s, b = c["stats"], c["cluster"]
        call = gap_verdict(c["pooled"], s["ci"]) if k == 0 else round_four.verdict(s)
        c["verdict"] = call
        interval = seed_stats.format_interval(s["ci"])
        lines.append(f"| {system} - {base} | {what} | {','.join(map(str, seeds))} | "
                     + " / ".join(f"{d:+.2f} ({_p(p)})" for d, p in zip(c["deltas"], c["per_seed_p"], strict=True))
                     + f" | {c['pooled']:+.2f} | {s['mean']:+.2f} {interval} | {_p(s['p'])} | "
                     f"{b['delta']:+.2f} {seed_stats.format_interval(b['ci'])} {_p(b['p'])} | {c['machines']} | "
                     f"{call} |")  # fmt: skip
        results.append(c)
    gap = results[0]
    lines += ["", f"**Decision** (the student within {MARGIN} BLEU of its teacher, pooled): pooled gap "
              f"{gap['pooled']:+.2f} BLEU over seeds {','.join(map(str, seeds))}: **{gap['verdict']}**.", ""]  # fmt: skip
    students = {s: units[("DBSA + sync student", s)] for s in seeds}
    serve_part, serve_rows = serve_lines([study[n] for n in sorted(study) if n.startswith("serve-")
                                          and study[n]["seed"] in seeds], students, refs)  # fmt: skip
    lines += serve_part
    lines += ["## Units", "", "| unit | every test set | machine | commit | training min |", "|---|---|---|---|---|"]
    for (system, seed), u in sorted(units.items(), key=lambda kv: (kv[0][1], list(SYSTEMS).index(kv[0][0]))):
        if seed in seeds:
            where = " (retrained)" if u.get("rebuilt") else " (round four)" if SYSTEMS[system][0] == "round4" else ""
            lines.append(f"| {u['unit']}{where} | {_pooled_bleu([u], refs):.2f} | {describe(u)} | "
                         f"{(u.get('commit') or '?')[:10]} | {u.get('train_minutes', '-')} |")  # fmt: skip
    record = {"seeds": seeds, "bleu": bleu, "margin": MARGIN, "serve": serve_rows, "comparisons": results}
    common.write_json(Path(args.results) / "results.json", record, indent=1, newline=True)
    return common.write_results(args.results, lines)


# ------------------------------------------------------------------------------------------------------------------
# Progress
# ------------------------------------------------------------------------------------------------------------------
def progress_text(results: str | Path, plan: list[tuple], name) -> str:
    """The planned units, done or not, and after them the units a rebuild added (retrained teachers and a rebuilt
    seed's German parser, in `REBUILT`), from the unit files alone (what each recorded: commit, machine,
    minutes, the figure it is for); the study page includes it."""
    runs = Path(results) / "runs"
    done, planned = common.done_units(results), [name(*u) for u in plan]
    lines = [f"Units done: {sum(n in done for n in planned)} of {len(plan)} (built from "
             "`benchmarks/results/distill/runs/*.json` by `study_distill.py`).", "",
             "| unit | state | commit | machine | wall minutes | figure |", "|---|---|---|---|---|---|"]  # fmt: skip
    rebuilt = Path(results) / REBUILT
    added = [(rebuilt / "runs", n) for n in sorted(common.done_units(rebuilt))]
    added += [(f / "runs", n) for f in sorted(rebuilt.glob("seed*/")) for n in sorted(common.done_units(f))]
    for folder, n in [(runs, n) for n in planned] + added:
        if folder == runs and n not in done:
            lines.append(f"| {n} | to run | | | | |")
            continue
        u = common.load_unit(folder / f"{n}.json", required=())
        minutes = sum(u.get(k) or 0 for k in ("wall_minutes", "wall_minutes_train", "wall_minutes_test"))
        if "dev_scores" in u:
            figure = f"GSD dev UAS {u['dev_scores'].get('uas')}, LAS {u['dev_scores'].get('las')}"
        elif u.get("kind") == "serve":
            figure = "BLEU " + ", ".join(f"{e} {u['tests'][e][TESTS[0]]['bleu']:.2f}" for e in u.get("tests", {}))
            figure += f" ({TESTS[0]})"
        else:
            figure = f"BLEU {TESTS[0]} {u.get('tests', {}).get(TESTS[0], {}).get('bleu', float('nan')):.2f}"
        where = folder.parent.relative_to(Path(results)).as_posix()
        state, n = ("done", n) if folder == runs else ("done (rebuild)", f"{where}/{n}")
        lines.append(f"| {n} | {state}{' (quick)' if u.get('quick') else ''} | {(u.get('commit') or '?')[:10]} | "
                     f"{describe(u) if u.get('machine') else '?'} | {minutes:.1f} | {figure} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write_progress(results: str | Path, plan: list[tuple], name) -> Path:
    path = Path(results) / "progress.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(progress_text(results, plan, name), encoding="utf-8")
    return path
