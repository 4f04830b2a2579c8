"""Sampling sentences of the synthetic language (:mod:`hf_syntax_mt.demo.synthetic`): a budget-driven grammar that
grows one source tree at a time (:class:`_SentenceBuilder`), then :func:`generate_pair` / :func:`generate_corpus`
linearise it into a source sentence and its head-final translation, with both gold trees.
"""

from __future__ import annotations

import random
from bisect import bisect
from itertools import accumulate

from ..errors import UserError
from .synthetic import (
    _CUM_WEIGHTS,
    COMPOUND_PROBABILITY,
    LEXICON,
    Lexeme,
    SyntheticPair,
    _compound,
    _linearize_source,
    _linearize_target,
    _Node,
    _pronoun_lexeme,
)

__all__ = ["generate_corpus", "generate_pair"]

# ----------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------

# Growth operations and their relative weights.
_OPERATIONS = ("adj", "adv", "nmod", "obl", "relcl", "coord_np", "coord_clause")
_OP_WEIGHTS = list(accumulate((3.0, 1.5, 2.0, 1.0, 1.5, 0.8, 0.6)))
_MAX_ATTEMPTS = 200


class _SentenceBuilder:
    """Grows one source tree from a minimal clause until it reaches a target number of words.

    Each step picks a growth operation (add an adjective, an adverb, a PP, a relative clause,
    coordinate an NP or a clause) and a random eligible node; the new subtree is attached only if the
    sentence stays within ``max_words``. Linear order comes from sibling ``slot`` numbers:

    * noun, left: cc/case -1, det 0, amod 1; right: nmod 0, acl:relcl 1, conj 2
    * verb, left: cc -1, relative "ke" as obj 0, nsubj 1, advmod 2; right: obj 0, obl 1, advmod 2, conj 3
    """

    def __init__(self, rng: random.Random, max_words: int) -> None:
        self.rng = rng
        self.max_words = max_words
        self.count = 0
        self.nouns: list[_Node] = []
        self.verbs: list[_Node] = []
        self.root: _Node | None = None

    def lexeme(self, cls: str) -> Lexeme:
        cum_weights = _CUM_WEIGHTS[cls]
        return LEXICON[cls][bisect(cum_weights, self.rng.random() * cum_weights[-1])]

    def word(self, cls: str, deprel: str) -> _Node:
        lex = self.lexeme(cls)
        if cls == "NOUN" and self.rng.random() < COMPOUND_PROBABILITY:
            lex = _compound(self.lexeme("NOUN"), lex)
        return _Node(lex, deprel)

    def noun_phrase(self, deprel: str) -> _Node:
        noun = self.word("NOUN", deprel)
        if self.rng.random() < 0.5:
            noun.attach(self.word("DET", "det"), "L", 0)
        if self.rng.random() < 0.15:
            noun.attach(self.word("ADJ", "amod"), "L", 1)
        return noun

    def clause(self, deprel: str) -> _Node:
        verb = self.word("VERB_TR" if self.rng.random() < 0.65 else "VERB_IN", deprel)
        verb.attach(self.noun_phrase("nsubj"), "L", 1)
        if verb.lex.transitive:
            verb.attach(self.noun_phrase("obj"), "R", 0)
        return verb

    def relative_clause(self) -> _Node:
        relativizer = self.word("PRON", "nsubj")
        if self.rng.random() < 0.3:  # object relative: "ke NP verb"
            verb = self.word("VERB_TR", "acl:relcl")
            relativizer.deprel = "obj"
            verb.attach(relativizer, "L", 0)
            verb.attach(self.noun_phrase("nsubj"), "L", 1)
        else:  # subject relative: "ke verb (NP)"
            verb = self.word("VERB_TR" if self.rng.random() < 0.6 else "VERB_IN", "acl:relcl")
            verb.attach(relativizer, "L", 1)
            if verb.lex.transitive:
                verb.attach(self.noun_phrase("obj"), "R", 0)
        return verb

    def prepositional(self, deprel: str) -> _Node:
        noun = self.noun_phrase(deprel)
        noun.attach(self.word("PREP_NMOD" if deprel == "nmod" else "PREP_OBL", "case"), "L", -1)
        return noun

    def coordinated(self, phrase: _Node) -> _Node:
        phrase.attach(self.word("CCONJ", "cc"), "L", -1)
        return phrase

    def register(self, nodes: list[_Node]) -> None:
        for node in nodes:
            self.count += 1
            if node.lex.upos == "NOUN":
                self.nouns.append(node)
            elif node.lex.upos == "VERB":
                self.verbs.append(node)

    def grow_step(self) -> bool:
        """Try one growth operation; return whether the sentence changed."""
        rng = self.rng
        op = _OPERATIONS[bisect(_OP_WEIGHTS, rng.random() * _OP_WEIGHTS[-1])]
        head: _Node
        if op in ("adj", "nmod", "relcl", "coord_np"):
            if not self.nouns:  # "ul <intransitive verb>": no noun to grow yet
                return False
            head = rng.choice(self.nouns)
        elif op == "coord_clause":
            head = self.root
        else:
            head = rng.choice(self.verbs)

        if op == "adj" and head.has("amod") < 2:
            side, slot, child = "L", 1, self.word("ADJ", "amod")
        elif op == "adv" and not head.has("advmod"):
            side, slot, child = ("L" if rng.random() < 0.5 else "R"), 2, self.word("ADV", "advmod")
        elif op == "nmod" and not head.has("nmod"):
            side, slot, child = "R", 0, self.prepositional("nmod")
        elif op == "obl" and not head.has("obl"):
            side, slot, child = "R", 1, self.prepositional("obl")
        elif op == "relcl" and not head.has("acl:relcl"):
            side, slot, child = "R", 1, self.relative_clause()
        elif op == "coord_np" and head.deprel != "conj" and not head.has("conj"):
            side, slot, child = "R", 2, self.coordinated(self.noun_phrase("conj"))
        elif op == "coord_clause" and head.has("conj") < 2:
            side, slot, child = "R", 3, self.coordinated(self.clause("conj"))
        else:
            return False
        nodes = child.subtree()
        if self.count + len(nodes) > self.max_words:
            return False
        head.attach(child, side, slot)
        self.register(nodes)
        return True

    def build(self, target_words: int, pronoun: bool = False) -> _Node:
        root = self.clause("root")
        if len(root.subtree()) > self.max_words:  # only possible for tiny max_words: start bare
            root = _Node(LEXICON["VERB_IN"][0], "root")
            root.attach(_Node(LEXICON["NOUN"][0], "nsubj"), "L", 1)
        if pronoun:  # documents: the main clause's subject or object NP becomes the bare pronoun "ul"
            role = "obj" if root.lex.transitive and self.rng.random() < 0.5 else "nsubj"
            siblings = root.right if role == "obj" else root.left
            i = next(i for i, child in enumerate(siblings) if child.deprel == role)
            pronoun_node = _Node(_pronoun_lexeme(0), role)
            pronoun_node.slot, siblings[i] = siblings[i].slot, pronoun_node
        self.root = root
        self.register(root.subtree())
        attempts = 0
        while self.count < target_words and attempts < _MAX_ATTEMPTS:
            attempts += 1
            self.grow_step()
        return root


