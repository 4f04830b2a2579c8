"""Map word-level dependency trees onto subword tokens.

Positions are 0-based indices into the final ``input_ids`` (special tokens included, e.g. the ``</s>`` Marian
appends). Rules (DESIGN.md, "Subword mapping rules"):

- PASCAL: the *middle* of word ``w`` is the mean of its subword positions; every subword of ``w`` gets the middle
  of ``head(w)``; the root's subwords get the root's own middle. Special and padding tokens: their own position.
- LISA: a subword's parent is the first subword of its word's head; the root's subwords point to the root's first
  subword.
- DBSA: a non-final subword points to the next subword of the same word; a final subword points to the first
  subword of the head word; the root's final subword points to itself.

:func:`align_parse` tokenizes a parsed sentence and aligns subwords with syntactic words by *character offsets*:

- each subword is assigned to the surface token whose span it overlaps most (ties: the first); a subword that
  overlaps no token (a whitespace-only piece such as ``"▁"``) is attached to the word of the next subword (or of
  the previous one at the end of the sentence). This also covers parsers that split the text differently from
  the tokenizer (parser "ca" + "n't", tokenizer piece "can't": the piece goes to the word it overlaps most; the
  other word is represented by the subwords that overlap it);
- UD multi-word tokens (French "du" = "de le"): the subwords of the surface token belong to the token's
  *representative* word, the first of its words whose head lies outside the token (its syntactic head). The
  other words get no subwords (``word_ids`` never names them) and every dependent pointing to one of them points
  to the middle (PASCAL) / first subword (LISA, DBSA) of the surface token;
- a word with no subword at all (not even an overlapping one) is represented by the first subword starting at
  or after it, or the last non-special subword.

Fast tokenizers give character offsets directly (``return_offsets_mapping``). The sentencepiece
``MarianTokenizer`` has none: its sentencepiece model gives the offsets of the same pieces
(``encode(..., return_type="offset_mapping")``). Any other slow tokenizer is encoded surface token by surface
token.

Truncation (``max_length``) keeps the leading and trailing special tokens (Marian: the final ``</s>``) as the
tokenizer's own truncation does, and cuts the content; a parent position beyond the last kept content token
(the word or its head was cut) is replaced by the position of that last kept token.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from ..errors import UserError
from ..methods.columns import Column, SubwordParse
from ..methods.registry import column_specs
from .parsed import ParsedSentence

__all__ = [
    "word_middle_positions",
    "parent_positions_from_word_ids",
    "lisa_parents_from_word_ids",
    "dbsa_heads_from_word_ids",
    "align_parse",
    "word_spans_in_text",
    "word_representatives",
]


# --------------------------------------------------------------------------------------------------------------
# word_ids -> positions
# --------------------------------------------------------------------------------------------------------------
def _positions_per_word(word_ids: Sequence[int | None], num_words: int) -> list[list[int]]:
    positions: list[list[int]] = [[] for _ in range(num_words)]
    for t, w in enumerate(word_ids):
        if w is not None:
            if not 0 <= w < num_words:
                raise UserError(f"word_ids[{t}] = {w} is out of range for {num_words} words")
            positions[w].append(t)
    return positions


def _check_heads(heads: Sequence[int]) -> None:
    n = len(heads)
    for i, h in enumerate(heads):
        if not 0 <= h <= n:
            raise UserError(f"heads[{i}] = {h} is out of range 0..{n} (UD heads are 1-based, 0 = root)")


def word_middle_positions(word_ids: Sequence[int | None], num_words: int | None = None) -> list[float]:
    """Middle position of every word: the mean of its subword positions.

    Args:
        word_ids: ``(T,)`` word index of each token, ``None`` for special/padding tokens.
        num_words: number of words (default ``max(word_ids) + 1``).

    Returns:
        ``(num_words,)`` floats; ``nan`` for a word without subwords. Tokens 6, 7, 8 give 7.0; tokens 6, 7 give 6.5.
    """
    if num_words is None:
        num_words = max((w for w in word_ids if w is not None), default=-1) + 1
    return [sum(p) / len(p) if p else float("nan") for p in _positions_per_word(word_ids, num_words)]


def _registered_column(name: str, word_ids: Sequence[int | None], heads: Sequence[int]) -> list:
    """The values of the registered column `name` for tokens `word_ids` of a tree with `heads` (its method's own
    `compute`, as `align_parse` runs it, without a text: every head word must have a subword)."""
    _check_heads(heads)
    positions = _positions_per_word(word_ids, len(heads))
    parse = ParsedSentence(["_"] * len(heads), list(heads), ["_"] * len(heads), ["_"] * len(heads))
    sentence = SubwordParse(parse, tuple(word_ids), tuple(map(tuple, positions)))
    return list(column_specs()[name].compute(sentence, None))


def parent_positions_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[float]:
    """PASCAL parent positions (the `parent_positions` column's `compute`).

    Args:
        word_ids: ``(T,)`` word index of each token (0-based), ``None`` for special/padding tokens.
        heads: ``(n,)`` UD heads of the words (1-based, 0 = root).

    Returns:
        ``(T,)`` floats: middle position of the head of the token's word (root: its own middle); a ``None`` token
        gets its own position. Raises ``ValueError`` if a head word has no subword.
    """
    return _registered_column("parent_positions", word_ids, heads)


def lisa_parents_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[int]:
    """LISA parents: ``(T,)`` position of the first subword of the token's head word (root word: its own first
    subword; ``None`` tokens: their own position)."""
    return _registered_column("lisa_parents", word_ids, heads)


def dbsa_heads_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[int]:
    """DBSA subword heads: ``(T,)`` positions. A non-final subword points to the next subword of its word, a final
    subword to the first subword of the head word; the root's final subword and ``None`` tokens to themselves."""
    return _registered_column("dbsa_heads", word_ids, heads)


