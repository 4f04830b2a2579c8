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
from ..vocabularies import DEPRELS, SUBWORD_TAGS, UPOS_TAGS
from .parsed import ParsedSentence

__all__ = [
    "word_middle_positions",
    "parent_positions_from_word_ids",
    "lisa_parents_from_word_ids",
    "dbsa_heads_from_word_ids",
    "align_parse",
    "FEATURE_COLUMNS",
    "PARSE_COLUMNS",
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


def _require(positions: list[list[int]], w: int, who: str) -> list[int]:
    if not positions[w]:
        raise UserError(
            f"word {w} has no subword in word_ids but is needed as a head by {who}; use align_parse, which "
            "redirects heads of multi-word tokens and truncated words"
        )
    return positions[w]


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


def _parents(word_ids: Sequence[int | None], heads: Sequence[int], positions: list[list[int]], reduce) -> list:
    """Each subword of word w gets `reduce(subword positions of head(w))` (root -> itself); special tokens -> own
    position. `reduce` = mean gives PASCAL's middle position, `min` LISA's first subword."""
    out = []
    for t, w in enumerate(word_ids):
        if w is None:
            out.append(reduce([t]))  # special token: its own position (a float for PASCAL)
            continue
        target = w if heads[w] == 0 else heads[w] - 1
        out.append(reduce(_require(positions, target, f"word {w}")))
    return out


def _middle(p: list[int]) -> float:
    return sum(p) / len(p)


def _dbsa(word_ids: Sequence[int | None], heads: Sequence[int], positions: list[list[int]]) -> list[int]:
    out: list[int] = []
    for t, w in enumerate(word_ids):
        if w is None:
            out.append(t)
            continue
        own = positions[w]  # sorted, contains t
        k = own.index(t)
        if k + 1 < len(own):
            out.append(own[k + 1])  # non-final subword -> next subword of the same word
        elif heads[w] == 0:
            out.append(t)  # final subword of the root -> itself
        else:
            out.append(min(_require(positions, heads[w] - 1, f"word {w}")))
    return out


def parent_positions_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[float]:
    """PASCAL parent positions.

    Args:
        word_ids: ``(T,)`` word index of each token (0-based), ``None`` for special/padding tokens.
        heads: ``(n,)`` UD heads of the words (1-based, 0 = root).

    Returns:
        ``(T,)`` floats: middle position of the head of the token's word (root: its own middle); a ``None`` token
        gets its own position. Raises ``ValueError`` if a head word has no subword.
    """
    _check_heads(heads)
    return _parents(word_ids, heads, _positions_per_word(word_ids, len(heads)), _middle)


def lisa_parents_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[int]:
    """LISA parents: ``(T,)`` position of the first subword of the token's head word (root word: its own first
    subword; ``None`` tokens: their own position)."""
    _check_heads(heads)
    return _parents(word_ids, heads, _positions_per_word(word_ids, len(heads)), min)


def dbsa_heads_from_word_ids(word_ids: Sequence[int | None], heads: Sequence[int]) -> list[int]:
    """DBSA subword heads: ``(T,)`` positions. A non-final subword points to the next subword of its word, a final
    subword to the first subword of the head word; the root's final subword and ``None`` tokens to themselves."""
    _check_heads(heads)
    return _dbsa(word_ids, heads, _positions_per_word(word_ids, len(heads)))


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


#: the input-feature columns `align_parse` computes (Sennrich & Haddow's features of each subword)
FEATURE_COLUMNS = ("pos_ids", "deprel_ids", "subword_tag_ids")
#: every column `align_parse` computes by name (`columns=`): on the source side, and `decoder_dbsa_heads` (the DBSA
#: heads of a target parse, positions in ``labels``) with ``target=True``
PARSE_COLUMNS = ("parent_positions", "lisa_parents", "dbsa_heads", "word_index", "word_heads", *FEATURE_COLUMNS,
                 "decoder_dbsa_heads")  # fmt: skip


def align_parse(
    tokenizer,
    parse: ParsedSentence,
    text: str | None = None,
    max_length: int | None = None,
    compute_lisa: bool = False,
    compute_dbsa: bool = False,
    compute_tree: bool = False,
    compute_features: bool = False,
    target: bool = False,
    columns: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Tokenize a parsed sentence and map its tree onto the subwords (rules in the module docstring).

    Args:
        tokenizer: a fast tokenizer, a sentencepiece ``MarianTokenizer`` or any slow tokenizer.
        parse: the sentence's parse; its ``spans`` (or, failing that, the words located left to right) tie the
            words to the text.
        text: the text to tokenize (default ``parse.text``; ``" ".join(parse.words)`` if both are ``None``).
        max_length: maximum number of tokens, special tokens included.
        compute_lisa: also return ``lisa_parents``.
        compute_dbsa: also return ``dbsa_heads``.
        compute_tree: also return ``word_index`` (``(T,)``, 1-based word of each subword, 0 for special tokens)
            and ``word_heads`` (``(n,)``, the parse's UD heads), for syntax-directed attention.
        compute_features: also return the Sennrich & Haddow features ``pos_ids``, ``deprel_ids`` and
            ``subword_tag_ids`` (``(T,)``, ids into ``INPUT_FEATURES``, 0 for special tokens).
        target: tokenize as a target sentence (``tokenizer(text_target=...)``), for target-side supervision.
        columns: columns to compute, as the methods declare them (the preprocessor and the pipeline pass the
            registry's `methods.Column`s), instead of the flags: those of `PARSE_COLUMNS` by name
            (``decoder_dbsa_heads`` is the DBSA heads of a target sentence, with ``target=True``), any other by its
            ``compute(parse, word_ids)``: one value per subword (special tokens included) from the parse and each
            subword's word index (None for special tokens).

    Returns:
        dict of ``(T,)`` lists: ``input_ids``, ``attention_mask`` (all 1), ``parent_positions`` (floats),
        ``word_ids`` (syntactic word index of each subword, ``None`` for special tokens), and the requested ones.
    """
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)):
        from ..errors import UserTypeError

        raise UserTypeError(f"max_length must be an int (tokens, special tokens included), got {max_length!r}")
    if columns is not None:  # names, or `Column`s (str subclasses that may carry their own `compute`): kept as given
        from ..validation import check_sequence

        columns = check_sequence(columns, "columns", "column names")
        if not all(isinstance(c, str) for c in columns):
            raise UserError(f"columns must be column names (strings), got {columns!r}")
    computed = [c for c in columns or () if c not in PARSE_COLUMNS]  # a method's own: by its compute
    if columns is not None:
        unknown = [c for c in computed if getattr(c, "compute", None) is None]
        if unknown:
            raise UserError(f"align_parse computes {list(PARSE_COLUMNS)} and columns with a `compute`, not {unknown}")
        compute_lisa |= "lisa_parents" in columns
        compute_dbsa |= "dbsa_heads" in columns or "decoder_dbsa_heads" in columns
        compute_tree |= "word_index" in columns or "word_heads" in columns
        compute_features |= any(c in columns for c in FEATURE_COLUMNS)
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

    # 3. parents on the full sequence
    result: dict[str, Any] = {"parent_positions": _parents(assigned, parse.heads, positions, _middle)}
    if compute_lisa:
        result["lisa_parents"] = _parents(assigned, parse.heads, positions, min)
    if compute_dbsa:
        result["dbsa_heads"] = _dbsa(assigned, parse.heads, positions)
    tokens_out: dict[str, list[int]] = {}  # per-token values that are not positions
    if compute_tree:
        tokens_out["word_index"] = [0 if w is None else w + 1 for w in assigned]
    if compute_features:
        tokens_out.update(_features(parse, assigned))
    for column in computed:
        values = list(column.compute(parse, list(assigned)))
        if len(values) != T:
            raise UserError(f"column {str(column)!r}: compute gave {len(values)} values for {T} subwords")
        tokens_out[str(column)] = values

    # 4. truncation: keep leading/trailing special tokens, cut the content, clamp parents past the cut
    keep = list(range(T))
    if max_length is not None and T > max_length:
        n_prefix = next((t for t in range(T) if not special[t]), T)
        n_suffix = next((k for k in range(T) if not special[T - 1 - k]), T)
        n_suffix = min(n_suffix, T - n_prefix)
        budget = max_length - n_prefix - n_suffix
        if budget < 0:
            raise UserError(f"max_length={max_length} cannot hold the {n_prefix + n_suffix} special tokens")
        keep = list(range(n_prefix + budget)) + list(range(T - n_suffix, T))
    if len(keep) < T:
        last = n_prefix + budget - 1  # last kept content token
        new_result = {}
        for name, values in result.items():
            cast = float if name == "parent_positions" else int
            new_values = []
            for j, t in enumerate(keep):
                new_values.append(cast(j) if special[t] else (cast(last) if values[t] > last else values[t]))
            new_result[name] = new_values
        result = new_result
    out = {
        "input_ids": [ids[t] for t in keep],
        "attention_mask": [1] * len(keep),
        **result,
        **{name: [values[t] for t in keep] for name, values in tokens_out.items()},
        "word_ids": [assigned[t] for t in keep],
    }
    if compute_tree:
        out["word_heads"] = list(parse.heads)
    if target and compute_dbsa:
        out["decoder_dbsa_heads"] = out["dbsa_heads"]  # a target parse's heads, as the decoder's column is named
    return out


def _features(parse: ParsedSentence, assigned: Sequence[int | None]) -> dict[str, list[int]]:
    """Sennrich & Haddow features of each subword: its word's UPOS and universal relation, and its B/I/E/O tag."""
    pos_vocab = {tag: k + 1 for k, tag in enumerate(UPOS_TAGS)}
    rel_vocab = {rel: k + 1 for k, rel in enumerate(DEPRELS)}
    tag_id = {tag: k + 1 for k, tag in enumerate(SUBWORD_TAGS)}
    positions = _positions_per_word(assigned, len(parse.words))
    pos_ids, deprel_ids, tags = [], [], []
    for t, w in enumerate(assigned):
        if w is None:
            pos_ids.append(0)
            deprel_ids.append(0)
            tags.append(0)
            continue
        pos_ids.append(pos_vocab.get(parse.upos[w] if parse.upos else "", 0))
        deprel_ids.append(rel_vocab.get((parse.deprels[w] if parse.deprels else "").split(":")[0].lower(), 0))
        own = positions[w]
        tag = "O" if len(own) == 1 else "B" if t == own[0] else "E" if t == own[-1] else "I"
        tags.append(tag_id[tag])
    return {"pos_ids": pos_ids, "deprel_ids": deprel_ids, "subword_tag_ids": tags}
