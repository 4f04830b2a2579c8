"""The documentation site: it builds with `mkdocs build --strict` (a broken link, a missing page, an include that
names no file or an API name that no longer exists fails), and it documents every registered method, every
`SyntaxMTConfig` field the package adds over `MarianConfig`, and only tests that exist. Built once per run (the
`site` fixture), it works opened from disk: every link names a file, search needs no server, no asset comes from the
network, equations are MathML, and the API reference shows no raw transformers docstring markup."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import needs
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


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hook():
    return _load(DOCS / "hooks" / "results.py")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once with --strict for every test of this file that reads the HTML."""
    _needs_mkdocs()
    if importlib.util.find_spec("latex2mathml") is None:
        if os.environ.get("CI"):
            pytest.fail("latex2mathml is not installed: the dev extra of pyproject.toml installs it")
        pytest.skip("latex2mathml is not installed (pip install -e '.[dev]')")
    site = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return site


class _Page(HTMLParser):
    """The references of one HTML page: (tag, attribute, value) for every href/src, and every element id."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs, self.ids, self.text = [], set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name) is not None:
                self.refs.append((tag, name, attrs[name], attrs.get("rel", "")))

    def handle_data(self, data):
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _pages(site: Path) -> dict[Path, _Page]:
    return {path: _parse(path) for path in sorted(site.rglob("*.html"))}


def test_the_site_builds_strict(site):
    # the API reference was rendered from the code, the study tables from benchmarks/results, the figure copied
    assert "SyntaxMTForConditionalGeneration" in (site / "api" / "model.html").read_text(encoding="utf-8")
    multi30k = (site / "studies" / "multi30k.html").read_text(encoding="utf-8")
    first_row = (ROOT / "benchmarks/results/multi30k/results.md").read_text(encoding="utf-8").splitlines()[2]
    assert first_row.split("|")[1].strip() in multi30k and first_row.split("|")[3].strip() in multi30k
    assert (site / "results" / "multi30k" / "curves.png").read_bytes() == (
        ROOT / "benchmarks/results/multi30k/curves.png"
    ).read_bytes()


def test_every_internal_link_opens_a_file_from_disk(site):
    """Opened as site/index.html (file://), a link to a directory shows a listing: every link and asset of every
    page must name an existing file, and every #fragment an element of that file."""
    pages = _pages(site)
    assert len(pages) > 40 and (site / "index.html") in pages
    checked, broken = 0, []
    for path, page in pages.items():
        if path.name == "404.html":
            continue  # served by a web server for any missing URL, so its links start at the site's root
        for tag, _attr, value, _rel in page.refs:
            parts = urlsplit(value)
            if parts.scheme or parts.netloc or value.startswith("data:"):
                continue  # an outside link (checked for assets below) or an inline image
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            checked += 1
            if not target.is_file():
                broken.append(f"{path.relative_to(site)}: <{tag}> {value} -> not a file")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(site)}: <{tag}> {value} -> no id {parts.fragment!r}")
    assert checked > 2000
    assert not broken, f"{len(broken)} broken links, e.g. {broken[:10]}"


def test_no_asset_is_fetched_from_the_network(site):
    """Scripts, stylesheets, fonts, icons and images all come from the site itself (the offline plugin would add a
    CDN's iframe-worker shim and the theme Google's fonts unless told otherwise)."""
    remote = []
    for path, page in _pages(site).items():
        for tag, attr, value, rel in page.refs:
            fetched = tag != "a" and not (tag == "link" and rel in ("canonical", "alternate", "next", "prev"))
            if fetched and (urlsplit(value).scheme in ("http", "https") or value.startswith("//")):
                remote.append(f"{path.relative_to(site)}: <{tag} {attr}={value}>")
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8")
        remote += [
            f"{css.relative_to(site)}: {m}"
            for m in re.findall(r"(?:url\(|@import)\s*[\"']?(?:https?:)?//[^)\"'\s]+", text)
        ]
    assert not remote, remote


