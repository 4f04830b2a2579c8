"""The house stays walkable (issue 16): no module over ~600 lines, no import circle in the package, the model file
imports nothing from the pipeline, data, evaluation or training packages, the methods import nothing above them,
and the method inputs are named once (the registry), not as parameters of every `forward`.

The import graph is read from the source with `ast`; the circle test runs on module-level imports (class bodies,
`try` and `if TYPE_CHECKING` blocks included) and again with function-level imports added (issue 28)."""

import ast
import importlib
from pathlib import Path

import pytest

from hf_syntax_mt.methods import input_names, supervision_names

SRC = Path(__file__).resolve().parents[2] / "src" / "hf_syntax_mt"
MODULES = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in SRC.rglob("*.py")}  # fmt: skip


def imports(name: str) -> set[str]:
    """The package modules `name` imports, at module level (`if TYPE_CHECKING` included) or inside functions."""
    edges = GRAPH[name]
    return edges["module"] | edges["function"]


# The modules that only re-exported names that moved (issue 28 removed them): no path of the package imports them.
REMOVED = ["hf_syntax_mt.batching", "hf_syntax_mt.train_data", "hf_syntax_mt.train_script", "hf_syntax_mt.model_card",
           "hf_syntax_mt.contrastive", "hf_syntax_mt.probing", "hf_syntax_mt.document_context",
           "hf_syntax_mt.data.synthetic", "hf_syntax_mt.data.textio",
           # issue 45: one alignment package (hf_syntax_mt.alignment.words, .aer and .targets)
           "hf_syntax_mt.word_alignment", "hf_syntax_mt.data.alignments",
           # issue 58: the pronoun study's German rules and lexicon live beside its builder in benchmarks/data
           "hf_syntax_mt.evaluation.pronoun_kinds", "hf_syntax_mt.evaluation.german_nouns",
           # issue 68: FlexAttention is the opt-in hf_syntax_mt.flex, the other kernels attention_functions
           "hf_syntax_mt.fused_kernels"]  # fmt: skip


@pytest.mark.parametrize("module", REMOVED)
def test_removed_module_paths_stay_removed(module):
    assert module not in MODULES, f"{module} is back: import from the module that defines the names instead"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_no_module_passes_600_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items() if len(p.read_text().splitlines()) > 600}
    assert not long, long


def import_graph(root: Path) -> dict[str, dict[str, set[str]]]:
    """Every module of the package at `root` -> {"module": ..., "function": ...}: the package modules it imports at
    module level (class bodies, `try` and `if TYPE_CHECKING` blocks included: a type checker follows those too) and
    inside functions. `from x import y` is an edge to `x.y` when that is a module, else to `x`."""
    modules = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in root.rglob("*.py")}  # fmt: skip
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = {"module": set(), "function": set()}
        stack = [(node, "module") for node in ast.parse(path.read_text(encoding="utf-8")).body]
        while stack:
            node, level = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                level = "function"
            stack.extend((child, level) for child in ast.iter_child_nodes(node))
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges[level] |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


GRAPH = import_graph(SRC)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle per back edge of a depth-first walk, each as `[a, b, ..., a]` (empty: the graph is acyclic)."""
    state, path, cycles = {}, [], []

    def visit(n):
        state[n] = "open"
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                cycles.append(path[path.index(m) :] + [m])
            elif m not in state:
                visit(m)
        path.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return cycles


@pytest.mark.parametrize("levels", [("module",), ("module", "function")], ids=["module-level", "with-function-level"])
def test_no_import_circle(levels):
    graph = {n: set().union(*(edges[level] for level in levels)) for n, edges in GRAPH.items()}
    cycles = find_cycles(graph)
    assert not cycles, f"import circles ({' + '.join(levels)} imports): " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_names_a_type_checking_circle_and_a_function_level_one(tmp_path):
    """A hand-built package: a -> b at module level, b -> a under `if TYPE_CHECKING` (a circle at module level);
    c -> d at module level, d -> c inside a function (a circle only once function-level imports count)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nB = 1\n")
    (pkg / "c.py").write_text("from . import d\n")
    (pkg / "d.py").write_text("def f():\n    from pkg.c import x\n")
    graph = import_graph(pkg)
    assert graph["pkg.b"] == {"module": {"pkg.a"}, "function": set()}
    assert graph["pkg.d"] == {"module": set(), "function": {"pkg.c"}}
    assert find_cycles({n: e["module"] for n, e in graph.items()}) == [["pkg.a", "pkg.b", "pkg.a"]]
    both = find_cycles({n: e["module"] | e["function"] for n, e in graph.items()})
    assert both == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.c", "pkg.d", "pkg.c"]]


