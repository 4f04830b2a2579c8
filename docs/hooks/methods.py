"""mkdocs hook: the method pages' place in the site comes from the method registry, so adding a method adds no entry
here or in mkdocs.yml.

- The nav's "Methods" section lists `methods/index.md`, then every registered method's page
  `docs/methods/<name>.md` in registry (head) order, titled by the page's `# heading`, then the other pages mkdocs.yml
  lists there. A registered method without a page fails the build.
- A line ``::methods`` becomes the table of the registered methods: registered name, page, the config options it
  owns (`owned_fields`) and the module it lives in.
- A line ``::methods-api`` becomes the API reference of every registered method's module (``::: module`` blocks,
  rendered by mkdocstrings), in registry order.

The registry is read from this checkout's `src/` (the same code the API reference documents).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SECTION = "Methods"
TABLE = re.compile(r"^::methods[ \t]*$", re.MULTILINE)
API = re.compile(r"^::methods-api[ \t]*$", re.MULTILINE)


def _registry():
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    from hf_syntax_mt import methods

    return methods


def page_title(name: str) -> str:
    """The `# heading` of `docs/methods/<name>.md`."""
    path = DOCS / "methods" / f"{name}.md"
    if not path.is_file():
        raise PluginError(f"the registered method {name!r} has no page: add docs/methods/{name}.md (CONTRIBUTING.md)")
    heading = re.search(r"^#\s+(.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    if heading is None:
        raise PluginError(f"docs/methods/{name}.md has no `# heading` to name it in the navigation")
    return heading.group(1).strip()


def method_pages() -> list[tuple[str, str]]:
    """`(title, "methods/<name>.md")` of every registered method, in registry order."""
    return [(page_title(m.name), f"methods/{m.name}.md") for m in _registry().registered()]


def methods_nav(nav: list) -> list:
    """`nav` with the method pages in its "Methods" section, after its first page (the index)."""
    pages = method_pages()
    listed = {path for _, path in pages}
    out = []
    for entry in nav:
        if isinstance(entry, dict) and SECTION in entry:
            section = entry[SECTION]
            first, rest = section[:1], [e for e in section[1:] if _path(e) not in listed]
            entry = {SECTION: [*first, *({title: path} for title, path in pages), *rest]}
        out.append(entry)
    return out


def _path(entry) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        value = next(iter(entry.values()))
        return value if isinstance(value, str) else None
    return None


def methods_table() -> str:
    """The Markdown table of the registered methods (a page in docs/methods/ links its siblings by file name)."""
    methods = _registry()
    rows = ["| registered name | method | config options | module |", "|---|---|---|---|"]
    for m in methods.registered():
        options = ", ".join(f"`{f}`" for f in methods.owned_fields(m)) or "none"
        module = type(m).__module__.replace(".", "/")
        rows.append(f"| [`{m.name}`]({m.name}.md) | {page_title(m.name)} | {options} | `src/{module}.py` |")
    return "\n".join(rows)


def methods_api() -> str:
    """mkdocstrings blocks for the module of every registered method, in registry order."""
    modules = dict.fromkeys(type(m).__module__ for m in _registry().registered())
    return "\n\n".join(f"::: {module}" for module in modules)


def on_config(config, **kwargs):
    config["nav"] = methods_nav(config["nav"])
    return config


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    markdown = API.sub(lambda _: methods_api(), markdown)
    return TABLE.sub(lambda _: methods_table(), markdown)
