"""German nouns for the contrastive pronoun test: a lexicon of gender and number (:class:`NounGenders`) and the one
test of whether a token of a German sentence is a noun (:meth:`NounGenders.noun_at`), used both for the nouns in
context and for the antecedent search (`pronoun_kinds.py`); part of the pronoun study's item builder (`pronoun_builder.py`).

The lexicon is read, not written by hand: from German CoNLL-U treebanks (UD FEATS ``Gender`` and ``Number`` of NOUN
tokens, :meth:`NounGenders.from_conllu`) and from the determiners that precede capitalised words in running German
text (:meth:`NounGenders.add_determiners`: ``das Haus`` -> neuter, ``eine Lampe`` -> feminine, ``den Vorspeisen`` ->
masculine or plural). Each word collects votes for ``masc`` / ``fem`` / ``neut`` / ``plur``; a determiner that allows
several readings splits its vote. A word is entered with its winning reading when that reading holds at least two
thirds of the votes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["NounGenders", "german_tokens"]

GERMAN_TOKEN = re.compile(r"\w+|[^\w\s]")
#: capitalised words that are no nouns (the polite ``Sie`` and its forms, wherever they stand)
NOT_NOUNS = {"sie", "ihr", "ihnen", "ihre", "ihrem", "ihren", "ihrer", "ihres"}
#: a capitalised first word followed by one of these is a verb (``Können Sie ...``, ``Wissen wir ...``)
SUBJECT_PRONOUNS = {"sie", "wir", "ihr", "ich", "du", "er", "es", "man"}
QUOTES = {'"', "'", "„", "“", "”", "»", "«", "(", "-", "–"}
#: determiner (lower case) -> the noun readings it allows; only those that agree in gender or number are listed
DETERMINERS = {
    "das": ("neut",), "ein": ("masc", "neut"), "eine": ("fem",), "einen": ("masc",), "einem": ("masc", "neut"),
    "einer": ("fem",), "eines": ("masc", "neut"), "die": ("fem", "plur"), "der": ("masc", "fem", "plur"),
    "dem": ("masc", "neut"), "den": ("masc", "plur"), "des": ("masc", "neut"), "diese": ("fem", "plur"),
    "dieser": ("masc", "fem", "plur"), "diesen": ("masc", "plur"), "diesem": ("masc", "neut"), "dieses": ("neut",),
    "kein": ("masc", "neut"), "keine": ("fem", "plur"), "keinen": ("masc", "plur"), "keinem": ("masc", "neut"),
    "jedes": ("neut",), "jede": ("fem",), "jeder": ("masc", "fem"), "jeden": ("masc",), "jedem": ("masc", "neut"),
}  # fmt: skip
READINGS = ("masc", "fem", "neut", "plur")
#: feminine singular endings that take ``-en`` in the plural (``Verfahrensweise`` -> ``-n``, ``Lösung`` -> ``-en``)
FEMININE_PLURAL = (("e", "n"), ("ung", "en"), ("heit", "en"), ("keit", "en"), ("ion", "en"), ("schaft", "en"),
                   ("tät", "en"), ("ik", "en"))  # fmt: skip


def german_tokens(text: str) -> list[tuple[str, int, int]]:
    """Words and punctuation of a German sentence with their character spans: ``[(token, start, end), ...]``."""
    return [(m.group(0), m.start(), m.end()) for m in GERMAN_TOKEN.finditer(text)]


class NounGenders:
    """German noun -> ``"masc"``, ``"fem"``, ``"neut"`` (singular) or ``"plur"``, from votes per lower-cased word
    (``counts``: word -> Counter over those four readings; a reading with under two thirds of a word's votes leaves
    the word out). :meth:`gender` gives the singular gender (None for a plural or unknown word); :meth:`reading`
    also says ``"plur"``; both find compounds by their longest known final part (at least 4 letters, after at least
    3): ``Parlamentsdebatte`` -> ``debatte`` -> fem. A word ending in ``-n``/``-en`` whose stem is a known feminine
    in ``-e``/``-ung``/... is plural (``Vorspeisen``: ``Vorspeise`` is feminine, and a feminine noun has no singular
    form in ``-n``)."""

    def __init__(self, counts: Mapping[str, Counter] | None = None):
        self.readings: dict[str, str] = {}
        for word, votes in (counts or {}).items():
            if not votes:
                continue
            reading, n = votes.most_common(1)[0]
            if n * 3 >= 2 * sum(votes.values()):
                self.readings[word] = reading
        self.table = {w: r for w, r in self.readings.items() if r != "plur"}  # the singular genders
        self._suffixes = sorted({w for w in self.readings if len(w) >= 4}, key=len, reverse=True)

    @staticmethod
    def conllu_counts(paths: Iterable[str | Path]) -> dict[str, Counter]:
        """Votes from the NOUN tokens of CoNLL-U files: a singular form and every lemma vote for their ``Gender``; a
        form with ``Number=Plur`` votes ``plur``."""
        from hf_syntax_mt.data.readers import iter_lines
        from hf_syntax_mt.validation import check_sequence

        if isinstance(paths, (str, Path)):  # one path: its characters would be read as paths ("/", ...)
            from hf_syntax_mt.errors import UserTypeError

            raise UserTypeError(f"paths must be a list of CoNLL-U files, not one path ({str(paths)!r}): pass "
                                f"[{str(paths)!r}]")  # fmt: skip
        paths = check_sequence(paths, "paths", "CoNLL-U files")
        counts: dict[str, Counter] = defaultdict(Counter)
        names = {"Masc": "masc", "Fem": "fem", "Neut": "neut"}
        for path in paths:
            for _, line in iter_lines(path):
                cols = line.split("\t")
                if len(cols) != 10 or not cols[0].isdigit() or cols[3] != "NOUN":
                    continue
                feats = dict(f.split("=", 1) for f in cols[5].split("|") if "=" in f)
                gender = names.get(feats.get("Gender", ""))
                if feats.get("Number") == "Plur":
                    counts[cols[1].lower()]["plur"] += 1
                elif gender:
                    counts[cols[1].lower()][gender] += 1
                if gender and cols[2] not in ("_", ""):  # the lemma is the singular
                    counts[cols[2].lower()][gender] += 1
        return counts

    @staticmethod
    def determiner_counts(texts: Iterable[str]) -> dict[str, Counter]:
        """Votes from running German text: each time a capitalised word (not the sentence's first) follows a
        determiner, directly or after lower-case adjectives, that occurrence allows the determiner's readings. The
        word gets the reading that the most occurrences allow, when it is the only one with that many and at least
        two thirds of the occurrences allow it (``den Kollegen`` + ``die Kollegen`` -> plural; ``die Umwelt`` alone
        -> feminine or plural: no reading): ``Counter({reading: occurrences allowing it, "other": the rest})``."""
        seen: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for text in texts:
            tokens = [t for t, _, _ in german_tokens(text)]
            for k in range(1, len(tokens)):
                word = tokens[k]
                if not word[:1].isupper() or len(word) < 2 or not word.isalpha() or word.lower() in NOT_NOUNS:
                    continue
                d = k - 1
                while (
                    d > 0
                    and k - d <= 3
                    and tokens[d].islower()
                    and tokens[d].isalpha()
                    and tokens[d] not in DETERMINERS
                ):
                    d -= 1  # adjectives between the determiner and the noun
                readings = DETERMINERS.get(tokens[d].lower())
                adjectives = tokens[d + 1 : k]
                if readings is None or not all(a.endswith(("e", "en", "er", "es", "em")) for a in adjectives):
                    continue
                seen[word.lower()].append(readings)
        counts: dict[str, Counter] = {}
        for word, occurrences in seen.items():
            allowed = Counter(r for readings in occurrences for r in readings).most_common()
            best, n = allowed[0]
            if (len(allowed) == 1 or allowed[1][1] < n) and 3 * n >= 2 * len(occurrences):
                counts[word] = Counter({best: n, "other": len(occurrences) - n})
        return counts

    @classmethod
    def from_sources(cls, conllu: Iterable[str | Path] = (), texts: Iterable[str] = ()) -> NounGenders:
        """The treebanks' votes where a treebank knows the word, else the determiners' in ``texts``."""
        counts = cls.conllu_counts(conllu)
        for word, votes in cls.determiner_counts(texts).items():
            if word not in counts:
                counts[word] = votes
        return cls(counts)

    @classmethod
    def from_conllu(cls, paths: Iterable[str | Path]) -> NounGenders:
        return cls(cls.conllu_counts(paths))

    def __len__(self) -> int:
        return len(self.readings)

    def reading(self, noun: str) -> str | None:
        """``"masc"``, ``"fem"``, ``"neut"``, ``"plur"`` or None (unknown)."""
        word = noun.lower()
        if word in self.readings:
            return self.readings[word]
        for singular, plural in FEMININE_PLURAL:  # Vorspeisen -> Vorspeise (fem) -> plural
            stem = word[: -len(plural)]
            if word.endswith(singular + plural) and len(stem) >= 3 and self._known(stem) == "fem":
                return "plur"
        return self._known(word)

    def _known(self, word: str) -> str | None:
        if word in self.readings:
            return self.readings[word]
        for suffix in self._suffixes:  # longest first
            if len(word) - len(suffix) >= 3 and word.endswith(suffix):
                return self.readings[suffix]
        return None

    def gender(self, noun: str) -> str | None:
        """The singular gender of ``noun``; None for a plural or an unknown word."""
        reading = self.reading(noun)
        return None if reading == "plur" else reading

    def noun_at(self, tokens: list[str], k: int) -> str | None:
        """The reading (:meth:`reading`) of token ``k`` of a sentence's tokens (as written) if it is a noun, else
        None: capitalised, at least two letters, not a form of ``Sie``; the sentence's first word (after quotes)
        only when the lexicon knows it as it is and no subject pronoun follows it (``Können Sie``, ``Wissen wir``:
        verbs)."""
        token = tokens[k]
        if not token[:1].isupper() or len(token) < 2 or not token.isalpha() or token.lower() in NOT_NOUNS:
            return None
        if all(t in QUOTES for t in tokens[:k]):  # the first word
            following = tokens[k + 1].lower() if k + 1 < len(tokens) else ""
            if token.lower() not in self.readings or following in SUBJECT_PRONOUNS:
                return None
        return self.reading(token)

    def nouns(self, text: str, before: int | None = None) -> list[tuple[str, str]]:
        """``(noun, gender)`` of the singular nouns of ``text`` (up to character ``before``) whose gender is known
        (:meth:`noun_at`)."""
        tokens = german_tokens(text)
        words = [t for t, _, _ in tokens]
        out = []
        for k, (token, start, _) in enumerate(tokens):
            if before is not None and start >= before:
                break
            reading = self.noun_at(words, k)
            if reading is not None and reading != "plur":
                out.append((token, reading))
        return out
