"""What kind of pronoun a contrastive pronoun item tests (issue 45): whether its German gender depends on an antecedent
noun (``referential``, ContraPro's condition, Müller et al. 2018) or is fixed by the construction (``expletive``,
``cleft``, ``clausal``, ``impersonal``), and the rules that drop items whose variants would be wrong for grammar rather
than context (a plural ``sie``; a case the German word order contradicts).

The rules read the English parse (words, 1-based heads, relations, UPOS), the German reference's tokens
(:func:`~hf_syntax_mt.evaluation.pronouns.german_tokens`, lower-cased here) and the word alignment; there is no German
parser. In order:

- **expletive**: the English ``it`` is ``expl``; or German ``es gibt`` / ``gibt es`` (existential).
- **impersonal**: German ``es geht ... um``, ``es handelt sich``, ``es liegt / kommt ... an``, ``es regnet`` /
  ``schneit``.
- **cleft**: German ``es`` next to a plural finite verb (``Es sind die Vorwürfe``: ``es`` is no plural subject); or the
  English ``it`` is the subject of a form of *be* with a predicate noun (``attr``) and German ``es`` next to a form of
  *sein*: "it's a tool (that ...)" -> ``Es ist ein Werkzeug``, where German says ``es`` whatever the antecedent's
  gender (a German ``er``/``sie`` there is the translator's choice of gender, and the item stays).
- **clausal**: an extraposed clause: the English ``it`` is the subject of a copula or raising verb (*be*, *seem*,
  *appear*, ...) or of an adjective, or the object of a verb whose adjective complement, with a ``ccomp`` / ``xcomp``
  / ``csubj`` after the pronoun ("it is important to note that", "makes it possible to"); or German ``es``, then at
  the next comma ``dass`` / ``ob`` / ``wie``, or a clause with ``zu`` (an infinitive; not ``um``/``ohne``/``statt``
  ... ``zu``, which are adverbial).
- **referential**: none of these, and an antecedent: an English noun (``NOUN``/``PROPN``) before the pronoun in its
  sentence (distance 0) or in one of the previous ``k`` sentences of the document (distance 1..k), aligned to a
  German noun whose gender (:class:`~hf_syntax_mt.evaluation.pronouns.NounGenders`) is the pronoun's; the nearest
  one is recorded; for ``es`` only when no aligned noun of another gender is nearer (``es`` is also the form for a
  clause or an event, and a neuter noun behind a nearer masculine or feminine one was, read by hand, seldom the
  antecedent). **no_antecedent** otherwise (a clause or event referred to, an antecedent further back, a noun
  the lexicon does not know, or an alignment that missed it).

Dropped (:func:`plural_sie`, :func:`german_case`): ``sie`` next to a plural finite verb (a subject ``sie`` next to
any lower-case word in ``-en``; plural: no gender to contrast), and ``es``/``sie`` whose case from the English relation contradicts the German word order (after ``ich``,
``du``, ``wir``, ``man`` in the same clause: accusative; first word of the sentence: nominative).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

__all__ = ["DISTANCE_BUCKETS", "KINDS", "distance_bucket", "find_antecedent", "german_case", "item_kind", "plural_sie"]

#: the kinds an item can have; only ``referential`` items test context
KINDS = ("referential", "no_antecedent", "expletive", "cleft", "clausal", "impersonal")
#: antecedent distances as the scores group them (sentences back; ``3+``: further)
DISTANCE_BUCKETS = ("0", "1", "2", "3+")

BE = {"be", "is", "'s", "was", "were", "been", "being", "am", "are", "'re", "ai"}
RAISING = {"seem", "seems", "seemed", "appear", "appears", "appeared", "happen", "happens", "happened", "become",
           "becomes", "became", "remain", "remains", "remained", "turn", "turns", "turned"}  # fmt: skip
CLAUSE_DEPS = {"ccomp", "xcomp", "csubj"}
PREDICATE_DEPS = {"acomp", "attr", "oprd"}
PLURAL_FINITE = {"sind", "waren", "seien", "wären", "haben", "hatten", "hätten", "werden", "wurden", "würden",
                 "können", "konnten", "könnten", "müssen", "mussten", "müssten", "sollen", "sollten", "wollen",
                 "wollten", "dürfen", "durften", "dürften", "mögen", "möchten"}  # fmt: skip
COPULA = {"ist", "war", "wäre", "sei", "sind", "waren"}
#: words in -en next to ``sie`` that are no plural verb
NOT_VERBS = {"den", "denen", "einen", "keinen", "ihren", "seinen", "diesen", "jenen", "meinen", "unseren", "eben",
             "oben", "unten", "neben", "gegen", "zwischen", "wegen", "trotzdem", "seien", "allen", "vielen", "wenigen",
             "beiden", "anderen", "selben", "gleichen", "morgen", "gestern", "dennoch"}  # fmt: skip
NOMINATIVE_ONLY = {"ich", "du", "wir", "man"}
CLAUSE_BREAK = {",", ";", ":", ".", "!", "?", "und", "aber", "oder", "denn", "dass", "weil", "wenn", "ob"}
QUOTES = {'"', "'", "„", "“", "”", "»", "«", "(", "-", "–"}


def _children(heads: Sequence[int], h: int) -> list[int]:
    """0-based children of the 0-based word ``h`` (``heads`` are 1-based, 0 = root)."""
    return [c for c, head in enumerate(heads) if head - 1 == h]


def _english_kind(words, heads, deprels, upos, i: int) -> tuple[str | None, str]:
    dep = deprels[i]
    if dep == "expl":
        return "expletive", "english:expl"
    h = heads[i] - 1
    if h < 0:
        return None, ""
    head_word = words[h].lower()
    if dep in ("nsubj", "nsubjpass"):
        predicates = [h] + [c for c in _children(heads, h) if deprels[c] in PREDICATE_DEPS]
        if head_word in BE | RAISING or upos[h] == "ADJ":
            if any(deprels[c] in CLAUSE_DEPS and c > i for p in predicates for c in _children(heads, p)):
                return "clausal", f"english:extraposition ({words[h]})"
        if head_word in BE and any(deprels[c] == "attr" and c > i and upos[c] in ("NOUN", "PROPN", "PRON", "NUM")
                                   for c in _children(heads, h)):  # fmt: skip
            return "cleft", f"english:it {words[h]} + predicate noun"
    if dep == "dobj":  # "find it hard to", "makes it possible that"
        for c in _children(heads, h):
            if deprels[c] in PREDICATE_DEPS | {"ccomp"} and upos[c] == "ADJ":
                if any(deprels[g] in CLAUSE_DEPS and g > i for g in _children(heads, c)):
                    return "clausal", f"english:extraposition ({words[h]} it {words[c]})"
    return None, ""


def _german_kind(tokens: Sequence[str], j: int) -> tuple[str | None, str]:
    """``tokens``: the reference's lower-cased tokens; ``j``: the pronoun."""
    if tokens[j] != "es":
        return None, ""
    near = {tokens[k] for k in (j - 1, j + 1) if 0 <= k < len(tokens)}
    rest = tokens[j + 1 :]
    if near & {"gibt", "gab", "gäbe", "geben", "gegeben"}:
        return "expletive", "german:es gibt"
    if near & {"geht", "ging", "gehe", "ginge"} and "um" in rest:
        return "impersonal", "german:es geht um"
    if near & {"handelt", "handelte", "handele"} and "sich" in tokens[max(0, j - 2) : j + 4]:
        return "impersonal", "german:es handelt sich"
    if near & {"regnet", "regnete", "schneit", "schneite"}:
        return "impersonal", "german:weather"
    if near & {"sind", "waren", "seien", "wären"}:
        return "cleft", "german:es + plural verb"
    if near & {"liegt", "lag", "kommt", "kam"} and "an" in rest:
        return "impersonal", "german:es liegt/kommt ... an"
    if "," in rest:
        after = rest.index(",") + 1
        if after < len(rest) and rest[after] in ("dass", "daß", "ob", "wie"):
            return "clausal", f"german:es ..., {rest[after]}"
        clause = rest[after:]
        clause = clause[: clause.index(",")] if "," in clause else clause
        if clause and clause[0] not in ("um", "ohne", "statt", "anstatt", "damit") and "zu" in clause[1:]:
            return "clausal", "german:es ..., ... zu"
    return None, ""


