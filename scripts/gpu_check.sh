#!/usr/bin/env bash
# The GPU check in one command (issue 43): on a machine whose Python already has torch with CUDA, and no network.
#
#   scripts/gpu_check.sh [--wheels DIR] [--parts install,fast,gpu,bench] [--out DIR] [--python PY] [--jobs N]
#                        [--fast-args "PYTEST ARGS"] [--gpu-args "PYTEST ARGS"]
#   make test-gpu        # the same, with WHEELS=DIR / PARTS=... / OUT=... passed through
#
# Parts, in order, each with its own time limit (seconds; the environment variables override them):
#   install  (INSTALL_LIMIT=60) with --wheels DIR: the missing packages from DIR (pip --no-index --find-links DIR):
#            the package's requirements (pinned to DIR's version where DIR has a wheel of it; installed ones that
#            satisfy are kept), under a constraint pinning the installed torch; torch is never asked for, and its
#            version and file are checked before and after (never reinstalled or upgraded)
#   fast     (FAST_LIMIT=200)    the fast suite (pytest -m "not slow and not gpu") with CUDA visible
#   gpu      (GPU_LIMIT=100)     the GPU-only tests (pytest -m gpu, tests/gpu/): skipped, with the reason, without CUDA
#   bench    (BENCH_LIMIT=120)   benchmarks/gpu/bench_gpu.py --quick (transformer-base, bf16, every method against
#                                MarianMTModel): skipped without CUDA
# then one summary (passed / failed / skipped per part, wall time per part, device, versions, what was skipped and
# why) printed and written to OUT/gpu_check.{json,md}, with each part's log beside it. Exit status 0 when no part
# failed or timed out. Meant to take about 6 minutes on one H100 (not timed there yet); the limits add up to 8.
# Documented in docs/gpu.md and benchmarks/gpu/README.md (how to download the wheel folder).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
WHEELS="${WHEELS:-}"
PARTS="${PARTS:-install,fast,gpu,bench}"
OUT_DIR="${OUT_DIR:-runs/gpu_check}"
JOBS="${JOBS:-}"
FAST_ARGS="${FAST_ARGS:-}"
GPU_ARGS="${GPU_ARGS:-tests}"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS=$2; shift 2 ;;
    --parts) PARTS=$2; shift 2 ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --fast-args) FAST_ARGS=$2; shift 2 ;;
    --gpu-args) GPU_ARGS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for part in ${PARTS//,/ }; do
  case "$part" in install|fast|gpu|bench) ;; *) echo "gpu_check: --parts: unknown part '$part' (install, fast, gpu, bench)" >&2; exit 2 ;; esac
done
if [ -n "$WHEELS" ] && [ ! -d "$WHEELS" ]; then echo "gpu_check: --wheels $WHEELS: no such folder" >&2; exit 2; fi
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
STATUS="$OUT_DIR/parts.tsv"  # part, status, seconds, limit, note
: > "$STATUS"
rm -f "$OUT_DIR/torch.txt" "$OUT_DIR/fast.xml" "$OUT_DIR/gpu.xml" "$OUT_DIR/bench_gpu-quick.json"  # a rerun reports itself only
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
wants() { [[ ",$PARTS," == *",$1,"* ]]; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$STATUS"; }
torch_id() { "$PY" -c 'import torch; print(torch.__version__, torch.__file__)' 2>/dev/null; }
HAS_CUDA=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null) || {
  echo "gpu_check: $PY cannot import torch: this check runs on a Python that already has torch (with CUDA)" >&2; exit 2; }
TORCH_BEFORE=$(torch_id)

# run PART LIMIT CMD...: the command under `timeout` (SIGINT first: pytest then stops and still writes its report)
run_part() {
  local part=$1 limit=$2 start rc status note=""
  shift 2
  echo "=== gpu_check: $part (limit ${limit}s): $*"
  start=$(date +%s%N)
  timeout --signal=INT --kill-after=20 "$limit" "$@" > "$OUT_DIR/$part.log" 2>&1
  rc=$?
  tail -n 5 "$OUT_DIR/$part.log"
  case $rc in 0) status=passed ;; 124|137) status=timed_out; note="stopped at its ${limit}s limit" ;;
    5) status=skipped; note="no tests selected" ;; *) status=failed; note="exit status $rc" ;; esac
  local ms=$((($(date +%s%N) - start) / 1000000))
  record "$part" "$status" "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$limit" "$note"
}