# --------------------------------------------------------------------------------------------------------------
# character offsets
# --------------------------------------------------------------------------------------------------------------
def word_spans_in_text(words: Sequence[str], text: str) -> list[tuple[int, int]]:
    """Locate words left to right in ``text`` (only whitespace may separate them).

    Raises ``ValueError`` naming the first word that is not found.
    """
    spans, pos = [], 0
    for i, word in enumerate(words):
        found = text.find(word, pos)
        if found < 0 or text[pos:found].strip():
            raise UserError(
                f"word {i} {word!r} not found in the text after character {pos}: {text!r}; give the parse's "
                "text and spans (ParsedSentence.spans)"
            )
        spans.append((found, found + len(word)))
        pos = found + len(word)
    return spans


def _remap_spans(source: str, target: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Move spans from ``source`` to ``target`` when both texts differ only in whitespace, else ``None``."""
    src = [i for i, c in enumerate(source) if not c.isspace()]
    dst = [i for i, c in enumerate(target) if not c.isspace()]
    if len(src) != len(dst) or any(source[i] != target[j] for i, j in zip(src, dst, strict=True)):
        return None
    out = []
    for s, e in spans:
        a, b = bisect.bisect_left(src, s), bisect.bisect_left(src, e) - 1
        if a >= len(dst) or b < a:
            return None
        out.append((dst[a], dst[b] + 1))
    return out


def _resolve_text_and_spans(parse: ParsedSentence, text: str | None) -> tuple[str, list[tuple[int, int]]]:
    if text is None:
        text = parse.text if parse.text is not None else " ".join(parse.words)
    if parse.spans is not None:
        if parse.text is None or parse.text == text:
            return text, list(parse.spans)
        remapped = _remap_spans(parse.text, text, parse.spans)
        if remapped is not None:
            return text, remapped
    if parse.mwt:
        raise UserError(
            f"the parse has multi-word tokens but no spans into the text {text!r} (parse text: {parse.text!r}); "
            "the words of a multi-word token cannot be located in the surface text"
        )
    return text, word_spans_in_text(parse.words, text)


def _sp_offsets(sp, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Pieces and character offsets from a ``sentencepiece.SentencePieceProcessor`` (``offset_mapping``: every
    sentencepiece from the floor, 0.2.2, has it)."""
    enc = sp.encode(text, return_type="offset_mapping")
    return list(enc["pieces"]), [tuple(o) for o in enc["offsets"]]


def _tokenize_with_offsets(
    tokenizer, text: str, token_spans: list[tuple[int, int]], target: bool = False
) -> tuple[list[int], list[bool], list[tuple[int, int] | None]]:
    """Returns ``input_ids`` (with special tokens), a special-token mask and each token's character offsets.
    ``target=True`` tokenizes as ``tokenizer(text_target=...)`` does (the target vocabulary of a Marian model)."""
    switch = getattr(tokenizer, "_switch_to_target_mode", None)
    if target and switch is not None and not getattr(tokenizer, "is_fast", False):
        switch()
        try:
            return _tokenize_with_offsets(tokenizer, text, token_spans)
        finally:
            tokenizer._switch_to_input_mode()
    if getattr(tokenizer, "is_fast", False):
        side = {"text_target": text} if target else {"text": text}
        enc = tokenizer(**side, add_special_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
        ids = list(enc["input_ids"])
        special = [bool(s) for s in enc["special_tokens_mask"]]
        offsets = [None if s else tuple(o) for o, s in zip(enc["offset_mapping"], special, strict=True)]
        return ids, special, offsets

    pieces: list[str] | None = None
    piece_offsets: list[tuple[int, int]] = []
    sp = getattr(tokenizer, "current_spm", None) or getattr(tokenizer, "sp_model", None)
    if sp is not None and text:
        sp_pieces, sp_offsets = _sp_offsets(sp, text)
        if sp_pieces == tokenizer.tokenize(text):
            pieces, piece_offsets = sp_pieces, sp_offsets
    if pieces is None:  # generic slow tokenizer: encode surface token by surface token
        pieces, piece_offsets = [], []
        for s, e in token_spans:
            for piece in tokenizer.tokenize(text[s:e]):
                pieces.append(piece)
                piece_offsets.append((s, e))
    content = list(tokenizer.convert_tokens_to_ids(pieces)) if pieces else []
    ids = list(tokenizer.build_inputs_with_special_tokens(content))
    start = next((p for p in range(len(ids) - len(content) + 1) if ids[p : p + len(content)] == content), None)
    if start is None:
        raise RuntimeError(f"cannot locate the content tokens inside build_inputs_with_special_tokens() for {text!r}: "
                           "the tokenizer adds special tokens in a way align_parse does not know")  # fmt: skip
    special = [not (start <= t < start + len(content)) for t in range(len(ids))]
    offsets: list[tuple[int, int] | None] = [None] * len(ids)
    for k, o in enumerate(piece_offsets):
        offsets[start + k] = o
    return ids, special, offsets


def word_representatives(parse: ParsedSentence) -> list[tuple[int, int, int]]:
    """For each surface token: ``(first word, end word, representative word)``; the representative of a multi-word
    token is its first word whose head lies outside it (the word that carries the token's subwords)."""
    out = []
    for ws, we in parse.surface_tokens():
        rep = ws
        if we - ws > 1:
            outside = [w for w in range(ws, we) if not ws < parse.heads[w] <= we]  # head 0 counts as outside
            rep = outside[0] if outside else ws
        out.append((ws, we, rep))
    return out


def _resolve_columns(columns: Sequence[str] | None, target: bool) -> list[Column]:
    """The columns to compute, each a `methods.Column` with its `compute`: those given (a `Column`, or the name of a
    registered one), else every registered column computed from the parse of this side."""
    side = "target" if target else "source"
    specs = column_specs()
    if columns is None:
        return [c for c in specs.values() if c.parse == side]
    from ..validation import check_sequence

    columns = check_sequence(columns, "columns", "column names")
    if not all(isinstance(c, str) for c in columns):
        raise UserError(f"columns must be column names (strings), got {columns!r}")
    resolved = [c if isinstance(c, Column) else specs.get(c, c) for c in columns]
    unknown = [str(c) for c in resolved if not isinstance(c, Column) or c.compute is None]
    if unknown:
        known = sorted(name for name, c in specs.items() if c.parse is not None)
        raise UserError(f"align_parse computes the columns the methods declare with a `compute` ({known}), not "
                        f"{unknown}.")  # fmt: skip
    other = [str(c) for c in resolved if c.parse != side]
    if other:
        raise UserError(f"columns {other} are not computed from a {side} parse: give target={not target} or leave "
                        "them out.")  # fmt: skip
    return resolved


def align_parse(
    tokenizer,
    parse: ParsedSentence,
    text: str | None = None,
    max_length: int | None = None,
    target: bool = False,
    columns: Sequence[str] | None = None,
    config=None,
) -> dict[str, Any]:
    """Tokenize a parsed sentence and map its tree onto the subwords (rules in the module docstring), then compute
    the requested columns, each by its method's `Column.compute` (`methods.SubwordParse`: the parse, each subword's
    word, the subwords that stand for each word).

    Args:
        tokenizer: a fast tokenizer, a sentencepiece ``MarianTokenizer`` or any slow tokenizer.
        parse: the sentence's parse; its ``spans`` (or, failing that, the words located left to right) tie the
            words to the text.
        text: the text to tokenize (default ``parse.text``; ``" ".join(parse.words)`` if both are ``None``).
        max_length: maximum number of tokens, special tokens included.
        target: tokenize as a target sentence (``tokenizer(text_target=...)``), for target-side supervision.
        columns: the columns to compute: `methods.Column`s (the preprocessor and the pipeline pass the registry's)
            or names of registered ones, all computed from the parse of this side; None: every registered column of
            this side (``parent_positions``, ``lisa_parents``, ``word_index``, ... for a source sentence).
        config: the model's config, given to every `compute` (a label vocabulary in the config drives a column);
            None: each column's default.

    Returns:
        dict of lists: ``input_ids`` and ``attention_mask`` (all 1), ``(T,)``; each column (``(T,)``, or ``(n,)`` for
        a ``"word"`` column); ``word_ids``, ``(T,)``, the syntactic word index of each subword (``None`` for special
        tokens).
    """
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)):
        from ..errors import UserTypeError

        raise UserTypeError(f"max_length must be an int (tokens, special tokens included), got {max_length!r}")
    columns = _resolve_columns(columns, target)
    text, spans = _resolve_text_and_spans(parse, text)
    tokens = word_representatives(parse)
    token_spans = [spans[ws] for ws, _, _ in tokens]
    ids, special, offsets = _tokenize_with_offsets(tokenizer, text, token_spans, target=target)
    T = len(ids)
    n = len(parse.words)

    # 1. subword -> surface token with the largest character overlap (spans are sorted left to right)
    ends = [e for _, e in token_spans]
    assigned: list[int | None] = [None] * T  # word index
    pending: list[int] = []  # content tokens overlapping no surface token
    for t in range(T):
        if special[t]:
            continue
        s, e = offsets[t]  # type: ignore[misc]
        best, best_overlap = None, 0
        k = bisect.bisect_right(ends, s)
        while k < len(token_spans) and token_spans[k][0] < e:
            overlap = min(e, token_spans[k][1]) - max(s, token_spans[k][0])
            if overlap > best_overlap:
                best, best_overlap = k, overlap
            k += 1
        if best is None:
            pending.append(t)
        else:
            assigned[t] = tokens[best][2]
    content = [t for t in range(T) if not special[t]]
    for t in pending:  # whitespace-only pieces: the next word, else the previous one
        after = [assigned[u] for u in content if u > t and assigned[u] is not None]
        before = [assigned[u] for u in content if u < t and assigned[u] is not None]
        assigned[t] = after[0] if after else (before[-1] if before else None)

    # 2. subword positions that represent each word (for heads)
    positions = _positions_per_word(assigned, n)
    for w in range(n):
        if positions[w]:
            continue
        s, e = spans[w]
        overlapping = [t for t in content if offsets[t][0] < e and offsets[t][1] > s]  # type: ignore[index]
        if overlapping:
            positions[w] = overlapping
        elif content:
            later = [t for t in content if offsets[t][0] >= s]  # type: ignore[index]
            positions[w] = [later[0] if later else content[-1]]

    # 3. every column on the full sequence, by its method's `compute`
    sentence = SubwordParse(parse, tuple(assigned), tuple(map(tuple, positions)), target)
    values: dict[Column, list] = {}
    for column in columns:
        values[column] = list(column.compute(sentence, config))
        expected = n if column.kind == "word" else T
        if len(values[column]) != expected:
            what = "words" if column.kind == "word" else "subwords"
            raise UserError(f"column {str(column)!r}: compute gave {len(values[column])} values for {expected} {what}")

    # 4. truncation: keep leading/trailing special tokens, cut the content; a position past the cut points to the
    # last kept content token, a special token's to itself; a "word" column keeps every word
    keep = list(range(T))
    if max_length is not None and T > max_length:
        n_prefix = next((t for t in range(T) if not special[t]), T)
        n_suffix = next((k for k in range(T) if not special[T - 1 - k]), T)
        n_suffix = min(n_suffix, T - n_prefix)
        budget = max_length - n_prefix - n_suffix
        if budget < 0:
            raise UserError(f"max_length={max_length} cannot hold the {n_prefix + n_suffix} special tokens")
        keep = list(range(n_prefix + budget)) + list(range(T - n_suffix, T))
    out: dict[str, Any] = {"input_ids": [ids[t] for t in keep], "attention_mask": [1] * len(keep)}
    for column, v in values.items():
        if column.kind == "word" or len(keep) == T:
            out[str(column)] = v
        elif column.is_position:
            last = n_prefix + budget - 1  # last kept content token
            cast = float if column.is_float else int
            out[str(column)] = [
                cast(j) if special[t] else (cast(last) if v[t] > last else v[t]) for j, t in enumerate(keep)
            ]
        else:
            out[str(column)] = [v[t] for t in keep]
    out["word_ids"] = [assigned[t] for t in keep]
    return out