def test_search_works_without_a_server(site):
    """From file:// the search index cannot be fetched: the offline plugin inlines it as `var __index = {...}` in
    search/search_index.js, and the worker runs in an iframe (the local iframe-worker shim on every page)."""
    script = (site / "search" / "search_index.js").read_text(encoding="utf-8")
    assert script.startswith("var __index = ")
    index = json.loads(script.removeprefix("var __index = "))
    assert index == json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert "methods/pascal.html" in locations and all((site / loc).is_file() for loc in locations if loc)
    assert any("parent-scaled" in doc["text"].lower() for doc in index["docs"])
    for path, page in _pages(site).items():
        if path.name == "404.html":
            continue
        scripts = [(path.parent / value).resolve() for tag, _a, value, _r in page.refs if tag == "script"]
        assert site / "javascripts" / "iframe-worker.js" in scripts, f"{path}: no local iframe-worker shim"
        config = re.search(r'<script id="__config" type="application/json">(.*?)</script>',
                           path.read_text(encoding="utf-8"), flags=re.DOTALL)  # fmt: skip
        worker = json.loads(config.group(1))["search"]
        assert (path.parent / json.loads(config.group(1))["base"] / worker).resolve().is_file() or (
            path.parent / worker
        ).resolve().is_file(), f"{path}: the search worker {worker} is not a file"


def _visible_text(path: Path) -> str:
    return "".join(_parse(path).text)


def test_equations_are_mathml_in_the_built_pages(site):
    """Every $$...$$ block of the method pages is a <math display="block"> element in their HTML, and no TeX is left
    in any page's text."""
    with_math = [p for p in sorted((DOCS / "methods").glob("*.md")) if "$$" in p.read_text(encoding="utf-8")]
    assert {"pascal", "alignment_bias", "synchronous", "document_context"} <= {p.stem for p in with_math}
    for md in with_math:
        source = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)
        blocks = len(re.findall(r"^\s*\$\$\s*$", source, flags=re.MULTILINE)) // 2
        html = (site / "methods" / f"{md.stem}.html").read_text(encoding="utf-8")
        assert html.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">') == blocks >= 1, md.name
    for path in sorted(site.rglob("*.html")):
        text = _visible_text(path)
        assert "$$" not in text and "\\frac" not in text and "\\mathcal" not in text, path
    pascal = (site / "methods" / "pascal.html").read_text(encoding="utf-8")
    assert "<mfrac>" in pascal and "<msqrt>" in pascal and "&#x003C3;" in pascal  # Eq. 3's fraction, root, sigma


def test_the_mathml_hook_converts_inline_and_display_math_and_names_bad_tex():
    needs.package("mkdocs")
    needs.package("latex2mathml")
    from mkdocs.exceptions import PluginError

    hook = _load(DOCS / "hooks" / "mathml.py")
    out = hook.to_mathml('<p>a <span class="arithmatex">\\(x_i &lt; 2\\)</span></p>\n'
                         '<div class="arithmatex">\\[\n\\frac{1}{n}\n\\]</div>')  # fmt: skip
    assert out.count("<math") == 2 and 'display="inline"' in out and 'display="block"' in out
    assert "<msub><mi>x</mi><mi>i</mi></msub><mo>&#x0003C;</mo><mn>2</mn>" in out
    assert "<mfrac><mrow><mn>1</mn></mrow><mrow><mi>n</mi></mrow></mfrac>" in out
    assert hook.to_mathml("<p>no math, $5</p>") == "<p>no math, $5</p>"
    with pytest.raises(PluginError, match="p.md: cannot render the equation 'x\\^'"):
        hook.to_mathml('<span class="arithmatex">\\(x^\\)</span>', "p.md")
    with pytest.raises(PluginError, match=r"TeX left unconverted: \\foo"):
        hook.to_mathml('<span class="arithmatex">\\(\\foo{x}\\)</span>', "p.md")


