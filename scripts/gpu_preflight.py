"""The GPU check's preflight (issue 48): is everything the package and its tests import installed, in a version
pyproject.toml allows? Run by `scripts/gpu_check.sh` before the test parts; cheap (no test runs).

What it requires comes from pyproject.toml, not from a list kept here: the runtime `dependencies`, and from the `dev`
extra the test runner (`pytest`), `hypothesis` (the fuzz tests import it) and, when the fast suite runs on parallel workers, `pytest-xdist`. The other dev
packages (spaCy, stanza, nltk, the docs tools) are optional: the tests that need them skip without them. Then the
runtime requirements of each of those, recursively (their `Requires-Dist`, markers evaluated for this Python): a
missing one fails (an import would), a version outside a transitive range is reported as a warning (pip's ranges
are often caps that do not break an import). torch is checked, never walked or installed: it stays as the machine
has it. Last, `import hf_syntax_mt` must succeed.

    python scripts/gpu_preflight.py [--pyproject PATH] [--parallel] [--json PATH]     # exit 0: ready, 1: not

A distribution installed with `pip install --no-deps --target DIR` counts when DIR is on `PYTHONPATH` (the GPU
check puts it there): importlib.metadata reads `sys.path`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: from the dev extra: what every test imports (the rest of the extra is optional: those tests skip)
TEST_RUNNER = ("pytest", "hypothesis")
PARALLEL = ("pytest-xdist",)
#: never walked into (its CUDA libraries are the machine's) and never installed by the check
KEEP_AS_INSTALLED = ("torch",)


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pyproject(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    """`(dependencies, optional-dependencies)` of pyproject.toml."""
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10: the quoted strings of `key = [ ... ]`

        def block(key):
            m = re.search(rf"^{key} = \[(.*?)^\]", text, flags=re.S | re.M)
            return re.findall(r'"([^"]+)"', m.group(1)) if m else []

        return block("dependencies"), {"dev": block("dev")}
    project = tomllib.loads(text)["project"]
    return project.get("dependencies", []), project.get("optional-dependencies", {})


def required(pyproject: Path, parallel: bool) -> list[str]:
    """The requirement strings the check needs, as pyproject.toml writes them."""
    dependencies, extras = read_pyproject(pyproject)
    wanted = TEST_RUNNER + (PARALLEL if parallel else ())
    from_dev = [spec for spec in extras.get("dev", []) if norm(re.match(r"[A-Za-z0-9_.-]+", spec)[0]) in wanted]
    missing = set(wanted) - {norm(re.match(r"[A-Za-z0-9_.-]+", spec)[0]) for spec in from_dev}
    if missing:
        raise SystemExit(f"gpu_preflight: {pyproject}: the dev extra names no {sorted(missing)}")
    return list(dependencies) + from_dev


def check(specs: list[str]) -> dict:
    """Walk the requirements: `missing` and `wrong_version` (direct: pyproject's ranges) fail, `warnings`
    (a transitive range not met) do not."""
    from packaging.requirements import Requirement

    report = {"required": [], "missing": [], "wrong_version": [], "warnings": [], "versions": {}}
    seen: set[str] = set()
    queue = [(Requirement(spec), None) for spec in specs]  # (requirement, who asks for it; None: pyproject)
    while queue:
        req, parent = queue.pop(0)
        name = norm(req.name)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            who = "pyproject.toml" if parent is None else parent
            entry = f"{req} (asked for by {who})"
            if entry not in report["missing"]:
                report["missing"].append(entry)
            continue
        version = dist.version
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            entry = f"{req.name} {version} installed, {req} asked for by {parent or 'pyproject.toml'}"
            (report["wrong_version"] if parent is None else report["warnings"]).append(entry)
        if parent is None:
            report["required"].append(str(req))
        if name in seen:
            continue
        seen.add(name)
        report["versions"][name] = version
        if name in KEEP_AS_INSTALLED:
            continue
        for sub in dist.requires or []:
            queue.append((Requirement(sub), f"{req.name} {version}"))
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    p.add_argument("--parallel", action="store_true", help="the fast suite runs on pytest-xdist workers: require it")
    p.add_argument("--json", type=Path, help="write the report here as JSON")
    args = p.parse_args(argv)
    report = check(required(args.pyproject, args.parallel))
    report["import"] = None
    if not report["missing"]:  # an import with a distribution missing would only repeat it
        start = time.perf_counter()
        try:
            importlib.import_module("hf_syntax_mt")
            report["import"] = f"import hf_syntax_mt: ok ({time.perf_counter() - start:.1f} s)"
        except Exception as error:  # noqa: BLE001  (any import failure is the finding)
            report["import_error"] = f"import hf_syntax_mt: {type(error).__name__}: {error}"
    report["ok"] = not (report["missing"] or report["wrong_version"] or report.get("import_error"))
    for key, label in (("missing", "missing"), ("wrong_version", "wrong version"), ("warnings", "warning")):
        for entry in report[key]:
            print(f"gpu_preflight: {label}: {entry}")
    if report.get("import_error"):
        print(f"gpu_preflight: {report['import_error']}")
    if report["ok"]:
        print(f"gpu_preflight: ok: {len(report['required'])} requirements of pyproject.toml and "
              f"{len(report['versions']) - len(report['required'])} of theirs installed; {report['import']}")  # fmt: skip
    else:
        print("gpu_preflight: FAILED: install what is missing (scripts/gpu_check.sh --wheels DIR; the folder: "
              "benchmarks/gpu/README.md)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