# --- install ----------------------------------------------------------------------------------------------------
if wants install; then
  if [ -z "$WHEELS" ]; then
    record install skipped 0 "${INSTALL_LIMIT:-60}" "no --wheels folder given: the packages already installed are used"
  else
    CONSTRAINTS="$OUT_DIR/constraints.txt"
    "$PY" -c 'import torch; print(f"torch=={torch.__version__}")' > "$CONSTRAINTS"
    # what the package needs (pyproject.toml's dependencies and the dev extra, but torch), as pyproject.toml says it;
    # a dev package the folder lacks is left out (its tests skip). pip keeps what is installed and satisfies (no
    # exact pin that would replace an installed transformers), takes the rest from the folder; torch, its CUDA
    # libraries and triton are never asked for, and the constraint pins torch
    mapfile -t REQS < <("$PY" - "$WHEELS" pyproject.toml <<'EOF'
import pathlib, re, sys


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


folder = {}
for wheel in pathlib.Path(sys.argv[1]).glob("*.whl"):
    name, version = wheel.name.split("-")[:2]
    folder[norm(name)] = version
text = pathlib.Path(sys.argv[2]).read_text()


def block(key):  # the quoted strings of `key = [ ... ]` in pyproject.toml
    m = re.search(rf"^{key} = \[(.*?)^\]", text, flags=re.S | re.M)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


skip = re.compile(r"(torch|triton|nvidia-|cuda-)")
for runtime, specs in ((True, block("dependencies")), (False, block("dev") + ["pytest"])):
    for spec in specs:
        name = norm(re.match(r"[A-Za-z0-9_.-]+", spec).group(0))
        if skip.match(name):
            print(f"gpu_check: not asking for {name}: torch stays as installed", file=sys.stderr)
        elif name in folder or runtime:
            print(spec)  # as pyproject says it: an installed release that satisfies it is kept, not replaced
EOF
    )
    if [ ${#REQS[@]} -eq 0 ]; then
      record install skipped 0 "${INSTALL_LIMIT:-60}" "no wheels in $WHEELS"
    else
      run_part install "${INSTALL_LIMIT:-60}" "$PY" -m pip install --no-index --find-links "$WHEELS" \
        -c "$CONSTRAINTS" --no-cache-dir --disable-pip-version-check "${REQS[@]}"
    fi
  fi
fi
TORCH_AFTER=$(torch_id)
if wants install && [ -n "$WHEELS" ] && [ "$TORCH_BEFORE" = "$TORCH_AFTER" ]; then
  echo "gpu_check: torch unchanged by the install: $TORCH_AFTER"
  printf 'torch unchanged: %s\n' "${TORCH_AFTER%% *}" > "$OUT_DIR/torch.txt"
fi
if [ "$TORCH_BEFORE" != "$TORCH_AFTER" ]; then
  echo "gpu_check: torch changed during the install ($TORCH_BEFORE -> $TORCH_AFTER): remove the torch wheel from the" \
       "folder and reinstall the machine's torch" >&2
  record torch failed 0 0 "torch changed: $TORCH_BEFORE -> $TORCH_AFTER"
fi
MISSING=$("$PY" - <<'EOF'
import importlib.util
need = ["transformers", "accelerate", "datasets", "evaluate", "sacrebleu", "sentencepiece", "tokenizers", "pytest"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
EOF
)

# --- the fast suite, the GPU-only tests, the benchmark ---------------------------------------------------------------
XDIST=()
if [ -n "$JOBS" ] && "$PY" -c 'import xdist' 2>/dev/null; then XDIST=(-n "$JOBS"); fi
if wants fast; then
  if [ -n "$MISSING" ]; then
    record fast failed 0 "${FAST_LIMIT:-200}" "missing packages: $MISSING (give --wheels DIR, benchmarks/gpu/README.md)"
  else
    # shellcheck disable=SC2086  # FAST_ARGS: several pytest arguments
    run_part fast "${FAST_LIMIT:-200}" "$PY" -m pytest -q -p no:cacheprovider -m "not slow and not gpu" -rfE \
      "${XDIST[@]}" --junitxml "$OUT_DIR/fast.xml" $FAST_ARGS
  fi
fi
if wants gpu; then
  if [ -n "$MISSING" ]; then
    record gpu failed 0 "${GPU_LIMIT:-100}" "missing packages: $MISSING (give --wheels DIR, benchmarks/gpu/README.md)"
  else
    # shellcheck disable=SC2086  # GPU_ARGS: several pytest arguments
    run_part gpu "${GPU_LIMIT:-100}" "$PY" -m pytest -q -p no:cacheprovider -m gpu -rsfE --junitxml "$OUT_DIR/gpu.xml" \
      $GPU_ARGS
  fi
fi
if wants bench; then
  if [ "$HAS_CUDA" != 1 ]; then
    record bench skipped 0 "${BENCH_LIMIT:-120}" "needs a CUDA device (torch.cuda.is_available() is False)"
  else
    run_part bench "${BENCH_LIMIT:-120}" "$PY" benchmarks/gpu/bench_gpu.py --quick --budget "${BENCH_LIMIT:-120}" \
      --output "$OUT_DIR/bench_gpu-quick.json"
  fi
fi

# --- the summary -----------------------------------------------------------------------------------------------------
"$PY" - "$OUT_DIR" "$PARTS" <<'EOF'
import importlib.metadata as md
import json, os, pathlib, platform, subprocess, sys
import xml.etree.ElementTree as ET

import torch

out, parts = pathlib.Path(sys.argv[1]), sys.argv[2].split(",")
rows = [line.split("\t") for line in (out / "parts.tsv").read_text().splitlines() if line]


def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def junit(path):
    """Counts and the skip reasons of a pytest JUnit report."""
    if not path.exists():
        return None
    suite = ET.parse(path).getroot()
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
            "failed_tests": failed[:20]}


cuda = torch.cuda.is_available()
try:  # a copy without .git (a lent machine): HF_SYNTAX_MT_COMMIT names the commit it was sent at
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
except OSError:
    commit = ""
commit = commit or os.environ.get("HF_SYNTAX_MT_COMMIT", "")
summary = {
    "device": torch.cuda.get_device_name(0) if cuda else f"CPU only ({platform.machine()}): torch sees no CUDA device",
    "cuda": torch.version.cuda, "python": platform.python_version(), "commit": commit or None,
    "versions": {n: version(n) for n in ("torch", "transformers", "accelerate", "datasets", "evaluate", "pytest")},
    "parts": {},
}
for part, status, seconds, limit, note in rows:
    entry = {"status": status, "seconds": round(float(seconds or 0), 1), "limit_seconds": int(limit), "note": note}
    if part in ("fast", "gpu"):
        entry["tests"] = junit(out / f"{part}.xml")
    if part == "bench" and (out / "bench_gpu-quick.json").exists():
        bench = json.loads((out / "bench_gpu-quick.json").read_text())
        entry["bench"] = {"complete": bench["complete"], "json": str(out / "bench_gpu-quick.json"),
                          "targets_met": sum(t["met"] for t in bench["targets"]), "targets": len(bench["targets"]),
                          "not_met": [f"{t['model']} {t['measure']} {t['batch']}: {t['ratio']:.2f} < {t['target']}"
                                      for t in bench["targets"] if not t["met"]]}
        if status == "passed" and not bench["complete"]:
            entry["status"] = "failed"
    if part == "install" and status == "passed" and (out / "torch.txt").exists():
        entry["note"] = (out / "torch.txt").read_text().strip()
    tests = entry.get("tests")
    if tests and tests["failed"] and entry["status"] == "passed":
        entry["status"] = "failed"
    if part == "gpu" and tests and not cuda and tests["passed"] == 0 and not tests["failed"]:
        entry["status"], entry["note"] = "skipped", "no CUDA device: every GPU test skipped"
    summary["parts"][part] = entry
summary["ok"] = all(p["status"] in ("passed", "skipped") for p in summary["parts"].values())
summary["seconds"] = round(sum(p["seconds"] for p in summary["parts"].values()), 1)
lines = [f"# GPU check: {'OK' if summary['ok'] else 'FAILED'}", "",
         f"device: {summary['device']}; torch {summary['versions']['torch']} (CUDA {summary['cuda']}), transformers "
         f"{summary['versions']['transformers']}, accelerate {summary['versions']['accelerate']}, datasets "
         f"{summary['versions']['datasets']}; Python {summary['python']}; commit {summary['commit']}", "",
         "| part | status | passed | failed | skipped | seconds (limit) | note |", "|---|---|---|---|---|---|---|"]
for part, p in summary["parts"].items():
    t = p.get("tests") or {}
    note = p["note"]
    if "bench" in p:
        b = p["bench"]
        note = f"{b['targets_met']} of {b['targets']} targets met" + ("" if b["complete"] else " (incomplete)")
    lines.append(f"| {part} | {p['status']} | {t.get('passed', '')} | {t.get('failed', '')} | {t.get('skipped', '')} "
                 f"| {p['seconds']:.0f} ({p['limit_seconds']}) | {note} |")
lines.append(f"\nwall time {summary['seconds']:.0f} s")
for part, p in summary["parts"].items():
    for reason, count in ((p.get("tests") or {}).get("skip_reasons") or {}).items():
        lines.append(f"- {part}: {count} skipped: {reason}")
    for name in (p.get("tests") or {}).get("failed_tests", []):
        lines.append(f"- {part}: FAILED {name}")
    for miss in p.get("bench", {}).get("not_met", []):
        lines.append(f"- bench target not met: {miss}")
    if p["status"] == "skipped":
        lines.append(f"- {part}: skipped: {p['note']}")
text = "\n".join(lines) + "\n"
(out / "gpu_check.json").write_text(json.dumps(summary, indent=1) + "\n")
(out / "gpu_check.md").write_text(text)
print("\n" + text)
sys.exit(0 if summary["ok"] else 1)
EOF