@pytest.mark.parametrize("module", ["hf_syntax_mt.modeling_syntax_mt", "hf_syntax_mt.configuration_syntax_mt"])
def test_the_model_side_imports_no_pipeline_data_evaluation_or_training(module):
    forbidden = ("hf_syntax_mt.pipeline_syntax_mt", "hf_syntax_mt.data", "hf_syntax_mt.evaluation",
                 "hf_syntax_mt.training")  # fmt: skip
    bad = {m for m in imports(module) if m.startswith(forbidden)}
    assert not bad, bad


@pytest.mark.parametrize("module", ["hf_syntax_mt.modeling_syntax_mt", "hf_syntax_mt.modeling_layers",
                                    "hf_syntax_mt.data.collator", "hf_syntax_mt.data.preprocess",
                                    "hf_syntax_mt.pipeline_syntax_mt"])  # fmt: skip
def test_the_spine_reaches_the_methods_through_the_registry_only(module):
    """Issue 58: no method module (document context included) is imported by the spine or the data side; they ask
    the registry's interface (`methods.registry` and what it is split into: `methods.base`, the `Method` base,
    `methods.records`, what one forward keeps; `methods.columns`; and `methods.supervision`, which reads the
    registry's declared columns and names no method)."""
    methods = {m for m in imports(module) if m.startswith("hf_syntax_mt.methods")}
    interface = {f"hf_syntax_mt.methods.{m}" for m in ("registry", "base", "records", "columns", "supervision")}
    assert methods <= interface, methods


def test_the_data_side_and_the_train_script_import_no_method_module():
    """Issue 68's done-when, for every module of `data/` and `training/` (the test above names the spine's): what they
    need of a method they ask the registry's interface, or the list of built-in methods (`methods.builtin`: which
    methods' options are `SyntaxMTConfig` fields, for the train flags)."""
    interface = {f"hf_syntax_mt.methods.{m}" for m in ("registry", "base", "records", "columns", "supervision",
                                                        "builtin")}  # fmt: skip
    modules = [n for n in MODULES if n.startswith(("hf_syntax_mt.data.", "hf_syntax_mt.training."))]
    assert len(modules) > 20
    bad = {
        n: m for n in modules if (m := {i for i in imports(n) if i.startswith("hf_syntax_mt.methods.")} - interface)
    }
    assert not bad, bad


# the user-error types (issue 49) and the one library of checks (`Option` and the option checks the methods declare
# with): standard-library-only leaves that every module may import
LEAVES = {"hf_syntax_mt.errors", "hf_syntax_mt.validation"}


def test_methods_import_only_the_registry_and_each_other():
    for name in MODULES:
        if name.startswith("hf_syntax_mt.methods."):
            outside = {m for m in imports(name) if not m.startswith("hf_syntax_mt.methods")}
            assert outside <= {"hf_syntax_mt.vocabularies"} | LEAVES, (name, outside)


# The alignment package (issue 45): alignments out of the model, alignment files, `align` and AER. It builds on the
# model's recorded attention, the readers and the guided-alignment method, never on the train, evaluation or
# pipeline side; and no module of the package imports its `__init__` (a saved model's remote code bundles modules,
# and the `__init__` pulls in all of them).
ALIGNMENT_MAY_IMPORT = {"hf_syntax_mt.data.readers", "hf_syntax_mt.methods.guided_alignment"} | LEAVES


def test_the_alignment_package_is_one_concern_and_imports_only_below_it():
    package = {n for n in MODULES if n.startswith("hf_syntax_mt.alignment.")}
    assert package == {f"hf_syntax_mt.alignment.{m}" for m in ("aer", "cross_attention", "targets", "words")}
    for name in package:
        outside = imports(name) - package
        assert outside <= ALIGNMENT_MAY_IMPORT, (name, outside - ALIGNMENT_MAY_IMPORT)


def test_no_module_imports_the_alignment_package_init():
    # `hf_syntax_mt.alignment` (the __init__) re-exports the public names for users; inside the package every import
    # names the module that defines the name
    importers = sorted(n for n in MODULES if "hf_syntax_mt.alignment" in imports(n))
    assert importers == [], importers


def test_the_alignment_package_exports_every_public_name_of_its_modules():
    import hf_syntax_mt.alignment as package

    for name in sorted(n for n in MODULES if n.startswith("hf_syntax_mt.alignment.")):
        module = importlib.import_module(name)
        for public in module.__all__:
            assert getattr(package, public) is getattr(module, public), (name, public)
    assert set(package.__all__) >= {"align", "align_corpus", "alignment_error_rate", "AlignmentTargets"}


