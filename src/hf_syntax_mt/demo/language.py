"""The demo's language pair: short English-like sentences -> a head-final language with postpositions.

Small on purpose, so that a model of a few hundred thousand parameters learns it in minutes on 2 CPU cores, with one
ambiguity that only the parse tree resolves.

Source (SVO, 3-15 words, 43 word types; ``?`` = optional)::

    S   -> NP_nsubj Vt NP_obj PP?  |  NP_nsubj Vi PP?
    NP  -> Det Adj? Noun PP_nmod?            (PP_nmod only inside the subject: "the dog with a hat saw ...")
    PP  -> Prep Det Adj? Noun                 the preposition is the `case` dependent of its noun

The PP at the end of a sentence attaches to the verb (``obl``) or, after an object, to the object noun (``nmod``).
``of`` only attaches to nouns; ``with`` and ``near`` attach to either, **each with probability 1/2 and independently
of every word in the sentence**: "the dog saw the cat with a telescope" is one string with two trees. A PP inside the
subject is always ``nmod`` (nothing else precedes the verb).

Target (head-final): every head comes after its dependents (in source order); articles are dropped; words are
translated one for one; each noun is followed by its relation's particle::

    nsubj -> noun "ga"      obj -> noun "o"      obl -> noun POSTPOSITION      nmod -> noun POSTPOSITION "no"

    the dog saw the cat with a telescope   (obl)   ->  peki ga tamu o rezo to mita
    the dog saw the cat with a telescope   (nmod)  ->  peki ga rezo to no tamu o mita

So the attachment of an ambiguous PP decides both the word order and the particle ``no`` of the translation: a model
that sees only the string can be right on one of the two trees, a model given the tree (PASCAL) can be right on both.
The language is fixed; a seed only picks which sentences are drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from .synthetic import DependencyTree, SyntheticPair
from .synthetic_corpus import to_conllu

if TYPE_CHECKING:  # pragma: no cover
    from datasets import DatasetDict

NOUNS = {
    "dog": "peki", "cat": "tamu", "man": "soro", "woman": "lina", "boy": "kufa", "girl": "meda", "bird": "wosi",
    "horse": "baru", "farmer": "nolu", "king": "hemo", "hat": "zupa", "stick": "goki", "telescope": "rezo",
    "ball": "fiko", "box": "dalu", "tree": "wapa", "garden": "sine", "river": "kolu", "house": "yema", "book": "tisa",
}  # fmt: skip
TRANSITIVE_VERBS = {
    "saw": "mita", "chased": "oyta", "liked": "suka", "found": "mitu", "pushed": "osita", "helped": "tasu",
    "painted": "kaita", "watched": "nagu",
}  # fmt: skip
INTRANSITIVE_VERBS = {"slept": "neta", "ran": "hasi", "sat": "suwa", "sang": "utau"}
ADJECTIVES = {"big": "ooki", "small": "tiku", "red": "aka", "old": "furu", "happy": "ureu", "green": "mido"}
DETERMINERS = ("the", "a")
AMBIGUOUS_PREPOSITIONS = {"with": "to", "near": "soba"}  # nmod or obl, the tree decides
NOUN_PREPOSITIONS = {"of": "kara"}  # nmod only
PREPOSITIONS = {**AMBIGUOUS_PREPOSITIONS, **NOUN_PREPOSITIONS}
PARTICLES = {"nsubj": "ga", "obj": "o"}
GENITIVE = "no"  # after the postposition of a PP that modifies a noun
ATTACHMENTS = ("verb", "noun")  # of a sentence-final PP: obl (head = verb) or nmod (head = object noun)

_LEXICON = {**NOUNS, **TRANSITIVE_VERBS, **INTRANSITIVE_VERBS, **ADJECTIVES, **PREPOSITIONS}

# how often each optional part appears (the diagnostic needs a steady supply of ambiguous sentence-final PPs)
P_TRANSITIVE = 0.8
P_FINAL_PP = 0.6
P_SUBJECT_PP = 0.25
P_ADJECTIVE = 0.3
P_NOUN_ONLY_PREP = 0.2  # share of "of" among the PPs that may attach to a noun


@dataclass
class DemoSentence:
    """A source sentence as drawn, before its tree is fixed: ``final_pp`` is the index of the sentence-final PP's noun
    (or None), whose head is the verb or the object noun depending on ``attachment``."""

    words: list[str]
    heads: list[int]  # 1-based, 0 = root
    deprels: list[str]
    upos: list[str]
    final_pp: int | None = None  # 1-based index of the sentence-final PP's noun
    ambiguous: bool = False  # that PP may attach to the verb or to the object (a transitive clause, with/near)

    def tree(self, attachment: str | None = None) -> DependencyTree:
        """The gold tree; ``attachment`` ("verb" or "noun") re-attaches an ambiguous sentence-final PP."""
        heads, deprels = list(self.heads), list(self.deprels)
        if attachment is not None:
            if not self.ambiguous:
                raise UserError(f"{' '.join(self.words)!r} has no ambiguous PP: attachment must be None")
            if attachment not in ATTACHMENTS:
                raise UserError(f"attachment must be one of {ATTACHMENTS}, got {attachment!r}")
            i = self.final_pp - 1
            verb, obj = deprels.index("root") + 1, deprels.index("obj") + 1
            heads[i], deprels[i] = (verb, "obl") if attachment == "verb" else (obj, "nmod")
        return DependencyTree(list(self.words), heads, deprels, list(self.upos))


def attachment_of(tree: DependencyTree) -> str | None:
    """'verb' / 'noun' for the sentence-final PP of an ambiguous demo sentence's tree, None without one."""
    last = len(tree.words)
    if tree.deprels[last - 1] in ("obl", "nmod") and tree.upos[tree.heads[last - 1] - 1] in ("VERB", "NOUN"):
        return "verb" if tree.deprels[last - 1] == "obl" else "noun"
    return None


