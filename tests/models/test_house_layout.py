"""The house stays walkable (issue 16): no module over ~600 lines, no import circle in the package, the model file
imports nothing from the pipeline, data, evaluation or training packages, the methods import nothing above them,
and the method inputs are named once (the registry), not as parameters of every `forward`."""

import ast
from pathlib import Path

import pytest

from hf_syntax_mt.methods import input_names, supervision_names

SRC = Path(__file__).resolve().parents[2] / "src" / "hf_syntax_mt"
MODULES = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in SRC.rglob("*.py")}  # fmt: skip
# compatibility shims re-export a module that moved (they import downwards only, by construction)
SHIMS = {"hf_syntax_mt.document_context", "hf_syntax_mt.train_data", "hf_syntax_mt.train_script",
         "hf_syntax_mt.batching", "hf_syntax_mt.contrastive", "hf_syntax_mt.model_card", "hf_syntax_mt.probing",
         "hf_syntax_mt.data.synthetic", "hf_syntax_mt.data.textio"}  # fmt: skip


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str) -> set[str]:
    """The package modules `name` imports, at module level or inside functions (`if TYPE_CHECKING` left out)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found, stack = set(), [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
            found |= {c for c in candidates if c in MODULES}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hf_syntax_mt"):
            found |= {node.module} & set(MODULES)
    return found - {name}


def test_no_module_passes_600_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items() if len(p.read_text().splitlines()) > 600}
    assert not long, long


def test_no_import_circle():
    graph = {n: imports(n) for n in MODULES if n not in SHIMS}
    # a package __init__ that re-exports its modules is not a step of a circle through those modules
    graph = {n: {m for m in deps if m not in SHIMS and not (m == n.rsplit(".", 1)[0])} for n, deps in graph.items()}
    state, path = {}, []

    def visit(n):
        state[n] = "open"
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                pytest.fail("import circle: " + " -> ".join(path[path.index(m):] + [m]))
            if m not in state:
                visit(m)
        path.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)


@pytest.mark.parametrize("module", ["hf_syntax_mt.modeling_syntax_mt", "hf_syntax_mt.configuration_syntax_mt"])
def test_the_model_side_imports_no_pipeline_data_evaluation_or_training(module):
    forbidden = ("hf_syntax_mt.pipeline_syntax_mt", "hf_syntax_mt.data", "hf_syntax_mt.evaluation",
                 "hf_syntax_mt.training", "hf_syntax_mt.train_script")  # fmt: skip
    bad = {m for m in imports(module) if m.startswith(forbidden)}
    assert not bad, bad


def test_methods_import_only_the_registry_and_each_other():
    for name in MODULES:
        if name.startswith("hf_syntax_mt.methods."):
            outside = {m for m in imports(name) if not m.startswith("hf_syntax_mt.methods")}
            assert outside <= {"hf_syntax_mt.vocabularies"}, (name, outside)


def test_method_inputs_are_not_parameters_of_the_spine():
    names = set(input_names()) | set(supervision_names())
    names -= {"context_input_ids", "context_attention_mask"}  # the document context is part of the spine's layers
    tree = ast.parse(MODULES["hf_syntax_mt.modeling_syntax_mt"].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            params = {a.arg for a in node.args.args + node.args.kwonlyargs}
            assert not params & names, (node.name, params & names)
