"""The parse data structure shared by every reader and parser: :class:`ParsedSentence`, one dependency tree over
syntactic words (UD conventions: 1-based heads, 0 = root) with the character span of each word's surface token, and
:func:`merge_sentences`, which joins the trees of one input into one tree.

The first module of the data flow (readers -> parsers -> subwords -> document context -> preprocess -> collator):
it imports nothing from the package, so readers never import parsers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UserError

__all__ = ["ParsedSentence", "format_conllu", "merge_sentences"]


@dataclass
class ParsedSentence:
    """A dependency tree over syntactic words (UD conventions).

    Attributes:
        words: the ``n`` syntactic words (for a UD multi-word token such as French "du", its words "de", "le").
        heads: ``n`` ints, the 1-based index of each word's head word; ``0`` marks a root.
        deprels: ``n`` dependency relation labels.
        upos: ``n`` universal POS tags.
        text: the sentence text the spans refer to (``None`` if unknown).
        spans: ``n`` ``(start, end)`` character offsets (end exclusive) into ``text`` of each word's *surface
            token*; the words of one multi-word token share the span of that token. ``None`` if unknown.
        mwt: multi-word tokens as ``(start, end)`` half-open ranges of 0-based word indices, e.g. ``[(2, 4)]`` when
            words 2 and 3 ("de", "le") form the surface token "du". ``None`` or ``[]`` when there are none.

    A sentence with no words (empty input line) is valid; otherwise the heads must form one tree: exactly one root
    and no cycle (every word reaches the root). Errors name the offending word ids (1-based, as CoNLL-U's ID).
    """

    words: list[str]
    heads: list[int]
    deprels: list[str]
    upos: list[str]
    text: str | None = None
    spans: list[tuple[int, int]] | None = None
    mwt: list[tuple[int, int]] | None = field(default=None)

    def __post_init__(self) -> None:
        n = len(self.words)
        self.words = list(self.words)
        self.heads = [int(h) for h in self.heads]
        self.deprels = list(self.deprels)
        self.upos = list(self.upos)
        for name in ("heads", "deprels", "upos"):
            if len(getattr(self, name)) != n:
                raise UserError(
                    f"ParsedSentence.{name} has {len(getattr(self, name))} entries but words has {n}: {self.words!r}"
                )
        for i, h in enumerate(self.heads):
            if not 0 <= h <= n:
                raise UserError(
                    f"ParsedSentence.heads[{i}] = {h} is out of range 0..{n} (heads are 1-based, 0 = root) "
                    f"for words {self.words!r}"
                )
            if h == i + 1:
                raise UserError(f"ParsedSentence.heads[{i}] = {h} points to the word itself ({self.words[i]!r})")
        _check_tree(self.heads, self.words)
        if self.spans is not None:
            self.spans = [(int(s), int(e)) for s, e in self.spans]
            if len(self.spans) != n:
                raise UserError(f"ParsedSentence.spans has {len(self.spans)} entries but words has {n}")
            limit = len(self.text) if self.text is not None else None
            for i, (s, e) in enumerate(self.spans):
                if s < 0 or e < s or (limit is not None and e > limit):
                    raise UserError(
                        f"ParsedSentence.spans[{i}] = {(s, e)} is not a valid span of a text of length {limit}"
                    )
        if self.mwt is not None:
            self.mwt = [(int(s), int(e)) for s, e in self.mwt]
            previous_end = 0
            for s, e in sorted(self.mwt):
                if not (0 <= s and e <= n and e - s >= 2) or s < previous_end:
                    raise UserError(
                        f"ParsedSentence.mwt range {(s, e)} is invalid for {n} words (ranges are half-open 0-based "
                        f"word indices, at least 2 words long, not overlapping): {self.mwt!r}"
                    )
                if self.spans is not None and len({self.spans[i] for i in range(s, e)}) != 1:
                    raise UserError(f"ParsedSentence.mwt range {(s, e)}: its words must share one span")
                previous_end = e

    def __len__(self) -> int:
        return len(self.words)

    def to_dict(self) -> dict[str, Any]:
        """A JSON/Arrow-friendly dict (lists instead of tuples) that :meth:`from_dict` reads back."""
        d = asdict(self)
        d["spans"] = None if self.spans is None else [list(s) for s in self.spans]
        d["mwt"] = None if self.mwt is None else [list(m) for m in self.mwt]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ParsedSentence:
        """Build from a dict with keys ``words, heads, deprels, upos`` and optional ``text, spans, mwt``."""
        missing = [k for k in ("words", "heads") if k not in d or d[k] is None]
        if missing:
            raise UserError(f"parse dict lacks required key(s) {missing}; got keys {sorted(d)}")
        n = len(d["words"])
        return cls(
            words=list(d["words"]),
            heads=list(d["heads"]),
            deprels=list(d.get("deprels") or ["_"] * n),
            upos=list(d.get("upos") or ["_"] * n),
            text=d.get("text"),
            spans=None if d.get("spans") is None else [tuple(s) for s in d["spans"]],
            mwt=None if d.get("mwt") is None else [tuple(m) for m in d["mwt"]],
        )

    def to_conllu(self, sent_id: str) -> str:
        """This sentence as one CoNLL-U block; see :func:`format_conllu`."""
        return format_conllu(self, sent_id)

    def surface_tokens(self) -> list[tuple[int, int]]:
        """Half-open word-index ranges of the surface tokens (one per word, one per multi-word token), in order."""
        starts = {s: e for s, e in (self.mwt or [])}
        out, i = [], 0
        while i < len(self.words):
            e = starts.get(i, i + 1)
            out.append((i, e))
            i = e
        return out


def _check_tree(heads: list[int], words: list[str]) -> None:
    """Raise ``ValueError`` unless ``heads`` (1-based, 0 = root, each in range) form one tree: a single root and no
    cycle. A cycle or a second root would silently give wrong parents and tree distances (0 inside a cycle)."""
    if not heads:
        return
    roots = [i + 1 for i, h in enumerate(heads) if h == 0]
    if not roots:
        raise UserError(f"heads {heads} have no root (no head equal to 0), so they form a cycle: give one word head 0")
    if len(roots) > 1:
        raise UserError(
            f"heads {heads} have {len(roots)} roots: words {roots} (1-based ids) all have head 0, but a dependency "
            "tree has exactly one root; attach the others to it (e.g. as parataxis) or split the sentence"
        )
    state = [0] * len(heads)  # 0: not visited, 1: on the current path, 2: reaches the root
    for start in range(len(heads)):
        path, w = [], start
        while w >= 0 and state[w] == 0:
            state[w] = 1
            path.append(w)
            w = heads[w] - 1
        if w >= 0 and state[w] == 1:  # back on the current path: a cycle
            cycle = path[path.index(w) :]
            arrows = " -> ".join(f"{i + 1} ({words[i]!r})" for i in [*cycle, w])
            raise UserError(
                f"heads {heads} contain a cycle that never reaches the root: words {sorted(i + 1 for i in cycle)} "
                f"(1-based ids): {arrows}; every word must lead to the root by following its head"
            )
        for i in path:
            state[i] = 2


def merge_sentences(sentences: Sequence[ParsedSentence], text: str | None = None) -> ParsedSentence:
    """Join several parsed sentences of one input into one tree.

    Word indices (and heads) of later sentences are shifted; every root after the first root of the first
    sentence is attached to that first root with the relation ``parataxis``. Spans must already be relative to
    ``text``.
    """
    words, heads, deprels, upos, spans, mwt = [], [], [], [], [], []
    has_spans = all(s.spans is not None for s in sentences)
    first_root = None
    for sent in sentences:
        offset = len(words)
        for i, h in enumerate(sent.heads):
            if h == 0:
                if first_root is None:
                    first_root = offset + i + 1
                    heads.append(0)
                    deprels.append(sent.deprels[i])
                else:
                    heads.append(first_root)
                    deprels.append("parataxis")
            else:
                heads.append(h + offset)
                deprels.append(sent.deprels[i])
        words.extend(sent.words)
        upos.extend(sent.upos)
        if has_spans:
            spans.extend(sent.spans)
        mwt.extend((s + offset, e + offset) for s, e in (sent.mwt or []))
    return ParsedSentence(words, heads, deprels, upos, text=text, spans=spans if has_spans else None, mwt=mwt or None)


def format_conllu(sentence: ParsedSentence, sent_id: str, empty: bool = False) -> str:
    """One CoNLL-U block (``# sent_id``, ``# text``, the word lines, a blank line) that
    :func:`hf_syntax_mt.data.readers.read_conllu` reads back to the same words, heads, relations, UPOS and spans.

    With ``empty=True`` a sentence without words (an empty input line) is the block of its two comments alone
    (``# sent_id``, ``# text``, no word line), which `read_conllu` reads back as an empty sentence: one block per
    input line, so a parsed corpus stays line aligned (``hf-syntax-mt parse`` writes them). The UD validator refuses
    such blocks; other tools may skip them.

    ``# text`` is the sentence's text verbatim (the reader locates every token in it); LEMMA, XPOS, FEATS and DEPS
    are ``_``; multi-word tokens get their range line (``3-4 du``) with the surface form taken from the text; MISC
    has ``SpaceAfter=No`` where the next token (or the end of the text) follows without a space.

    Raises:
        ValueError: for a sentence without words unless ``empty`` (CoNLL-U has no empty sentence: drop or mark the
            line before), a text with a line break, or a sent_id or word that is empty or holds a tab or a line break.
    """
    n = len(sentence.words)
    text = sentence.text if sentence.text is not None else " ".join(sentence.words)
    if n == 0 and not empty:
        raise UserError(f"sentence {sent_id}: a sentence without words has no CoNLL-U block (text {text!r})")
    if any(c in text for c in "\n\r"):  # a tab may stay in `# text` (the reader reads the comment whole)
        raise UserError(f"sentence {sent_id}: the text {text!r} holds a line break, which CoNLL-U cannot hold")
    if n == 0:  # the comments alone: `read_conllu` reads an empty sentence back
        if not sent_id or any(c in sent_id for c in "\t\n\r"):
            raise UserError(f"sentence {sent_id!r}: the sent_id is empty or holds a tab or a line break")
        return f"# sent_id = {sent_id}\n# text = {text}\n\n"
    for name, value in (("sent_id", sent_id), *((f"word {i + 1}", w) for i, w in enumerate(sentence.words))):
        if not value or any(c in value for c in "\t\n\r"):
            raise UserError(f"sentence {sent_id}: {name} {value!r} is empty or holds a tab or a line break, which "
                             "a CoNLL-U column cannot hold")  # fmt: skip
    spans = sentence.spans if sentence.spans is not None and sentence.text is not None else None
    tokens = sentence.surface_tokens()
    lines = [f"# sent_id = {sent_id}", f"# text = {text}"]
    for k, (first, last) in enumerate(tokens):
        misc = "_"
        if spans is not None:
            end = spans[first][1]
            following = spans[tokens[k + 1][0]][0] if k + 1 < len(tokens) else len(text)
            misc = "SpaceAfter=No" if following == end else "_"
        if last - first > 1:
            form = (
                text[spans[first][0] : spans[first][1]] if spans is not None else "".join(sentence.words[first:last])
            )
            lines.append(f"{first + 1}-{last}\t{form}\t_\t_\t_\t_\t_\t_\t_\t{misc}")
            misc = "_"
        for i in range(first, last):
            word_misc = misc if i == last - 1 else "_"
            lines.append(f"{i + 1}\t{sentence.words[i]}\t_\t{sentence.upos[i] or '_'}\t_\t_\t{sentence.heads[i]}\t"
                         f"{sentence.deprels[i] or '_'}\t_\t{word_misc}")  # fmt: skip
    return "\n".join(lines) + "\n\n"