def _noun_phrase(rng: random.Random, words: list, head: int, deprel: str, with_pp: bool) -> int:
    """Append ``Det Adj? Noun (PP)?`` to ``words`` (rows of word, head, deprel, upos; head of the noun = ``head``);
    return the noun's 1-based index. Heads inside the phrase are filled in here."""
    start = len(words)
    words.append([rng.choice(DETERMINERS), None, "det", "DET"])
    if rng.random() < P_ADJECTIVE:
        words.append([rng.choice(list(ADJECTIVES)), None, "amod", "ADJ"])
    words.append([rng.choice(list(NOUNS)), head, deprel, "NOUN"])
    noun = len(words)
    for row in words[start : noun - 1]:
        row[1] = noun
    if with_pp:
        _prepositional_phrase(rng, words, noun, "nmod", rng.choice(list(PREPOSITIONS)))
    return noun


def _prepositional_phrase(rng: random.Random, words: list, head: int, deprel: str, prep: str) -> int:
    words.append([prep, None, "case", "ADP"])
    at = len(words)
    noun = _noun_phrase(rng, words, head, deprel, with_pp=False)
    words[at - 1][1] = noun
    return noun


def draw_sentence(rng: random.Random, ambiguous: bool | None = None) -> DemoSentence:
    """Draw one source sentence (with ``ambiguous=True``: one with an ambiguous sentence-final PP; False: one
    without). Its ``tree()`` attaches an ambiguous PP to the verb; pick the attachment with ``tree(attachment)``."""
    for _ in range(1000):
        words: list = []
        subject = _noun_phrase(rng, words, None, "nsubj", with_pp=rng.random() < P_SUBJECT_PP)
        transitive = rng.random() < P_TRANSITIVE
        verb_word = rng.choice(list(TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS))
        words.append([verb_word, 0, "root", "VERB"])
        verb = len(words)
        words[subject - 1][1] = verb
        if transitive:
            _noun_phrase(rng, words, verb, "obj", with_pp=False)
        final_pp, is_ambiguous = None, False
        if rng.random() < P_FINAL_PP:
            if transitive and rng.random() < P_NOUN_ONLY_PREP:
                final_pp = _prepositional_phrase(rng, words, len(words), "nmod", "of")  # the object noun is last
            else:
                prep = rng.choice(list(AMBIGUOUS_PREPOSITIONS))
                final_pp = _prepositional_phrase(rng, words, verb, "obl", prep)
                is_ambiguous = transitive
        if ambiguous is None or ambiguous == is_ambiguous:
            w, h, d, u = (list(col) for col in zip(*words, strict=True))
            return DemoSentence(w, h, d, u, final_pp=final_pp, ambiguous=is_ambiguous)
    raise RuntimeError("could not draw a sentence of the requested kind")  # pragma: no cover


