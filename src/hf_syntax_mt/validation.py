"""The package's one library of checks at its boundaries: each raises `UserTypeError` (a wrong type) or `UserError` (a
wrong value) naming the argument, field or index, the value, and what to pass. Standard library only: every module of
the package may import it (the methods, the config, the pipeline, the CLI).

Two faces of the same checks:

- **arguments** (``check_*(value, name, ...)``, returning the checked value): a ``str`` where a sequence of strings is
  meant (it would be iterated by character), ``None`` or other non-strings among the entries, wrong nesting, line
  spans out of range, counts;
- **config options** (``check_*(config, name, ...)``, an `Option.check`): the field `name` of a config, read with
  ``getattr`` (ints in a range, loss weights, positive numbers, probabilities, switches, choices, per-layer head
  counts, layer indices). `Option` declares an option of a method (type, default, doc and one of these checks), and
  `checking` gives a check its extra arguments.

Each test is written once and shared: an int (`_is_int`; `_int_in` for a config value, which JSON must write), a
finite number (`_is_finite`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import UserError, UserTypeError

__all__ = [
    "Option", "check_bool", "check_choice", "check_count", "check_decoder_layer", "check_finite", "check_int",
    "check_layer_list", "check_per_layer_heads", "check_positive", "check_probability", "check_sequence",
    "check_spans", "check_string_lists", "check_strings", "check_weight", "checking", "shown",
]  # fmt: skip


def shown(value, width: int = 60) -> str:
    """``repr(value)``, cut to about ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)  # numpy integers too, never True / False


def _int_in(x, low: int, high: int | None = None) -> bool:
    """A Python int (never a bool; a config value is written to JSON, so no numpy integer) in ``low..high``
    (``high`` None: no upper bound)."""
    return isinstance(x, int) and not isinstance(x, bool) and low <= x and (high is None or x <= high)


def _is_finite(x) -> bool:
    """A real number (never a bool) that is neither infinite nor NaN."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def check_sequence(value, name: str, what: str = "strings") -> list:
    """``value`` as a list: any sequence or iterable but a ``str`` / ``bytes`` (iterated by character) or a mapping;
    `UserTypeError` naming ``name`` otherwise. A generator is read once."""
    if isinstance(value, (str, bytes)):
        raise UserTypeError(
            f"{name} must be a list of {what}, not a {type(value).__name__} ({shown(value)}): a string would be read "
            f"character by character; pass [{shown(value, 30)}] for one, or split the text into a list first "
            "(e.g. text.splitlines())"
        )
    if value is None or isinstance(value, dict) or not hasattr(value, "__iter__"):
        raise UserTypeError(f"{name} must be a list of {what}, got {type(value).__name__}: {shown(value)}")
    return list(value)


def check_strings(value, name: str, what: str = "strings") -> list[str]:
    """A list of plain strings: refuses a ``str`` (or bytes) itself, and names the first entry that is not a string
    (``None`` included). numpy strings and other ``str`` subclasses come back as plain ``str``."""
    items = check_sequence(value, name, what)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            hint = " (use '' for an empty line)" if item is None else ""
            raise UserTypeError(f"{name}[{i}] must be a string, got {type(item).__name__}: {shown(item)}{hint}")
    return [str(item) for item in items]


def check_string_lists(value, name: str, what: str = "lists of strings", allow_none: bool = False) -> list:
    """A list of lists of strings (e.g. one context per sentence, or a list of documents): refuses a ``str``, a flat
    list of strings (one level of nesting missing) and ``None`` entries (unless ``allow_none``), naming the index."""
    items = check_sequence(value, name, what)
    out = []
    for i, item in enumerate(items):
        if item is None and allow_none:
            out.append(None)
            continue
        if isinstance(item, str):
            raise UserTypeError(
                f"{name}[{i}] must be a list of strings, got the string {shown(item)}: {name} is one list per entry "
                f"(wrap it: [[{shown(item, 30)}]] for one entry holding that sentence)"
            )
        if item is None or isinstance(item, dict) or not hasattr(item, "__iter__"):
            raise UserTypeError(f"{name}[{i}] must be a list of strings, got {type(item).__name__}: {shown(item)}")
        out.append(check_strings(item, f"{name}[{i}]"))
    return out


def check_spans(spans, n: int, name: str = "documents", of: str = "lines") -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` spans over ``n`` items: two ints each, ``0 <= start <= end <= n``, not
    overlapping. Refuses a bare pair (``(0, 3)`` for ``[(0, 3)]``), negative or past-the-end spans and overlaps, naming
    the span's index."""
    items = check_sequence(spans, name, "(start, end) spans")
    if len(items) == 2 and all(_is_int(x) for x in items):
        raise UserTypeError(f"{name} must be a list of (start, end) spans, got one pair {shown(spans)}: pass "
                            f"[{shown(tuple(items))}]")  # fmt: skip
    out = []
    for i, span in enumerate(items):
        if isinstance(span, (str, bytes)) or not isinstance(span, Sequence) or len(span) != 2:
            raise UserTypeError(f"{name}[{i}] must be a (start, end) pair of ints, got {shown(span)}")
        start, end = span
        if not (_is_int(start) and _is_int(end)):
            raise UserTypeError(f"{name}[{i}] must be a (start, end) pair of ints, got {shown(span)}")
        if not 0 <= start <= end <= n:
            raise UserError(f"{name}[{i}] = {shown(span)} is outside the {n} {of}: spans are 0-based, half-open, "
                            f"with 0 <= start <= end <= {n}")  # fmt: skip
        out.append((int(start), int(end)))
    order = sorted(range(len(out)), key=lambda i: out[i])
    for a, b in zip(order, order[1:], strict=False):
        if out[b][0] < out[a][1]:
            raise UserError(f"{name}[{b}] = {shown(out[b])} overlaps {name}[{a}] = {shown(out[a])}: a line belongs to "
                            "one document at most")  # fmt: skip
    return out


