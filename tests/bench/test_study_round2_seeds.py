"""`benchmarks/studies/study_round2.py`'s *Seed-level statistics* (issue 66): on hand-built unit files of two settings,
each row against sacrebleu and scipy computed directly on the seeds' lines (every test set of the setting
concatenated), and the machine rule of round three (a pair of different kinds left out, or compared and given again
without it under ``--mixed-machines``)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import needs
import numpy as np
import sacrebleu

stats = needs.package("scipy").stats  # the dev extra's

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import study_round2 as r2  # noqa: E402

TESTS = r2.MULTI30K_TESTS
#: test set -> its references (different on each, so that the concatenation's order matters)
REFS = {
    t: [f"a man rides a red bike {k}", "two dogs play in the snow near a tree", f"a girl reads a book on the bus {k}",
        "the cat sleeps on a mat", f"people walk down a busy street {k}"]
    for k, t in enumerate(TESTS)
}  # fmt: skip
WRONG = ["a woman walks", "cats sit on a wall", "a boy eats a cake today", "the dog runs", "nobody is here"]


def hyps(t: str, good: int) -> list[str]:
    """The first ``good`` lines of the references of ``t``, the rest wrong."""
    return REFS[t][:good] + WRONG[good:]


#: (setting, method, seed) -> how many lines are right on each test set (vanilla worse than the method at most seeds)
RIGHT = {
    ("low", "vanilla", 0): (1, 2, 1, 0), ("low", "pascal", 0): (3, 2, 2, 1),
    ("low", "vanilla", 1): (2, 2, 1, 1), ("low", "pascal", 1): (2, 4, 2, 2),
    ("low", "vanilla", 2): (0, 1, 2, 2), ("low", "pascal", 2): (2, 1, 3, 3),
    ("full", "vanilla", 0): (3, 3, 2, 2), ("full", "alignment", 0): (3, 4, 2, 3),
    ("full", "vanilla", 1): (2, 3, 3, 1), ("full", "alignment", 1): (2, 2, 3, 2),
}  # fmt: skip


def write_units(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)
    for t in TESTS:
        (data / "multi30k" / f"{t}.de").write_text("".join(r + "\n" for r in REFS[t]))
        (data / "multi30k" / f"{t}.en").write_text("".join(r + "\n" for r in REFS[t]))
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    for (setting, method, seed), right in RIGHT.items():
        name = r2.unit_name(setting, method, seed)
        lines = {t: hyps(t, k) for t, k in zip(TESTS, right, strict=True)}
        record = {"unit": name, "setting": setting, "method": method, "seed": seed, "precision": "fp32",
                  "device": "cpu", "steps": 10, "train_minutes": 1.0, "trainer_test_agrees": True, "threads": 1,
                  # low seed 0's PASCAL ran on a CPU without native bf16, its vanilla on one with it (another kind)
                  "cpu_native_bf16": (setting, method, seed) != ("low", "pascal", 0),
                  "tests": {t: {"bleu": sacrebleu.corpus_bleu(h, [REFS[t]]).score,
                                "chrf": sacrebleu.corpus_chrf(h, [REFS[t]]).score,
                                "hypotheses_sha256": hashlib.sha256("".join(x + "\n" for x in h).encode()).hexdigest()}
                            for t, h in lines.items()}}  # fmt: skip
        (results / "runs" / f"{name}.json").write_text(json.dumps(record))
        for t, h in lines.items():
            (results / "runs" / f"{name}.{t}.txt").write_text("".join(x + "\n" for x in h))
    return data, results


def pooled_bleu(setting: str, method: str, seeds) -> list[float]:
    """Each seed's corpus BLEU over the four test sets concatenated, straight from sacrebleu."""
    refs = [r for t in TESTS for r in REFS[t]]
    return [sacrebleu.corpus_bleu([x for t, k in zip(TESTS, RIGHT[(setting, method, s)], strict=True)
                                   for x in hyps(t, k)], [refs]).score for s in seeds]  # fmt: skip


def concat(setting: str, method: str, seeds) -> list[str]:
    return [x for s in seeds for t, k in zip(TESTS, RIGHT[(setting, method, s)], strict=True) for x in hyps(t, k)]


