"""The document study's analysis (`docnmt_real.py --aggregate` calls `aggregate`): the unit files loaded and checked,
the paired bootstrap of each context kind against the control and against its own random-context run, per seed and
pooled, the pronoun tables, and ``RESULTS/results.md``. It reads only the unit files (and the pronoun items' files);
running units is `docnmt_real.py`'s."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.data.ende_sentence_data import EVAL_SETS, TEST_SETS  # noqa: E402
from benchmarks.studies import seen_pairs  # noqa: E402
from benchmarks.studies.docnmt_real import CONTEXT_KINDS, KINDS, RECIPE  # noqa: E402

#: the fields the aggregate reads, and their types (`common.check_fields`); test scores are keyed by test set
SCORES = {"bleu": float, "chrf": float, "sentences": int, "lines": list}
UNIT_FIELDS = {"unit": str, "kind": set(KINDS), "seed": int, "tests": {"*": SCORES}, "random_context": {"*": SCORES},
               "pronouns": {"*": dict}, "train_minutes": float, "steps": int, "device": str, "cpu": str,
               "model_signature": str, "commit": (str, type(None)), "weights_sha256": str,
               "step1": (dict, type(None)), "partial": dict, "recipe": dict,
               "hypotheses_sha256": {"*": str}}  # fmt: skip


def load_units(results: Path, folder: str = "runs") -> list[dict]:
    """The unit files under ``results/folder`` with their hypotheses; units of ``replicates/`` are marked so. Each is
    checked: the fields the aggregate reads and their types, and every hypothesis file it records against its
    sha256 and its sentence count; anything wrong stops the aggregate with one line naming the file(s)."""
    units = []
    for path in sorted((results / folder).glob("*.json")):
        try:
            unit = common.load_unit(path, required=("unit", "kind", "seed", "tests"), fields=UNIT_FIELDS)
            unit["hypotheses"], unit["replicate"] = {}, folder == "replicates"
            recorded = unit.get("hypotheses_sha256") or {}
            for name in TEST_SETS:
                for key, field in ((name, "tests"), (f"{name}.random", "random_context")):
                    file = path.parent / f"{unit['unit']}.{key}.txt"
                    if key in recorded or file.is_file():  # every file the unit records, and any other beside it
                        lines = unit.get(field, {}).get(name, {}).get("sentences")
                        unit["hypotheses"][key] = common.read_hypotheses(path, file, recorded.get(key), lines)
        except common.UnitFileError as e:
            raise SystemExit(str(e)) from None
        units.append(unit)
    return sorted(units, key=lambda u: (list(KINDS).index(u["kind"]), u["seed"]))


def comparisons(units: list[dict], references: dict[str, list[str]], samples: int, compared: str = "document") -> dict:
    """Per test set: per seed, the ``compared`` kind (a context kind) vs control and vs its own random-context run
    (paired bootstrap of BLEU and chrF), and the same pooled over the seeds present for both (hypotheses and
    references concatenated)."""
    from hf_syntax_mt.evaluation import paired_bootstrap

    by_key = {(u["kind"], u["seed"]): u for u in units}
    out: dict = {}
    for name in TEST_SETS:
        refs = references[name]
        out[name] = {"control": {}, "random": {}}
        for baseline, key in (("control", name), ("random", f"{name}.random")):
            pooled = {"base": [], "system": [], "refs": []}
            for (kind, seed), doc in sorted(by_key.items()):
                base = by_key.get(("control", seed)) if baseline == "control" else doc
                if kind != compared or base is None or key not in base["hypotheses"]:
                    continue
                system, baseline_hyps = doc["hypotheses"][name], base["hypotheses"][key]
                lines = doc["tests"][name].get("lines")  # a --quick subset; else the first lines
                unit_refs = [refs[i] for i in lines] if lines else refs[: len(system)]
                out[name][baseline][seed] = paired_bootstrap(baseline_hyps, system, unit_refs, samples)
                pooled["base"] += baseline_hyps
                pooled["system"] += system
                pooled["refs"] += unit_refs
            if len(out[name][baseline]) > 1:
                out[name][baseline]["pooled"] = paired_bootstrap(pooled["base"], pooled["system"], pooled["refs"],
                                                                 samples)  # fmt: skip
    return out


def _delta(test: dict, metric: str = "bleu") -> str:
    m = test[metric]
    return f"{m['system'] - m['baseline']:+.2f} (p {m['p_value']:.3f})"


def step1_note(unit: dict) -> str:
    """Which step-1 weights a unit has (step 1) or started from (step 2), by fingerprint, and whether a step 1 trained
    again on a new machine matched the committed one."""
    if unit.get("weights_sha256"):
        return f"; weights sha256 {unit['weights_sha256'][:12]}"
    s = unit.get("step1")
    if not s:
        return ""
    note = f"; from step-1 weights {s['weights_sha256'][:12]}"
    if not s["rebuilt"]:
        return note
    match = {True: ", equal to the committed step 1", False: ", NOT the committed step 1's weights", None: ""}
    return f"{note} (step 1 trained again here{match[s['matches_committed']]})"


def partial_note(unit: dict) -> str:
    """A unit written from a lost model's evaluation caches (`device/docnmt_from_caches.py`): what it lacks."""
    p = unit.get("partial")
    if not p:
        return ""
    return f"; from the evaluation caches of a lost model, missing: {', '.join(p['missing']) or 'nothing'}"


