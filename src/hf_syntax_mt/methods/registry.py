"""The method registry: every syntax- or document-aware method is one `Method` registered by name.

A method owns, in one place:

- its config options (`config_options`, one `Option` each: type, default, docstring and check), which become
  `SyntaxMTConfig` fields when the method is built in (registered before `SyntaxMTConfig` is created, i.e. listed in
  `methods/builtin.py`; the config stays flat and its docstring lists them), and the checks between them
  (`validate`); a method registered later keeps its options under `config.method_options[name]`;
- the self- and cross-attention heads it takes in each layer (`heads`, split into named kinds by `kinds`); heads
  are given out in registry order, so in a layer the heads of the first registered method come first. Every reader
  of head positions asks `head_layout` / `head_kinds` (the one source of head order);
- the data columns it needs: model inputs (`inputs`, the preprocessor, collator, pipeline and train script ask
  `input_columns`) and training-only supervision (`supervision`), each a `Column` that says what its values are
  aligned with, how they are padded and which parse they are computed from (`column_specs`: the data side reads
  these and nothing else), and the check of their values in a collated batch (`check_batch`);
- its attention hooks, applied to its own heads on the eager score path of `SyntaxMTAttention`
  (`query` -> `scores` -> `logits` -> `probs` -> `record`), and the per-forward preparation of its inputs
  (`prepare`), which reach the attention as keyword arguments, the way transformers v5 passes attention kwargs;
  what several methods derive from the same inputs (tree distances) is computed once per forward (`shared`);
- optionally, a fused form of those hooks (`fused`): a FlexAttention `score_mod` (`score_mod`) or an additive
  logit bias that SDPA takes as its mask (`attention_bias`), used instead of the eager path where
  `config.syntax_attention_kernel` and the device allow it (the eager path stays the reference);
- its auxiliary loss (`loss`, with `loss_weights`), added to the cross-entropy by the model;
- its parameters (`build_attention`, `build_encoder`, `build_model`, `init_weights`) and a one-line description
  for model cards and signatures (`describe`);
- what the tiny-config tester needs of it (`tester_config`: the options that switch it on at the tester's size;
  `trainable`: the parameters one training step must change), so that tests/models/test_every_method.py holds no
  table of its own.

Adding a method is one module with a `Method` subclass and `register(MyMethod())`: the attention class, the
encoder, the decoder and the generation class need no edit (tests/models/test_registry.py shows it with a toy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..errors import UserError, UserTypeError
from .columns import Column

SITES = ("encoder", "decoder", "cross")  # encoder self-attention, decoder self-attention, decoder cross-attention


@dataclass
class HeadRecord:
    """What a supervised self-attention head group stored: masked logits, raw scores and probabilities, each
    `(B, k, T, S)` for the group's k heads."""

    logits: torch.Tensor
    scores: torch.Tensor
    probs: torch.Tensor


@dataclass
class AttentionRecord:
    """Attention kept during one forward for the auxiliary losses, `align()` and the symmetric model (one typed
    record instead of a store keyed by tuples).

    Attributes:
        heads: `(site, layer, kind)` -> `HeadRecord` of a method's heads (e.g. `("encoder", 0, "dbsa")`).
        cross_layers: decoder layers whose cross-attention probabilities are wanted.
        cross: decoder layer -> its cross-attention probabilities `(B, H, T, S)` (with gradient).
        record_heads: whether head groups store their `HeadRecord` (only when a loss reads them).
    """

    record_heads: bool = False
    cross_layers: set[int] = field(default_factory=set)
    heads: dict[tuple[str, int, str], HeadRecord] = field(default_factory=dict)
    cross: dict[int, torch.Tensor] = field(default_factory=dict)

    def wants_cross(self, layer: int) -> bool:
        return layer in self.cross_layers

    def of_kind(self, site: str, kind: str) -> list[HeadRecord]:
        """The head records of one kind on one site, in layer order."""
        return [r for (s, _, k), r in sorted(self.heads.items(), key=lambda kv: kv[0][1]) if s == site and k == kind]