def test_the_api_reference_renders_transformers_style_docstrings(site):
    """No raw transformers markup in the API pages, and a config field renders with the type and default of the
    code (read here from SyntaxMTConfig itself)."""
    for path in sorted((site / "api").glob("*.html")):
        text = _visible_text(path)
        for raw in ("*optional*", "[~transformers.", "[`", "`list[", "`int`", "`float`"):
            assert raw not in text, f"{path.name} shows {raw!r}"
    html = (site / "api" / "model.html").read_text(encoding="utf-8")
    default = dataclasses.fields(SyntaxMTConfig)[[f.name for f in dataclasses.fields(SyntaxMTConfig)].index(
        "pascal_sigma")].default  # fmt: skip
    item = re.search(r"<code>pascal_sigma</code>.*?</li>", html, flags=re.DOTALL).group(0)
    assert re.search(r"\(<code>(<span[^>]*>)?float(</span>)?</code>\)", item)
    assert f"defaults to <code>{default}</code>" in item and "Standard deviation of the Gaussian" in item
    # forward()'s arguments, written without an Args: header, are a parameter list with their shapes
    # (the methods' inputs are documented in their modules: `labels` is the spine's own)
    forward = html[html.index('id="hf_syntax_mt.modeling_syntax_mt.SyntaxMTForConditionalGeneration.forward"') :]
    item = re.search(r"<code>labels</code>.*?</li>", forward, flags=re.DOTALL).group(0)
    assert "Shape <code>(batch_size, target_length)</code>" in item and "LongTensor" in item


def test_the_docstring_extension_rewrites_transformers_conventions():
    needs.package("griffe")
    convert = _load(DOCS / "hooks" / "docstrings.py").convert
    doc = (
        "A [`~transformers.MarianConfig`] or a [`transformers.PreTrainedModel`]; `mask[~pad]` stays.\n\n"
        "Build it::\n\n    model = X()\n\n"
        "Args:\n"
        "    heads (`list[int]`, *optional*):\n        Heads per layer.\n"
        "    sigma (`float`, *optional*, defaults to 1.0): The width.\n"
        '    mode (`str`, *optional*, defaults to `"gaussian"`):\n        How.\n'
        "    a, b (`int`): Two layers.\n"
        "    plain (int): Left alone.\n"
    )
    assert convert(doc) == (
        "A `MarianConfig` or a `transformers.PreTrainedModel`; `mask[~pad]` stays.\n\n"
        "Build it:\n\n    model = X()\n\n"
        "Args:\n"
        "    heads (list[int]): Optional.\n        Heads per layer.\n"
        "    sigma (float): Optional, defaults to `1.0`. The width.\n"
        '    mode (str): Optional, defaults to `"gaussian"`.\n        How.\n'
        "    a, b (int): Two layers.\n"
        "    plain (int): Left alone.\n"
    )
    # transformers' forward() docstrings: argument lines at the left margin, no Args: header
    assert convert("Inputs.\n\nids (`torch.LongTensor` of shape `(B, S)`, *optional*, in `kwargs`):\n    The ids.\n"
                   "mask (`torch.Tensor`): 1 or 0.\n\nReturns:\n    The output.") == (
        "Inputs.\n\nArgs:\n    ids (torch.LongTensor): Optional. Shape `(B, S)`. In `kwargs`.\n        The ids.\n"
        "    mask (torch.Tensor): 1 or 0.\n\nReturns:\n    The output."
    )  # fmt: skip