def check_count(
    value, name: str, minimum: int = 1, allow_none: bool = False, maximum: int | None = None
) -> int | None:
    """An int >= ``minimum`` (a batch size, a chunk length) and <= ``maximum`` where a larger value can only exhaust
    memory, or ``None`` where ``allow_none``; never a bool or a float (`UserTypeError`) or a numeric string."""
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise UserTypeError(f"{name} must be an int >= {minimum}, got {shown(value)} (a {type(value).__name__})")
    if value < minimum:
        raise UserError(f"{name} must be an int >= {minimum}, got {shown(value)}")
    if maximum is not None and value > maximum:
        raise UserError(f"{name} must be at most {maximum:,} (more can only exhaust memory), got {shown(value)}")
    return int(value)


# ------------------------------------------------------------------------------------------------------------------
# Config options: `check(config, name, ...)`, each an `Option.check` (or called by the config for its own fields)
# ------------------------------------------------------------------------------------------------------------------
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


def _hint(hint: str) -> str:
    return f" ({hint})" if hint else ""


def check_int(config, name: str, low: int, high: int | None = None, hint: str = "") -> None:
    """An int option (not a bool) in ``low..high`` (``high`` None: no upper bound); ``hint`` says what it means."""
    value = getattr(config, name)
    if not _int_in(value, low, high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise UserError(f"{name}={value!r} must be an int {bounds}{_hint(hint)}.")


def check_decoder_layer(config, name: str, hint: str) -> None:
    """An optional decoder layer index (0-based), or None."""
    if getattr(config, name) is not None:
        n = config.decoder_layers
        check_int(config, name, 0, n - 1, f"the model has decoder_layers={n}: a decoder layer index, {hint}")


def check_finite(config, name: str) -> None:
    """A finite number (not a bool, NaN or infinite): a size, a rate or a weight torch would take silently."""
    value = getattr(config, name)
    if not _is_finite(value):
        raise UserError(f"{name}={value!r} must be a finite number, not {type(value).__name__}.")


def check_weight(config, name: str, hint: str = "0 switches it off") -> None:
    """A loss weight: a finite number >= 0."""
    value = getattr(config, name)
    if not (_is_finite(value) and value >= 0):
        raise UserError(f"{name}={value!r} must be a finite number >= 0 ({hint}).")


def check_positive(config, name: str, hint: str = "") -> None:
    """A finite number (not a bool) > 0: a width, a scale or an initial value that 0 would break (e.g. an initial
    weight behind a softplus); loss weights, where 0 switches a term off, use `check_weight`."""
    value = getattr(config, name)
    if not (_is_finite(value) and value > 0):
        raise UserError(f"{name}={value!r} must be a finite number > 0{_hint(hint)}.")


def check_probability(config, name: str, hint: str = "") -> None:
    """A probability option: a number (not a bool) in ``[0, 1]``."""
    value = getattr(config, name)
    if not (_is_finite(value) and 0.0 <= value <= 1.0):
        raise UserError(f"{name}={value!r} is a probability: it must be a number in [0, 1]{_hint(hint)}.")


def check_bool(config, name: str, hint: str = "") -> None:
    """A switch: True or False (not 0, 1 or a string)."""
    value = getattr(config, name)
    if not isinstance(value, bool):
        raise UserError(f"{name}={value!r} must be True or False{_hint(hint)}.")


def check_choice(config, name: str, choices, hint: str = "") -> None:
    """An option that takes one of a fixed set of values."""
    value = getattr(config, name)
    if value not in choices:
        raise UserError(f"{name}={value!r} must be one of {tuple(choices)}{_hint(hint)}.")


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
            f"of heads per {side} layer, e.g. {example}."
        )
    for layer, k in enumerate(heads):
        if not _int_in(k, 0, n_heads):
            raise UserError(
                f"{name}[{layer}]={k!r} but {side}_attention_heads={n_heads}: each entry must be an int in "
                f"0..{n_heads}."
            )


def check_layer_list(config, name: str, side: str, hint: str = "") -> None:
    """An optional list of distinct `side` layer indices (0-based), e.g. `alignment_bias_layers=[1]`."""
    layers, n = getattr(config, name), getattr(config, f"{side}_layers")
    if layers is None:
        return
    for layer in layers:
        if not _int_in(layer, 0, n - 1):
            raise UserError(
                f"{name} contains {layer!r} but the model has {side}_layers={n}: give distinct {side} layer indices "
                f"in 0..{n - 1}, e.g. [{n - 1}]{_hint(hint)}."
            )
    if len(set(layers)) != len(layers):
        raise UserError(f"{name}={layers!r} lists a layer twice: give distinct {side} layer indices{_hint(hint)}.")
