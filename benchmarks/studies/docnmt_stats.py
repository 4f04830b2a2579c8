"""The document study's analysis (`docnmt_real.py --aggregate` calls `aggregate`): the unit files loaded and checked,
the paired bootstrap of each context kind against the control and against its own random-context run, per seed and
pooled, the pronoun tables, and ``RESULTS/results.md``. It reads only the unit files (and the pronoun items' files);
running units is `docnmt_real.py`'s."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.data.ende_sentence_data import EVAL_SETS, TEST_SETS  # noqa: E402
from benchmarks.studies import seen_pairs  # noqa: E402
from benchmarks.studies.docnmt_setup import CONTEXT_KINDS, KINDS, RECIPE, item_file  # noqa: E402

#: `benchmarks/data/pronoun_items.py --rescore`'s file, beside the unit folders: the units' per-item pronoun outcomes on
#: the item file they were scored on, regrouped on the items of the current file that the old one holds too
RESCORED = "pronoun_items.rescored.json"

#: the fields the aggregate reads, and their types (`common.check_fields`); test scores are keyed by test set
SCORES = {"bleu": float, "chrf": float, "sentences": int, "lines": list}
UNIT_FIELDS = {"unit": str, "kind": set(KINDS), "seed": int, "tests": {"*": SCORES}, "random_context": {"*": SCORES},
               "pronouns": {"*": dict}, "train_minutes": float, "steps": int, "device": str, "cpu": str,
               "model_signature": str, "commit": (str, type(None)), "weights_sha256": str,
               "step1": (dict, type(None)), "partial": dict, "recipe": dict,
               "hypotheses_sha256": {"*": str}, "pronoun_items": {"file": str, "sha256": str, "items": int}}  # fmt: skip


def load_units(results: Path, folder: str = "runs", allow_unhashed: bool = False) -> list[dict]:
    """The unit files under ``results/folder`` with their hypotheses; units of ``replicates/`` are marked so. Each is
    checked: the fields the aggregate reads and their types, every test set scored, and every hypothesis file it
    records against its sha256 (required unless ``allow_unhashed``) and its sentence count; anything wrong stops the
    aggregate with one line naming the file(s)."""
    units = []
    for path in sorted((results / folder).glob("*.json")):
        try:
            unit = common.load_unit(path, required=("unit", "kind", "seed", "tests"), fields=UNIT_FIELDS)
            unit["hypotheses"], unit["replicate"] = {}, folder == "replicates"
            recorded = unit.get("hypotheses_sha256") or {}
            common.check_unit_tests(path, unit["tests"], TEST_SETS)
            for name in TEST_SETS:
                for key, field in ((name, "tests"), (f"{name}.random", "random_context")):
                    file = path.parent / f"{unit['unit']}.{key}.txt"
                    if key in recorded or file.is_file():  # every file the unit records, and any other beside it
                        lines = unit.get(field, {}).get(name, {}).get("sentences")
                        common.require_hash(path, recorded.get(key), f"its {key} hypotheses", allow_unhashed)
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


def _unit_label(unit: dict) -> str:
    return unit["unit"] + (", replicate" if unit["replicate"] else "")


def _accuracy(score: dict) -> str:
    return f"{score['accuracy']:.3f} ({score['n']})"


def _scores_ok(score) -> bool:
    return (
        isinstance(score, dict) and isinstance(score.get("n"), int) and isinstance(score.get("accuracy"), int | float)
    )


def load_rescored(path: Path) -> dict | None:
    """The rescore file (`RESCORED`), checked for the fields the aggregate reads; None where there is none. A file
    that is not valid JSON or lacks a field stops the aggregate with one line naming the file and the field."""
    if not path.is_file():
        return None
    fix = "make it again: python benchmarks/data/pronoun_items.py --rescore OLD_ITEMS"
    try:
        rescored = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: not valid JSON ({e}): {fix}") from None
    want = {"old_items_sha256": str, "old_item_count": int, "new_item_count": int, "common_items": int, "units": dict}
    bad = [k for k, t in want.items() if not isinstance(rescored, dict) or not isinstance(rescored.get(k), t)]
    for unit, contexts in (rescored.get("units") or {}).items() if not bad else ():
        for context, r in contexts.items() if isinstance(contexts, dict) else [("*", None)]:
            by = r.get("referential_by_distance") if isinstance(r, dict) else None
            if not (_scores_ok(r) and _scores_ok(r.get("referential")) and isinstance(by, dict)
                    and all(_scores_ok(d) for d in by.values())):  # fmt: skip
                bad.append(f"units.{unit}.{context}")
    if bad:
        raise SystemExit(f"{path}: field {bad[0]!r} missing or not what the rescore writes: {fix}")
    return rescored


def item_set(unit: dict, n: int, current: dict | None, rescored: dict | None, name: str) -> str:
    """Which pronoun items a unit's ``n`` scores come from, as far as the files say: the item file's sha256 and count
    that the unit records (`docnmt_real.item_file`); else, for an older unit, the old item file of the rescore that
    regrouped its outcomes (``old_items_sha256``), where its count is the unit's; else only the count. Said against the
    current item file ``current`` (`item_file`), named ``name``."""
    key = f"{'replicates' if unit['replicate'] else 'runs'}/{unit['unit']}"
    if recorded := unit.get("pronoun_items"):
        sha, count, how = recorded["sha256"], recorded["items"], "recorded in the unit file"
    elif rescored and key in rescored["units"] and n == rescored["old_item_count"]:
        sha, count = rescored["old_items_sha256"], n
        how = f"`{RESCORED}`'s `old_items_sha256`: the unit file records no hash of its items"
    else:
        sha, count, how = None, n, "the unit file records no hash of its items"
    text = (f"{n} of " if n != count else "") + f"{count} items" + (f" of sha256 `{sha[:12]}`" if sha else "")
    text += f" ({how})"
    if current is None:
        return text
    if sha == current["sha256"]:
        return f"{text}, the current `{name}`"
    if sha is None and count == current["items"]:
        return f"{text}; the current `{name}` has as many (sha256 `{current['sha256'][:12]}`)"
    return f"{text}, not the current `{name}` ({current['items']} items, sha256 `{current['sha256'][:12]}`)"


def pronoun_lines(units: list[dict], items: Path, rescored_path: Path) -> list[str]:
    """The pronoun tables: each unit's accuracies on the item set it was scored on (overall, by German pronoun, by
    whether a noun of the pronoun's gender is in the context), labelled with that item set (`item_set`); and, where
    a rescore file exists, the referential items' accuracy by antecedent distance, read from it."""
    rows = [(u, c) for u in units for c in u.get("pronouns", {})]
    if not rows:
        return []
    current = item_file(items) if items.is_file() else None
    rescored = load_rescored(rescored_path)
    sets: dict[str, list[str]] = {}
    for u, c in rows:
        names = sets.setdefault(item_set(u, u["pronouns"][c]["n"], current, rescored, items.name), [])
        names += [] if _unit_label(u) in names else [_unit_label(u)]
    label = (f"Item set: every row was scored on {next(iter(sets))}." if len(sets) == 1
             else "Item sets: " + "; ".join(f"{', '.join(us)}: {s}" for s, us in sets.items()) + ".")  # fmt: skip
    keys = sorted({k for u, c in rows for k in u["pronouns"][c]["by_pronoun"]})
    lines = ["", "Contrastive pronoun items: accuracy (the reference above every variant), overall, by German pronoun, "
             "and by whether a noun of the pronoun's gender is in the previous two reference sentences.", "", label, "",
             "| unit | context | n | accuracy | noun in context | no noun | " + " | ".join(keys) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(keys)]  # fmt: skip
    for u, c in rows:
        p = u["pronouns"][c]
        noun = p["by_noun_in_context"]
        cells = [_accuracy(p["by_pronoun"][k]) if k in p["by_pronoun"] else "-" for k in keys]
        lines.append(f"| {_unit_label(u)} | {c} | {p['n']} | {p['accuracy']:.3f} | "
                     f"{noun.get('true', {}).get('accuracy', float('nan')):.3f} | "
                     f"{noun.get('false', {}).get('accuracy', float('nan')):.3f} | " + " | ".join(cells) + " |")  # fmt: skip
    return lines + (
        referential_lines(rows, rescored, current, items.name) + paired_lines(rescored) if rescored else []
    )


