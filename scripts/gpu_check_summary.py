"""The GPU check's summary (`scripts/gpu_check.sh`): OUT/gpu_check.{json,md} from OUT/parts.tsv, OUT/device.json and
each part's JUnit report and bench JSON. The check writes it as each part starts and ends (`--running PART` while one
runs), so that a run cut off by a time limit has its results so far; the last call is the verdict.

    python scripts/gpu_check_summary.py OUT PARTS DRY_RUN [--partial [--running PART]] [--stopped WHY]
                                                                    # exit 0: ok, 1: not (or --partial)

The verdict is "OK" only when something was checked on the GPU and nothing failed: no part failed, timed out or
was cut, at least one part passed, and, outside a dry run, torch sees a CUDA device and a GPU part (gpu, bench) was
asked for ("checked nothing: no CUDA device" otherwise, whatever passed: issue 65). It imports no
torch (device.json holds what the check read from torch once, at its start).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

GPU_PARTS = ("gpu", "bench")
PACKAGES = ("torch", "transformers", "accelerate", "datasets", "pytest", "pytest-xdist")


def version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def junit(path: Path) -> dict | None:
    """Counts and the skip reasons of a pytest JUnit report."""
    if not path.exists():
        return None
    try:
        suite = ET.parse(path).getroot()
    except ET.ParseError:  # a report being written when the check was stopped
        return None
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    reasons, failed = {}, []
    for case in suite.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        for child in case:
            if child.tag == "skipped":
                reason = (child.get("message") or "").strip()
                reasons[reason] = reasons.get(reason, 0) + 1
            elif child.tag in ("failure", "error"):
                failed.append(name)
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    return {"passed": passed, "failed": n["failures"] + n["errors"], "skipped": n["skipped"], "skip_reasons": reasons,
            "failed_tests": failed[:20]}  # fmt: skip


def commit_id() -> str | None:
    try:  # a copy without .git (a lent machine): HF_SYNTAX_MT_COMMIT names the commit it was sent at
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    return commit or os.environ.get("HF_SYNTAX_MT_COMMIT") or None


def part_entry(out: Path, part: str, status: str, seconds: str, limit: str, note: str) -> dict:
    entry = {"status": status, "seconds": round(float(seconds or 0), 1), "limit_seconds": int(limit), "note": note}
    if part in ("fast", "gpu"):
        entry["tests"] = junit(out / f"{part}.xml")
    if part == "bench" and (out / "bench_gpu-quick.json").exists():
        try:
            bench = json.loads((out / "bench_gpu-quick.json").read_text())
        except json.JSONDecodeError:
            bench = None
        if bench is not None:
            entry["bench"] = {
                "complete": bench["complete"], "json": str(out / "bench_gpu-quick.json"), "cut": bench.get("cut", []),
                "targets_met": sum(t["met"] for t in bench["targets"]), "targets": len(bench["targets"]),
                "not_met": [f"{t['model']} {t['measure']} {t['batch']}: {t['ratio']:.2f} < {t['target']}"
                            for t in bench["targets"] if not t["met"]],
            }  # fmt: skip
            if status == "passed" and not bench["complete"]:
                entry["status"] = "incomplete"
    if part == "preflight" and (out / "preflight.json").exists():
        pre = json.loads((out / "preflight.json").read_text())
        entry["preflight"] = {k: pre.get(k) for k in ("required", "missing", "wrong_version", "warnings", "import",
                                                     "import_error")}  # fmt: skip
        problems = pre["missing"] + pre["wrong_version"] + ([pre["import_error"]] if pre.get("import_error") else [])
        entry["note"] = "; ".join(problems[:3]) if problems else f"{len(pre['required'])} requirements met"
    if part == "install" and status == "passed" and (out / "torch.txt").exists():
        entry["note"] = (out / "torch.txt").read_text().strip()
    tests = entry.get("tests")
    if tests and tests["failed"] and entry["status"] == "passed":
        entry["status"] = "failed"
    return entry


def summarise(
    out: Path, parts: list[str], dry_run: bool, partial: bool, running: str | None, stopped: str | None
) -> dict:
    device = json.loads((out / "device.json").read_text())
    rows = [line.split("\t") for line in (out / "parts.tsv").read_text().splitlines() if line]
    summary = {
        "device": device["device"], "cuda": device["cuda"], "cuda_available": device["cuda_available"],
        "python": device["python"], "commit": commit_id(), "versions": {n: version(n) for n in PACKAGES},
        "asked": parts, "parts": {}, "partial": partial, "running": running, "stopped": stopped,
    }  # fmt: skip
    for part, status, seconds, limit, note in rows:
        entry = part_entry(out, part, status, seconds, limit, note)
        tests = entry.get("tests")
        if (part == "gpu" and entry["status"] == "passed" and tests and not device["cuda_available"]
                and tests["passed"] == 0 and not tests["failed"]):  # fmt: skip
            entry["status"], entry["note"] = "skipped", "no CUDA device: every GPU test skipped"
        summary["parts"][part] = entry
    problems = []
    statuses = {part: entry["status"] for part, entry in summary["parts"].items()}
    bad = [part for part, status in statuses.items() if status not in ("passed", "skipped")]
    if bad:
        problems.append(f"not passed: {', '.join(f'{part} ({statuses[part]})' for part in bad)}")
    gpu_asked = [p for p in parts if p in GPU_PARTS]
    if not dry_run and not device["cuda_available"]:  # whatever passed, nothing ran on a GPU
        could_not = f": {', '.join(gpu_asked)} could not run" if gpu_asked else ": no GPU part (gpu, bench) ran"
        problems.append(f"checked nothing: no CUDA device (torch.cuda.is_available() is False){could_not}; run the "
                        "check on a Python whose torch sees a GPU")  # fmt: skip
    elif not dry_run and not gpu_asked:
        problems.append("checked nothing on the GPU: no GPU part (gpu, bench) was asked for; add them to --parts")
    if not any(status == "passed" for status in statuses.values()):
        problems.append("nothing was checked: no part passed")
    if stopped:
        problems.append(f"the check was stopped ({stopped}); parts not run: "
                        f"{', '.join(p for p in parts if p not in statuses) or 'none'}")  # fmt: skip
    summary["problems"] = [] if partial else problems
    summary["ok"] = not partial and not problems
    summary["dry_run"] = dry_run
    summary["seconds"] = round(sum(p["seconds"] for p in summary["parts"].values()), 1)
    return summary


def markdown(summary: dict) -> str:
    verdict = "OK" if summary["ok"] else "FAILED"
    if summary["partial"]:
        verdict = "IN PROGRESS" + (f" (running: {summary['running']})" if summary["running"] else "")
    v = summary["versions"]
    lines = [f"# GPU check{' (dry run)' if summary['dry_run'] else ''}: {verdict}", "",
             f"device: {summary['device']}; torch {v['torch']} (CUDA {summary['cuda']}), transformers "
             f"{v['transformers']}, accelerate {v['accelerate']}, datasets {v['datasets']}; Python {summary['python']}; "
             f"commit {summary['commit']}", "",
             "| part | status | passed | failed | skipped | seconds (limit) | note |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for part, p in summary["parts"].items():
        t = p.get("tests") or {}
        note = p["note"]
        if "bench" in p:
            b = p["bench"]
            note = f"{b['targets_met']} of {b['targets']} targets met" + ("" if b["complete"] else " (incomplete)")
        lines.append(f"| {part} | {p['status']} | {t.get('passed', '')} | {t.get('failed', '')} | {t.get('skipped', '')} "
                     f"| {p['seconds']:.0f} ({p['limit_seconds']}) | {note} |")  # fmt: skip
    lines.append(f"\nwall time {summary['seconds']:.0f} s")
    for problem in summary["problems"]:
        lines.append(f"- FAILED: {problem}")
    for part, p in summary["parts"].items():
        for reason, count in ((p.get("tests") or {}).get("skip_reasons") or {}).items():
            lines.append(f"- {part}: {count} skipped: {reason}")
        for name in (p.get("tests") or {}).get("failed_tests", []):
            lines.append(f"- {part}: FAILED {name}")
        for cut in p.get("bench", {}).get("cut", []):
            lines.append(f"- bench cut: {cut}")
        for miss in p.get("bench", {}).get("not_met", []):
            lines.append(f"- bench target not met: {miss}")
        if p["status"] == "skipped":
            lines.append(f"- {part}: skipped: {p['note']}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("parts", help="the parts asked for, comma-separated")
    p.add_argument("dry_run", choices=["0", "1"])
    p.add_argument("--partial", action="store_true", help="a checkpoint while the check runs, not the verdict")
    p.add_argument("--running", default=None, help="the part that is running now")
    p.add_argument("--stopped", default=None, help="why the check stopped before its end (a signal)")
    args = p.parse_args(argv)
    parts = [part for part in args.parts.split(",") if part]
    summary = summarise(args.out, parts, args.dry_run == "1", args.partial, args.running, args.stopped)
    text = markdown(summary)
    for name, content in (("gpu_check.json", json.dumps(summary, indent=1) + "\n"), ("gpu_check.md", text)):
        tmp = args.out / f".{name}.tmp"
        tmp.write_text(content)
        tmp.replace(args.out / name)  # never half a file, whenever the check is stopped
    if not args.partial:
        print("\n" + text)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
