"""`scripts/gpu_check.sh` and its preflight (`scripts/gpu_preflight.py`), on the CPU.

The preflight runs in real environments that lack a distribution (a venv whose site-packages are this one's minus
the hidden distribution's files: both its import and its metadata are gone): without `evaluate` (which pyproject no
longer asks for) it passes, without `datasets` (or `dill`, which datasets needs) it fails naming what is missing and
who asks for it. Its requirements are pyproject.toml's, and they cover every module-level import of the package and
of the tests. Bad options are refused before anything runs. End to end (slow): the install mode takes the folder's
wheels into a target folder without dependencies and leaves a torch wheel out, and without CUDA the GPU parts are
reported as skipped with the reason."""

import ast
import importlib.metadata as md
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
PREFLIGHT = ROOT / "scripts" / "gpu_preflight.py"


@pytest.fixture(scope="module")
def preflight():
    spec = importlib.util.spec_from_file_location("gpu_preflight", PREFLIGHT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def top_level_names(distribution: str, folder: Path) -> set[str]:
    """The entries of `folder` a distribution installed there (its packages, modules and .dist-info)."""
    names = set()
    for dist in md.distributions(name=distribution, path=[str(folder)]):
        names |= {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}
    return names


def site_folders() -> list[Path]:
    """Where this Python finds installed distributions, in its order: the folders of `sys.path` that hold some (the
    GPU check's target folder of wheels on PYTHONPATH, ahead of the machine's older releases; site-packages; folders
    a .pth file adds), then site-packages in any case."""
    paths = sysconfig.get_paths()
    folders = [Path(p) for p in sys.path if p and Path(p).is_dir() and any(Path(p).glob("*.dist-info"))]
    folders += [Path(paths["purelib"]), Path(paths["platlib"])]
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def python_without(folder: Path, *hidden: str) -> str:
    """A Python with this one's packages but `hidden` (distribution names): a venv without pip whose one .pth adds,
    for each of `site_folders()` in order, a folder of links to its entries except the hidden distributions' files.
    (The GPU check runs the tests with its target folder on PYTHONPATH; the child's PYTHONPATH is src/ only.)"""
    views = []
    for i, site in enumerate(site_folders()):
        drop = set().union(*(top_level_names(name, site) for name in hidden))
        view = folder / f"site-view-{i}"
        view.mkdir(parents=True)
        for entry in site.iterdir():  # no .pth file: the folders they add are among site_folders() already
            if entry.name not in drop and entry.suffix != ".pth":
                (view / entry.name).symlink_to(entry)
        views.append(view)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True, timeout=120)
    python = folder / "venv" / "bin" / "python"
    venv_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    lines = "".join(f"import site; site.addsitedir({str(view)!r})\n" for view in views)
    Path(venv_site, "site-view.pth").write_text(lines)
    return str(python)


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}


