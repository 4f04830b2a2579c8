#!/usr/bin/env bash
# The GPU check in one command (issues 43, 48): on a machine whose Python already has torch with CUDA, and no network.
#
#   scripts/gpu_check.sh [--wheels DIR] [--target DIR] [--parts install,preflight,fast,gpu,bench] [--out DIR]
#                        [--bundle DIR] [--python PY] [--jobs N] [--gpu-jobs N] [--dry-run]
#                        [--fast-args "PYTEST ARGS"] [--gpu-args "PYTEST ARGS"]
#   make test-gpu        # the same, with WHEELS=DIR / PARTS=... / OUT=... / BUNDLE=DIR / JOBS=N passed through
#
# Parts, in order, each with its own time limit (seconds; the environment variables override them; 9 minutes in all):
#   install   (INSTALL_LIMIT=75) with --wheels DIR: every wheel of DIR, exactly that file (its version), without
#             dependencies, into a target folder (pip install --no-index --no-deps --target DIR, default
#             runs/gpu_site) that goes first on PYTHONPATH, after src/. A torch, triton, nvidia-* or cuda-* wheel is
#             left out: torch is never installed; its version and file are checked before and after
#   preflight (PREFLIGHT_LIMIT=45) scripts/gpu_preflight.py: what pyproject.toml asks for (the runtime dependencies,
#             pytest, and pytest-xdist for parallel workers) and their own requirements are installed, and
#             `import hf_syntax_mt` works; the test parts run only when it passes
#   fast      (FAST_LIMIT=150)   the fast suite (pytest -m "not slow and not gpu") with CUDA visible, on --jobs
#             pytest-xdist workers (default: the CPU count, at most 8; 1: serial)
#   gpu       (GPU_LIMIT=150)    the GPU-only tests (pytest -m gpu, tests/gpu/) on --gpu-jobs workers (default 4):
#             skipped, with the reason, without CUDA
#   bench     (BENCH_LIMIT=120)  benchmarks/gpu/bench_gpu.py --quick (transformer-base, bf16, every method against
#             MarianMTModel; its torch.compile phase only while under half its limit is spent): skipped without CUDA
# then one summary (passed / failed / skipped per part, wall time per part, device, versions, what was skipped and
# why) printed and written to OUT/gpu_check.{json,md}, with each part's log beside it. --bundle DIR (a lent machine's
# $OUT) then copies gpu_check.{json,md} and the bench JSON/MD there, with every log in gpu_check.tar.gz. --dry-run:
# install and preflight only; the other parts are reported with the command they would run. Exit status 0 when no
# part failed or timed out. The limits (not timings) add up to 540 s; what was measured: docs/gpu.md.
# Documented in docs/gpu.md and benchmarks/gpu/README.md (how to download the wheel folder).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
WHEELS="${WHEELS:-}"
PARTS="${PARTS:-install,preflight,fast,gpu,bench}"
TARGET="${TARGET:-runs/gpu_site}"
BUNDLE="${BUNDLE:-}"
DRY_RUN=0
OUT_DIR="${OUT_DIR:-runs/gpu_check}"
JOBS="${JOBS:-}"
GPU_JOBS="${GPU_JOBS:-4}"
FAST_ARGS="${FAST_ARGS:-}"
GPU_ARGS="${GPU_ARGS:-tests}"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --bundle) BUNDLE=$2; shift 2 ;;
    --gpu-jobs) GPU_JOBS=$2; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
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
  case "$part" in install|preflight|fast|gpu|bench) ;; *) echo "gpu_check: --parts: unknown part '$part' (install, preflight, fast, gpu, bench)" >&2; exit 2 ;; esac
