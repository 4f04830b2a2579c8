"""Self-contained remote code: the modules a saved model needs, written beside its weights as one flat folder.

`transformers` loads a directory's `auto_map` / `custom_pipelines` classes from `.py` files in that directory, and
copies the files they import by following relative imports *within that one folder only*
(`dynamic_module_utils.get_relative_import_files` maps `from .x import y` to `x.py` beside the file). Any absolute
import becomes a package the user must install. So `save_pretrained` writes a flat copy of exactly the modules the
model, config and pipeline classes need: it follows the package's own relative imports (at module level and inside
functions) from the modules defining those classes, gives each module a flat file name, and rewrites the relative
imports to point at the flat names (`from .data.parsers import Parser` -> `from .parsers import Parser`). The
directory then loads on a machine with only torch and transformers (plus a parser library when the model parses).

Imports of other packages are checked, because transformers' remote-code loader requires every package a file
imports, wherever the import sits, except imports inside `try` blocks. A function-level import of an optional
package (`datasets`, `stanza`, `spacy`, `matplotlib`) is wrapped in `try: ... except ImportError: raise`, which
changes nothing when the function runs and keeps the package optional at load time. An optional package imported at
module level cannot be bundled: `save_pretrained` raises `RemoteCodeError` naming the module and the import.

`from . import a` is rewritten to a form transformers follows when it sits at module level (the module is needed on
import). Inside a function it is left as it is unless `a` is bundled anyway: transformers does not follow that form
either, so a module that only such a lazy import reaches (e.g. a backward-compatible alias) is not copied, and that
function raises `ImportError` in the copy.

The walk works on any layout: on the installed package (`hf_syntax_mt.data.parsers` -> `parsers.py`) and on an
already flat folder loaded as remote code (re-saving a model loaded with `trust_remote_code=True`).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

# What a machine with only torch + transformers has: the standard library, torch, transformers and the packages
# transformers itself requires.
AVAILABLE_PACKAGES = frozenset(sys.stdlib_module_names) | {
    "torch", "transformers", "huggingface_hub", "numpy", "safetensors", "tokenizers", "packaging", "regex", "yaml",
    "tqdm", "filelock", "typing_extensions",
}  # fmt: skip

HEADER = "# Written by hf-syntax-mt {version} from {module} (a flat copy for trust_remote_code=True).\n"


class RemoteCodeError(RuntimeError):
    """A module the saved model needs cannot be written as self-contained remote code."""


@dataclass
class RemoteCodeBundle:
    """The flat files to write (`files`: flat module name -> source) and the flat module of every source module."""

    files: dict[str, str] = field(default_factory=dict)
    flat_names: dict[str, str] = field(default_factory=dict)  # dotted module name -> flat module name

    def reference(self, cls: type) -> str:
        """`"flat_module.ClassName"`, as `auto_map` and `custom_pipelines` name a class."""
        return f"{self.flat_names[cls.__module__]}.{cls.__name__}"

    def write(self, directory: str | Path) -> list[Path]:
        paths = []
        for name, source in sorted(self.files.items()):
            path = Path(directory) / f"{name}.py"
            path.write_text(source, encoding="utf-8")
            paths.append(path)
        return paths


def _module_file(name: str, needed_by: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise RemoteCodeError(f"{needed_by} imports {name!r}, which is not a Python source file: it cannot be copied.")
    if spec.submodule_search_locations is not None:
        raise RemoteCodeError(
            f"{needed_by} imports from the package {name!r} (its __init__.py): the remote-code bundle is flat, so "
            "import from the module that defines the name instead (e.g. `from .data.parsers import get_parser`)."
        )
    return Path(spec.origin)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _relative_targets(node: ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The modules a relative import needs: `from .a.b import x` -> [pkg.a.b]; `from . import a, b` -> [pkg.a, pkg.b]
    (each must be a module: names defined in a package's __init__.py cannot be bundled)."""
    package = _package_of(module, path)
    if node.module:
        return [importlib.util.resolve_name("." * node.level + node.module, package)]
    return [importlib.util.resolve_name("." * node.level + a.name, package) for a in node.names]


