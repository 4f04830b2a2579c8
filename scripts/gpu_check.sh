#!/usr/bin/env bash
# The GPU check in one command (issues 43, 48, 57): on a machine whose Python already has torch with CUDA, and no
# network.
#
#   scripts/gpu_check.sh [--wheels DIR] [--target DIR] [--parts install,preflight,fast,gpu,bench] [--out DIR]
#                        [--bundle DIR] [--python PY] [--jobs N] [--gpu-jobs N] [--dry-run]
#                        [--fast-args "PYTEST ARGS"] [--gpu-args "PYTEST ARGS"]
#   make test-gpu        # the same, with WHEELS=DIR / PARTS=... / OUT=... / BUNDLE=DIR / JOBS=N passed through
#
# Parts, in order, each with its own time limit (seconds; the environment variables override them; 570 s in all):
#   install   (INSTALL_LIMIT=45) with --wheels DIR: every wheel file of DIR, exactly that file (its version), without
#             dependencies, into a target folder (pip install --no-index --no-deps --target DIR, default
#             runs/gpu_site, emptied first: a machine kept warm keeps it) that goes first on PYTHONPATH, after src/.
#             A torch, triton, nvidia-* or cuda-* wheel is left out: torch is never installed; its version and file
#             are checked before and after
#   preflight (PREFLIGHT_LIMIT=45) scripts/gpu_preflight.py: what pyproject.toml asks for (the runtime dependencies,
#             pytest, and pytest-xdist for parallel workers) and their own requirements are installed, and
#             `import hf_syntax_mt` works; the test parts run only when it passes
#   fast      (FAST_LIMIT=150)   the fast suite (pytest -m "not slow and not gpu") with CUDA visible, on --jobs
#             pytest-xdist workers (default: the CPU count, at most 8; 1: serial)
#   gpu       (GPU_LIMIT=150)    the GPU-only tests (pytest -m gpu, tests/gpu/) on --gpu-jobs workers (default 4)
#   bench     (BENCH_LIMIT=180)  benchmarks/gpu/bench_gpu.py --quick --budget BENCH_LIMIT (transformer-base, bf16,
#             every method against MarianMTModel; it cuts itself to the limit and says what it cut)
# Each part's log and report go to OUT as it runs, and the summary (passed / failed / skipped per part, wall time
# per part, device, versions, what was skipped and why) is written to OUT/gpu_check.{json,md} as each part starts
# and ends (scripts/gpu_check_summary.py), so a run stopped by a time limit (SIGINT or SIGTERM: the running part is
# stopped and recorded) has what it did. --bundle DIR (a lent machine's $OUT) gets gpu_check.{json,md}, the bench
# JSON/MD and every log in gpu_check.tar.gz at the same moments. --dry-run: install and preflight only; the other
# parts are reported with the command they would run. Exit status 0 only when something was checked and nothing
# failed: no part failed or timed out, one passed at least, and (outside a dry run) torch sees CUDA and a GPU part
# (gpu, bench) was asked for: without CUDA it says "checked nothing: no CUDA device" and exits 1, whatever passed;
# 2 for bad options, no part, or a --python that cannot import torch.
# The limits (not timings) add up to 570 s; what was measured: docs/gpu.md. Documented in docs/gpu.md and
# benchmarks/gpu/README.md (how to download the wheel folder).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
WHEELS="${WHEELS:-}"
PARTS="${PARTS:-install,preflight,fast,gpu,bench}"
DEFAULT_TARGET=runs/gpu_site
TARGET="${TARGET:-$DEFAULT_TARGET}"
BUNDLE="${BUNDLE:-}"
DRY_RUN=0
OUT_DIR="${OUT_DIR:-runs/gpu_check}"
JOBS="${JOBS:-}"
GPU_JOBS="${GPU_JOBS:-4}"
FAST_ARGS="${FAST_ARGS:-}"
GPU_ARGS="${GPU_ARGS:-tests}"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }
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
if [ -z "${PARTS//,/}" ]; then
  echo "gpu_check: --parts '$PARTS': give at least one part (install, preflight, fast, gpu, bench): none checks nothing" >&2
  exit 2
