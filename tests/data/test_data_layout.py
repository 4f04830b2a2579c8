"""The layout of the data package: its modules in the order the data flows, no import circle, nothing from the model,
pipeline, evaluation or training side, and every module short enough to read (issue 16).

The graph is read from the source with ``ast`` (module-level and function-level imports alike, ``TYPE_CHECKING``
blocks included), so it holds whether or not an import ever runs.
"""

import ast
import importlib
from pathlib import Path

import pytest

import hf_syntax_mt

SRC = Path(hf_syntax_mt.__file__).parent  # src/hf_syntax_mt
DATA = SRC / "data"

# The flow: readers (+ the parse data class) -> parsers -> subwords -> document context -> preprocess -> collator.
# A module may import only modules before it. `parser_config` (a parser from a model config) and `parser_training` (a
# spaCy parser trained on treebanks) follow the parsers, `parse_corpus` (a text file parsed to CoNLL-U) the preprocessor,
# `multitask` (parse + translate rows for the preprocessor) the preprocessor; the package `__init__` re-exports what
# comes before. (The guided-alignment targets built on the preprocessed rows are in `hf_syntax_mt.alignment.targets`.)
FLOW = [
    "parsed",
    "readers",
    "stanza_resources",
    "cache_shards",
    "parsers",
    "parser_config",
    "parser_training",
    "subwords",
    "documents",
    "preprocess",
    "multitask",
    "parse_corpus",
    "collator",
    "__init__",
]

# What the data side never imports, directly or through another module of the package.
FORBIDDEN = [
    "hf_syntax_mt.configuration_syntax_mt",  # the feature vocabularies are in hf_syntax_mt.vocabularies
    "hf_syntax_mt.modeling_syntax_mt",
    "hf_syntax_mt.pipeline_syntax_mt",
    "hf_syntax_mt.evaluation",
    "hf_syntax_mt.training",
]

MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_exists(name: str) -> bool:
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(path: Path) -> set[str]:
    """The modules of the package that ``path`` imports, anywhere in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from x import y`: y is a module when a file of that name exists, else a name defined in x
            candidates = [f"{base}.{a.name}" if module_exists(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        found.update(c for c in candidates if c.split(".")[0] == "hf_syntax_mt")
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """Every module of the package -> the modules of the package it imports."""
    return {module_name(p): imported_modules(p) for p in sorted(SRC.rglob("*.py"))}


def test_every_data_module_has_its_place_in_the_flow():
    modules = sorted(p.stem for p in DATA.glob("*.py"))
    assert sorted(FLOW) == modules, "a new module of hf_syntax_mt.data needs its place in FLOW (test_layout.py)"


def test_data_modules_import_only_earlier_modules_of_the_flow(graph):
    late = []
    for path in DATA.glob("*.py"):
        for target in graph[module_name(path)]:
            if target == "hf_syntax_mt.data":
                target = "hf_syntax_mt.data.__init__"
            if target.startswith("hf_syntax_mt.data."):
                stem = target.rsplit(".", 1)[1]
                if FLOW.index(stem) >= FLOW.index(path.stem):
                    late.append(f"data.{path.stem} imports data.{stem}")
    assert not late, f"imports against the flow {' -> '.join(FLOW)}: {sorted(late)}"


def test_no_data_module_is_on_an_import_cycle(graph):
    def reachable(start: str) -> set[str]:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        return seen

    on_cycle = [name for name in graph if name.startswith("hf_syntax_mt.data") and name in reachable(name)]
    assert not on_cycle, f"modules that import themselves through others: {on_cycle}"


def test_data_never_reaches_the_model_pipeline_evaluation_or_training_side(graph):
    bad = {}
    for path in DATA.glob("*.py"):
        seen, todo = set(), [module_name(path)]
        while todo:  # through every module of the package it imports, not only its own imports
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        if reached := sorted(seen & set(FORBIDDEN)):
            bad[f"data.{path.stem}"] = reached
    assert not bad, f"data modules reaching the model / pipeline / evaluation / training side: {bad}"


def test_no_data_module_is_longer_than_600_lines():
    long = {p.name: n for p in DATA.glob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules of hf_syntax_mt.data over {MAX_LINES} lines: {long}; split them"


def test_the_graph_sees_function_level_imports():
    """The walk must see imports inside functions (documents once imported preprocess lazily, closing a circle)."""
    tree = ast.parse("def f():\n    from .preprocess import x\n")
    assert any(isinstance(n, ast.ImportFrom) and n.module == "preprocess" for n in ast.walk(tree))
    assert "hf_syntax_mt.data.readers" in imported_modules(DATA / "documents.py")
    assert "hf_syntax_mt.validation" in imported_modules(DATA / "subwords.py")  # inside `_resolve_columns`


# The names each of these modules exported before the layout change of issue 16: they stay importable from there.
# (The modules that only re-exported moved names, `data.textio` and `data.synthetic`, are gone: issue 28.)
OLD_PATHS = {
    "hf_syntax_mt.data.parsers": [
        "ParsedSentence",
        "Parser",
        "ParserNotAvailableError",
        "MissingParseError",
        "StanzaParser",
        "SpacyParser",
        "ConllParser",
        "CachedParser",
        "read_conllu",
        "iter_conllu",
        "merge_sentences",
        "get_parser",
        "PARSER_BACKENDS",
        "normalize_whitespace",
    ],
    "hf_syntax_mt.data.preprocess": [
        "SyntaxMTPreprocessor",
        "prepare_dataset",
        "parse_texts",
        "load_parallel_files",
        "read_parallel_conllu",
    ],
    "hf_syntax_mt.data.documents": [
        "DocumentContext",
        "add_document_context",
        "encode_context",
        "read_doc_ids",
        "read_documents",
    ],
    "hf_syntax_mt.data.subwords": ["ParsedSentence", "align_parse"],
}  # fmt: skip  (issue 58: configuration_syntax_mt no longer re-exports the vocabularies: hf_syntax_mt.vocabularies)


@pytest.mark.parametrize("module", sorted(OLD_PATHS))
def test_old_import_paths_keep_their_names(module):
    mod = importlib.import_module(module)
    missing = [name for name in OLD_PATHS[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"
    assert all(hasattr(mod, name) for name in getattr(mod, "__all__", []))