def item_kind(words, heads, deprels, upos, i: int, tokens: Sequence[str], j: int) -> tuple[str | None, str]:
    """(kind, evidence) of the English ``it`` at word ``i`` translated by the German token ``j`` when the rules of the
    module docstring say it is not referential, else ``(None, "")`` (then :func:`find_antecedent` decides)."""
    kind, evidence = _english_kind(words, heads, deprels, upos, i)
    if kind == "expletive":
        return kind, evidence
    if kind == "cleft" and not (tokens[j] == "es" and {tokens[k] for k in (j - 1, j + 1) if 0 <= k < len(tokens)}
                                & COPULA):  # fmt: skip
        kind, evidence = None, ""  # "it is no instrument" -> "sie ist kein Instrument": the German form is chosen
    german, german_evidence = _german_kind(tokens, j)
    if german is not None:
        return german, german_evidence
    return kind, evidence


def plural_sie(
    tokens: Sequence[str], j: int, nominative: bool = False, cased: Sequence[str] | None = None
) -> str | None:
    """The plural finite verb next to ``sie`` (token ``j`` of the lower-cased ``tokens``), or None: an auxiliary or
    modal (``sind``, ``können``), or, for a subject (``nominative``), any word in ``-en`` written lower-case in
    ``cased`` (the tokens as written; a noun such as ``Daten`` is not a verb) but a few determiners and prepositions
    (``sie zeugen``, ``dann gehen sie``)."""
    cased = tokens if cased is None else cased
    if tokens[j] != "sie":
        return None
    for k in (j - 1, j + 1):
        if 0 <= k < len(tokens) and tokens[k] in PLURAL_FINITE:
            return tokens[k]
    if nominative:
        for k in (j + 1, j - 1):
            word = tokens[k] if 0 <= k < len(tokens) else ""
            if word.endswith("en") and word.isalpha() and word not in NOT_VERBS and not cased[k][:1].isupper():
                return word
    return None