def paired_lines(rescored: dict) -> list[str]:
    """The rescore's paired tests (`studies/pronoun_paired.py`), one row per item group and comparison: per seed the
    two accuracies, the items only the document model passes (+) and only the baseline passes (-), McNemar's p; and
    the difference pooled over the seeds with its bootstrap interval and p."""
    paired = rescored.get("paired")
    if not isinstance(paired, dict) or not paired:
        return []
    lines = ["", "Paired tests on the same items (`studies/pronoun_paired.py`): the document model with its own context "
             "against step 1, the control and itself with another document's context. Per seed: accuracy % of the "
             "two, items only the document model passes (+) / only the baseline passes (-), McNemar's exact p. "
             "Pooled: the mean over seeds of the difference in points, 95% paired-bootstrap interval over items "
             "(1,000 samples), p. Groups: all common items, the referential ones, and those by antecedent distance "
             "(`unknown`: referential, antecedent not found with confidence).", "",
             "| items | comparison | n | seed 0 | seed 1 | seed 2 | pooled |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for group in ("all", "referential", "0", "1", "2+", "unknown"):
        for label, entry in paired.get(group, {}).items():
            seeds = entry["seeds"]
            cells = [(f"{x['system']:.1f} / {x['baseline']:.1f} (+{x['only_system']} -{x['only_baseline']}, "
                      f"p {x['p']:.2f})") if (x := seeds.get(k)) else "-" for k in ("0", "1", "2")]  # fmt: skip
            pooled = entry.get("pooled")
            cell = f"{pooled['difference']:+.2f} [{pooled['low']:+.2f}, {pooled['high']:+.2f}], p {pooled['p']:.3f}" \
                if pooled else "-"  # fmt: skip
            n = next(iter(seeds.values()))["n"]
            lines.append(f"| {group} | {label} | {n} | " + " | ".join(cells) + f" | {cell} |")
    return lines


def referential_lines(rows: list[tuple[dict, str]], rescored: dict, current: dict | None, name: str) -> list[str]:
    """The rescore's figures for the pronoun table's rows (unit, context): accuracy (n) on the common items, on their
    referential items and on those by antecedent distance, as `RESCORED` holds them."""
    found = [(u, c, r) for u, c in rows
             if (r := rescored["units"].get(f"{'replicates' if u['replicate'] else 'runs'}/{u['unit']}", {}).get(c))]  # fmt: skip
    if not found:
        return []
    distances = sorted({d for *_, r in found for d in r["referential_by_distance"]},
                       key=lambda d: (d == "unknown", int(d.rstrip("+")) if d != "unknown" else 0))  # fmt: skip
    new = rescored["new_item_count"]
    stale = "" if current is None or current["items"] == new else (
        f"; the current `{name}` has {current['items']} items: make the rescore again")  # fmt: skip
    lines = ["", f"Referential items by antecedent distance (`{RESCORED}`{stale}): the units' per-item outcomes on the "
             f"{rescored['old_item_count']} items of sha256 `{rescored['old_items_sha256'][:12]}`, regrouped on the "
             f"{rescored['common_items']} items of the {new}-item file that those hold too; accuracy (n) on them, on "
             "their referential items (the German form depends on an antecedent noun), and on those by the "
             "antecedent's distance in sentences (0: in the pronoun's own sentence).", "",
             "| unit | context | common items | referential | " + " | ".join(f"distance {d}" for d in distances) + " |",
             "|---|---|---|---|" + "---|" * len(distances)]  # fmt: skip
    for u, c, r in found:
        by = r["referential_by_distance"]
        cells = [_accuracy(by[d]) if d in by else "-" for d in distances]
        lines.append(f"| {_unit_label(u)} | {c} | {_accuracy(r)} | {_accuracy(r['referential'])} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    return lines


def aggregate(args) -> str | None:
    from hf_syntax_mt.data.readers import read_lines

    results = Path(args.results)
    allow_unhashed = getattr(args, "allow_unhashed", False)
    if not (units := common.aggregated_units(results, lambda r: load_units(r, allow_unhashed=allow_unhashed))):
        return None
    references = {name: read_lines(Path(args.data) / EVAL_SETS[name].target) for name in TEST_SETS}
    systems = [kind for kind in CONTEXT_KINDS if any(u["kind"] == kind for u in units)]
    tests = {kind: comparisons(units, references, args.bootstrap_samples, kind) for kind in systems}
    #: units run again elsewhere (another machine kind, another commit): shown beside, never pooled with the seeds
    replicates = load_units(results, "replicates", allow_unhashed)
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
    lines += pronoun_lines(units + replicates, Path(args.items), results / RESCORED)
    first = units[0]
    some = next(iter(first["tests"].values()))
    lines += ["", f"BLEU: `{some['bleu_signature']}`", f"chrF: `{some['chrf_signature']}`", "",
              "Units (model signatures):", ""]  # fmt: skip
    lines += [f"- {u['unit']}{', replicate' if u['replicate'] else ''} ({u['device']}"
              f"{', ' + u['cpu'] if u['replicate'] else ''}, {u['steps']} steps, commit {(u.get('commit') or '?')[:10]}): "
              f"`{u['model_signature']}`{step1_note(u)}{partial_note(u)}" for u in units + replicates]  # fmt: skip
    return common.write_results(results, lines)