fi
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
# what the check reads from torch, once: a Python that cannot import torch (or is no Python: --python /bin/true
# exits 0 and prints nothing) is refused before anything runs
PROBE='import json, platform, torch
cuda = torch.cuda.is_available()
print("gpu_check_device " + json.dumps({"python": platform.python_version(), "torch": torch.__version__,
      "torch_file": torch.__file__, "cuda": torch.version.cuda, "cuda_available": cuda,
      "device": torch.cuda.get_device_name(0) if cuda else
      f"CPU only ({platform.machine()}): torch sees no CUDA device"}))'
DEVICE=$("$PY" -c "$PROBE" 2>/dev/null | grep '^gpu_check_device ' | tail -n 1)
if [ -z "$DEVICE" ]; then
  echo "gpu_check: --python $PY: not a Python that can import torch: this check runs on a Python that already has" \
       "torch (with CUDA)" >&2
  exit 2
fi
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
STATUS="$OUT_DIR/parts.tsv"  # part, status, seconds, limit, note
: > "$STATUS"
rm -f "$OUT_DIR"/{torch.txt,fast.xml,gpu.xml,preflight.json,bench_gpu-quick.json,bench_gpu-quick.md,gpu_check.json,gpu_check.md}  # a rerun reports itself only
printf '%s\n' "${DEVICE#gpu_check_device }" > "$OUT_DIR/device.json"
HAS_CUDA=$(grep -c '"cuda_available": true' "$OUT_DIR/device.json")
if [ -n "$BUNDLE" ]; then mkdir -p "$BUNDLE" && BUNDLE=$(cd "$BUNDLE" && pwd) || { echo "gpu_check: --bundle $BUNDLE: cannot make it" >&2; exit 2; }; fi
if [ -n "$WHEELS" ]; then mkdir -p "$TARGET" || exit 2; TARGET=$(cd "$TARGET" && pwd); fi
# src/ first, then the wheels' target folder (it shadows the machine's older releases), then what was there
export PYTHONPATH="$ROOT/src${WHEELS:+:$TARGET}${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
wants() { [[ ",$PARTS," == *",$1,"* ]]; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$STATUS"; }
torch_id() { "$PY" -c 'import torch; print(torch.__version__, torch.__file__)' 2>/dev/null; }

# the summary and the bundle, now: as each part starts (`checkpoint PART`) and ends (`checkpoint`), and the verdict
# at the end (`checkpoint final`)
STOPPED=""
checkpoint() {
  local args=("$OUT_DIR" "$PARTS" "$DRY_RUN") rc
  case "${1:-}" in final) ;; "") args+=(--partial) ;; *) args+=(--partial --running "$1") ;; esac
  [ -n "$STOPPED" ] && args+=(--stopped "$STOPPED")
  "$PY" scripts/gpu_check_summary.py "${args[@]}"
  rc=$?
  if [ -n "$BUNDLE" ]; then  # a lent machine's $OUT: the summary and the bench result as files, every log in one archive
    local tmp
    tmp=$(mktemp) && cp "$OUT_DIR"/gpu_check.{json,md} "$BUNDLE"/ \
      && { cp "$OUT_DIR"/bench_gpu-quick.{json,md} "$BUNDLE"/ 2>/dev/null || true; } \
      && tar -czf "$tmp" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")" && mv -f "$tmp" "$BUNDLE/gpu_check.tar.gz" \
      && chmod 644 "$BUNDLE/gpu_check.tar.gz" || { echo "gpu_check: --bundle $BUNDLE: could not write there" >&2; rc=1; }
    rm -f "$tmp"
  fi
  return $rc
}

