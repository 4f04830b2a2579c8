"""What the benchmark scripts share: paths, the common arguments and the timing of the throughput benchmarks, JSON
result files and the environment they record, and the unit loop of the studies (units already written are skipped,
no unit starts after a time limit).

Every script (``python benchmarks/<folder>/<name>.py``) puts the repository on ``sys.path`` and imports
``from benchmarks.common import ...``; this module imports nothing else of ``benchmarks/``, so it works as a plain
``import common`` too, with this folder on ``sys.path``. Heavy modules (torch, hf_syntax_mt) are imported inside the
functions, so that ``--help`` and ``--list`` stay fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

try:  # as `benchmarks.common` (every script), or as plain `common` with this folder on sys.path
    from benchmarks.arguments import BATCH, NATURAL, POSITIVE, SECONDS, SEED, THREADS, apply_quick, refuse_overwriting
except ImportError:
    from arguments import BATCH, NATURAL, POSITIVE, SECONDS, SEED, THREADS, apply_quick, refuse_overwriting

HERE = Path(__file__).resolve().parent  # benchmarks/
ROOT = HERE.parent  # the repository
DATA = ROOT.parent / "shared" / "data"  # the shared data directory, beside the repository
RESULTS = HERE / "results"


# ------------------------------------------------------------------------------------------------------------------
# Files and the environment
# ------------------------------------------------------------------------------------------------------------------
def read_lines(path: Path) -> list[str]:
    """Lines split at "\n" only, as every line-aligned file of the package (imported late: --help stays fast)."""
    from hf_syntax_mt.data.readers import read_lines as read

    return read(path)


def mean_std(values: list[float]) -> str:
    """A table cell: "-" for no value, the value for one, "mean ± sample std" (two decimals) for more."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json(path: str | Path, data: dict, indent: int = 2, newline: bool = False, **dumps) -> Path:
    """Write ``data`` as JSON (creating the folder); ``newline`` ends the file with one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, **dumps) + ("\n" if newline else ""), encoding="utf-8")
    return path


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def software() -> dict:
    """``{"platform", "torch", "package"}``: what a result file records of the software that made it."""
    import torch

    from hf_syntax_mt import __version__

    return {"platform": platform.platform(), "torch": torch.__version__, "package": __version__}


def git_commit(tree: Path = ROOT) -> str | None:
    """The commit of the checkout at ``tree`` (this repository by default; None outside a git checkout)."""
    try:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None


def relative_path(arg: str) -> str:
    """No absolute path of this machine in a committed file: the shared data becomes ``../shared/data/...``, the
    repository ``./...``, and any other absolute path is written relative to the repository (``--output-dir
    /work/study-runs`` beside a checkout at /work/main: ``../study-runs``); other arguments are kept."""
    for base, label in ((Path(DATA).resolve(), "../shared/data"), (ROOT.resolve(), ".")):
        if arg == str(base) or arg.startswith(str(base) + os.sep):
            return label + arg[len(str(base)) :]
    if os.path.isabs(arg):
        return os.path.relpath(arg, ROOT.resolve())
    return arg


# ------------------------------------------------------------------------------------------------------------------
# Precision
# ------------------------------------------------------------------------------------------------------------------
def cpu_has_native_bf16() -> bool:
    """Whether the CPU multiplies bf16 natively (AVX512-BF16 or AMX). Without it (e.g. AVX2-only CPUs) bf16 autocast
    is emulated and much slower than fp32 (`benchmarks/speed/bench_bf16.py` measured a training step 11-20x slower on an AVX2 EPYC)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def choose_precision(requested: str, device: str) -> str:
    """``requested`` ("fp32", "bf16"), or for "auto" bf16 where the device computes it natively, else fp32."""
    if requested != "auto":
        return requested
    if device == "cuda":
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_native_bf16() else "fp32"


# ------------------------------------------------------------------------------------------------------------------
# Studies: units (a method and a seed), skipped when their JSON exists
# ------------------------------------------------------------------------------------------------------------------
def unit_name(method: str, seed: int) -> str:
    return f"{method}-seed{seed}"