def test_code_and_tables_wrap_or_scroll(site):
    """The extra stylesheet is on every page and wraps code blocks and table cells (cut off on the right before)."""
    css = (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert re.search(r"pre > code \{[^}]*white-space: pre-wrap", css)
    assert re.search(r"td \{[^}]*min-width: 0", css)
    for path, page in _pages(site).items():
        if path.name == "404.html":
            continue  # its links start at the site's root
        sheets = [
            (path.parent / v).resolve() for tag, _a, v, rel in page.refs if tag == "link" and rel == "stylesheet"
        ]
        assert site / "stylesheets" / "extra.css" in sheets, path


def test_the_landing_page_gives_the_first_commands_and_the_studies_figures():
    """docs/index.md names `make demo` and `make test` (targets of the Makefile) first, and every figure in its
    headline is one the study pages (or the results they include) report; the README's demo figures are the demo
    page's."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert f"make {target}" in index and re.search(rf"^{target}:", makefile, flags=re.MULTILINE)
    assert index.index("make demo") < index.index("## ")  # before the first section
    found = index[index.index("## What the studies found") :].split("\n## ")[0]
    studies = "\n".join(p.read_text(encoding="utf-8") for p in [*sorted((DOCS / "studies").glob("*.md")), DOCS / "demo.md",
                         *sorted((ROOT / "benchmarks" / "results").rglob("*.md"))])  # fmt: skip
    figures = set(re.findall(r"(?<![\w.])[+-]?\d+\.\d+(?![\w.])", found))
    assert len(figures) >= 10
    assert not sorted(f for f in figures if f.lstrip("+") not in studies), "figures not in the study pages"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    demo_line = re.search(r"\*\*The demo\*\*.*?(?=\n- \*\*)", readme, flags=re.DOTALL).group(0)
    demo = (DOCS / "demo.md").read_text(encoding="utf-8")
    demo_figures = re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", demo_line)
    assert demo_figures and all(f in demo for f in demo_figures)


def test_no_example_scores_translations_against_themselves():
    """In every shell example of the docs, a file that a command writes (`> FILE`, `--output FILE`) is not the
    reference of a later `sacrebleu REF` or `--ref(erences) REF` in the same block."""
    checked = 0
    for path in sorted(DOCS.rglob("*.md")):
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
            written = set()
            for line in block.splitlines():
                line = line.split("  #")[0]
                refs = re.findall(r"(?:^sacrebleu|--refs?|--references)\s+(\S+)", line)
                assert not written & set(refs), f"{path.name}: {line!r} scores against {written & set(refs)}"
                checked += bool(refs)
                written |= set(re.findall(r"(?:>|--output)\s+(\S+)", line))
    assert checked >= 2


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


def test_every_registered_method_has_a_page_a_nav_entry_a_table_row_and_a_tester(site):
    """What adding a method needs besides its module, test, page and builtin line is made by the code: the site's
    Methods navigation, the method index's table and the API reference of its module are read from the registry
    (docs/hooks/methods.py), and the tester from the method's `tester_config`; checked here on the built site for
    every registered method."""
    index = (site / "methods" / "index.html").read_text(encoding="utf-8")
    api = (site / "api" / "methods.html").read_text(encoding="utf-8")
    nav_links = [value for tag, _a, value, _r in _parse(site / "index.html").refs if tag == "a"]
    for method in registered():
        assert (DOCS / "methods" / f"{method.name}.md").is_file(), f"add docs/methods/{method.name}.md"
        assert (site / "methods" / f"{method.name}.html").is_file()
        assert f"methods/{method.name}.html" in nav_links, f"{method.name} is not in the site's navigation"
        assert f'href="{method.name}.html"><code>{method.name}</code>' in index, f"{method.name}: no row in the index"
        assert method.tester_config is not None, f"give {method.name} a tester_config (the tiny-config tester's entry)"
        assert f'id="{type(method).__module__}"' in api, f"{method.name}: its module is not in the API reference"
    order = [index.index(f'href="{m.name}.html"><code>{m.name}</code>') for m in registered()]
    assert order == sorted(order)  # the table is in head order


def test_the_methods_hook_lists_every_registered_method_in_head_order():
    _needs_mkdocs()
    import yaml

    hook = _load(DOCS / "hooks" / "methods.py")

    class Loader(yaml.SafeLoader):  # mkdocs.yml's !!python tags are not needed for the nav
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)["nav"]
    section = next(e["Methods"] for e in hook.methods_nav(nav) if isinstance(e, dict) and "Methods" in e)
    paths = [e if isinstance(e, str) else next(iter(e.values())) for e in section]
    assert paths == ["methods/index.md", *[f"methods/{m.name}.md" for m in registered()], "methods/other-options.md"]
    assert hook.methods_nav(hook.methods_nav(nav)) == hook.methods_nav(nav)  # a page listed by hand is not doubled


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


def test_every_required_include_is_a_file_git_tracks():
    """Session 20's CI failed on a clean clone: `::include benchmarks/results/recipes/fren.md` existed here but
    .gitignore kept it out of the commit. A required include must name a file the repository tracks."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = set(
        subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    )
    pattern = re.compile(r"^::include[ \t]+(\S+)[ \t]*$", re.MULTILINE)
    required = {(page.relative_to(ROOT).as_posix(), rel) for page in (ROOT / "docs").rglob("*.md")
                for rel in pattern.findall(page.read_text(encoding="utf-8"))}  # fmt: skip
    assert len(required) >= 5
    untracked = sorted(f"{page}: {rel}" for page, rel in required if rel not in tracked)
    assert not untracked, f"pages include files git does not track (commit them, or un-ignore them): {untracked}"


