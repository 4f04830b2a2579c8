"""The unit files of the Multi30k study rounds two to four, written and read in one place: a unit's test sets scored
(hypothesis files beside the unit, with their sha256), the record its ``<unit>.json`` holds (`unit_record`: round
two's fields, round four adding its recipe and parsers), and the unit files loaded back, each checked
(`load_units`). Round two's `run_unit` and round four's fr->en `run_fren_unit` train and translate; what they write is
built here, so the two cannot drift apart."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import common, machine


def score_test_sets(runs: Path, name: str, hypotheses: dict[str, list[str]], files: dict[str, dict]) -> dict:
    """Each test set's hypotheses written to ``runs/<name>.<test set>.txt`` and scored against its references:
    ``{test set: {bleu, chrf, ..., "buckets", "hypotheses_sha256"}}``. ``files[test set]`` holds the ``src`` and
    ``tgt`` paths (the sources' whitespace lengths give the buckets)."""
    from hf_syntax_mt.evaluation import bucket_scores, corpus_scores

    tests = {}
    for test_set, hyps in hypotheses.items():
        f = files[test_set]
        refs = Path(f["tgt"]).read_text(encoding="utf-8").split("\n")[: len(hyps)]
        lengths = [len(s.split()) for s in Path(f["src"]).read_text(encoding="utf-8").split("\n")[: len(hyps)]]
        text = "".join(h + "\n" for h in hyps)
        (runs / f"{name}.{test_set}.txt").write_text(text, encoding="utf-8")
        tests[test_set] = {**corpus_scores(hyps, refs), "buckets": bucket_scores(lengths, hyps, refs),
                           "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest()}  # fmt: skip
    return tests


def unit_record(*, unit: tuple[str, str, str, int], about: str, extra: dict, overrides, args, precision: str,
                subset, tokenizer, info: dict, wall_train: float, test_start: float, tests: dict,
                trainer_test: list[str] | None, first_test: str, hypotheses: dict[str, list[str]], device: str,
                checkpoint, argv: list[str]) -> dict:  # fmt: skip
    """What a unit file holds. ``unit`` is ``(name, setting, method, seed)``; ``extra`` (round four: the recipe's
    name and the parsers) follows ``about``; ``info`` is the run's ``hf_syntax_mt_run.json``; ``test_start`` the
    `time.perf_counter` reading before translating; ``trainer_test`` the Trainer's own predictions of ``first_test``
    (None where the run had no test split)."""
    import torch

    name, setting, method, seed = unit
    minutes = info.get("train_seconds", info["train_runtime"] or 0.0) / 60
    first = hypotheses[first_test]
    return {
        "unit": name, "setting": setting, "method": method, "seed": seed, "about": about, **extra,
        "overrides": overrides, "recipe": args.recipe, "precision": precision, "quick": args.quick,
        "subset": subset, "tokenizer": Path(tokenizer).name, "steps": info["global_step"],
        "train_minutes": round(minutes, 2), "wall_minutes_train": round(wall_train / 60, 2),
        "wall_minutes_test": round((time.perf_counter() - test_start) / 60, 2),
        "tokens_seen": info["num_input_tokens_seen"],
        "tokens_per_second": round(info["num_input_tokens_seen"] / max(minutes * 60, 1e-9), 1),
        "curve": info["curve"], "averaged_steps": info["averaged_steps"],
        "validation": info["scores"].get("validation"), "test_last_step_2016": info["scores"].get("test_last_step"),
        # the Trainer's own predictions of the first test set against the pipeline's: the same model, so they agree
        # except where the Trainer cut a source at max_length (the pipeline reads up to max_position_embeddings)
        "trainer_test_agrees": None if trainer_test is None else trainer_test == first,
        "trainer_test_identical_lines": None if trainer_test is None else round(
            sum(a == b for a, b in zip(trainer_test, first, strict=False)) / max(len(first), 1), 4),
        "test_batches_sorted_by_length": True,
        "tests": tests, "model_signature": info["model_signature"],
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})",
        "cpu_native_bf16": common.cpu_has_native_bf16(), "threads": torch.get_num_threads(),
        "machine": machine.machine_record(device),
        "load_average_at_end": os.getloadavg(), "resumed_from": checkpoint and Path(checkpoint).name,
        **common.software(), "commit": common.git_commit(), "train_argv": [common.relative_path(a) for a in argv],
    }  # fmt: skip


def write_unit(runs: Path, record: dict) -> Path:
    """``runs/<unit>.json``, and its BLEU per test set on stdout."""
    path = common.write_json(runs / f"{record['unit']}.json", record, indent=1, newline=True)
    scores = ", ".join(f"{t} {s['bleu']:.2f}" for t, s in record["tests"].items())
    print(f"=== {record['unit']}: BLEU {scores} -> {path}", flush=True)
    return path


#: the fields every round's aggregate reads, and their types (`common.check_fields`); ``tests`` is keyed by test set
TEST_FIELDS = {"bleu": float, "chrf": float, "hypotheses_sha256": str,
               "buckets": [{"bucket": str, "count": int, "bleu": float}]}  # fmt: skip
#: a unit file's required fields (the rest of `unit_record`'s are read where present)
REQUIRED = ("unit", "setting", "method", "seed", "tests", "precision", "device")


def load_units(results: Path, fields: dict, tests_of: Callable[[str], tuple[str, ...]],
               allow_unhashed: bool = False) -> list[dict]:  # fmt: skip
    """The unit files under ``results/runs`` with their hypotheses, each checked: the ``fields`` the aggregate reads
    and their types (the setting and method among those ``fields`` allow), every test set of the setting
    (``tests_of(setting)``) scored, each test set's hypotheses against the sha256 (required unless
    ``allow_unhashed``) and the sentence count (its buckets') the unit records. Anything wrong stops the aggregate
    with one line naming the file(s)."""
    units = []
    for path in sorted((Path(results) / "runs").glob("*.json")):
        try:
            unit = common.load_unit(path, REQUIRED, fields)
            common.check_unit_tests(path, unit["tests"], tests_of(unit["setting"]))
            unit["hypotheses"] = {}
            for t, scores in unit["tests"].items():
                common.require_hash(path, scores.get("hypotheses_sha256"), f"its {t} hypotheses", allow_unhashed)
                lines = sum(b["count"] for b in scores["buckets"]) if "buckets" in scores else None
                hypotheses = path.parent / f"{unit['unit']}.{t}.txt"
                unit["hypotheses"][t] = common.read_hypotheses(
                    path, hypotheses, scores.get("hypotheses_sha256"), lines
                )
        except common.UnitFileError as e:
            raise SystemExit(str(e)) from None
        units.append(unit)
    return units