done
if [ -n "$WHEELS" ] && [ ! -d "$WHEELS" ]; then echo "gpu_check: --wheels $WHEELS: no such folder" >&2; exit 2; fi
for pair in "jobs:$JOBS" "gpu-jobs:$GPU_JOBS"; do
  value=${pair#*:}
  if [ -n "$value" ] && ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
    echo "gpu_check: --${pair%%:*} $value: give a whole number of workers >= 1 (1: no parallel workers)" >&2; exit 2
  fi
done
if [ -z "$JOBS" ]; then JOBS=$(nproc 2>/dev/null || echo 1); [ "$JOBS" -gt 8 ] && JOBS=8; fi
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
STATUS="$OUT_DIR/parts.tsv"  # part, status, seconds, limit, note
: > "$STATUS"
rm -f "$OUT_DIR"/{torch.txt,fast.xml,gpu.xml,preflight.json,bench_gpu-quick.json,bench_gpu-quick.md}  # a rerun reports itself only
if [ -n "$WHEELS" ]; then mkdir -p "$TARGET" || exit 2; TARGET=$(cd "$TARGET" && pwd); fi
# src/ first, then the wheels' target folder (it shadows the machine's older releases), then what was there
export PYTHONPATH="$ROOT/src${WHEELS:+:$TARGET}${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
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

# --- install: every wheel of the folder as it is (its exact version), no dependencies, into the target folder ------
if wants install; then
  if [ -z "$WHEELS" ]; then
    record install skipped 0 "${INSTALL_LIMIT:-75}" "no --wheels folder given: the packages already installed are used"
  else
    mapfile -t ALL < <(find "$WHEELS" -maxdepth 1 -name '*.whl' | sort)
    WHEEL_FILES=()
    for wheel in "${ALL[@]}"; do
      case "$(basename "$wheel" | tr '[:upper:]_' '[:lower:]-')" in
        torch-*|triton-*|nvidia-*|cuda-*) echo "gpu_check: leaving out $(basename "$wheel"): torch stays as installed" ;;
        *) WHEEL_FILES+=("$wheel") ;;
      esac
    done
    if [ ${#WHEEL_FILES[@]} -eq 0 ]; then
      record install skipped 0 "${INSTALL_LIMIT:-75}" "no wheels in $WHEELS"
    else
      run_part install "${INSTALL_LIMIT:-75}" "$PY" -m pip install --no-index --no-deps --upgrade --target "$TARGET" \
        --no-cache-dir --no-compile --disable-pip-version-check --no-warn-script-location "${WHEEL_FILES[@]}"
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

# --- preflight: what pyproject.toml asks for is installed (scripts/gpu_preflight.py) ------------------------------
PARALLEL=()
if [ "$JOBS" -gt 1 ] || [ "$GPU_JOBS" -gt 1 ]; then PARALLEL=(--parallel); fi
READY=1
if wants preflight || wants fast || wants gpu; then
  run_part preflight "${PREFLIGHT_LIMIT:-45}" "$PY" scripts/gpu_preflight.py "${PARALLEL[@]}" --json "$OUT_DIR/preflight.json"
  [ "$(tail -n 1 "$STATUS" | cut -f2)" = passed ] || READY=0
fi
NOT_READY="the preflight failed: $(grep -E '^gpu_preflight: (missing|wrong version|import)' "$OUT_DIR/preflight.log" 2>/dev/null | sed 's/^gpu_preflight: //' | head -n 3 | paste -sd ';' -) (give --wheels DIR: benchmarks/gpu/README.md)"

# --- the fast suite, the GPU-only tests, the benchmark ---------------------------------------------------------------
# part NAME LIMIT CMD...: run it, or say why not (dry run, preflight failed)
part() {
  local name=$1 limit=$2
  shift 2
  if [ "$READY" != 1 ]; then record "$name" failed 0 "$limit" "$NOT_READY"
  elif [ "$DRY_RUN" = 1 ]; then record "$name" skipped 0 "$limit" "dry run: would run $(printf "%q " "$@")"
  else run_part "$name" "$limit" "$@"; fi
}
xdist() { if [ "$1" -gt 1 ]; then printf '%s\n' -n "$1"; fi; }
if wants fast; then
  mapfile -t XDIST < <(xdist "$JOBS")
  # shellcheck disable=SC2086  # FAST_ARGS: several pytest arguments
  part fast "${FAST_LIMIT:-150}" "$PY" -m pytest -q -p no:cacheprovider -m "not slow and not gpu" -rfE \
    "${XDIST[@]}" --junitxml "$OUT_DIR/fast.xml" $FAST_ARGS
fi
if wants gpu; then
  mapfile -t XDIST < <(xdist "$GPU_JOBS")
  # shellcheck disable=SC2086  # GPU_ARGS: several pytest arguments
  part gpu "${GPU_LIMIT:-150}" "$PY" -m pytest -q -p no:cacheprovider -m gpu -rsfE "${XDIST[@]}" \
    --junitxml "$OUT_DIR/gpu.xml" $GPU_ARGS
fi
if wants bench; then
  if [ "$HAS_CUDA" != 1 ]; then
    record bench skipped 0 "${BENCH_LIMIT:-120}" "needs a CUDA device (torch.cuda.is_available() is False)"
  else
    part bench "${BENCH_LIMIT:-120}" "$PY" benchmarks/gpu/bench_gpu.py --quick --budget "${BENCH_LIMIT:-120}" \
      --output "$OUT_DIR/bench_gpu-quick.json"
  fi
fi

# --- the summary -----------------------------------------------------------------------------------------------------
"$PY" - "$OUT_DIR" "$PARTS" "$DRY_RUN" <<'EOF'
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
    "versions": {n: version(n) for n in ("torch", "transformers", "accelerate", "datasets", "pytest", "pytest-xdist")},
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
    if part == "gpu" and tests and not cuda and tests["passed"] == 0 and not tests["failed"]:
        entry["status"], entry["note"] = "skipped", "no CUDA device: every GPU test skipped"
    summary["parts"][part] = entry
summary["ok"] = all(p["status"] in ("passed", "skipped") for p in summary["parts"].values())
summary["dry_run"] = sys.argv[3] == "1"
summary["seconds"] = round(sum(p["seconds"] for p in summary["parts"].values()), 1)
lines = [f"# GPU check{' (dry run)' if summary['dry_run'] else ''}: {'OK' if summary['ok'] else 'FAILED'}", "",
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
RC=$?
if [ -n "$BUNDLE" ]; then  # a lent machine's $OUT: the summary and the bench result as files, every log in one archive
  mkdir -p "$BUNDLE" && cp "$OUT_DIR"/gpu_check.{json,md} "$BUNDLE"/ \
    && { cp "$OUT_DIR"/bench_gpu-quick.{json,md} "$BUNDLE"/ 2>/dev/null || true; } \
    && tar -czf "$BUNDLE/gpu_check.tar.gz" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")" \
    && echo "gpu_check: bundled into $BUNDLE" || { echo "gpu_check: --bundle $BUNDLE: could not write there" >&2; RC=1; }
fi
exit $RC