def translate(tree: DependencyTree) -> tuple[str, DependencyTree]:
    """The target sentence and its tree: head-final order, articles dropped, particles after nouns."""
    children: dict[int, list[int]] = {}
    for i, h in enumerate(tree.heads, start=1):
        children.setdefault(h, []).append(i)
    out: list[list] = []  # rows of (word, source index of the head word or None, deprel, upos, owner source index)
    position: dict[int, int] = {}  # source word index -> 1-based target index

    def visit(i: int) -> None:
        deprel = tree.deprels[i - 1]
        for c in children.get(i, []):
            if tree.deprels[c - 1] not in ("det", "case"):
                visit(c)
        out.append([_LEXICON[tree.words[i - 1]], tree.heads[i - 1], deprel, tree.upos[i - 1], i])
        position[i] = len(out)
        if deprel in PARTICLES:
            out.append([PARTICLES[deprel], i, "case", "ADP", None])
        elif deprel in ("obl", "nmod"):
            prep = next(tree.words[c - 1] for c in children[i] if tree.deprels[c - 1] == "case")
            out.append([PREPOSITIONS[prep], i, "case", "ADP", None])
            if deprel == "nmod":
                out.append([GENITIVE, i, "case", "ADP", None])

    root = tree.heads.index(0) + 1
    visit(root)
    words = [row[0] for row in out]
    heads = [0 if row[1] == 0 else position[row[1]] for row in out]
    target = DependencyTree(words, heads, [row[2] for row in out], [row[3] for row in out])
    return " ".join(words), target


def make_pair(sentence: DemoSentence, attachment: str | None = None) -> SyntheticPair:
    tree = sentence.tree(attachment)
    target, target_tree = translate(tree)
    return SyntheticPair(" ".join(tree.words), target, tree, target_tree)


def generate_corpus(n: int, seed: int = 0) -> list[SyntheticPair]:
    """``n`` pairs; an ambiguous PP attaches to the verb or to the object with probability 1/2 each."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        sentence = draw_sentence(rng)
        attachment = rng.choice(ATTACHMENTS) if sentence.ambiguous else None
        pairs.append(make_pair(sentence, attachment))
    return pairs


def to_dataset(splits: dict[str, list[SyntheticPair]], extra: dict[str, dict[str, list]] | None = None) -> DatasetDict:
    """``{split: pairs}`` -> DatasetDict with ``source``, ``target`` and the gold trees (``source_words``,
    ``source_heads``, ...), the columns `hf_syntax_mt.demo.synthetic_corpus.gold_source_parses` reads; ``extra`` adds
    columns per split."""
    from datasets import Dataset, DatasetDict

    out = {}
    for name, pairs in splits.items():
        columns: dict[str, list] = {"source": [p.source for p in pairs], "target": [p.target for p in pairs]}
        for side in ("source", "target"):
            trees = [p.source_tree if side == "source" else p.target_tree for p in pairs]
            for field in ("words", "heads", "deprels", "upos"):
                columns[f"{side}_{field}"] = [list(getattr(t, field)) for t in trees]
        columns.update((extra or {}).get(name, {}))
        out[name] = Dataset.from_dict(columns)
    return DatasetDict(out)


def write_conllu(path: str | Path, pairs: list[SyntheticPair], prefix: str) -> Path:
    """The source trees of ``pairs`` as one CoNLL-U file (the demo pipeline's parser reads it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(to_conllu(p.source_tree, f"{prefix}-{i}", p.source) for i, p in enumerate(pairs, start=1))
    path.write_text(text, encoding="utf-8")
    return path


__all__ = [
    "ATTACHMENTS",
    "DemoSentence",
    "attachment_of",
    "draw_sentence",
    "generate_corpus",
    "make_pair",
    "to_dataset",
    "translate",
    "write_conllu",
]