@dataclass
class AttentionContext:
    """What a hook sees besides its tensors: the attention module, its site and layer, the additive mask
    `(B|1, 1, T, S)` or None (whatever mask format the configured kernel takes), the cache, the method inputs (what
    the active methods' `prepare` gave; never the kernel's kwargs) and the record (or None). The mask
    is set for the eager path and SDPA's bias; a score_mod, in FlexAttention, gets padding from the kernel instead
    (`mask` is then None)."""

    module: nn.Module
    site: str
    mask: torch.Tensor | None
    past_key_values: object
    inputs: dict
    record: AttentionRecord | None


@dataclass(frozen=True)
class Option:
    """A config option a method declares in its own module (`Method.config_options`). For a built-in method it becomes a
    `SyntaxMTConfig` field: `type` its annotation (a `list[...]` given as a tuple is stored as a list; a
    `float | int` is checked to be finite), `default` its default (off: None, 0 or False; never a mutable list),
    `doc` its entry in `help(SyntaxMTConfig)` (one sentence or more, without the type line) and `check` its
    validator, `check(config, name)` raising a `UserError` (e.g. `check_per_layer_heads`, or
    `checking(check_weight, hint)` for a shared check with a hint), run before the method's `validate`."""

    type: Any
    default: Any
    doc: str
    check: Callable[[Any, str], None] | None = None


def checking(check: Callable, *args, **kwargs) -> Callable[[Any, str], None]:
    """`check(config, name, *args, **kwargs)` as an `Option.check`: `checking(check_int, 1, hint="N_c")`."""

    def run(config, name: str) -> None:
        check(config, name, *args, **kwargs)

    return run


def check_options(method: Method, config) -> None:
    """Run the `check` of every option `method` declares (built in: a config field), then its `validate`."""
    for name, option in method.config_options.items():
        if option.check is not None and hasattr(config, name):
            option.check(config, name)
    method.validate(config)


class ForwardInputs(dict):
    """The method inputs of one encoder forward (input name -> tensor or None), as `Method.prepare` receives them,
    plus what methods derive from them, computed once per forward and shared (`shared`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.derived: dict[str, Any] = {}


def shared(inputs: dict, key: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, computed once per forward under `key` when `inputs` is the forward's `ForwardInputs`: methods
    that derive the same tensor from the same inputs (e.g. `"tree_distances"` from `word_index` and `word_heads`)
    call this with the same key and share one result. With a plain dict it is computed each call."""
    if not isinstance(inputs, ForwardInputs):
        return compute()
    if key not in inputs.derived:
        inputs.derived[key] = compute()
    return inputs.derived[key]


