"""Small checkers the public API boundaries share (issue 49): a ``str`` where a sequence of strings is meant (it would
be iterated by character), ``None`` or other non-strings among the entries, wrong nesting, and line spans out of range.

Each raises `UserTypeError` (a wrong type) or `UserError` (a wrong value) naming the argument and the index, the value,
and what to pass. Standard library only: every module of the package may import it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from .errors import UserError, UserTypeError

__all__ = ["check_count", "check_sequence", "check_spans", "check_string_lists", "check_strings", "shown"]


def shown(value, width: int = 60) -> str:
    """``repr(value)``, cut to about ``width`` characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)  # numpy integers too, never True / False


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