def _validate_lengths(min_words: int, max_words: int) -> None:
    if max_words < 3:
        raise UserError(f"max_words={max_words} is too small: the shortest sentences have 3 words; use max_words >= 3")
    if not 1 <= min_words <= max_words:
        raise UserError(f"need 1 <= min_words <= max_words, got min_words={min_words}, max_words={max_words}")


def generate_pair(rng: random.Random, min_words: int = 3, max_words: int = 60) -> SyntheticPair:
    """Sample one sentence pair with ``min_words <= len(source words) <= max_words``.

    The length target is drawn as ``min_words + (max_words - min_words + 1) * u**2`` with ``u``
    uniform: many short sentences, about a fifth of them 40+ words long with the defaults.

    Args:
        rng: the random generator to draw from (the only source of randomness).
        min_words, max_words: length range of the source sentence, in words.
    """
    _validate_lengths(min_words, max_words)
    root = _sample_root(rng, min_words, max_words)
    source, source_tree = _linearize_source(root)
    target, target_tree = _linearize_target(root)
    return SyntheticPair(source, target, source_tree, target_tree)


def _sample_root(rng: random.Random, min_words: int, max_words: int, pronoun: bool = False) -> _Node:
    """Grow source trees until one has ``min_words..max_words`` words (see :func:`generate_pair`)."""
    while True:
        target_words = min(max_words, min_words + int((max_words - min_words + 1) * rng.random() ** 2))
        root = _SentenceBuilder(rng, max_words).build(target_words, pronoun=pronoun)
        if min_words <= len(root.subtree()) <= max_words:
            return root


def generate_corpus(n: int, seed: int = 0, min_words: int = 3, max_words: int = 60) -> list[SyntheticPair]:
    """Generate ``n`` pairs with distinct source sentences, deterministically from ``seed``.

    The first ``k`` pairs of ``generate_corpus(n, seed)`` do not depend on ``n``. For documents (sentences whose
    translation needs the previous sentence) see :func:`generate_documents`.
    """
    if n < 0:
        raise UserError(f"n must be >= 0, got {n}")
    _validate_lengths(min_words, max_words)
    rng = random.Random(seed)
    pairs: list[SyntheticPair] = []
    seen: set[str] = set()
    budget = 20 * n + 1000
    while len(pairs) < n:
        budget -= 1
        if budget < 0:
            raise RuntimeError(
                f"could only generate {len(pairs)} distinct sentences out of n={n} with "
                f"min_words={min_words}, max_words={max_words}; widen the length range or lower n"
            )
        pair = generate_pair(rng, min_words, max_words)
        if pair.source not in seen:
            seen.add(pair.source)
            pairs.append(pair)
    return pairs


def _split_corpus(splits: dict[str, int], seed: int, min_words: int, max_words: int) -> dict[str, list[SyntheticPair]]:
    for name, size in splits.items():
        if size < 0:
            raise UserError(f"split {name!r} has negative size {size}")
    # One deduplicated corpus, cut into consecutive slices: splits never share a source sentence.
    pairs = generate_corpus(sum(splits.values()), seed=seed, min_words=min_words, max_words=max_words)
    out, start = {}, 0
    for name, size in splits.items():
        out[name] = pairs[start : start + size]
        start += size
    return out