class Method:
    """Base class of a registered method; every hook defaults to "does nothing"."""

    name: str = ""
    #: config options the method declares (name -> `Option`): `SyntaxMTConfig` fields when built in
    config_options: dict[str, Option] = {}
    #: what the tiny-config tester (tests/models/test_every_method.py, 2 + 2 layers of 4 heads) switches the method
    #: on with: config overrides; None fails the tester's coverage test until it is given
    tester_config: dict | None = None
    #: fragments of the parameter names one training step must change (the tester checks each)
    trainable: tuple[str, ...] = ()
    #: model inputs read at training and inference (data columns of the same names; a `Column` says its kind)
    inputs: tuple[str, ...] = ()
    #: training-only supervision columns (given to `forward()` with the labels, never to the encoder)
    supervision: tuple[str, ...] = ()
    #: names of the auxiliary losses it adds
    losses: tuple[str, ...] = ()
    #: the fused form of its hooks, if any: "score_mod" (`score_mod`, run in FlexAttention) or "bias"
    #: (`attention_bias`, run in SDPA as an additive mask); None: its heads always take the eager path when they
    #: need it
    fused: str | None = None
    #: what the method needs at inference that a plain Marian model lacks, for the export's refusal ("a parse at
    #: inference: ..." or "extra modules: ..."); None: its inference graph is Marian's once `export_state` has run
    #: (a training-only loss, or parameters that fold into Marian's weights). A method that does not set it is
    #: refused by `hf_syntax_mt.export`, so a new method is never exported by mistake.
    inference_needs: str | None = "code of its own at inference (the method does not declare `inference_needs = None`)"

    @property
    def from_parse(self) -> bool:
        """Whether its inputs are computed from the source parse (the pipeline parses new text for them)."""
        return any(getattr(c, "parse", None) == "source" for c in self.inputs)

    def active(self, config) -> bool:
        return False

    def validate(self, config) -> None:
        """Checks between its options (each option's own check is its `Option.check`, run first): raise a
        `UserError` naming the option and what to use."""

    def heads(self, config, site: str, layer: int) -> int:
        """Number of heads this method takes in the self-attention (`"encoder"`, `"decoder"`) or cross-attention
        (`"cross"`) of `layer`; `-1` means every head of that attention."""
        return 0

    def kinds(self, config, site: str, layer: int) -> dict[str, int]:
        """The method's heads in this attention by kind, in order (`{"lisa": 1, "dbsa": 2}`); by default one kind
        named after the method. The counts add up to `heads` (`-1`: every head)."""
        return {self.name: self.heads(config, site, layer)}

    def input_columns(self, config) -> tuple[str, ...]:
        return self.inputs if self.active(config) else ()

    def supervision_columns(self, config) -> tuple[str, ...]:
        return self.supervision if self.active(config) else ()

    def describe(self, config) -> str | None:
        """One line for model cards and signatures, or None when inactive."""
        return None

    def check_batch(self, batch: dict) -> None:
        """Check the values of its columns in a batch the collator built (CPU tensors, before they reach a device,
        where reading values is a host sync); raise a `UserError` naming the column, row and value."""

    # --- parameters -----------------------------------------------------------------------------------------
    def build_attention(self, attention: nn.Module, config, site: str, layer: int, num_heads: int) -> None:
        """Add this method's parameters to an attention module that has `num_heads` of its heads (called for every
        attention module, with `num_heads=0` where the method takes none)."""

    def build_encoder(self, encoder: nn.Module, config) -> None:
        """Add parameters to the encoder (e.g. feature embeddings, the document context's encoder)."""

    def build_layer(self, layer: nn.Module, config, side: str, layer_idx: int) -> None:
        """Add a sublayer to an `"encoder"` or `"decoder"` layer (called for every layer; run by `sublayer`)."""

    def build_model(self, model: nn.Module, config) -> None:
        """Add parameters to the translation model (e.g. the global-fertility network)."""

    def init_weights(self, module: nn.Module, config) -> None:
        """Initialise this method's parameters held by `module` (called by `_init_weights` for every module)."""

    def document_level(self, name: str) -> bool:
        """Whether parameter `name` is one this method adds for document-level reading (theta_d of two-step
        training: `freeze_sentence_level_parameters` keeps only those trainable)."""
        return False

    # --- forward --------------------------------------------------------------------------------------------
    def embed(self, encoder: nn.Module, input_ids: torch.Tensor, embeds: torch.Tensor, inputs: dict) -> torch.Tensor:
        """Token embeddings `(B, S, D)` -> embeddings with this method's input (e.g. linguistic features)."""
        return embeds

    def prepare(self, config, inputs: dict, input_shape: torch.Size, attention_mask) -> dict:
        """Check this method's encoder inputs once per forward and return the attention inputs they become (the
        hooks' `ctx.inputs`, e.g. tree weights from `word_index` / `word_heads`; never given to the kernel)."""
        return {}

    def encoder_states(self, encoder: nn.Module, config, inputs: dict, batch_size: int) -> tuple[dict, dict]:
        """Once per encoder forward, for every registered method (active or not: an inactive one may warn about its
        inputs): (what its `sublayer` reads in every encoder layer, fields of the encoder output that the decoder
        reads through `decoder_states`, batch-first so that `generate()` copies them for beams)."""
        return {}, {}

    def decoder_states(self, config, encoder_outputs) -> dict:
        """Once per decoder forward (each decoding step): what its `sublayer` reads in every decoder layer, from the
        encoder output fields its `encoder_states` gave."""
        return {}

    def sublayer(self, layer: nn.Module, hidden_states: torch.Tensor, states: dict) -> torch.Tensor:
        """`(B, T, D)` -> `(B, T, D)`: its sublayer of `layer` (`build_layer`), after the layer's self-attention
        block; `states` holds what the `encoder_states` / `decoder_states` of the active methods gave."""
        return hidden_states

    def needs_eager(self, ctx: AttentionContext) -> bool:
        """Whether its heads take the eager score path in this call (default: always, since its hooks change the
        scores or probabilities; a method whose hooks only record overrides it)."""
        return True

    def query(self, ctx: AttentionContext, query: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """The queries `(B, k, T, d)` of this method's heads `start..stop-1`."""
        return query

    def scores(self, ctx: AttentionContext, scores: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Scaled dot-product scores `(B, k, T, S)` of its heads, before the mask."""
        return scores

    def logits(self, ctx: AttentionContext, logits: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Masked logits `(B, k, T, S)` of its heads, before the softmax."""
        return logits

    def probs(self, ctx: AttentionContext, probs: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Attention probabilities `(B, k, T, S)` of its heads, before dropout."""
        return probs

    def record(self, ctx: AttentionContext, record: HeadRecord, start: int, stop: int) -> None:
        """Store what the loss needs in `ctx.record` (called only when a record is kept)."""

    def score_mod(self, ctx: AttentionContext, start: int, stop: int) -> Callable:
        """(`fused = "score_mod"`) A FlexAttention `score_mod(score, b, h, q_idx, kv_idx)` equal to this method's
        `scores` hook on its heads: `score` is the scaled dot product of one query/key pair, `h` the head *within
        this method's group* (0..stop-start-1). The attention masks padding after it. It is compiled (on CUDA),
        once for every layer and pass: let it read tensors only (captured in its closure), never a Python number,
        string or branch that differs between layers or passes, or each value compiles another graph, nor a
        module-level float (dynamo makes it a graph input, which breaks the backward; `hf_syntax_mt.fused_kernels`)."""
        raise NotImplementedError(f"Method {self.name!r} declares fused={self.fused!r} but has no score_mod.")

    def attention_bias(
        self, ctx: AttentionContext, query: torch.Tensor, key: torch.Tensor, start: int, stop: int
    ) -> torch.Tensor:
        """(`fused = "bias"`) The additive bias `(B, k, T, S)` that its `logits` hook adds to the masked logits of
        its heads, from their queries `(B, k, T, d)` (after the `query` hook) and keys `(B, k, S, d)`; the
        attention runs the heads in SDPA with `mask + bias` as the mask."""
        raise NotImplementedError(f"Method {self.name!r} declares fused={self.fused!r} but has no attention_bias.")

    # --- objective ------------------------------------------------------------------------------------------
    def wants_record(self, model: nn.Module, batch: dict) -> tuple[bool, set[int]]:
        """(whether head groups must store their records, the cross-attention layers to keep) for this batch."""
        return False, set()

    def loss(self, model: nn.Module, record: AttentionRecord, batch: dict, outputs) -> dict[str, torch.Tensor]:
        """Auxiliary losses, summed over tokens (the model divides by the target tokens), unweighted."""
        return {}

    def loss_weights(self, config) -> dict[str, float]:
        return {}

    # --- export ---------------------------------------------------------------------------------------------
    def export_state(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """(`inference_needs = None`) Turn `state`, a copy of `model`'s state dict, into a plain `MarianMTModel`'s,
        in place: fold this method's parameters into Marian's weights, delete those only training reads."""


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
        _NAMES[kind] = tuple(dict.fromkeys(n for m in _REGISTRY.values() for n in getattr(m, kind)))
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


def loss_names() -> tuple[str, ...]:
    return _names("losses")


def describe(config) -> list[str]:
    """One line per active method (model cards, signatures)."""
    return [line for m in active_methods(config) if (line := m.describe(config))]


def per_layer(config, name: str, side: str) -> list[int]:
    """The per-layer head counts of option `name` (zeros when unset)."""
    return getattr(config, name) or [0] * getattr(config, f"{side}_layers")


def check_per_layer_heads(config, name: str) -> None:
    """A per-layer head-count option (`encoder_pascal_heads=[2, 0, 0]`): one int in 0..heads per layer."""
    heads = getattr(config, name)
    if heads is None:
        return
    side = name.split("_")[0]
    n_layers, n_heads = getattr(config, f"{side}_layers"), getattr(config, f"{side}_attention_heads")
    example = [1] + [0] * (n_layers - 1)
    if isinstance(heads, (str, bytes)) or not isinstance(heads, (list, tuple)):  # "1,1" or 2: not one int per layer
        raise UserTypeError(f"{name}={heads!r} must be a list of head counts, one int per {side} layer "
                            f"({side}_layers={n_layers}), e.g. {example}.")  # fmt: skip
    if len(heads) != n_layers:
        raise UserError(
            f"{name} has {len(heads)} entries but the model has {side}_layers={n_layers}: give one number "
            f"of heads per {side} layer, e.g. {[1] + [0] * (n_layers - 1)}."
        )
    for layer, k in enumerate(heads):
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= n_heads:
            raise UserError(
                f"{name}[{layer}]={k!r} but {side}_attention_heads={n_heads}: each entry must be an int in "
                f"0..{n_heads}."
            )


def check_weight(config, name: str, hint: str = "0 switches it off") -> None:
    """A loss weight: a finite number >= 0."""
    value = getattr(config, name)
    if isinstance(value, bool) or not value >= 0 or value == float("inf"):
        raise UserError(f"{name}={value!r} must be a finite number >= 0 ({hint}).")


def check_positive(config, name: str, hint: str = "") -> None:
    """A finite number (not a bool) > 0: a width, a scale or an initial value that 0 would break (e.g. an initial
    weight behind a softplus); loss weights, where 0 switches a term off, use `check_weight`."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise UserError(f"{name}={value!r} must be a finite number > 0{f' ({hint})' if hint else ''}.")


def check_int(config, name: str, low: int, high: int | None = None, hint: str = "") -> None:
    """An int option (not a bool) in ``low..high`` (``high`` None: no upper bound); ``hint`` says what it means."""
    value = getattr(config, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise UserError(f"{name}={value!r} must be an int {bounds}{f' ({hint})' if hint else ''}.")


def check_probability(config, name: str, hint: str = "") -> None:
    """A probability option: a number (not a bool) in ``[0, 1]``."""
    value = getattr(config, name)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise UserError(
            f"{name}={value!r} is a probability: it must be a number in [0, 1]{f' ({hint})' if hint else ''}."
        )


def check_bool(config, name: str, hint: str = "") -> None:
    """A switch: True or False (not 0, 1 or a string)."""
    value = getattr(config, name)
    if not isinstance(value, bool):
        raise UserError(f"{name}={value!r} must be True or False{f' ({hint})' if hint else ''}.")


def check_choice(config, name: str, choices, hint: str = "") -> None:
    """An option that takes one of a fixed set of values."""
    value = getattr(config, name)
    if value not in choices:
        raise UserError(f"{name}={value!r} must be one of {tuple(choices)}{f' ({hint})' if hint else ''}.")


def check_layer_list(config, name: str, side: str, hint: str = "") -> None:
    """An optional list of distinct `side` layer indices (0-based), e.g. `alignment_bias_layers=[1]`."""
    layers, n = getattr(config, name), getattr(config, f"{side}_layers")
    if layers is None:
        return
    hint = f" ({hint})" if hint else ""
    for layer in layers:
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n:
            raise UserError(
                f"{name} contains {layer!r} but the model has {side}_layers={n}: give distinct {side} layer indices "
                f"in 0..{n - 1}, e.g. [{n - 1}]{hint}."
            )
    if len(set(layers)) != len(layers):
        raise UserError(f"{name}={layers!r} lists a layer twice: give distinct {side} layer indices{hint}.")


def check_decoder_layer(config, name: str, hint: str) -> None:
    """An optional decoder layer index (0-based), or None."""
    if getattr(config, name) is not None:
        n = config.decoder_layers
        check_int(config, name, 0, n - 1, f"the model has decoder_layers={n}: a decoder layer index, {hint}")