def _first_shell_block(page: str, heading: str) -> str:
    section = page[page.index(f"\n## {heading}\n") :]
    return re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)


def test_the_train_on_your_own_two_files_example_runs_as_written(tmp_path, monkeypatch):
    """Issue 49: every runnable example needed ../shared/data. Getting started's "two text files" example is run here as
    written (only `--max_steps` lowered) on small files written for it: `train` saves a model whose card names the
    languages and the test scores, `translate` writes one line per input line, and the `sacrebleu` line scores
    those lines as the package does."""
    import shlex
    import shutil

    from huggingface_hub import ModelCard

    from hf_syntax_mt.cli import main as cli_main
    from hf_syntax_mt.demo.synthetic_corpus import write_corpus
    from hf_syntax_mt.evaluation import RUN_INFO, corpus_scores

    block = _first_shell_block(
        (DOCS / "getting-started.md").read_text(encoding="utf-8"), "Train on your own two text files"
    )
    commands = [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [
        ["hf-syntax-mt", "train"],
        ["hf-syntax-mt", "translate"],
        ["sacrebleu", "test.en"],
    ]
    train = commands[0]
    train[train.index("--max_steps") + 1] = "4"  # the page's 300 steps take minutes; the flags are the page's
    files = write_corpus(tmp_path / "made", splits={"train": 48, "test": 6}, seed=3, max_words=8)
    for split, name in (("train", "corpus"), ("test", "test")):
        shutil.copy(files[split]["src"], tmp_path / f"{name}.fr")
        shutil.copy(files[split]["tgt"], tmp_path / f"{name}.en")
    monkeypatch.chdir(tmp_path)
    assert cli_main(train[1:]) == 0
    assert cli_main(commands[1][1:]) == 0
    out = tmp_path / "runs" / "fr-en"
    card = ModelCard.load(out / "README.md").data
    info = json.loads((out / RUN_INFO).read_text(encoding="utf-8"))
    assert card.language == ["fr", "en"] and info["global_step"] == 4
    bleu = {(r.dataset_split, r.metric_type): r.metric_value for r in card.eval_results}[("test", "bleu")]
    assert bleu == round(info["scores"]["test"]["bleu"], 2)
    hypotheses = (tmp_path / "test.hyp.en").read_text(encoding="utf-8").splitlines()
    references = (tmp_path / "test.en").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == len(references) == 6
    scored = subprocess.run([sys.executable, "-m", "sacrebleu", *commands[2][1:]], capture_output=True, text=True,
                            timeout=120, check=True)  # fmt: skip
    got = {s["name"]: s["score"] for s in json.loads(scored.stdout)}
    expected = corpus_scores(hypotheses, references)
    assert got["BLEU"] == pytest.approx(expected["bleu"], abs=0.05)
    assert got["chrF2"] == pytest.approx(expected["chrf"], abs=0.05)
    # issue 56: one model, one BLEU. `train` recorded 3.76 where `translate` + sacrebleu gave 6.4 (greedy against 4
    # beams); both decode with the model's generation config now, and the run's score names it
    assert hypotheses == (out / "test_generations.txt").read_text(encoding="utf-8").splitlines()
    assert got["BLEU"] == pytest.approx(info["scores"]["test"]["bleu"], abs=0.05)
    assert info["scores"]["test"]["decoding"] == "beams:4|max_length:128|weights:last(4)"