def run_preflight(python: str, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = out / "preflight.json"
    run = subprocess.run([python, str(PREFLIGHT), "--json", str(report), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env())  # fmt: skip
    return run, json.loads(report.read_text())


@pytest.fixture(scope="module")
def without_datasets(tmp_path_factory):
    return python_without(tmp_path_factory.mktemp("no-datasets"), "datasets", "evaluate")


def test_the_view_hides_the_distribution_and_keeps_the_rest(without_datasets):
    probe = ("import importlib.util as u, importlib.metadata as m, torch\n"
             "print(u.find_spec('datasets') is None, u.find_spec('transformers') is not None)\n"
             "try:\n    m.version('datasets'); print(False)\nexcept m.PackageNotFoundError:\n    print(True)")  # fmt: skip
    out = subprocess.run([without_datasets, "-c", probe], capture_output=True, text=True, timeout=300, env=env())
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


def test_the_view_keeps_a_target_folder_on_pythonpath_first(tmp_path, monkeypatch):
    """The GPU check installs its wheels into a folder on PYTHONPATH, ahead of the machine's older releases (the H200
    run's hypothesis 6.168.3): the view keeps that order, so the child sees the folder's release, and hides a
    distribution there too."""
    target = tmp_path / "target"
    for name, version in (("hypothesis", "999.0"), ("gpu_check_probe", "1.0")):
        info = target / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    monkeypatch.syspath_prepend(str(target))  # as PYTHONPATH puts it
    assert site_folders()[0] == target.resolve()
    probe = "import importlib.metadata as m\nfor n in ('hypothesis', 'gpu_check_probe'):\n    try:\n        print(m.version(n))\n    except m.PackageNotFoundError:\n        print('none')"
    seen = {}
    for label, hidden in (("all", ()), ("hidden", ("gpu_check_probe",))):
        python = python_without(tmp_path / label, *hidden)
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300, env=env())
        seen[label] = out.stdout.split()
    assert seen == {"all": ["999.0", "1.0"], "hidden": ["999.0", "none"]}


def test_without_evaluate_the_preflight_passes(tmp_path):
    """pyproject no longer asks for `evaluate`: a machine without it (the lent H100's image) is ready."""
    python = python_without(tmp_path, "evaluate")
    run, report = run_preflight(python, tmp_path, "--parallel")
    assert run.returncode == 0 and report["ok"], run.stdout + run.stderr
    assert not report["missing"] and not report["wrong_version"] and "import hf_syntax_mt: ok" in report["import"]
    assert "evaluate" not in " ".join(report["required"]) and "evaluate" not in report["versions"]
    assert "gpu_preflight: ok" in run.stdout


def test_without_datasets_the_preflight_names_it(without_datasets, tmp_path):
    run, report = run_preflight(without_datasets, tmp_path)
    assert run.returncode == 1 and not report["ok"]
    assert report["missing"] == ["datasets>=4.0.0 (asked for by pyproject.toml)"], report["missing"]
    assert "gpu_preflight: missing: datasets>=4.0.0 (asked for by pyproject.toml)" in run.stdout
    assert report["import"] is None  # no import tried over a known gap


def test_a_missing_requirement_of_a_requirement_is_named_with_who_asks(tmp_path):
    python = python_without(tmp_path, "dill")
    run, report = run_preflight(python, tmp_path)
    assert run.returncode == 1
    askers = {  # the installed distributions whose requirements name dill
        f"{d.metadata['Name']} {d.version}" for d in md.distributions()
        if any(r.split(";")[0].replace(" ", "").lower().startswith("dill") for r in d.requires or [])
    }  # fmt: skip
    assert report["missing"] and all(entry.startswith("dill") for entry in report["missing"])
    assert f"datasets {md.version('datasets')}" in " ".join(report["missing"])  # the datasets pyproject asks for
    named = {entry.split("asked for by ")[1].rstrip(")") for entry in report["missing"]}
    assert named <= askers, (named, askers)


def test_the_requirements_are_pyprojects_and_cover_every_import(preflight):
    """Everything the package and the tests import at module level (third-party) is a distribution the preflight
    requires, directly or as a requirement of one; nothing else from the dev extra is required but the runner."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = preflight.required(ROOT / "pyproject.toml", parallel=True)
    assert specs == project["dependencies"] + ["pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.170"]
    report = preflight.check(specs)
    assert report["missing"] == [] and report["wrong_version"] == []
    closure = set(report["versions"])
    owners = md.packages_distributions()
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"hf_syntax_mt", "hf_syntax_mt_cli", "benchmarks"}
    imported = {}
    for folder in ("src", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if "evaluate_modules" in path.parts:  # `evaluate` module scripts: run only by evaluate.load (the extra)
                continue
            for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level: every run imports these
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []  # fmt: skip
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local:
                        imported.setdefault(top, path.relative_to(ROOT))
    assert {"torch", "transformers", "datasets", "pytest"} <= set(imported)  # the scan sees the real imports
    for module, where in imported.items():
        distributions = {preflight.norm(d) for d in owners.get(module, [])}
        assert distributions & closure, (
            f"{where} imports {module} ({distributions}), which the preflight does not require"
        )


@pytest.mark.parametrize(
    "args, message",
    [(["--parts", "fast,nonsense"], "unknown part 'nonsense'"), (["--wheels", "/no/such/folder"], "no such folder"),
     (["--frobnicate"], "unknown option --frobnicate"), (["--jobs", "0"], "--jobs 0: give a whole number"),
     (["--gpu-jobs", "two"], "--gpu-jobs two: give a whole number"),
     (["--parts", ""], "--parts '': give at least one part"), (["--parts", ","], "give at least one part"),
     (["--python", "/bin/true"], "--python /bin/true: not a Python that can import torch"),
     (["--python", "/no/such/python"], "not a Python that can import torch")],
)  # fmt: skip
def test_bad_options_are_refused_before_anything_runs(tmp_path, args, message):
    run = gpu_check(sys.executable, tmp_path / "out", *args)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "out" / "gpu_check.json").exists()


def gpu_check(python: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "--python", python, "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


def repack(distribution: str, folder: Path) -> Path:
    """A wheel of an installed distribution, made from its installed files (no network): what a wheel folder holds."""
    dist = md.distribution(distribution)
    name, version = dist.metadata["Name"].replace("-", "_"), dist.version
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        record = []
        for f in dist.files:
            if f.parts[0] == ".." or "__pycache__" in f.parts or f.name in ("RECORD", "INSTALLER", "REQUESTED"):
                continue
            z.write(f.locate(), str(f))
            record.append(f"{f},,")
        info = f"{name}-{version}.dist-info"
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def fake_torch_wheel(folder: Path) -> Path:
    wheel = folder / "torch-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("torch/__init__.py", "raise ImportError('the check installed a torch wheel')\n")
        info = "torch-0.0.1.dist-info"
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"torch/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return wheel


@pytest.mark.slow
def test_dry_run_installs_the_folder_without_dependencies_and_never_torch(without_datasets, tmp_path):
    """Without datasets the check fails at its preflight (no test part runs); with a folder holding a datasets
    wheel and a torch wheel, the install mode puts datasets (that exact version) into the target folder, leaves torch
    out, and the dry run passes."""
    run = gpu_check(without_datasets, tmp_path / "bare", "--dry-run", "--parts", "preflight,fast")
    summary = json.loads((tmp_path / "bare" / "gpu_check.json").read_text())
    assert run.returncode == 1 and not summary["ok"]
    assert summary["parts"]["preflight"]["status"] == "failed"
    assert "datasets>=4.0.0" in summary["parts"]["preflight"]["note"]
    assert summary["parts"]["fast"]["status"] == "failed" and "datasets" in summary["parts"]["fast"]["note"]

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    repack("datasets", wheels)
    fake_torch_wheel(wheels)
    target = tmp_path / "site"
    run = gpu_check(without_datasets, tmp_path / "out", "--dry-run", "--wheels", str(wheels), "--target", str(target),
                    "--bundle", str(tmp_path / "bundle"))  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert summary["ok"] and summary["dry_run"] and summary["versions"]["datasets"] == md.version("datasets")
    assert summary["parts"]["install"]["note"] == f"torch unchanged: {torch.__version__}"
    assert summary["parts"]["preflight"]["status"] == "passed"
    assert "leaving out torch-0.0.1-py3-none-any.whl" in run.stdout and not (target / "torch").exists()
    assert (target / "datasets" / "__init__.py").exists() and (
        target / f"datasets-{md.version('datasets')}.dist-info"
    ).exists()
    for part in ("fast", "gpu"):
        assert summary["parts"][part]["status"] == "skipped" and "dry run: would run" in summary["parts"][part]["note"]
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == [
        "gpu_check.json",
        "gpu_check.md",
        "gpu_check.tar.gz",
    ]


def tiny_wheel(folder: Path, name: str = "gpu_check_probe", version: str = "1.0") -> Path:
    """A wheel of one module, `name` (its `VERSION` is `version`)."""
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{name}.py", f"VERSION = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{name}.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return wheel


def test_the_install_takes_wheel_files_only_into_a_target_it_empties_first(tmp_path):
    """Issue 57: `find -name '*.whl'` took a folder named `.whl` (the device notes' name for the wheel folder) and pip
    failed on it. Folders are left out, the target folder is emptied first (a warm machine kept the first run's
    install), and a target holding files the check did not put there is refused, not emptied."""
    wheels = tmp_path / "wheels"
    (wheels / ".whl").mkdir(parents=True)
    (wheels / "not-a-file.whl").mkdir()
    tiny_wheel(wheels)
    target = tmp_path / "site"
    target.mkdir()
    (target / ".gpu_check_target").touch()  # an earlier run's install
    (target / "stale_module.py").write_text("")
    args = ["--dry-run", "--parts", "install", "--wheels", str(wheels), "--target", str(target)]
    run = gpu_check(sys.executable, tmp_path / "out", *args, "--bundle", str(tmp_path / "bundle"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in target.iterdir()) == [".gpu_check_target", "gpu_check_probe-1.0.dist-info",
                                                         "gpu_check_probe.py"]  # fmt: skip
    log = (tmp_path / "out" / "install.log").read_text()
    assert "gpu_check_probe-1.0-py3-none-any.whl" in log and "not-a-file" not in log and "/.whl" not in log
    summary = json.loads((tmp_path / "bundle" / "gpu_check.json").read_text())
    assert summary["ok"] and summary["parts"]["install"]["status"] == "passed"

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    run = gpu_check(sys.executable, tmp_path / "out2", *args[:-1], str(foreign))
    assert run.returncode == 1 and (foreign / "keep.txt").read_text() == "mine"
    install = json.loads((tmp_path / "out2" / "gpu_check.json").read_text())["parts"]["install"]
    assert install["status"] == "failed" and "holds files the check did not install" in install["note"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the bench part runs (the check itself)")
def test_a_gpu_part_asked_for_without_cuda_fails_the_check(tmp_path):
    """Issue 57: `--parts bench` without CUDA printed "GPU check: OK" having checked nothing."""
    run = gpu_check(sys.executable, tmp_path / "out", "--parts", "bench", "--bundle", str(tmp_path / "bundle"))
    assert run.returncode == 1 and "# GPU check: FAILED" in run.stdout, run.stdout + run.stderr
    summary = json.loads((tmp_path / "bundle" / "gpu_check.json").read_text())
    assert not summary["ok"] and summary["parts"]["bench"]["status"] == "skipped"
    assert summary["problems"] == [
        "checked nothing: no CUDA device (torch.cuda.is_available() is False): bench could not run; run the check on a "
        "Python whose torch sees a GPU",
        "nothing was checked: no part passed",
    ]


@pytest.mark.slow
def test_a_check_stopped_by_a_signal_records_the_running_part_and_bundles_what_it_did(tmp_path):
    """Issue 57: results were copied to the bundle only at the end, so a run cut off by its time limit returned
    nothing. The bundle is written as each part starts and ends; a SIGTERM stops the running part (pytest gets SIGINT
    and writes its report), records it, and writes the verdict: the parts it did, the one it stopped, none after."""
    import signal
    import time

    sleeper = tmp_path / "tests_sleep" / "test_sleep.py"
    sleeper.parent.mkdir()
    sleeper.write_text("import time\n\ndef test_quick():\n    pass\n\ndef test_sleeps():\n    time.sleep(120)\n")
    bundle = tmp_path / "bundle"
    command = ["bash", str(SCRIPT), "--python", sys.executable, "--out", str(tmp_path / "out"), "--bundle",
               str(bundle), "--parts", "preflight,fast,gpu", "--jobs", "1", "--gpu-jobs", "1", "--fast-args",
               str(sleeper)]  # fmt: skip
    run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = None
    for _ in range(600):  # the bundle says which part runs, while it runs
        time.sleep(0.5)
        try:
            seen = json.loads((bundle / "gpu_check.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if seen["running"] == "fast":
            break
    assert seen and seen["running"] == "fast" and seen["parts"]["preflight"]["status"] == "passed"
    assert "IN PROGRESS (running: fast)" in (bundle / "gpu_check.md").read_text()
    time.sleep(5)  # pytest is in the sleeping test
    run.send_signal(signal.SIGTERM)
    output = run.communicate(timeout=120)[0]
    assert run.returncode == 1, output
    summary = json.loads((bundle / "gpu_check.json").read_text())
    assert (
        not summary["ok"]
        and summary["stopped"] == "stopped by SIGTERM"
        and list(summary["parts"])
        == [
            "preflight",
            "fast",
        ]
    )
    fast = summary["parts"]["fast"]
    assert fast["status"] == "interrupted" and fast["tests"]["passed"] == 1  # the report pytest wrote on SIGINT
    assert "parts not run: gpu" in summary["problems"][-1]
    import tarfile

    with tarfile.open(bundle / "gpu_check.tar.gz") as archive:
        assert {"out/fast.log", "out/fast.xml", "out/preflight.log"} <= set(archive.getnames())


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the preflight alone fails for another reason")
def test_without_cuda_a_check_of_no_gpu_part_says_it_checked_nothing(tmp_path, monkeypatch):
    """Issue 65: `--parts preflight` on a machine without CUDA printed "# GPU check: OK", exit 0: the preflight
    passes, and nothing ran on a GPU."""
    monkeypatch.setenv("PREFLIGHT_LIMIT", "600")  # its 45 s are for a GPU machine, not a loaded CPU one
    run = gpu_check(sys.executable, tmp_path, "--parts", "preflight")
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert summary["parts"]["preflight"]["status"] == "passed", run.stdout + run.stderr  # it ran, and passed
    assert run.returncode == 1 and "# GPU check: FAILED" in run.stdout, run.stdout
    assert not summary["ok"] and summary["problems"] == [
        "checked nothing: no CUDA device (torch.cuda.is_available() is False): no GPU part (gpu, bench) ran; run the "
        "check on a Python whose torch sees a GPU"
    ]
    assert "checked nothing: no CUDA device" in (tmp_path / "gpu_check.md").read_text()


def test_with_cuda_a_check_without_a_gpu_part_checked_nothing_on_the_gpu(tmp_path):
    """The verdict itself (`gpu_check_summary.summarise`) on a device that has CUDA: a check of the fast suite alone
    ran nothing on the GPU, so it is not OK; with the gpu part passed it is, and a dry run is judged as one."""
    spec = importlib.util.spec_from_file_location("gpu_check_summary", ROOT / "scripts" / "gpu_check_summary.py")
    summary_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary_script)
    (tmp_path / "device.json").write_text(json.dumps({"device": "GPU", "cuda": "12.8", "cuda_available": True,
                                                      "python": "3.11"}))  # fmt: skip
    (tmp_path / "parts.tsv").write_text("preflight\tpassed\t1.0\t45\t\nfast\tpassed\t2.0\t150\t\n")
    verdict = summary_script.summarise(tmp_path, ["preflight", "fast"], False, False, None, None)
    assert not verdict["ok"] and verdict["problems"] == [
        "checked nothing on the GPU: no GPU part (gpu, bench) was asked for; add them to --parts"
    ]
    with (tmp_path / "parts.tsv").open("a") as f:
        f.write("gpu\tpassed\t3.0\t150\t\n")
    assert summary_script.summarise(tmp_path, ["preflight", "fast", "gpu"], False, False, None, None)["ok"]
    assert summary_script.summarise(tmp_path, ["preflight", "fast"], True, False, None, None)["ok"]  # a dry run


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the check runs the GPU parts (the check itself)")
def test_without_cuda_the_gpu_parts_are_skipped_with_the_reason(tmp_path):
    fast = ["tests/gpu/test_bench_gpu.py::test_tiny_results_are_refused_under_benchmarks_results",
            "tests/gpu/test_bench_gpu.py::test_every_registered_method_has_a_setting"]  # fmt: skip
    gpu = "tests/gpu/test_translation_on_device.py::test_translate_document_leaves_a_cpu_model_on_the_cpu_where_cuda_is_visible"
    run = gpu_check(sys.executable, tmp_path, "--parts", "fast,gpu,bench", "--jobs", "1", "--gpu-jobs", "1",
                    "--fast-args", " ".join(fast), "--gpu-args", gpu)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr  # the GPU parts asked for checked nothing (issue 57)
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert not summary["ok"] and list(summary["parts"]) == ["preflight", "fast", "gpu", "bench"]
    assert summary["problems"] == ["checked nothing: no CUDA device (torch.cuda.is_available() is False): gpu, bench "
                                   "could not run; run the check on a Python whose torch sees a GPU"]  # fmt: skip
    assert summary["versions"]["torch"] == torch.__version__ and "CPU only" in summary["device"]
    fast_part, gpu_part, bench = (summary["parts"][p] for p in ("fast", "gpu", "bench"))
    assert fast_part["status"] == "passed" and fast_part["tests"]["passed"] == len(fast)
    assert gpu_part["status"] == "skipped" and gpu_part["tests"]["skipped"] == 1 and gpu_part["tests"]["passed"] == 0
    assert any("needs a CUDA device" in reason for reason in gpu_part["tests"]["skip_reasons"])
    assert bench["status"] == "skipped" and "CUDA" in bench["note"]
    assert "# GPU check: FAILED" in run.stdout and (tmp_path / "fast.log").exists()
