"""`benchmarks/studies/study_distill.py` and `distill_aggregate.py`: the plan and its names, which units a run skips,
the students' train command (round four's, as its committed unit file records it, plus exactly the distillation
flags), the decision rule by hand, and the aggregate on hand-built unit files against sacrebleu and scipy computed
directly."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks import common  # noqa: E402
from benchmarks.studies import distill_aggregate as agg  # noqa: E402
from benchmarks.studies import study_distill as sd  # noqa: E402
from benchmarks.studies import study_round2 as r2  # noqa: E402
from benchmarks.studies import study_round4 as r4  # noqa: E402

TESTS = r2.MULTI30K_TESTS


def test_the_plan_is_the_parser_then_each_seeds_students_and_serving_and_names_round_trip():
    assert [sd.unit_name(*u) for u in sd.PLAN] == ["german-parser"] + [
        n for s in (3, 4, 5) for n in (f"distill-dbsa_sync_full-seed{s}", f"distill-vanilla-seed{s}", f"serve-seed{s}")
    ]
    for unit in sd.PLAN:
        assert sd.parse_unit(sd.unit_name(*unit)) == unit
    for bad in ("distill-all3-seed3", "distill-vanilla-seedX", "serve-3", "serve-seed", "german", "low-vanilla-seed3"):
        with pytest.raises(SystemExit, match="unknown unit"):
            sd.parse_unit(bad)
    # the students are round four's own methods, unchanged
    assert sd.STUDENTS == {m: r4.METHODS[m] for m in ("dbsa_sync_full", "vanilla")}


def test_a_run_skips_written_units_and_runs_the_rest_in_plan_order(tmp_path):
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    (runs / "german-parser.json").write_text(json.dumps({"unit": "german-parser"}))
    (runs / "distill-vanilla-seed3.json").write_text('{"unit": "distill-vani')  # truncated: runs again
    ran = []

    def run(argv):
        args = sd.parse_args(["--results", str(tmp_path / "results"), "--output-dir", str(tmp_path / "out"),
                              "--no-aggregate", *argv])  # fmt: skip
        ran.clear()
        common.run_study(args, sd.PLAN, sd.parse_unit, lambda a, *unit: ran.append(sd.unit_name(*unit[:3])),
                         lambda a: pytest.fail("--no-aggregate"), name=sd.unit_name)  # fmt: skip
        return list(ran)

    assert run([]) == [sd.unit_name(*u) for u in sd.PLAN[1:]]
    assert run(["--units", "serve-seed4", "german-parser", "distill-vanilla-seed3"]) == [
        "serve-seed4",
        "distill-vanilla-seed3",
    ]


def _fake_data(root: Path) -> Path:
    """The validation files `round_one.files` checks exist (empty: the argv is built, nothing is read)."""
    data = root / "data"
    for folder, names in (
        ("multi30k", ("val.en", "val.de")),
        ("multi30k-parsed", ("val.en.conllu.gz", "val.de.conllu.gz")),
    ):
        (data / folder).mkdir(parents=True, exist_ok=True)
        for n in names:
            (data / folder / n).write_text("")
    return data


def _student(tmp_path: Path, method: str, seed: int = 3) -> tuple[list[str], Path, Path, Path]:
    data, runs = _fake_data(tmp_path), tmp_path / "r4out" / "runs"
    args = sd.parse_args(["--output-dir", str(runs), "--data", str(data)])
    sub = runs / "data" / "low-5000-seed2026"
    splits = {"train": {"src": sub / "train.en", "tgt": sub / "train.de", "src_conllu": sub / "train.en.conllu",
                        "tgt_conllu": sub / "train.de.conllu"}}  # fmt: skip
    teacher, parser = tmp_path / "teachers" / f"low-all3-seed{seed}", tmp_path / "de_parser" / "model-best"
    out = runs / "models" / sd.unit_name("distill", method, seed)
    argv = sd.student_argv(args, method, seed, out, runs / "tokenizer-low-4000", "cpu", splits, teacher, parser,
                           "0123abcd")  # fmt: skip
    return argv, data, runs, teacher


def _flags(argv: list[str]) -> dict[str, str | None]:
    return {a: b for a, b in zip(argv, [*argv[1:], None], strict=True) if a.startswith("--")}


DISTILL = {"--distill_from", "--distill_num_beams", "--distill_cache_dir"}
TARGET_PARSER = {"--target_parser", "--target_parser_model", "--parser_cache_dir"}


def test_the_vanilla_student_trains_with_round_fours_committed_argv_plus_the_distillation_flags(tmp_path):
    """Against the train command round four's ``low-vanilla-seed3`` unit file records (built by round two's code when
    it ran): the same flags and values but the output folder and the card's title, plus the teacher's flags."""
    recorded = json.loads((r4.RESULTS / "runs" / "low-vanilla-seed3.json").read_text())["train_argv"]
    argv, data, runs, teacher = _student(tmp_path, "vanilla")
    rewritten = [a.replace(str(data), "../shared/data").replace(str(runs), "../r4out/runs") for a in argv]
    mine, theirs = _flags(rewritten), _flags(recorded)
    assert set(mine) - set(theirs) == DISTILL and set(theirs) <= set(mine)
    same = [k for k in theirs if k not in ("--output_dir", "--model_card_title")]
    assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}
    assert len(rewritten) == len(recorded) + 2 * len(DISTILL)  # every argument is a flag and its value
    assert (mine["--distill_from"], mine["--distill_num_beams"]) == (str(teacher), "5")
    assert mine["--distill_cache_dir"] == "../r4out/runs/distill_cache"
    assert "low-all3-seed3" in mine["--model_card_title"]


def test_the_dbsa_student_drops_the_references_trees_and_parses_the_teachers_outputs(tmp_path):
    argv, data, runs, teacher = _student(tmp_path, "dbsa_sync_full", seed=4)
    args = sd.parse_args(["--output-dir", str(runs), "--data", str(data)])
    out = runs / "models" / "distill-dbsa_sync_full-seed4"
    sub = runs / "data" / "low-5000-seed2026"
    splits = {"train": {"src": sub / "train.en", "tgt": sub / "train.de", "src_conllu": sub / "train.en.conllu",
                        "tgt_conllu": sub / "train.de.conllu"}}  # fmt: skip
    four = r2.round_one.train_argv(args, "dbsa_sync_full", 4, out, runs / "tokenizer-low-4000", "cpu",
                                   spec=r4.METHODS["dbsa_sync_full"], split_files=splits, predict=False)  # fmt: skip
    mine, theirs = _flags(argv), _flags(four)
    assert theirs["--train_target_conllu"] == str(sub / "train.de.conllu") and "--train_target_conllu" not in mine
    assert set(mine) - set(theirs) == DISTILL | TARGET_PARSER
    assert set(theirs) - set(mine) == {"--train_target_conllu"}
    same = [k for k in theirs if k not in ("--model_card_title", "--train_target_conllu")]
    assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}
    assert mine["--validation_target_conllu"] == theirs["--validation_target_conllu"]  # validation keeps references
    assert (mine["--target_parser"], mine["--target_parser_model"]) == (
        "spacy",
        str(tmp_path / "de_parser" / "model-best"),
    )
    assert mine["--distill_from"] == str(teacher) and mine["--distill_num_beams"] == "5"
    # the two students of a seed share the teacher's translations; each unit has its own parse cache
    vanilla, *_ = _student(tmp_path / "v", "vanilla", seed=4)
    assert (
        Path(_flags(vanilla)["--distill_cache_dir"]).name == Path(mine["--distill_cache_dir"]).name == "distill_cache"
    )
    assert mine["--parser_cache_dir"] == str(runs / "models" / "parse_cache-distill-dbsa_sync_full-seed4-0123abcd")


@pytest.mark.parametrize(
    ("pooled", "ci", "expected"),
    [
        (-0.1, (-0.25, 0.05), "met, shown over seeds"),
        (-0.3, (-0.3, -0.3 + 1e-9), "met, shown over seeds"),  # the margin itself is "within"
        (-0.2, (-0.6, 0.2), "met on the pooled figure, not shown over seeds"),
        (-0.4, (-0.9, 0.1), "missed on the pooled figure, not shown over seeds"),
        (-0.8, (-1.2, -0.31), "missed, shown over seeds"),
        (0.5, (0.2, 0.8), "met, shown over seeds"),  # a student better than its teacher is within it
        (-0.1, None, "met on the pooled figure (no interval"),
        (-0.5, None, "missed on the pooled figure (no interval"),
    ],
)
def test_the_decision_rule_on_hand_built_gaps(pooled, ci, expected):
    assert agg.gap_verdict(pooled, ci).startswith(expected)


REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps on a mat"]
WRONG = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
RIGHT = [REFS[:k] + WRONG[k:] for k in range(5)]  # k sentences right


def _tests(hyps: list[str]) -> dict:
    return {t: {"bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score, "chrf": 0.0,
                "hypotheses_sha256": hashlib.sha256("".join(h + "\n" for h in hyps).encode()).hexdigest()}
            for t in TESTS}  # fmt: skip


def _write(runs: Path, name: str, record: dict, hyps: dict[str, list[str]]) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{name}.json").write_text(json.dumps({"unit": name, "commit": "abc", **record}))
    for stem, lines in hyps.items():
        for t in TESTS:
            (runs / f"{stem}.{t}.txt").write_text("".join(h + "\n" for h in lines))


def _unit(runs: Path, name: str, method: str, seed: int, k: int, **extra) -> None:
    record = {"method": method, "seed": seed, "precision": "fp32", "device": "cpu", "steps": 10, "train_minutes": 2.0,
              "tests": _tests(RIGHT[k]), **extra}  # fmt: skip
    _write(runs, name, record, {name: RIGHT[k]})


def test_the_aggregate_over_complete_seeds_against_sacrebleu_and_scipy(tmp_path):
    from scipy import stats

    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for t in TESTS:
        (data / f"{t}.de").write_text("".join(r + "\n" for r in REFS))
    four, study = tmp_path / "four" / "runs", tmp_path / "study"
    # seed -> sentences right of (teacher, DBSA student, vanilla student, DBSA on references, vanilla)
    plan = {3: (3, 2, 2, 1, 0), 4: (4, 3, 2, 2, 1), 5: (3, 3, 1, 1, 1)}
    for seed, (t, ds, vs, d, v) in plan.items():
        for method, k in (("all3", t), ("dbsa_sync_full", d), ("vanilla", v)):
            _unit(four, f"low-{method}-seed{seed}", method, seed, k, setting="low")
        _unit(study / "runs", f"distill-dbsa_sync_full-seed{seed}", "dbsa_sync_full", seed, ds, kind="distill")
        if seed != 5:  # seed 5 has no vanilla student: left out whole
            _unit(study / "runs", f"distill-vanilla-seed{seed}", "vanilla", seed, vs, kind="distill")
    serve_hyps = {"ct2_float32": RIGHT[2], "ct2_int8": RIGHT[1]}
    rows = {r: {"seconds": [1.0], "median_s": 1.0, "sentences_per_s": rate} for r, rate in
            zip(agg.SPEED_ROWS, (2.0, 5.0, 8.0, 20.0, 50.0), strict=True)}  # fmt: skip
    _write(study / "runs", "serve-seed3", {
        "kind": "serve", "seed": 3, "tests": {e: _tests(h) for e, h in serve_hyps.items()},
        "identical_to_generate": {"ct2_float32": dict.fromkeys(TESTS, 4), "ct2_int8": dict.fromkeys(TESTS, 3)},
        "speed": [{"beams": 4, "batch_size": 32, "rows": rows, "load_average_1min": [[1.0, 1.5]]}]},
        {f"serve-seed3.{e}": h for e, h in serve_hyps.items()})  # fmt: skip
    args = SimpleNamespace(results=str(study), round4_results=str(four.parent), data=str(tmp_path / "data"),
                           bootstrap_samples=20)  # fmt: skip
    text = agg.aggregate(args, sd.PLAN, sd.unit_name)

    def bleu(k, seeds=1):
        return sacrebleu.corpus_bleu(RIGHT[k] * 4 * seeds, [REFS * 4 * seeds]).score

    def row(start):
        line = next(x for x in text.splitlines() if x.startswith(f"| {start}"))
        return [c.strip() for c in line.strip("|").split("|")]

    assert "Complete seeds: 3,4 of 3,4,5." in text
    assert row("teacher (all3) |")[1:] == [f"{bleu(3):.2f}", f"{bleu(4):.2f}",
                                           f"{sacrebleu.corpus_bleu((RIGHT[3] + RIGHT[4]) * 4, [REFS * 8]).score:.2f}"]  # fmt: skip
    # the gap, seed by seed, against scipy's paired t and t interval over the two seeds
    student, teacher = [bleu(plan[s][1]) for s in (3, 4)], [bleu(plan[s][0]) for s in (3, 4)]
    deltas = [a - b for a, b in zip(student, teacher, strict=True)]
    mean = sum(deltas) / 2
    low, high = stats.t.interval(0.95, 1, loc=mean, scale=stats.sem(deltas))
    gap = row("DBSA + sync student - teacher (all3) |")
    assert gap[2] == "3,4" and [c.split(" (")[0] for c in gap[3].split(" / ")] == [f"{d:+.2f}" for d in deltas]
    assert gap[5] == f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]"
    assert gap[6] == r2.format_p(stats.ttest_rel(student, teacher).pvalue)
    pooled = (sacrebleu.corpus_bleu((RIGHT[2] + RIGHT[3]) * 4, [REFS * 8]).score
              - sacrebleu.corpus_bleu((RIGHT[3] + RIGHT[4]) * 4, [REFS * 8]).score)  # fmt: skip
    assert gap[4] == f"{pooled:+.2f}"
    expected = agg.gap_verdict(pooled, (low, high))
    assert gap[-1] == expected and f"pooled gap {pooled:+.2f} BLEU over seeds 3,4: **{expected}**" in text
    # distillation alone: the vanilla student against vanilla on the references
    alone = row("vanilla student - vanilla on references |")
    assert alone[3].split(" (")[0] == f"{bleu(2) - bleu(0):+.2f}"
    # CTranslate2: BLEU of each export against generate's, identical lines, and the speed ratios
    served = row("3 | ")
    assert served == ["3", f"{bleu(2):.2f}", f"{bleu(2):.2f}", "100.0%", f"{bleu(1):.2f}", "75.0%"]
    speed = row("3 | 4 | 32 |")
    assert speed[3:8] == ["2.0", "5.0", "8.0", "20.0", "50.0"] and speed[8:11] == ["1.60x", "4.00x", "10.00x"]
    saved = json.loads((study / "results.json").read_text())
    assert saved["seeds"] == [3, 4] and saved["comparisons"][0]["verdict"] == expected
    assert (study / "progress.md").read_text().startswith("Units done: 6 of 10")


def test_the_progress_table_is_built_from_the_unit_files(tmp_path):
    runs = tmp_path / "runs"
    _unit(runs, "distill-vanilla-seed4", "vanilla", 4, 2, kind="distill", wall_minutes_train=50.0,
          wall_minutes_test=5.5, quick=True)  # fmt: skip
    text = agg.progress_text(tmp_path, sd.PLAN, sd.unit_name)
    assert text.startswith("Units done: 1 of 10")
    line = next(x for x in text.splitlines() if x.startswith("| distill-vanilla-seed4 |"))
    assert (
        "| done (quick) | abc | " in line
        and f"| 55.5 | BLEU {TESTS[0]} " + f"{sacrebleu.corpus_bleu(RIGHT[2], [REFS]).score:.2f} |" in line
    )
    assert "| german-parser | to run |" in text


def test_the_committed_progress_page_is_the_one_the_unit_files_give():
    """docs/studies/distill.md includes results/distill/progress.md: it must say what the committed units say (the
    study rewrites it after each unit and with --aggregate; commit it with the unit files)."""
    assert (sd.RESULTS / "progress.md").read_text() == agg.progress_text(sd.RESULTS, sd.PLAN, sd.unit_name)


def test_a_retrained_teacher_replaces_round_fours_for_its_seed_and_a_second_parser_is_listed(tmp_path):
    """Seed 5 rebuilt (docs/studies/distill.md): a teacher under RESULTS/rebuilt/runs/ is that seed's teacher (its own
    lines and BLEU, marked retrained); round four's lost model's unit is not read for it; a second German parser unit
    loads beside the first; the progress table lists both added units after the plan."""
    data = tmp_path / "data" / "multi30k"
    data.mkdir(parents=True)
    for t in TESTS:
        (data / f"{t}.de").write_text("".join(r + "\n" for r in REFS))
    four, study = tmp_path / "four" / "runs", tmp_path / "study"
    for seed, (t, ds, vs, d, v) in {3: (3, 2, 2, 1, 0), 5: (4, 2, 1, 1, 1)}.items():
        for method, k in (("all3", t), ("dbsa_sync_full", d), ("vanilla", v)):
            _unit(four, f"low-{method}-seed{seed}", method, seed, k, setting="low")
        for method, k in (("dbsa_sync_full", ds), ("vanilla", vs)):
            _unit(study / "runs", f"distill-{method}-seed{seed}", method, seed, k, kind="distill")
    _unit(study / "rebuilt" / "runs", "low-all3-seed5", "all3", 5, 1, setting="low", wall_minutes_train=60.0)
    for folder, uas in ((study, 76.4), (study / "rebuilt" / "seed5", 75.0)):  # seed 5's students' own parser
        _write(folder / "runs", "german-parser", {"dev_scores": {"uas": uas, "las": 60.0}}, {})
    args = SimpleNamespace(results=str(study), round4_results=str(four.parent), data=str(tmp_path / "data"),
                           bootstrap_samples=20)  # fmt: skip
    text = agg.aggregate(args, sd.PLAN, sd.unit_name)

    def bleu(k):
        return sacrebleu.corpus_bleu(RIGHT[k] * 4, [REFS * 4]).score

    teacher = next(x for x in text.splitlines() if x.startswith("| teacher (all3) |")).strip("|").split("|")
    assert [c.strip() for c in teacher[1:3]] == [f"{bleu(3):.2f}", f"{bleu(1):.2f}"]  # seed 5: the retrained one's
    gap = next(x for x in text.splitlines() if x.startswith("| DBSA + sync student - teacher (all3) |")).split("|")[4]
    assert [c.split(" (")[0].strip() for c in gap.split(" / ")] == [
        f"{bleu(2) - bleu(3):+.2f}",
        f"{bleu(2) - bleu(1):+.2f}",
    ]
    assert "| low-all3-seed5 (retrained) |" in text and "| low-all3-seed3 (round four) |" in text
    assert "The teacher of seed 5 was retrained" in text
    assert "(`german-parser`): GSD dev UAS 76.4" in text
    assert "(`german-parser` of `rebuilt/seed5`): GSD dev UAS 75.0" in text
    progress = (study / "progress.md").read_text().splitlines()
    assert progress[0].startswith("Units done: 5 of 10")
    assert [x.split("|")[1:3] for x in progress[-2:]] == [[" rebuilt/low-all3-seed5 ", " done (rebuild) "],
                                                         [" rebuilt/seed5/german-parser ", " done (rebuild) "]]  # fmt: skip
    assert progress[-2].split("|")[5].strip() == "60.0" and "UAS 75.0" in progress[-1]
    # a retrained model that is not a teacher is refused
    _unit(study / "rebuilt" / "runs", "low-vanilla-seed5", "vanilla", 5, 1, setting="low")
    with pytest.raises(SystemExit, match="only a teacher"):
        agg.aggregate(args, sd.PLAN, sd.unit_name)