def test_the_leaves_import_nothing_of_the_package_but_each_other():
    """`errors` and `validation` stay leaves: importing them pulls in no other module of the package (so every
    module, the methods included, may import them without a circle)."""
    for name in LEAVES:
        assert imports(name) <= LEAVES, (name, imports(name) - LEAVES)


def test_method_inputs_are_not_parameters_of_the_spine():
    names = set(input_names()) | set(supervision_names())  # the document context's inputs included (issue 68)
    assert {"context_input_ids", "parent_positions"} <= names  # the check below is not vacuous
    tree = ast.parse(MODULES["hf_syntax_mt.modeling_syntax_mt"].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            params = {a.arg for a in node.args.args + node.args.kwonlyargs}
            assert not params & names, (node.name, params & names)


def test_flexattention_is_opt_in():
    """Issue 68: no module of the package imports `hf_syntax_mt.flex` (its compile, dynamo settings and globals) but
    the train script, inside the function its ``--flex_attention`` flag calls: a user switches it on by importing it
    or by the flag; the import graph sees the edge to it (its own imports)."""
    assert "hf_syntax_mt.attention_functions" in imports("hf_syntax_mt.flex")
    importers = sorted(name for name in MODULES if "hf_syntax_mt.flex" in imports(name))
    assert importers == ["hf_syntax_mt.training.script"], importers
    assert "hf_syntax_mt.flex" not in GRAPH["hf_syntax_mt.training.script"]["module"]  # at function level only


def method_words() -> set[str]:
    """What only a method may name: every registered method's options, inputs and supervision columns, and the name
    of each method that is more than one plain word (`document_context`; `pascal` quoted as a string below)."""
    from hf_syntax_mt.methods import registered

    words = set(input_names()) | set(supervision_names())
    for method in registered():
        words |= set(method.config_options)
        if "_" in method.name:
            words.add(method.name)
    return words


@pytest.mark.parametrize("module", ["hf_syntax_mt.modeling_syntax_mt", "hf_syntax_mt.pipeline_syntax_mt",
                                    "hf_syntax_mt.data.collator", "hf_syntax_mt.data.preprocess",
                                    "hf_syntax_mt.training.prepare", "hf_syntax_mt.training.trainer"])  # fmt: skip
def test_the_spine_and_the_pipeline_name_no_method_option_input_or_method(module):
    """Issue 68: the spine and the pipeline name no method, option or column, code and docstrings alike (document
    context included: its inputs, two-step training and document translation reach them through the hooks); what
    they need of a method they ask the registry."""
    import re

    from hf_syntax_mt.methods import registered

    text = MODULES[module].read_text()
    words = method_words()
    assert {"context_sentences", "context_input_ids", "encoder_pascal_heads", "document_context"} <= words
    found = sorted({w for w in words if re.search(rf"\b{re.escape(w)}\b", text)})
    quoted = sorted({m.name for m in registered() if re.search(rf"[`'\"]{m.name}[`'\"]", text)})
    assert not found and not quoted, (found, quoted)


def test_the_name_check_finds_a_method_option():
    """The check above, on a text that names an option, an input and a quoted method name."""
    import re

    text = "model(context_input_ids=ids)  # see `pascal`, context_sentences=2"
    words = method_words()
    assert sorted(w for w in words if re.search(rf"\b{re.escape(w)}\b", text)) == ["context_input_ids",
                                                                                  "context_sentences"]  # fmt: skip
    assert re.search(r"[`'\"]pascal[`'\"]", text)


def test_the_data_side_and_the_train_script_name_no_method_option():
    """Issue 68's done-when: no module of `data/` or `training/` names a method's option or a method of more than one
    word (code, docstrings and help texts alike); a flag or a message that needs one asks the registry. Columns may
    appear there (the public `*_from_word_ids` helpers of `data.subwords` are named after theirs)."""
    import re

    from hf_syntax_mt.methods import registered

    words = {o for m in registered() for o in m.config_options} | {m.name for m in registered() if "_" in m.name}
    assert {"context_sentences", "max_context_length", "guided_alignment_weight", "document_context"} <= words
    modules = [n for n in MODULES if n.startswith(("hf_syntax_mt.data.", "hf_syntax_mt.training."))]
    assert "hf_syntax_mt.training.script_args" in modules and "hf_syntax_mt.data.preprocess" in modules
    found = {}
    for name in modules:
        text = MODULES[name].read_text()
        if hits := sorted(w for w in words if re.search(rf"\b{re.escape(w)}\b", text)):
            found[name] = hits
    assert not found, found
