"""The synthetic language as data: documents whose pronouns need the previous sentence (Zhang et al. 2018), their
contrastive examples, CoNLL-U and text files, and ``datasets`` (:mod:`hf_syntax_mt.demo.synthetic` is the language,
:mod:`hf_syntax_mt.demo.synthetic_grammar` samples its sentences).

``datasets`` is imported inside the functions that build a ``DatasetDict``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from .synthetic import (
    PRONOUN,
    PRONOUN_TARGETS,
    DependencyTree,
    SyntheticPair,
    _linearize_source,
    noun_class,
    translate_tree,
)
from .synthetic_grammar import _sample_root, _split_corpus, _validate_lengths, generate_pair

if TYPE_CHECKING:  # pragma: no cover
    from datasets import DatasetDict

__all__ = [
    "PronounLink",
    "SyntheticDocument",
    "contrastive_examples",
    "generate_documents",
    "gold_parses",
    "gold_source_parses",
    "load_synthetic_dataset",
    "load_synthetic_documents",
    "to_conllu",
    "write_corpus",
]

# ----------------------------------------------------------------------------------------------------
# Documents: a pronoun whose translation needs the previous sentence
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PronounLink:
    """The context-dependent pronoun of one document sentence (all indices 0-based).

    Attributes:
        word: position of ``ul`` in the source sentence.
        target_word: position of its translation (``ira``/``itu`` + case suffix) in the target sentence.
        antecedent_sentence: index, in the document, of the sentence holding the antecedent (the previous one).
        antecedent_word: position of the antecedent noun (that sentence's main-clause subject) in its source.
        noun_class: the antecedent's class, which chose the form (0: ``-ani`` -> ``ira``, 1: ``-ose`` -> ``itu``).
        contrastive_target: the target sentence with the other pronoun form (same case suffix), a wrong translation.
    """

    word: int
    target_word: int
    antecedent_sentence: int
    antecedent_word: int
    noun_class: int
    contrastive_target: str


@dataclass
class SyntheticDocument:
    """A synthetic document: its sentence pairs (with gold trees) and, per sentence, its context-dependent pronoun
    (``None`` where the sentence translates on its own)."""

    doc_id: str
    sentences: list[SyntheticPair]
    pronouns: list[PronounLink | None]

    def __post_init__(self) -> None:
        if len(self.sentences) != len(self.pronouns):
            raise UserError(f"{len(self.sentences)} sentences but {len(self.pronouns)} pronoun entries")

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def sources(self) -> list[str]:
        return [pair.source for pair in self.sentences]

    @property
    def targets(self) -> list[str]:
        return [pair.target for pair in self.sentences]


def _main_subject(tree: DependencyTree) -> int:
    """0-based position of the main clause's subject (the dependent ``nsubj`` of the root)."""
    root = tree.heads.index(0) + 1
    return next(
        i for i, (h, rel) in enumerate(zip(tree.heads, tree.deprels, strict=True)) if h == root and rel == "nsubj"
    )


def _pronoun_pair(
    source_tree: DependencyTree, cls: int, antecedent: tuple[int, int]
) -> tuple[SyntheticPair, PronounLink]:
    target, target_tree = translate_tree(source_tree, pronoun_class=cls)
    word = source_tree.words.index(PRONOUN)
    # the pronoun's translation is the only target word that starts with a pronoun form (target stems are CVCV)
    target_word = next(i for i, w in enumerate(target_tree.words) if w.startswith(PRONOUN_TARGETS[cls]))
    contrastive = list(target_tree.words)
    contrastive[target_word] = PRONOUN_TARGETS[1 - cls] + contrastive[target_word][len(PRONOUN_TARGETS[cls]) :]
    link = PronounLink(word, target_word, antecedent[0], antecedent[1], cls, " ".join(contrastive))
    return SyntheticPair(" ".join(source_tree.words), target, source_tree, target_tree), link


def generate_documents(
    n_docs: int,
    sentences_per_doc: tuple[int, int] = (2, 6),
    seed: int = 0,
    min_words: int = 3,
    max_words: int = 12,
    pronoun_probability: float = 0.5,
    paired: bool = True,
) -> list[SyntheticDocument]:
    """Generate ``n_docs`` documents in which pronouns need the previous sentence to be translated.

    Each sentence after the first, when the previous sentence's main-clause subject is a noun, is with probability
    ``pronoun_probability`` a *pronoun sentence*: its main clause has ``ul`` as subject or object, translated
    ``ira``/``itu`` by the class of that previous subject (Zhang et al. 2018, Eq. 2: the translation of ``x^(k)``
    depends on ``X^(<k)``). With ``paired=True`` each pronoun sentence is used twice, in two different documents,
    once after an antecedent of each class (except a few left without partner at the end), so the current source
    sentence alone does not determine the form. Deterministic from ``seed``.

    Args:
        n_docs: number of documents (>= 0).
        sentences_per_doc: ``(min, max)`` sentences per document, ``1 <= min <= max``.
        seed: random seed.
        min_words, max_words: length range of every source sentence, in words (``max_words >= 3``).
        pronoun_probability: chance that an eligible sentence is a pronoun sentence, in ``[0, 1]``.
        paired: reuse every pronoun sentence with an antecedent of the other class (see above).

    Returns:
        Documents with ids ``doc-0``, ``doc-1``, ...
    """
    if isinstance(n_docs, bool) or not isinstance(n_docs, int) or n_docs < 0:
        raise UserError(f"n_docs must be an int >= 0, got {n_docs!r}")
    if len(sentences_per_doc) != 2 or not 1 <= sentences_per_doc[0] <= sentences_per_doc[1]:
        raise UserError(f"sentences_per_doc must be (min, max) with 1 <= min <= max, got {sentences_per_doc!r}")
    if not 0.0 <= pronoun_probability <= 1.0:
        raise UserError(f"pronoun_probability must be in [0, 1], got {pronoun_probability!r}")
    _validate_lengths(min_words, max_words)
    rng = random.Random(seed)
    # pronoun source trees waiting for an antecedent of class c: (document index, tree), oldest first
    waiting: dict[int, list[tuple[int, DependencyTree]]] = {0: [], 1: []}
    documents = []
    for d in range(n_docs):
        sentences: list[SyntheticPair] = []
        pronouns: list[PronounLink | None] = []
        for i in range(rng.randint(*sentences_per_doc)):
            antecedent = None
            if sentences:
                previous = sentences[-1].source_tree
                subject = _main_subject(previous)
                if previous.upos[subject] == "NOUN":
                    antecedent = (i - 1, subject)
            if antecedent is not None and rng.random() < pronoun_probability:
                cls = noun_class(sentences[-1].source_tree.words[antecedent[1]])
                queue = waiting[cls]
                if paired and queue and queue[0][0] != d:
                    tree = queue.pop(0)[1]
                else:
                    _, tree = _linearize_source(_sample_root(rng, min_words, max_words, pronoun=True))
                    if paired:
                        waiting[1 - cls].append((d, tree))
                pair, link = _pronoun_pair(tree, cls, antecedent)
                sentences.append(pair)
                pronouns.append(link)
            else:
                sentences.append(generate_pair(rng, min_words, max_words))
                pronouns.append(None)
        documents.append(SyntheticDocument(f"doc-{d}", sentences, pronouns))
    return documents


def contrastive_examples(
    documents: Sequence[SyntheticDocument], context_sentences: int | None = None
) -> Iterator[dict]:
    """One contrastive example per context-dependent pronoun, in the form `hf_syntax_mt.evaluation.contrastive` scores.

    Yields dicts with ``doc_id``, ``sentence_index``, ``context`` (the previous source sentences of the document,
    oldest first; the last ``context_sentences`` of them if given), ``source``, ``correct`` (the reference) and
    ``contrastive`` (the same sentence with the other pronoun form), and ``noun_class`` of the antecedent.
    """
    if context_sentences is not None and (not isinstance(context_sentences, int) or context_sentences < 1):
        raise UserError(f"context_sentences must be an int >= 1 or None (all previous), got {context_sentences!r}")
    for document in documents:
        sources = document.sources
        for i, (pair, link) in enumerate(zip(document.sentences, document.pronouns, strict=True)):
            if link is None:
                continue
            start = 0 if context_sentences is None else max(0, i - context_sentences)
            yield {
                "doc_id": document.doc_id,
                "sentence_index": i,
                "context": sources[start:i],
                "source": pair.source,
                "correct": pair.target,
                "contrastive": link.contrastive_target,
                "noun_class": link.noun_class,
            }


# ----------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------


def to_conllu(tree: DependencyTree, sent_id: str, text: str | None = None) -> str:
    """Render ``tree`` as a CoNLL-U block (``# sent_id``, ``# text``, 10 columns, blank line at the end)."""
    if text is None:
        text = " ".join(tree.words)
    if "\n" in text or "\n" in sent_id:
        raise UserError(f"sent_id and text must be single lines, got sent_id={sent_id!r}, text={text!r}")
    lines = [f"# sent_id = {sent_id}", f"# text = {text}"]
    for i, (word, head, deprel, upos) in enumerate(
        zip(tree.words, tree.heads, tree.deprels, tree.upos, strict=True), start=1
    ):
        if not word or any(ch.isspace() for ch in word):
            raise UserError(f"word {i} of sentence {sent_id} is empty or contains whitespace: {word!r}")
        lines.append(f"{i}\t{word}\t_\t{upos}\t_\t_\t{head}\t{deprel}\t_\t_")
    return "\n".join(lines) + "\n\n"


_DEFAULT_SPLITS = {"train": 20000, "validation": 500, "test": 500}


def write_corpus(
    out_dir: str | Path,
    splits: dict[str, int] | None = None,
    seed: int = 0,
    min_words: int = 3,
    max_words: int = 60,
) -> dict[str, dict[str, Path]]:
    """Write ``{split}.src``, ``{split}.tgt`` (one sentence a line) and their ``.conllu`` gold trees.

    Args:
        out_dir: directory to write to (created if missing).
        splits: split name -> number of sentences (default train 20000, validation 500, test 500).
        seed, min_words, max_words: as in :func:`generate_corpus`.

    Returns:
        ``{split: {"src": path, "tgt": path, "src_conllu": path, "tgt_conllu": path}}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = _split_corpus(dict(_DEFAULT_SPLITS if splits is None else splits), seed, min_words, max_words)
    paths: dict[str, dict[str, Path]] = {}
    for name, pairs in data.items():
        files = {
            "src": out_dir / f"{name}.src",
            "tgt": out_dir / f"{name}.tgt",
            "src_conllu": out_dir / f"{name}.src.conllu",
            "tgt_conllu": out_dir / f"{name}.tgt.conllu",
        }
        files["src"].write_text("".join(p.source + "\n" for p in pairs), encoding="utf-8")
        files["tgt"].write_text("".join(p.target + "\n" for p in pairs), encoding="utf-8")
        files["src_conllu"].write_text(
            "".join(to_conllu(p.source_tree, f"{name}-{i}", p.source) for i, p in enumerate(pairs, start=1)),
            encoding="utf-8",
        )
        files["tgt_conllu"].write_text(
            "".join(to_conllu(p.target_tree, f"{name}-{i}", p.target) for i, p in enumerate(pairs, start=1)),
            encoding="utf-8",
        )
        paths[name] = files
    return paths


def load_synthetic_dataset(
    n_train: int = 20000,
    n_valid: int = 500,
    n_test: int = 500,
    seed: int = 0,
    min_words: int = 3,
    max_words: int = 60,
) -> DatasetDict:
    """The synthetic pair as a ``datasets.DatasetDict`` with splits ``train``/``validation``/``test``.

    Columns: ``source``, ``target`` (strings) and the gold trees of both sides,
    ``{side}_words``, ``{side}_heads`` (1-based, 0 = root), ``{side}_deprels``, ``{side}_upos`` for
    ``side`` in ``source``/``target``, so the demo needs no parser.
    """
    data = _split_corpus({"train": n_train, "validation": n_valid, "test": n_test}, seed, min_words, max_words)
    return _to_dataset_dict({name: [(pair, {}) for pair in pairs] for name, pairs in data.items()}, {})


def _to_dataset_dict(data: dict[str, list[tuple[SyntheticPair, dict]]], extra: dict) -> DatasetDict:
    """``{split: [(pair, extra column values)]}`` -> DatasetDict with the text, gold-tree and ``extra`` columns."""
    from datasets import Dataset, DatasetDict, Features, List, Value

    features = Features(
        {
            "source": Value("string"),
            "target": Value("string"),
            **{
                f"{side}_{column}": List(Value("int32" if column == "heads" else "string"))
                for side in ("source", "target")
                for column in ("words", "heads", "deprels", "upos")
            },
            **extra,
        }
    )
    dataset = {}
    for name, rows in data.items():
        columns: dict[str, list] = {column: [] for column in features}
        for pair, values in rows:
            columns["source"].append(pair.source)
            columns["target"].append(pair.target)
            for side, tree in (("source", pair.source_tree), ("target", pair.target_tree)):
                columns[f"{side}_words"].append(tree.words)
                columns[f"{side}_heads"].append(tree.heads)
                columns[f"{side}_deprels"].append(tree.deprels)
                columns[f"{side}_upos"].append(tree.upos)
            for column, value in values.items():
                columns[column].append(value)
        dataset[name] = Dataset.from_dict(columns, features=features)
    return DatasetDict(dataset)


def load_synthetic_documents(
    n_train: int = 2000,
    n_valid: int = 100,
    n_test: int = 100,
    seed: int = 0,
    sentences_per_doc: tuple[int, int] = (2, 6),
    min_words: int = 3,
    max_words: int = 12,
    pronoun_probability: float = 0.5,
) -> DatasetDict:
    """Synthetic documents (:func:`generate_documents`) as a ``DatasetDict``, one row per sentence, in document order.

    Sizes count *documents*; splits are consecutive slices of one ``generate_documents`` call, so a pronoun
    sentence of the test split may occur in training with the other pronoun form. Columns: those of
    :func:`load_synthetic_dataset`, plus ``doc_id``, ``sentence_index`` (position in the document),
    ``pronoun_class`` (the antecedent's noun class, -1 for sentences without pronoun) and ``contrastive_target``
    (the target with the wrong pronoun form; ``""`` without pronoun).
    """
    from datasets import Value

    for name, size in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test)):
        if size < 0:
            raise UserError(f"{name} must be >= 0, got {size}")
    documents = generate_documents(
        n_train + n_valid + n_test, sentences_per_doc, seed, min_words, max_words, pronoun_probability
    )
    bounds = {"train": (0, n_train), "validation": (n_train, n_train + n_valid), "test": (n_train + n_valid, None)}
    data = {
        name: [
            (
                pair,
                {
                    "doc_id": doc.doc_id,
                    "sentence_index": i,
                    "pronoun_class": -1 if link is None else link.noun_class,
                    "contrastive_target": "" if link is None else link.contrastive_target,
                },
            )
            for doc in documents[start:stop]
            for i, (pair, link) in enumerate(zip(doc.sentences, doc.pronouns, strict=True))
        ]
        for name, (start, stop) in bounds.items()
    }
    extra = {"doc_id": Value("string"), "sentence_index": Value("int32"), "pronoun_class": Value("int32"),
             "contrastive_target": Value("string")}  # fmt: skip
    return _to_dataset_dict(data, extra)


def gold_parses(batch: dict, sides: tuple[str, ...] = ("source", "target")) -> dict:
    """`datasets.map(batched=True)` function: the gold trees of `load_synthetic_dataset` as `source_parse` /
    `target_parse` columns of parse dicts, the form `SyntaxMTPreprocessor(source_parse_column=...,
    target_parse_column=...)` reads."""
    keys = ("words", "heads", "deprels", "upos")
    out = {}
    for side in sides:
        rows = zip(batch[side], *(batch[f"{side}_{k}"] for k in keys), strict=True)
        out[f"{side}_parse"] = [{"text": text, **dict(zip(keys, row, strict=True))} for text, *row in rows]
    return out


def gold_source_parses(batch: dict) -> dict:
    """`gold_parses` for the source side only."""
    return gold_parses(batch, sides=("source",))