def seed_number(text: str) -> int | None:
    """The seed of a unit name's ``seedK`` part: ASCII digits only (``str.isdigit`` also accepts "²", which ``int``
    refuses), else None."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_unit(name: str, methods: Iterable[str]) -> tuple[str, int]:
    """``"pascal-seed1"`` -> ``("pascal", 1)``; an unknown method or a malformed name stops the script."""
    method, sep, seed = name.rpartition("-seed")
    if not sep or method not in methods or seed_number(seed) is None:
        raise SystemExit(f"unknown unit {name!r}: use METHOD-seedK with METHOD in {sorted(methods)} and K a number "
                         "(0-9 digits)")  # fmt: skip
    return method, int(seed)


class UnitFileError(ValueError):
    """A unit file that is not a complete unit (corrupt, truncated, or missing a field)."""


def load_unit(
    path: str | Path, required: Iterable[str] = ("unit", "method", "seed"), fields: dict | None = None
) -> dict:
    """The record of a unit file ``RESULTS/runs/<unit>.json``, checked: valid JSON (a truncated file is not), an
    object with the ``required`` fields, for the unit the file is named after, and the types of ``fields``
    (`check_fields`). Raises `UnitFileError` naming the file and what is wrong; the fix is to delete the file, so
    that the unit runs again."""
    path = Path(path)
    fix = f"delete {path} to run the unit again"
    try:
        unit = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UnitFileError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno}; a truncated or corrupted "
                            f"unit file): {fix}") from None  # fmt: skip
    except UnicodeDecodeError as e:
        raise UnitFileError(f"{path}: not UTF-8 text (byte {e.start}): {fix}") from None
    if not isinstance(unit, dict):
        raise UnitFileError(f"{path}: a unit file holds a JSON object, got {type(unit).__name__}: {fix}")
    if missing := [k for k in required if k not in unit]:
        raise UnitFileError(f"{path}: the unit file has no field {', '.join(map(repr, missing))}: {fix}")
    if "unit" in unit and unit["unit"] != path.stem:
        raise UnitFileError(f"{path}: field 'unit' is {unit['unit']!r}, not the file's unit {path.stem!r}: {fix}")
    check_fields(path, unit, fields or {})
    return unit


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", dict: "an object", list: "a list",
               bool: "true or false", type(None): "null"}  # fmt: skip


def _expect(path: Path, field: str, value, want) -> None:
    """``value`` is of a type of ``want`` (``float``: any JSON number; never a bool for a number), or one of the values
    of a set ``want``; else `UnitFileError` naming the file and field."""
    if isinstance(want, (set, frozenset)):
        if isinstance(value, str | int | float | type(None)) and value in want:
            return
        expected = f"one of {sorted(want)}"
    else:
        types = want if isinstance(want, tuple) else (want,)
        types = (*types, int) if float in types else types  # a JSON number may be written 30 or 30.0
        if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
            return
        expected = " or ".join(
            _TYPE_NAMES.get(t, t.__name__) for t in dict.fromkeys(types) if not (t is int and float in types)
        )
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise UnitFileError(f"{path}: field {field!r} must be {expected}, got {shown} ({type(value).__name__}): correct "
                        f"it, or delete {path} to run the unit again")  # fmt: skip


def check_fields(path: str | Path, record: dict, spec: dict, where: str = "") -> None:
    """Check a unit file's fields against ``spec``: field -> a type or a tuple of types (``float``: any number), or a
    set of the values allowed; a dict, for an object whose fields are checked against that spec; a one-element list
    ``[spec]``, for a list of objects. ``"*"`` checks every field of an object (an object keyed by test set). Fields
    the record lacks are not checked here (`load_unit`'s ``required`` names those that must be there), except in the
    objects of a list (a bucket is read whole: each needs every field of its spec). Raises
    `UnitFileError` naming the file, the field (dotted: ``tests.test_2016_flickr.bleu``), the type expected and the
    value found."""
    for key, want in spec.items():
        for k in list(record) if key == "*" else [key] if key in record else []:
            name, value = f"{where}{k}", record[k]
            if isinstance(want, dict):
                _expect(Path(path), name, value, dict)
                check_fields(path, value, want, name + ".")
            elif isinstance(want, list):
                _expect(Path(path), name, value, list)
                for i, item in enumerate(value):
                    _expect(Path(path), f"{name}[{i}]", item, dict)
                    if missing := [k for k in want[0] if k not in item]:  # an entry of a list is read whole
                        raise UnitFileError(f"{path}: {name}[{i}] has no field {', '.join(map(repr, missing))}: "
                                            f"correct it, or delete {path} to run the unit again")  # fmt: skip
                    check_fields(path, item, want[0], f"{name}[{i}].")
            else:
                _expect(Path(path), name, value, want)


def check_unit_tests(path: str | Path, tests: dict, expected: Iterable[str], what: str = "field 'tests'") -> None:
    """A unit's scores must cover every test set of its setting (``expected``): a unit missing one would stop the
    aggregate with a bare ``KeyError`` (or compare fewer test sets without a word). `UnitFileError` naming the file and
    the test sets."""
    if missing := [t for t in expected if t not in tests]:
        raise UnitFileError(f"{path}: {what} has no {', '.join(map(repr, missing))} (the setting's test sets are "
                            f"{list(expected)}): the unit is incomplete; delete {path} to run it again")  # fmt: skip


def require_hash(path: str | Path, sha256, what: str, allow_unhashed: bool) -> None:
    """A unit's hypotheses are checked against the sha256 it records; a unit that records none is refused, unless the
    user asks for it (``--allow-unhashed``: only its line count is checked then)."""
    if sha256 is None and not allow_unhashed:
        raise UnitFileError(f"{path}: records no sha256 of {what}, so a replaced or cut hypothesis file would go "
                            "unnoticed: run the unit again (delete the file), or aggregate with --allow-unhashed to "
                            "accept it on its line count alone")  # fmt: skip


def read_hypotheses(unit_path: str | Path, path: str | Path, sha256: str | None = None,
                    lines: int | None = None) -> list[str]:  # fmt: skip
    """The lines of a unit's hypothesis file, checked against its unit file ``unit_path``: the sha256 of the file's
    bytes and the number of sentences it scored, where the unit records them (every unit written since the studies
    began recording them does). A missing file, another sha256 (a file replaced by another unit's, or cut) or
    another line count raise `UnitFileError` naming both files: the aggregate stops rather than compare the wrong
    translations."""
    path, unit_path = Path(path), Path(unit_path)
    fix = f"restore it (git checkout -- {path}), or delete {unit_path} and its hypotheses to run the unit again"
    if not path.is_file():
        raise UnitFileError(f"{unit_path}: its hypotheses {path} are missing: {fix}")
    data = path.read_bytes()
    if sha256 is not None and (got := hashlib.sha256(data).hexdigest()) != sha256:
        raise UnitFileError(f"{path}: sha256 {got[:12]}... is not the {sha256[:12]}... that {unit_path} records for "
                            f"it (the file was replaced or cut): {fix}")  # fmt: skip
    try:
        hypotheses = data.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError as e:
        raise UnitFileError(f"{path}: not UTF-8 text (byte {e.start}): {fix}") from None
    if lines is not None and len(hypotheses) != lines:
        raise UnitFileError(f"{path}: {len(hypotheses)} lines, but {unit_path} scored {lines} sentences: {fix}")
    return hypotheses


def save_unit(runs: str | Path, record: dict, model_dir: str | Path | None = None) -> Path:
    """Write a finished unit's record to ``runs/<unit>.json`` (the evidence that is committed), then remove
    ``model_dir`` (its checkpoints and model; None: keep them). Returns the unit file."""
    path = write_json(Path(runs) / f"{record['unit']}.json", record, indent=1, newline=True)
    if model_dir is not None:
        shutil.rmtree(model_dir, ignore_errors=True)
    return path


def aggregated_units(results: str | Path, load: Callable[[Path], list[dict]]) -> list[dict]:
    """``load(results)``: a study's checked unit files; none yet is said, and the aggregate writes nothing."""
    units = load(Path(results))
    if not units:
        print(f"no unit files under {Path(results) / 'runs'} yet")
    return units


def write_results(results: str | Path, lines: list[str], plot: Callable[[], object] | None = None) -> str:
    """An aggregate's table: ``lines`` written to ``results/results.md`` and printed, then ``plot()``; the text."""
    text = "\n".join(lines) + "\n"
    (Path(results) / "results.md").write_text(text, encoding="utf-8")
    if plot is not None:
        plot()
    print(text)
    return text


def done_units(results: str | Path) -> set[str]:
    """The units whose result file ``RESULTS/runs/<unit>.json`` is a JSON object (`load_unit`, no field required:
    the aggregation checks the fields it reads); a corrupted or truncated file is reported, and its unit is not done
    (it runs again)."""
    runs = Path(results) / "runs"
    done = set()
    for path in sorted(runs.glob("*.json")) if runs.is_dir() else []:
        try:
            load_unit(path, required=())
        except UnitFileError as e:
            print(f"warning: {e}")
            continue
        done.add(path.stem)
    return done


def list_units(names: Iterable[str], done: set[str]) -> None:
    """``--list``: one line per planned unit, ``done`` or ``todo``."""
    for name in names:
        print(f"{'done' if name in done else 'todo'}  {name}")


def study_device(args) -> str:
    """The device of ``args.device`` (``auto``: CUDA when there is one), with ``args.threads`` torch threads."""
    import torch

    torch.set_num_threads(args.threads)
    return args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def resume_or_clear(out: Path, argv: list[str]) -> str | None:
    """An interrupted unit goes on from its last checkpoint under ``out`` (``--resume_from_checkpoint`` appended to
    ``argv``); without one, ``out`` is cleared for a fresh run. Returns the checkpoint, or None."""
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint = get_last_checkpoint(str(out)) if Path(out).is_dir() else None
    if checkpoint is not None:
        print(f"    resuming from {checkpoint}", flush=True)
        argv += ["--resume_from_checkpoint", checkpoint]
    else:
        shutil.rmtree(out, ignore_errors=True)
    return checkpoint


def run_study(args, plan: list[tuple], parse: Callable[[str], tuple], run: Callable[..., object],
              aggregate: Callable[[object], object], name: Callable[..., str] = unit_name) -> int:  # fmt: skip
    """The ``main`` of a unit study (arguments of `add_study_arguments`): ``--list`` the ``plan``'s units,
    ``--aggregate`` only, or run ``run(args, *unit, device)`` for ``--units`` (parsed by ``parse``; default the plan)
    that are not done yet, with `run_plan`, aggregating after each unless ``--no-aggregate``."""
    units = [parse(u) for u in args.units] if args.units else plan
    for flag in ("results", "output_dir"):  # a unit clears its folder under --output-dir: never the data's
        refuse_overwriting(None, args, [flag], folders=["data"])
    done = done_units(args.results)  # a truncated or corrupted unit file is reported and its unit runs again
    if args.list:
        list_units([name(*u) for u in plan], done)
        return 0
    if args.aggregate:
        aggregate(args)
        return 0
    device = study_device(args)
    run_plan(units, done, lambda *unit: run(args, *unit, device), args.time_limit, args.max_units,
             after=None if args.no_aggregate else lambda: aggregate(args), name=name)  # fmt: skip
    return 0


def add_study_arguments(p, results: str | Path | None, output_dir: str | Path | None, threads: int = 1,
                        units_help: str = "units to run (default: the PLAN)") -> None:  # fmt: skip
    """The run-control arguments every unit study shares (`multi30k_study`, `study_round2`, `docnmt_real`,
    `cpu_minute`, `alignment_study`): which units (``--units``, ``--list``, ``--time-limit``, ``--max-units``), where (``--device``,
    ``--threads``, ``--data``, ``--results``, ``--output-dir``), and ``--aggregate`` / ``--no-aggregate`` /
    ``--quick``. A ``results`` or ``output_dir`` of None leaves the default to the study (set after parsing). Check
    ``--quick`` with `refuse_quick_evidence` after parsing."""
    p.add_argument("--units", nargs="+", help=units_help)
    p.add_argument("--time-limit", type=SECONDS, default=None, help="start no new unit after this many minutes")
    p.add_argument("--max-units", type=POSITIVE, default=None, help="run at most N units in this invocation")
    p.add_argument("--list", action="store_true", help="print which units are done and stop")
    p.add_argument("--aggregate", action="store_true", help="only rebuild the tables from the unit files")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--threads", type=THREADS, default=threads, help="torch threads on the CPU")
    p.add_argument("--data", default=str(DATA), help="the shared data directory")
    p.add_argument("--results", default=results and str(results), help="unit files and tables (committed)")
    p.add_argument("--output-dir", default=output_dir and str(output_dir),
                   help="data, tokenizers, models (not committed)")  # fmt: skip
    p.add_argument("--no-aggregate", action="store_true", help="do not rebuild the tables after each unit (parallel "
                   "invocations into one --results; run --aggregate once at the end)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="tiny budget: plumbing check (write to another --results)")
    p.add_argument("--allow-unhashed", action="store_true", help="aggregate unit files that record no sha256 of their "
                   "hypotheses (written before the studies recorded them): their files are then checked by line count "
                   "only")  # fmt: skip


def refuse_quick_evidence(p, args, quick: bool | None = None, path=None, flag: str = "--results") -> None:
    """``--quick`` results are not evidence: refuse them under ``benchmarks/results`` (``path``, given as ``flag``;
    by default ``args.results`` when ``args.quick``)."""
    quick = args.quick if quick is None else quick
    path = args.results if path is None else path
    if quick and Path(path).resolve().is_relative_to(RESULTS.resolve()):
        p.error(f"--quick results are not evidence: give {flag} outside {RESULTS} (e.g. /tmp/quick)")


def run_plan(plan: Iterable[tuple], done: set[str], run: Callable[..., object],
             time_limit: float | None = None, max_units: int | None = None,
             after: Callable[[], object] | None = None, name: Callable[..., str] = unit_name) -> int:  # fmt: skip
    """Run ``run(*unit)`` for each unit of ``plan`` (``(method, seed)``, or any tuple that ``name`` turns into the
    unit's name) not in ``done``, then ``after()``; start none after
    ``time_limit`` minutes or ``max_units`` units. A unit that raises is reported (traceback) and the plan goes on
    with the next one (a long unattended study is not stopped by one broken unit); the failures are raised together
    at the end. Returns the number of units run."""
    start, ran, failed = time.perf_counter(), 0, []
    for unit in plan:
        unit_label = name(*unit)
        if unit_label in done:
            print(f"skip {unit_label} (done)")
            continue
        if time_limit is not None and (time.perf_counter() - start) / 60 > time_limit:
            print(f"time limit of {time_limit} minutes reached: stopping before {unit_label}")
            break
        if max_units is not None and ran >= max_units:
            break
        try:
            run(*unit)
        except Exception:  # noqa: BLE001 (reported, and raised again below)
            traceback.print_exc()
            print(f"unit {unit_label} FAILED: going on with the next unit", flush=True)
            failed.append(unit_label)
            continue
        ran += 1
        if after is not None:
            after()
    if failed:
        raise RuntimeError(f"{len(failed)} unit(s) failed: {', '.join(failed)} (tracebacks above); {ran} finished")
    return ran


# ------------------------------------------------------------------------------------------------------------------
# Throughput benchmarks (bench_*.py): a method against vanilla Marian of the same dims
# ------------------------------------------------------------------------------------------------------------------
def add_common_arguments(p, output: str) -> None:
    """The arguments every throughput benchmark shares: threads, model dims, the synthetic batch, rounds, output."""
    p.add_argument("--threads", type=THREADS, default=2)
    p.add_argument("--d-model", type=POSITIVE, default=256)
    p.add_argument("--layers", type=POSITIVE, default=6)
    p.add_argument("--heads", type=POSITIVE, default=8)
    p.add_argument("--vocab-size", type=POSITIVE, default=2000)
    p.add_argument("--batch-size", type=BATCH, default=32)
    p.add_argument("--min-words", type=POSITIVE, default=10)
    p.add_argument("--max-words", type=POSITIVE, default=60)
    p.add_argument("--new-tokens", type=POSITIVE, default=32)
    p.add_argument("--rounds", type=POSITIVE, default=15)
    p.add_argument("--warmup", type=NATURAL, default=3)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--output", default=output)


def parse_quick(p):
    """Parse `p` with a `--quick` flag (d_model 128, 3 layers, 5 rounds, batch 16); set threads and seed."""
    import torch

    p.add_argument("--quick", action="store_true", help="small model, 5 rounds")
    args = p.parse_args()
    apply_quick(p, args, None, dict(d_model=128, layers=3, rounds=5, warmup=1, batch_size=16))
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return args


def sync(device):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train_step(model, optimizer, inputs):
    loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def generate(model, inputs, new_tokens):
    gen_inputs = {k: v for k, v in inputs.items() if k != "labels"}
    return model.generate(
        **gen_inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_beams=1, do_sample=False
    )


def time_interleaved(fns: dict, rounds: int, warmup: int, device: str) -> dict[str, list[float]]:
    """Seconds of each of ``fns`` per round, after ``warmup`` untimed rounds; the order alternates every round."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for r in range(rounds):
        order = list(fns) if r % 2 == 0 else list(reversed(fns))
        for name in order:
            sync(device)
            start = time.perf_counter()
            fns[name]()
            sync(device)
            times[name].append(time.perf_counter() - start)
    return times


def time_training(models: dict, inputs: dict, args, device: str = "cpu") -> dict[str, list[float]]:
    """Seconds of one AdamW step (lr 1e-4, trainable parameters only) per model, each on ``inputs[name]``,
    interleaved over ``args.rounds`` rounds after ``args.warmup``."""
    import torch

    for m in models.values():
        m.train()
    optimizers = {
        n: torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4) for n, m in models.items()
    }
    return time_interleaved(
        {n: (lambda n=n: train_step(models[n], optimizers[n], inputs[n])) for n in models},
        args.rounds,
        args.warmup,
        device,
    )


def time_generation(models: dict, inputs: dict, args, rounds: int, device: str = "cpu", decode=generate):
    """Seconds of ``decode(model, inputs[name], args.new_tokens)`` per model in eval mode, interleaved, one warm-up."""
    import torch

    for m in models.values():
        m.eval()
    with torch.inference_mode():
        return time_interleaved(
            {n: (lambda n=n: decode(models[n], inputs[n], args.new_tokens)) for n in models}, rounds, 1, device
        )


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {k: statistics.median(v) for k, v in times.items()}


def result_header(args, benchmark: str, method: str, n_src: int, n_tgt: int) -> dict:
    """The fields every throughput result starts with: what ran, where, with which settings and batch."""
    import torch

    import hf_syntax_mt

    device = getattr(args, "device", "cpu")
    return {
        "benchmark": benchmark,
        "method": method,
        "quick": args.quick,
        "package": hf_syntax_mt.__version__,
        "torch": torch.__version__,
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "cpu": cpu_name(),
        "threads": args.threads,
        "config": {k: v for k, v in vars(args).items() if k != "output"},
        "batch": {"sentences": args.batch_size, "source_tokens": n_src, "target_tokens": n_tgt},
    }


def timing_fields(args, med: dict, gmed: dict, n_src: int, n_tgt: int) -> dict:
    """Median step/generation seconds per model and the token rates derived from them."""
    return {
        "train_step_seconds_median": med,
        "generate_seconds_median": gmed,
        "train_tokens_per_second": {k: (n_src + n_tgt) / v for k, v in med.items()},
        "generate_tokens_per_second": {k: args.batch_size * args.new_tokens / v for k, v in gmed.items()},
    }
