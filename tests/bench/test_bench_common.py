"""`benchmarks/common.py`, the helpers the benchmark scripts share: the unit loop of the studies, JSON files, paths."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS.parent))  # the repository: `import benchmarks.*`

from benchmarks import common  # noqa: E402


def test_paths():
    assert common.HERE == BENCHMARKS and common.ROOT == BENCHMARKS.parent
    assert common.DATA == BENCHMARKS.parent.parent / "shared" / "data"
    assert (
        common.relative_path(str(common.DATA.resolve() / "multi30k" / "train.en"))
        == "../shared/data/multi30k/train.en"
    )
    assert common.relative_path(str(common.ROOT.resolve() / "runs" / "x")) == "./runs/x"
    assert common.relative_path("--seed") == "--seed"
    # any other absolute path: relative to the repository (a folder beside the checkout, /tmp), never absolute
    beside = common.ROOT.resolve().parent / "study-runs" / "multi30k" / "lisa-seed0"
    assert common.relative_path(str(beside)) == "../study-runs/multi30k/lisa-seed0"
    far = common.relative_path("/tmp/quick/x")
    assert not Path(far).is_absolute() and (common.ROOT.resolve() / far).resolve() == Path("/tmp/quick/x").resolve()
    assert common.relative_path(str(common.ROOT.resolve()) + "-other/x") == f"../{common.ROOT.name}-other/x"


#: a path of the machine that wrote a file: /work, /tmp, /home, /root, /Users, /mnt, /scratch, /data ... at the start
#: of a JSON string, of a line or after a space, quote or "=", not inside a URL or a relative path
ABSOLUTE = re.compile(
    r"""(?:^|[\s"'=(])(/(?:work|tmp|home|root|Users|mnt|scratch|data|opt|var|private|srv)/[^\s"']*)"""
)


def test_committed_results_hold_no_absolute_path_of_the_machine_that_wrote_them():
    results = BENCHMARKS / "results"
    found = []
    for path in sorted(results.rglob("*")):
        if path.suffix not in (".json", ".md", ".jsonl", ".txt", ".log") or not path.is_file():
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            found += [f"{path.relative_to(BENCHMARKS.parent)}:{lineno}: {m}" for m in ABSOLUTE.findall(line)]
    assert sum(1 for _ in results.rglob("runs/*.json")) > 50  # the scan reads the committed unit files
    assert not found, "absolute paths in committed results (use common.relative_path):\n" + "\n".join(found[:20])
    assert ABSOLUTE.findall(' "--output_dir", "/work/study-runs/x",') == ["/work/study-runs/x"]
    assert ABSOLUTE.findall('"../shared/data/x" see https://example.org/home/x and ./runs/tmp/y') == []


def test_units_and_the_plan(tmp_path, capsys, monkeypatch):
    assert common.unit_name("pascal", 1) == "pascal-seed1"
    assert common.parse_unit("dbsa_sync-seed12", {"dbsa_sync": None}) == ("dbsa_sync", 12)
    for bad in ("pascal", "pascal-seedx", "other-seed0"):
        with pytest.raises(SystemExit, match="unknown unit"):
            common.parse_unit(bad, ["pascal"])
    assert common.done_units(tmp_path) == set()
    common.write_json(tmp_path / "runs" / "a-seed0.json", {"x": 1}, indent=1, newline=True)
    assert (tmp_path / "runs" / "a-seed0.json").read_text() == '{\n "x": 1\n}\n'
    assert common.done_units(tmp_path) == {"a-seed0"}

    ran, after = [], []
    plan = [("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    assert common.run_plan(plan, {"a-seed0"}, lambda m, s: ran.append((m, s)), max_units=2,
                           after=lambda: after.append(len(ran))) == 2  # fmt: skip
    assert ran == [("b", 0), ("c", 0)] and after == [1, 2]
    assert "skip a-seed0 (done)" in capsys.readouterr().out
    clock = iter([0.0, 0.0, 61.0 * 60])  # start, before b (in time), before c (over the limit)
    monkeypatch.setattr(common.time, "perf_counter", lambda: next(clock))
    ran.clear()
    assert common.run_plan(plan[1:], set(), lambda m, s: ran.append(m), time_limit=60) == 1
    assert ran == ["b"] and "time limit of 60 minutes reached: stopping before c-seed0" in capsys.readouterr().out


def test_a_failing_unit_does_not_stop_the_plan(capsys):
    ran, after = [], []

    def run(method, seed):
        if method == "b":
            raise ValueError("broken unit")
        ran.append(method)

    with pytest.raises(RuntimeError, match=r"1 unit\(s\) failed: b-seed0 .* 2 finished"):
        common.run_plan([("a", 0), ("b", 0), ("c", 0)], set(), run, after=lambda: after.append(list(ran)))
    assert ran == ["a", "c"] and after == [["a"], ["a", "c"]]  # no aggregate after the failed unit
    captured = capsys.readouterr()
    assert "ValueError: broken unit" in captured.err and "unit b-seed0 FAILED" in captured.out


def test_a_study_main_lists_aggregates_and_runs_the_units_not_done(tmp_path, capsys, monkeypatch):
    import argparse

    import torch

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # study_device's threads: not the test process's

    p = argparse.ArgumentParser()
    common.add_study_arguments(p, tmp_path, tmp_path / "out", threads=1)
    plan = [("a", 0), ("b", 0), ("c", 1)]
    common.write_json(tmp_path / "runs" / "a-seed0.json", {"unit": "a-seed0"})
    ran, aggregated = [], []

    def main(*argv):
        args = p.parse_args(list(argv))
        common.refuse_quick_evidence(p, args)
        return common.run_study(args, plan, lambda name: common.parse_unit(name, "abc"),
                                lambda args, m, s, device: ran.append((m, s, device)), aggregated.append)  # fmt: skip

    assert main("--list") == 0 and not ran and not aggregated
    assert capsys.readouterr().out.split("\n")[:3] == ["done  a-seed0", "todo  b-seed0", "todo  c-seed1"]
    assert main("--aggregate") == 0 and not ran and len(aggregated) == 1
    auto = "cuda" if torch.cuda.is_available() else "cpu"  # --device auto (the default), on a GPU machine too
    assert main() == 0 and ran == [("b", 0, auto), ("c", 1, auto)] and len(aggregated) == 3  # after each unit
    ran.clear()
    assert main("--units", "c-seed1", "a-seed0", "--no-aggregate", "--device", "cpu") == 0 and ran == [("c", 1, "cpu")]
    assert len(aggregated) == 3
    with pytest.raises(SystemExit, match="unknown unit"):
        main("--units", "z-seed0")
    p.set_defaults(results=str(common.RESULTS / "x"))
    with pytest.raises(SystemExit):
        main("--quick")
    assert "--quick results are not evidence" in capsys.readouterr().err


def test_write_json_is_what_the_scripts_wrote(tmp_path):
    data = {"ratios": {"train_ratio": 1.0}, "path": Path("x")}
    path = common.write_json(tmp_path / "deep" / "r.json", data, default=str)
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=2, default=str)  # no final newline, as before


def test_mean_std_is_one_table_cell_for_every_study():
    """The one `mean_std` the study scripts share: the sample standard deviation, by hand."""
    assert common.mean_std([]) == "-"
    assert common.mean_std([37.361]) == "37.36"
    values = [37.0, 37.5, 38.5]  # mean 37.666.., squared deviations 0.444.., 0.0277.., 0.694.. over n - 1 = 2
    assert (
        common.mean_std(values) == f"37.67 ± {((0.4444444 + 0.0277778 + 0.6944444) / 2) ** 0.5:.2f}" == "37.67 ± 0.76"
    )


def test_a_finished_unit_is_saved_and_an_aggregate_writes_its_table(tmp_path, capsys):
    model = tmp_path / "models" / "vanilla-seed0"
    (model / "checkpoint-10").mkdir(parents=True)
    record = {"unit": "vanilla-seed0", "seed": 0, "bleu": 30.5}
    path = common.save_unit(tmp_path / "runs", record, model)
    assert path == tmp_path / "runs" / "vanilla-seed0.json" and json.loads(path.read_text()) == record
    assert not model.exists()  # a finished unit needs no checkpoint
    kept = tmp_path / "models" / "kept"
    kept.mkdir()
    common.save_unit(tmp_path / "runs", {**record, "unit": "kept"}, None)
    assert kept.is_dir()
    assert common.aggregated_units(tmp_path / "empty", lambda r: []) == []
    assert f"no unit files under {tmp_path / 'empty' / 'runs'} yet" in capsys.readouterr().out
    drawn = []
    text = common.write_results(tmp_path, ["| a |", "| b |"], lambda: drawn.append(1))
    assert text == "| a |\n| b |\n" == (tmp_path / "results.md").read_text(encoding="utf-8") and drawn == [1]


def test_every_study_driver_takes_the_shared_run_control(tmp_path):
    from benchmarks.studies import alignment_study, cpu_minute, docnmt_real, multi30k_study, study_round2

    shared = ["--units", "u-seed0", "--time-limit", "5", "--max-units", "1", "--no-aggregate", "--threads", "3",
              "--results", str(tmp_path / "r"), "--output-dir", str(tmp_path / "o"), "--data", str(tmp_path / "d")]  # fmt: skip
    for study in (alignment_study, cpu_minute, docnmt_real, multi30k_study, study_round2):
        args = study.parse_args(shared)
        assert (args.units, args.time_limit, args.max_units, args.no_aggregate, args.threads) == (
            ["u-seed0"],
            5.0,
            1,
            True,
            3,
        ), study.__name__
        assert (args.results, args.output_dir, args.data) == tuple(str(tmp_path / k) for k in "rod")
        assert not (args.list or args.aggregate or args.quick) and args.device == "auto"
        with pytest.raises(SystemExit):  # --quick results are not evidence: never under benchmarks/results
            study.parse_args(["--quick", "--results", str(common.RESULTS / "x")])
    with pytest.raises(SystemExit):
        alignment_study.parse_args(["--device", "cuda"])  # a CPU-only study says so