def german_case(tokens: Sequence[str], j: int) -> tuple[str | None, str]:
    """The case the German word order gives ``es``/``sie`` at token ``j``: accusative after a nominative-only pronoun
    of the same clause (``ich habe es``, ``ob wir sie``), nominative as the sentence's first word; else None."""
    for k in range(j - 1, max(-1, j - 3), -1):
        if tokens[k] in CLAUSE_BREAK:
            break
        if tokens[k] in NOMINATIVE_ONLY:
            return "acc", f"german:after {tokens[k]}"
    if all(t in QUOTES for t in tokens[:j]):
        return "nom", "german:first word"
    return None, ""


def find_antecedent(
    line: int,
    i: int,
    start: int,
    k: int,
    words: Sequence[Sequence[str]],
    upos: Sequence[Sequence[str]],
    aligned: Callable[[int, int], list[int]],
    tokens: Sequence[Sequence[tuple[str, int, int]]],
    noun_gender: Callable[[str], str | None],
    compatible: Callable[[str], bool],
) -> Mapping | None:
    """The nearest antecedent of the pronoun at English word ``i`` of ``line``: an English noun before it in its
    sentence, then in each of the previous ``k`` sentences of the document (from ``start``, the document's first
    line), right to left, aligned (``aligned(line, word)`` -> German token indices) to a German noun whose gender
    (``noun_gender``) is ``compatible`` with the pronoun's. Returns ``{"distance", "line", "english", "english_index",
    "german", "german_span", "other_gender_nearer"}`` (``line`` 1-based; ``other_gender_nearer``: an aligned noun of
    another gender came first) or None."""
    other_gender_nearer = False
    for distance in range(k + 1):
        at = line - distance
        if at < start:
            break
        positions = range(i - 1, -1, -1) if distance == 0 else range(len(words[at]) - 1, -1, -1)
        for w in positions:
            if upos[at][w] not in ("NOUN", "PROPN"):
                continue
            for t in sorted(aligned(at, w)):
                token, s, e = tokens[at][t]
                if not token[:1].isupper():
                    continue
                gender = noun_gender(token)
                if gender is None:
                    continue
                if compatible(gender):
                    return {"distance": distance, "line": at + 1, "english": words[at][w], "english_index": w,
                            "german": token, "german_span": [s, e], "other_gender_nearer": other_gender_nearer}  # fmt: skip
                other_gender_nearer = True
    return None


def distance_bucket(distance: int) -> str:
    """``"0"``, ``"1"``, ``"2"`` or ``"3+"``."""
    return str(distance) if distance < 3 else "3+"