def _imports(body: list[ast.stmt], in_function: bool = False, in_try: bool = False):
    """Every import statement in `body` (recursively: imports are statements, so only statement bodies are visited),
    with whether it sits inside a function and inside a `try` block."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function, in_try
            continue
        function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        guarded = in_try or isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try)))  # all of try/except/else
        for part in ("body", "orelse", "finalbody"):
            yield from _imports(getattr(node, part, None) or [], function, guarded)
        for block in [*getattr(node, "handlers", []), *getattr(node, "cases", [])]:  # except clauses, match cases
            yield from _imports(block.body, function, guarded)


def _parse(path: Path) -> tuple[str, ast.Module]:
    source = path.read_text(encoding="utf-8")
    return source, ast.parse(source, filename=str(path))


def _walk(roots: list[str]) -> dict[str, tuple[Path, str, ast.Module]]:
    """Every module reachable from `roots` through relative imports: dotted name -> (file, source, tree)."""
    found: dict[str, tuple[Path, str, ast.Module]] = {}
    todo = [(r, "save_pretrained") for r in roots]
    while todo:
        name, needed_by = todo.pop()
        if name in found:
            continue
        path = _module_file(name, needed_by)
        found[name] = (path, *_parse(path))
        for node, in_function, _ in _imports(found[name][2].body):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and (node.module or not in_function):
                todo += [(target, name) for target in _relative_targets(node, name, path)]
    return found


def _flat_names(modules: dict[str, tuple[Path, str, ast.Module]]) -> dict[str, str]:
    """File stem, unless two different files share it; then the dotted module name joined by `_`. The same file
    content under two module names (a flat folder that transformers loaded twice) is one module."""
    contents: dict[str, set[str]] = {}
    for path, source, _ in modules.values():
        contents.setdefault(path.stem, set()).add(source)
    names = {m: p.stem if len(contents[p.stem]) == 1 else m.replace(".", "_") for m, (p, _, _) in modules.items()}
    clash: dict[str, set[str]] = {}
    for m, n in names.items():
        clash.setdefault(n, set()).add(modules[m][1])
    if bad := sorted(n for n, texts in clash.items() if len(texts) > 1):
        raise RemoteCodeError(f"different modules would be written as {bad}: rename one of them.")
    return names


def _rewrite(name: str, path: Path, source: str, tree: ast.Module, flat: dict[str, str], root: str) -> str:
    lines = source.splitlines(keepends=True)
    edits: list[tuple[ast.stmt, list[str]]] = []  # statement -> replacement lines (without the indentation prefix)
    for node, in_function, in_try in _imports(tree.body):
        where = f"{name} line {node.lineno}"
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            targets = [flat.get(t) for t in _relative_targets(node, name, path)]
            if None in targets:  # a lazy `from . import a` of a module the model does not need: left as it is
                continue
            if node.module:
                names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
                edits.append((node, [f"from .{targets[0]} import {names}"]))
            else:  # `from . import a`: transformers does not follow it; import the module by a form it follows
                edits.append((node, [line for a, t in zip(node.names, targets, strict=True) for line in (
                    f"from .{t} import __name__ as _{t}_module_name",
                    f"{a.asname or a.name} = __import__('sys').modules[_{t}_module_name]",
                )]))  # fmt: skip
            continue
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        tops = {m.split(".")[0] for m in modules}
        if root in tops:
            raise RemoteCodeError(f"{where}: an absolute import of {root!r}; import it relatively (from .x import y).")
        optional = sorted(tops - AVAILABLE_PACKAGES)
        if not optional or in_try:
            continue
        if not in_function:
            raise RemoteCodeError(
                f"{where}: a module-level import of {', '.join(optional)}, which a machine with only torch and "
                "transformers lacks, in a module the saved model needs. Import it inside the function that uses it."
            )
        statement = ast.get_source_segment(source, node)
        edits.append((node, ["try:  # optional: only this function needs it", f"    {statement}",
                             "except ImportError:", "    raise"]))  # fmt: skip
    for node, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        indent, rest = first[: node.col_offset], last[node.end_col_offset :]
        if indent.strip():
            raise RemoteCodeError(f"{name} line {node.lineno}: put the import on its own line to bundle it.")
        text = "".join(f"{indent}{line}\n" for line in new)
        lines[node.lineno - 1 : node.end_lineno] = [text[:-1] + rest if rest.strip() else text]
    return "".join(lines)


def build_bundle(classes: list[type], version: str = "") -> RemoteCodeBundle:
    """The flat remote-code files for `classes` (the config, model and pipeline classes) and all they import."""
    modules = _walk([cls.__module__ for cls in classes])
    root = min(modules, key=len).split(".")[0]
    flat = _flat_names(modules)
    bundle = RemoteCodeBundle(flat_names=flat)
    for name, (path, source, tree) in sorted(modules.items()):
        if flat[name] in bundle.files:  # the same file under a second module name
            continue
        source = _rewrite(name, path, source, tree, flat, root)
        if not source.startswith(HEADER[:26]):
            source = HEADER.format(version=version, module=name) + source
        compile(source, f"{flat[name]}.py", "exec")  # the rewrite must stay valid Python
        bundle.files[flat[name]] = source
    return bundle


def attach_remote_code(model, model_classes: list[type]) -> RemoteCodeBundle:
    """Fill `model.config.auto_map` (the config and `model_classes`: base model, then the LM-head model) and
    `custom_pipelines` (the translation pipeline) and return the bundle to write beside the weights."""
    import sys

    from .pipeline_syntax_mt import SyntaxTranslationPipeline

    version = getattr(sys.modules.get(__package__ or ""), "__version__", "")
    config_class = type(model.config)
    bundle = build_bundle([config_class, *model_classes, SyntaxTranslationPipeline], version=version)
    base, lm = model_classes
    model.config.auto_map = {
        "AutoConfig": bundle.reference(config_class),
        "AutoModel": bundle.reference(base),
        "AutoModelForSeq2SeqLM": bundle.reference(lm),
    }
    model.config.custom_pipelines = {
        "translation": {
            "impl": bundle.reference(SyntaxTranslationPipeline),
            "pt": ["AutoModelForSeq2SeqLM"],
            "tf": [],
            "type": "text",
        }
    }
    return bundle