# a time limit's signal: stop the running part (it gets SIGINT: pytest writes its report, the bench its JSON), record
# it, skip the rest, write the summary and the bundle
PART_PID=""
on_signal() {
  STOPPED="stopped by SIG$1"
  trap '' INT TERM
  if [ -n "$PART_PID" ] && kill -0 "$PART_PID" 2>/dev/null; then
    kill -INT "$PART_PID" 2>/dev/null
    ( sleep 15; kill -KILL "$PART_PID" 2>/dev/null ) &
  fi
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

# run PART LIMIT CMD...: the command under `timeout` (SIGINT first: pytest then stops and still writes its report)
run_part() {
  local part=$1 limit=$2 start rc status note=""
  shift 2
  echo "=== gpu_check: $part (limit ${limit}s): $*"
  checkpoint "$part"
  start=$(date +%s%N)
  timeout --signal=INT --kill-after=20 "$limit" "$@" > "$OUT_DIR/$part.log" 2>&1 &
  PART_PID=$!
  wait "$PART_PID"
  rc=$?
  while kill -0 "$PART_PID" 2>/dev/null; do wait "$PART_PID"; rc=$?; done  # a signal interrupted the first wait
  PART_PID=""
  tail -n 5 "$OUT_DIR/$part.log"
  case $rc in 0) status=passed ;; 124|137) status=timed_out; note="stopped at its ${limit}s limit" ;;
    5) status=skipped; note="no tests selected" ;; *) status=failed; note="exit status $rc" ;; esac
  if [ -n "$STOPPED" ]; then status=interrupted; note="$STOPPED while it ran (exit status $rc)"; fi
  local ms=$((($(date +%s%N) - start) / 1000000))
  record "$part" "$status" "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$limit" "$note"
  checkpoint
}
finish() { checkpoint final; exit $?; }

TORCH_BEFORE=$(torch_id)
# --- install: every wheel file of the folder as it is (its exact version), no dependencies, into the target folder --
if wants install; then
  if [ -z "$WHEELS" ]; then
    record install skipped 0 "${INSTALL_LIMIT:-45}" "no --wheels folder given: the packages already installed are used"
  else
    mapfile -t ALL < <(find -L "$WHEELS" -maxdepth 1 -type f -name '*.whl' | sort)  # files only: not a folder '.whl'
    WHEEL_FILES=()
    for wheel in "${ALL[@]}"; do
      case "$(basename "$wheel" | tr '[:upper:]_' '[:lower:]-')" in
        torch-*|triton-*|nvidia-*|cuda-*) echo "gpu_check: leaving out $(basename "$wheel"): torch stays as installed" ;;
        *) WHEEL_FILES+=("$wheel") ;;
      esac
    done
    if [ ${#WHEEL_FILES[@]} -eq 0 ]; then
      record install skipped 0 "${INSTALL_LIMIT:-45}" "no wheel files in $WHEELS"
    elif [ -n "$(ls -A "$TARGET")" ] && [ ! -e "$TARGET/.gpu_check_target" ] \
         && [ "$TARGET" != "$ROOT/$DEFAULT_TARGET" ]; then
      record install failed 0 "${INSTALL_LIMIT:-45}" "--target $TARGET holds files the check did not install: give an empty or new folder"
    else
      # emptied first: a machine kept warm between runs keeps it, and an older install would be tested instead
      find "$TARGET" -mindepth 1 -maxdepth 1 -exec rm -rf {} + && : > "$TARGET/.gpu_check_target"
      run_part install "${INSTALL_LIMIT:-45}" "$PY" -m pip install --no-index --no-deps --upgrade --target "$TARGET" \
        --no-cache-dir --no-compile --disable-pip-version-check --no-warn-script-location "${WHEEL_FILES[@]}"
    fi
  fi
fi
[ -n "$STOPPED" ] && finish
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
[ -n "$STOPPED" ] && finish
NOT_READY="the preflight failed: $(grep -E '^gpu_preflight: (missing|wrong version|import)' "$OUT_DIR/preflight.log" 2>/dev/null | sed 's/^gpu_preflight: //' | head -n 3 | paste -sd ';' -) (give --wheels DIR: benchmarks/gpu/README.md)"

# --- the fast suite, the GPU-only tests, the benchmark ---------------------------------------------------------------
# part NAME LIMIT CMD...: run it, or say why not (dry run, preflight failed)
part() {
  local name=$1 limit=$2
  shift 2
  if [ "$READY" != 1 ]; then record "$name" failed 0 "$limit" "$NOT_READY"
  elif [ "$DRY_RUN" = 1 ]; then record "$name" skipped 0 "$limit" "dry run: would run $(printf "%q " "$@")"
  else run_part "$name" "$limit" "$@"; fi
  [ -n "$STOPPED" ] && finish
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
    record bench skipped 0 "${BENCH_LIMIT:-180}" "needs a CUDA device (torch.cuda.is_available() is False)"
  else
    part bench "${BENCH_LIMIT:-180}" "$PY" benchmarks/gpu/bench_gpu.py --quick --budget "${BENCH_LIMIT:-180}" \
      --output "$OUT_DIR/bench_gpu-quick.json"
  fi
fi
finish