def seed_rows(text: str) -> dict[str, list[str]]:
    section = text.split("## Seed-level statistics")[1].split("Machine kinds:")[0]
    return {cells[0]: cells for line in section.splitlines() if line.startswith("| `")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}  # fmt: skip


def check_row(cells: list[str], setting: str, method: str, seeds: list[int], samples: int) -> None:
    """One row of the seed table against scipy and sacrebleu on the lines themselves."""
    from hf_syntax_mt.evaluation import paired_bootstrap

    system, base = pooled_bleu(setting, method, seeds), pooled_bleu(setting, "vanilla", seeds)
    deltas = np.array(system) - np.array(base)
    assert cells[1] == ",".join(map(str, seeds))
    assert cells[2] == " / ".join(f"{d:+.2f}" for d in deltas)
    mean, interval = cells[3].split(" ", 1)
    assert mean == f"{deltas.mean():+.2f}"
    low, high = stats.t.interval(0.95, len(seeds) - 1, loc=deltas.mean(), scale=stats.sem(deltas))
    assert interval == f"[{low:+.2f}, {high:+.2f}]"
    assert cells[4] == r2.format_p(stats.ttest_rel(system, base).pvalue)
    assert cells[5] == r2.format_p(stats.wilcoxon(deltas, method="exact").pvalue)
    better, worse = int((deltas > 0).sum()), int((deltas < 0).sum())
    assert cells[6] == f"{better}+ {worse}- p {r2.format_p(stats.binomtest(better, better + worse).pvalue)}"
    assert cells[7] == r2.format_p(stats.ttest_ind(system, base).pvalue)
    # the pooled ΔBLEU the cluster bootstrap resamples: every seed's lines concatenated, scored at once
    refs = [r for _ in seeds for t in TESTS for r in REFS[t]]
    sys_lines, base_lines = concat(setting, method, seeds), concat(setting, "vanilla", seeds)
    pooled = sacrebleu.corpus_bleu(sys_lines, [refs]).score - sacrebleu.corpus_bleu(base_lines, [refs]).score
    assert cells[8].startswith(f"{pooled:+.2f} [")
    # the line bootstrap of the same lines, each resampled on its own
    assert cells[9] == r2.format_p(paired_bootstrap(base_lines, sys_lines, refs, samples)["bleu"]["p_value"])


def test_seed_level_statistics_of_every_method_in_every_setting(tmp_path, monkeypatch):
    data, results = write_units(tmp_path)
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    args = SimpleNamespace(results=str(results), data=str(data), bootstrap_samples=30)
    # by default low seed 0's pair (native bf16 True vs False) is left out: low has seeds 1 and 2, full 0 and 1
    text = r2.aggregate(args)
    rows = seed_rows(text)
    assert list(rows) == ["`full` alignment - vanilla", "`low` pascal - vanilla"]
    check_row(rows["`full` alignment - vanilla"], "full", "alignment", [0, 1], 30)
    check_row(rows["`low` pascal - vanilla"], "low", "pascal", [1, 2], 30)
    assert rows["`low` pascal - vanilla"][10] == "1,2: unknown"  # no unit here records its machine
    assert "pairs of different kinds are left out" in text
    assert "- low-pascal-seed0 / low-vanilla-seed0: different machine kinds: native bf16 False vs True" in text
    # --mixed-machines: every seed compared, the machines column names the pair of different kinds, and the
    # comparison is given again without it
    text = r2.aggregate(SimpleNamespace(**vars(args), mixed_machines=True))
    assert "study_round2.py --aggregate --mixed-machines`" in text
    rows = seed_rows(text)
    assert list(rows) == ["`full` alignment - vanilla", "`low` pascal - vanilla",
                          "`low` pascal - vanilla, one kind only"]  # fmt: skip
    check_row(rows["`low` pascal - vanilla"], "low", "pascal", [0, 1, 2], 30)
    assert rows["`low` pascal - vanilla"][10] == "0: different; 1,2: unknown"
    check_row(rows["`low` pascal - vanilla, one kind only"], "low", "pascal", [1, 2], 30)
    assert rows["`low` pascal - vanilla, one kind only"][10] == "1,2: unknown"
    check_row(rows["`full` alignment - vanilla"], "full", "alignment", [0, 1], 30)
