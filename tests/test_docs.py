"""The documentation site: it builds with `mkdocs build --strict` (a broken link, a missing page, an include that
names no file or an API name that no longer exists fails), and it documents every registered method, every
`SyntaxMTConfig` field the package adds over `MarianConfig`, and only tests that exist."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import MarianConfig

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.methods import registered

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))


def _needs_mkdocs():
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not installed: the dev extra of pyproject.toml installs it")
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")


def _hook():
    spec = importlib.util.spec_from_file_location("docs_results_hook", DOCS / "hooks" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strict(tmp_path):
    _needs_mkdocs()
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    # the API reference was rendered from the code, the study tables from benchmarks/results, the figure copied
    assert "SyntaxMTForConditionalGeneration" in (site / "api" / "model" / "index.html").read_text(encoding="utf-8")
    multi30k = (site / "studies" / "multi30k" / "index.html").read_text(encoding="utf-8")
    first_row = (ROOT / "benchmarks/results/multi30k/results.md").read_text(encoding="utf-8").splitlines()[2]
    assert first_row.split("|")[1].strip() in multi30k and first_row.split("|")[3].strip() in multi30k
    assert (site / "results" / "multi30k" / "curves.png").read_bytes() == (
        ROOT / "benchmarks/results/multi30k/curves.png"
    ).read_bytes()


def test_every_registered_method_has_a_page_and_every_config_field_is_documented():
    text = _docs_text()
    for method in registered():
        assert (DOCS / "methods" / f"{method.name}.md").is_file(), f"add docs/methods/{method.name}.md"
        assert f"`{method.name}`" in text
    marian = {f.name for f in dataclasses.fields(MarianConfig)}
    added = [f.name for f in dataclasses.fields(SyntaxMTConfig) if f.name not in marian]
    assert "encoder_pascal_heads" in added and "method_options" in added  # the comparison finds the added fields
    missing = [name for name in added if f"`{name}`" not in text]
    assert not missing, f"SyntaxMTConfig fields not in docs/: {missing}"


def test_every_test_the_docs_name_exists():
    defined = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined |= set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE))
    text = _docs_text() + (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = set(re.findall(r"::(test_\w+)", text)) | set(re.findall(r"`(test_[a-z]\w*)`", text))
    assert len(named) > 50  # the method pages and the bad-input table name their tests
    assert not sorted(named - defined), f"docs name tests that do not exist: {sorted(named - defined)}"
    files = set(re.findall(r"(tests/[\w/]+\.py)", text))
    assert not [f for f in files if not (ROOT / f).is_file()], "docs name test files that do not exist"


def test_includes_read_the_file_demote_headings_and_fail_on_a_missing_file(tmp_path):
    _needs_mkdocs()
    from mkdocs.exceptions import PluginError

    hook = _hook()
    assert hook.include("a\n::include benchmarks/results/multi30k/results.md\nb", "p.md").startswith(
        "a\n" + (ROOT / "benchmarks/results/multi30k/results.md").read_text(encoding="utf-8").strip("\n")[:40]
    )
    assert hook._demote("# Title\n\n## A\n\n```\n# not a heading\n```\n\n### B") == (
        "\n### A\n\n```\n# not a heading\n```\n\n#### B"
    )
    with pytest.raises(PluginError, match="no/such.md: no such file"):
        hook.include("::include no/such.md", "p.md")
    assert "Not built yet" in hook.include("::include? no/such.md", "p.md")
    with pytest.raises(PluginError, match="outside the repository"):
        hook.include("::include ../../etc/hostname", "p.md")
