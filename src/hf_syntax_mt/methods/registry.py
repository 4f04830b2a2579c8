"""The method registry: the registered methods by name, in head order, and the lookups every reader asks (the spine,
the data side, the train script, the docs): which methods a config switches on (`active_methods`, `method_of`), where
their heads sit (`head_layout`, `head_kinds`), which columns they read (`input_columns`, `supervision_columns`,
`column_specs`), how many previous sentences of its document a sentence is read with (`document_window`,
`document_inputs`, `document_settings`), their losses and descriptions. State and lookups only: what a method is
lives in `base.py` (the `Method` base and its hooks), what one forward keeps in `records.py`, and the option checks in
`hf_syntax_mt.validation`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UserError
from ..validation import check_count, check_strings
from .base import Method
from .columns import Column, DataTransform

__all__ = [
    "DataOptions", "active_methods", "callbacks", "column_specs", "data_transforms", "describe", "document_columns",
    "document_inputs", "document_settings", "document_window", "get_method", "head_kinds", "head_layout", "input_columns", "input_names",
    "loss_names", "method_of", "on_change", "owned_fields", "parse_columns", "register", "registered",
    "supervision_columns", "supervision_names", "unregister",
]  # fmt: skip

_REGISTRY: dict[str, Method] = {}
_LISTENERS: list[Callable[[], None]] = []
_NAMES: dict[str, tuple[str, ...]] = {}  # input / supervision / loss names, rebuilt when the registry changes
_COLUMNS: dict[str, Column] = {}  # every declared column by name, rebuilt when the registry changes


def _changed() -> None:
    _NAMES.clear()
    _COLUMNS.clear()
    for listener in _LISTENERS:
        listener()


def register(method: Method, after: str | None = None) -> Method:
    """Add `method` under `method.name`: after the methods registered before it (its heads come after theirs), or
    right after the method named `after`."""
    if not method.name or not method.name.isidentifier():
        raise UserError(f"A method needs a name that is a Python identifier, got {method.name!r}.")
    if method.name in _REGISTRY and type(_REGISTRY[method.name]) is not type(method):
        raise UserError(
            f"A method named {method.name!r} is already registered ({type(_REGISTRY[method.name]).__name__})."
        )
    if after is not None and after == method.name:
        raise UserError(f"register({method.name!r}, after={after!r}): a method cannot come after itself; give the "
                        f"name of another registered method ({[n for n in _REGISTRY if n != method.name]}).")  # fmt: skip
    if after is not None and after not in _REGISTRY:
        raise UserError(f"register(..., after={after!r}): no method {after!r} is registered; use one of "
                        f"{list(_REGISTRY)}.")  # fmt: skip
    _REGISTRY[method.name] = method
    if after is not None:
        order = [n for n in _REGISTRY if n != method.name]
        order.insert(order.index(after) + 1, method.name)
        items = {n: _REGISTRY[n] for n in order}
        _REGISTRY.clear()
        _REGISTRY.update(items)
    _changed()
    return method


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _changed()


def on_change(listener: Callable[[], None]) -> None:
    """Call `listener` now and whenever a method is registered (the model refreshes its forward signature)."""
    _LISTENERS.append(listener)
    listener()


def registered() -> list[Method]:
    return list(_REGISTRY.values())


def get_method(name: str) -> Method:
    if name not in _REGISTRY:
        raise KeyError(f"No method {name!r} is registered; registered: {sorted(_REGISTRY)}.")
    return _REGISTRY[name]


def active_methods(config) -> list[Method]:
    """The methods a config switches on (none for a config without the syntax options, e.g. a `MarianConfig`)."""
    if not hasattr(config, "method_options"):
        return []
    return [m for m in _REGISTRY.values() if m.active(config)]


def method_of(config, name: str) -> Method | None:
    """The registered method `name` when `config` switches it on, else None (also for a config without the syntax
    options, e.g. a `MarianConfig`): how code outside the method asks what the method derives from the config
    (`method_of(config, "document_context") is not None`, then the method's own answers)."""
    method = _REGISTRY.get(name)
    return method if method is not None and hasattr(config, "method_options") and method.active(config) else None


def head_layout(config, site: str, layer: int, num_heads: int) -> list[tuple[Method, int, int]]:
    """`(method, start, stop)` for every method with heads in this attention, in registry order."""
    groups, start = [], 0
    for method in _REGISTRY.values():
        k = method.heads(config, site, layer)
        if k == -1:
            k = num_heads - start
        if k:
            groups.append((method, start, start + k))
            start += k
    if start > num_heads:
        taken = {m.name: stop - begin for m, begin, stop in groups}
        raise UserError(
            f"{site} layer {layer} asks for {start} syntax heads {taken} but has only {num_heads} attention heads: "
            "lower the per-layer counts."
        )
    return groups


def head_kinds(config, site: str, layer: int, num_heads: int) -> list[tuple[str, int, int]]:
    """`(kind, start, stop)` for every kind of head in this attention (`Method.kinds`: `"pascal"`, `"tree"`,
    `"lisa"`, `"dbsa"`, ...), in head order: the one answer to "which heads are LISA's" (probing reads it)."""
    out = []
    for method, start, stop in head_layout(config, site, layer, num_heads):
        kinds = method.kinds(config, site, layer)
        if len(kinds) == 1:
            kinds = {next(iter(kinds)): stop - start}  # the one kind takes the group (also for `-1`)
        for kind, k in kinds.items():
            if k:
                out.append((kind, start, start + k))
                start += k
    return out


def owned_fields(method: Method) -> tuple[str, ...]:
    """Every config option `method` declares (`config_options`; a built-in method's are `SyntaxMTConfig` fields)."""
    return tuple(method.config_options)


def _names(kind: str) -> tuple[str, ...]:
    if kind not in _NAMES:  # cached: the models ask at every decoding step
        # plain strings, not the `Column`s (a str subclass that torch.compile's fullgraph tracing cannot hold)
        _NAMES[kind] = tuple(dict.fromkeys(str(n) for m in _REGISTRY.values() for n in getattr(m, kind)))
    return _NAMES[kind]


def input_names() -> tuple[str, ...]:
    """Every model input any registered method reads (the one list of syntax keyword arguments)."""
    return _names("inputs")


def supervision_names() -> tuple[str, ...]:
    """Every training-only supervision column any registered method reads."""
    return _names("supervision")


def input_columns(config) -> list[str]:
    """The data columns a model with `config` reads at training and inference."""
    return list(dict.fromkeys(c for m in active_methods(config) for c in m.input_columns(config)))


def parse_columns(config) -> list[str]:
    """The input columns computed from the source parse (`Column.parse == "source"`: what the pipeline must parse new
    text for)."""
    specs = column_specs()
    return [specs[c] for c in input_columns(config) if c in specs and specs[c].parse == "source"]


def supervision_columns(config) -> list[str]:
    """The training-only columns (parse supervision) a model with `config` learns from."""
    return list(dict.fromkeys(c for m in active_methods(config) for c in m.supervision_columns(config)))


def column_specs() -> dict[str, Column]:
    """Every column any registered method declares (`inputs` and `supervision`), by name, with its kind; a name
    declared without a kind is a `"source"` column padded with 0. Two methods declaring one name must agree."""
    if not _COLUMNS:
        specs: dict[str, Column] = {}
        for method in _REGISTRY.values():
            for name in (*method.inputs, *method.supervision):
                column = name if isinstance(name, Column) else Column(name, "source")
                known = specs.get(name)
                if known is not None and (known.kind, known.pad, known.dtype, known.parse, known.compute) != (
                    column.kind, column.pad, column.dtype, column.parse, column.compute
                ):  # fmt: skip
                    raise UserError(f"Method {method.name!r} declares column {name!r} as {column.kind!r}, which "
                                    f"another method declares as {known.kind!r}.")  # fmt: skip
                specs[str(name)] = column
        _COLUMNS.update(specs)
    return _COLUMNS


def data_transforms(config) -> list[DataTransform]:
    """The data steps the methods `config` switches on add to the train script (`Method.data_transforms`), in
    registry order."""
    return [t for m in active_methods(config) for t in m.data_transforms(config)]


def callbacks(config) -> list[str]:
    """The trainer callbacks (``"module:Class"``) the methods `config` switches on need, each once."""
    return list(dict.fromkeys(c for m in active_methods(config) for c in m.callbacks(config)))


def loss_names() -> tuple[str, ...]:
    return _names("losses")


def describe(config) -> list[str]:
    """One line per active method (model cards, signatures)."""
    return [line for m in active_methods(config) if (line := m.describe(config))]


def document_window(config) -> int:
    """How many previous source sentences of its document each sentence is read with (`Method.document_window`, the
    most any active method reads): 0 for a sentence-level model, or a config without the syntax options."""
    return max((m.document_window(config) for m in active_methods(config)), default=0)


class DataOptions:
    """What data made without a model reads as its config (`hf_syntax_mt.data.SyntaxMTPreprocessor` without
    ``config=``): the method options given (``max_context_length=6``), else each registered method's declared default.
    Each option given must be one a registered method declares, and passes that option's check."""

    #: a config's per-method options of methods registered outside the package: none given here (their defaults)
    method_options: dict = {}

    def __init__(self, **options):
        declared = {name: (m, option) for m in _REGISTRY.values() for name, option in m.config_options.items()}
        unknown = sorted(set(options) - set(declared))
        if unknown:
            raise UserError(f"{unknown} are not options of a registered method; the methods declare "
                            f"{sorted(declared)}.")  # fmt: skip
        self._given = dict(options)
        self._options = {name: option.default for name, (_, option) in declared.items()} | options
        for name in options:
            check = declared[name][1].check
            if check is not None:
                check(self, name)

    def __getattr__(self, name: str):
        options = self.__dict__.get("_options", {})
        if name not in options:
            raise AttributeError(name)
        return options[name]

    def __reduce__(self):  # picklable (the preprocessor that holds it goes to `datasets.map` workers)
        return (_data_options, (self._given,))

    def __repr__(self) -> str:
        return f"DataOptions({', '.join(f'{k}={v!r}' for k, v in self._given.items())})"


def _data_options(options: dict) -> DataOptions:
    return DataOptions(**options)


def _document_methods(config) -> list[Method]:
    """The methods that read a document: those `config` switches on, or for data made without a model
    (`DataOptions`) every registered method with a `document_option` (the data has the documents, so they read them)."""
    if isinstance(config, DataOptions):
        return [m for m in _REGISTRY.values() if m.document_option]
    return [m for m in active_methods(config) if m.document_option]


def document_columns(config) -> list[str]:
    """The columns `document_inputs` makes for `config` (a model's config or `DataOptions`): the columns of kind
    ``"context"`` the methods that read a document declare."""
    return list(dict.fromkeys(str(c) for m in _document_methods(config) for c in m.inputs
                              if isinstance(c, Column) and c.kind == "context"))  # fmt: skip


def document_inputs(config, tokenizer, previous: list[str]) -> dict[str, list]:
    """The inputs one sentence gets from its previous source sentences (a list of strings, oldest first), from every
    method that reads a document (`Method.document_inputs`; `config` a model's config, or `DataOptions` for data made
    without one): input name -> one unpadded row. The pipeline and the preprocessor both ask this."""
    previous = check_strings(previous, "previous", "strings (the previous source sentences, oldest first)")
    return {
        name: row
        for m in _document_methods(config)
        for name, row in m.document_inputs(config, tokenizer, previous).items()
    }


def document_settings(config, window: int | None = None) -> str:
    """The options that set `document_window`, as messages name them: with their values in `config`
    (`"context_sentences=0"`), or set to read `window` sentences (`"context_sentences=2"`, for an example)."""
    window = check_count(window, "window (previous sentences read)", allow_none=True, maximum=1024)
    active = active_methods(config)
    return ", ".join(
        f"{m.document_option}={(m.document_window(config) if m in active else 0) if window is None else window}"
        for m in _REGISTRY.values() if m.document_option
    )  # fmt: skip