def aggregate(args) -> str | None:
    from hf_syntax_mt.data.readers import read_lines

    results = Path(args.results)
    if not (units := common.aggregated_units(results, load_units)):
        return None
    references = {name: read_lines(Path(args.data) / EVAL_SETS[name].target) for name in TEST_SETS}
    systems = [kind for kind in CONTEXT_KINDS if any(u["kind"] == kind for u in units)]
    tests = {kind: comparisons(units, references, args.bootstrap_samples, kind) for kind in systems}
    #: units run again elsewhere (another machine kind, another commit): shown beside, never pooled with the seeds
    replicates = load_units(results, "replicates")
    controls = [u for u in units if u["kind"] == "control"]
    replicate_tests = {kind: comparisons(replicates + controls, references, args.bootstrap_samples, kind)
                       for kind in CONTEXT_KINDS if any(u["kind"] == kind for u in replicates)}  # fmt: skip
    beams = units[0].get("recipe", RECIPE)["num_beams"]
    lines = [f"BLEU / chrF per test set (documents in order, beam {beams}); mean ± std over seeds.", "",
             "| model | seeds | " + " | ".join(f"{t} BLEU | {t} chrF" for t in TEST_SETS) + " | train min | device |",
             "|---|---|" + "---|---|" * len(TEST_SETS) + "---|---|"]  # fmt: skip
    rows = [(kind, "tests", kind) for kind in KINDS] + [(k, "random_context", f"{k}, random context") for k in systems]
    for kind, key, label in rows:
        us = [u for u in units if u["kind"] == kind and u.get(key)]
        if not us:
            continue
        cells = []
        for t in TEST_SETS:
            cells += [common.mean_std([u[key][t]["bleu"] for u in us if t in u[key]]),
                      common.mean_std([u[key][t]["chrf"] for u in us if t in u[key]])]  # fmt: skip
        lines.append(f"| {label} | {','.join(str(u['seed']) for u in us)} | " + " | ".join(cells)
                     + f" | {common.mean_std([u['train_minutes'] for u in us])} | {us[0]['device']} |")  # fmt: skip
    for u in replicates:
        for key, label in (("tests", "own context"), ("random_context", "random context")):
            cells = [
                f"{u[key][t][m]:.2f}" if t in u.get(key, {}) else "-" for t in TEST_SETS for m in ("bleu", "chrf")
            ]
            lines.append(f"| {u['unit']}, replicate, {label} | {u['seed']} | " + " | ".join(cells)
                         + f" | {u['train_minutes']:.2f} | {u['device']}, {u['cpu']} |")  # fmt: skip
    for kind in systems:
        label = {"document": "Document model", "unfrozen": "Unfrozen document model"}[kind]
        lines += ["", f"{label} against the control and against itself with random context: ΔBLEU (p), paired "
                  "bootstrap per seed and pooled over seeds (hypotheses of all seeds concatenated); ΔchrF the same.",
                  "", "| test set | against | " + " | ".join(f"seed {s}" for s in range(3)) + " | pooled | ΔchrF pooled |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for name in TEST_SETS:
            for baseline in ("control", "random"):
                t = tests[kind][name][baseline]
                if not t:
                    continue
                cells = [_delta(t[s]) if s in t else "-" for s in range(3)]
                pooled = t.get("pooled")
                lines.append(f"| {name} | {baseline} | " + " | ".join(cells)
                             + f" | {_delta(pooled) if pooled else '-'} | {_delta(pooled, 'chrf') if pooled else '-'} |")  # fmt: skip
    if replicate_tests:
        lines += ["", "Replicates (`replicates/`), each against the control of its seed and against itself with "
                  "random context: ΔBLEU (p), ΔchrF (p).", "", "| test set | against | unit | ΔBLEU | ΔchrF |",
                  "|---|---|---|---|---|"]  # fmt: skip
        lines += [f"| {name} | {baseline} | {kind}-seed{seed} | {_delta(t)} | {_delta(t, 'chrf')} |"
                  for kind, by_test in replicate_tests.items() for name in TEST_SETS for baseline in ("control", "random")
                  for seed, t in by_test[name][baseline].items() if seed != "pooled"]  # fmt: skip
    # test pairs that occur verbatim in the training set (BConTrasT's stock turns), and the scores without them
    if seen_pairs.have_training_data(args.data):
        seen = seen_pairs.seen_lines(args.data, [t for t in TEST_SETS if any(t in u["hypotheses"] for u in units)])
        lines += ["", *seen_pairs.table(units, references, seen, KINDS)]
    pronoun_rows = [(u, c) for u in units + replicates for c in u.get("pronouns", {})]
    if pronoun_rows:
        keys = sorted({k for u, c in pronoun_rows for k in u["pronouns"][c]["by_pronoun"]})
        lines += ["", "Contrastive pronoun items (`pronoun_items.jsonl`): accuracy (the reference above every "
                  "variant), overall, by German pronoun, and by whether a noun of the pronoun's gender is in the "
                  "previous two reference sentences.", "",
                  "| unit | context | n | accuracy | noun in context | no noun | " + " | ".join(keys) + " |",
                  "|---|---|---|---|---|---|" + "---|" * len(keys)]  # fmt: skip
        for u, c in pronoun_rows:
            p = u["pronouns"][c]
            noun = p["by_noun_in_context"]
            cells = [f"{p['by_pronoun'][k]['accuracy']:.3f} ({p['by_pronoun'][k]['n']})" if k in p["by_pronoun"]
                     else "-" for k in keys]  # fmt: skip
            unit = u["unit"] + (", replicate" if u["replicate"] else "")
            lines.append(f"| {unit} | {c} | {p['n']} | {p['accuracy']:.3f} | "
                         f"{noun.get('true', {}).get('accuracy', float('nan')):.3f} | "
                         f"{noun.get('false', {}).get('accuracy', float('nan')):.3f} | " + " | ".join(cells) + " |")  # fmt: skip
    first = units[0]
    some = next(iter(first["tests"].values()))
    lines += ["", f"BLEU: `{some['bleu_signature']}`", f"chrF: `{some['chrf_signature']}`", "",
              "Units (model signatures):", ""]  # fmt: skip
    lines += [f"- {u['unit']}{', replicate' if u['replicate'] else ''} ({u['device']}"
              f"{', ' + u['cpu'] if u['replicate'] else ''}, {u['steps']} steps, commit {(u.get('commit') or '?')[:10]}): "
              f"`{u['model_signature']}`{step1_note(u)}{partial_note(u)}" for u in units + replicates]  # fmt: skip
    return common.write_results(results, lines)
