"""The layout of the `evaluation` and `training` packages: small modules, and neither package imports the other.

Two modules of the command behind `scripts/train.py` (`training/script.py`, which trains and then scores the model
and writes the run file and the model card) are allowed to use both: `training/scoring.py` (it scores the model) and
`training/run_outputs.py` (it signs the run and writes the run file and the model card).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "hf_syntax_mt"
MAX_LINES = 600

#: What counts as importing a package: the package or any of its modules.
EVALUATION = ("hf_syntax_mt.evaluation",)
TRAINING = ("hf_syntax_mt.training",)
#: The end-to-end training command's scoring and writing: it scores what it trained (the only training modules that
#: import evaluation).
# distill: a teacher is named by its signature and run file, as the scores name a model
COMPOSERS = {"hf_syntax_mt.training.scoring", "hf_syntax_mt.training.run_outputs", "hf_syntax_mt.training.distill"}


def modules(package: str) -> list[Path]:
    return sorted((PACKAGE / package).glob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from x import y` counts as x and x.y), at any depth."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def crosses(names: set[str], other: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(n == o or n.startswith(o + ".") for o in other))


@pytest.mark.parametrize("package", ["evaluation", "training"])
def test_modules_are_small(package):
    paths = modules(package)
    assert len(paths) >= 4, f"{package}/ should be a package of several modules"
    long = {p.name: n for p in paths if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines in {package}/: {long}"


def test_evaluation_never_imports_training():
    found = {module_name(p): crosses(imported(p), TRAINING) for p in modules("evaluation")}
    assert not {k: v for k, v in found.items() if v}


def test_training_never_imports_evaluation_except_the_script():
    found = {module_name(p): crosses(imported(p), EVALUATION) for p in modules("training")}
    assert not {k: v for k, v in found.items() if v and k not in COMPOSERS}
    assert all(found[name] for name in COMPOSERS), "the allow-list names a module that no longer needs it: remove it"


def test_the_resolver_sees_relative_imports():
    """`from ..evaluation import x` inside training/ resolves to hf_syntax_mt.evaluation (the check above works)."""
    names = imported(PACKAGE / "training" / "run_outputs.py")
    assert "hf_syntax_mt.evaluation" in names and "hf_syntax_mt.training.script_args" in names
