"""What kind of pronoun a contrastive pronoun item tests (issue 45): whether its German gender depends on an antecedent
noun (``referential``, ContraPro's condition, Müller et al. 2018) or is fixed by the construction (``expletive``,
``cleft``, ``clausal``, ``impersonal``), and the rules that drop items whose variants would be wrong for grammar rather
than context (a plural ``sie``; a case the German word order contradicts). Rewritten in issue 51 after three hand
checks (``benchmarks/results/docnmt_real/pronoun_items.handcheck.tsv``). Part of the pronoun study's item builder
(`pronoun_builder.py`, run by `pronoun_items.py`); the kinds and distance buckets that scoring reads are in
`hf_syntax_mt.evaluation.pronouns`.

The rules read the English parse (words, 1-based heads, relations, UPOS), the German reference's tokens
(`german_nouns.german_tokens`, lower-cased here) and the word alignment; there is no German
parser. In order:

- **expletive**: the English ``it`` is ``expl``; or German ``es gibt`` / ``gibt es`` (existential).
- **impersonal**: German ``es geht um`` (also verb-final "wenn es um ... geht", ``ums``), ``es handelt sich``,
  ``es kommt auf ... an`` (not "es kommt ... an", arrives), ``es liegt daran`` / ``an`` + a personal pronoun (not a
  place), weather (``es regnet``, "es war kalt").
- **cleft**: German ``es`` next to a plural finite verb (``Es sind die Vorwürfe``: ``es`` is no plural subject); or the
  English ``it`` is the subject of a form of *be* with a predicate noun (``attr``) and German ``es`` next to a form of
  *sein*: "it's a tool (that ...)" -> ``Es ist ein Werkzeug``, where German says ``es`` whatever the antecedent's
  gender (a German ``er``/``sie`` there is the translator's choice of gender, and the item stays).
- **clausal**: an extraposed clause: the English ``it`` is the subject of a copula or raising verb (*be*, *seem*,
  *appear*, ...) or of an adjective, or the object of a verb whose adjective complement, with a ``ccomp`` / ``xcomp``
  / ``csubj`` after the pronoun ("it is important to note that", "makes it possible to"); or German ``es``, then at
  the next comma (before a colon) ``dass`` / ``ob`` / ``wie`` (not "so ..., wie"), ``es scheint, als`` / ``es sieht so
  aus, als``, or a ``zu``-infinitive after the comma (``zu`` + a verb in ``-n`` ending the clause, or one word such as
  ``einzubeziehen``; not ``zu`` as a preposition, not ``um``/``ohne``/``statt ... zu``, not a coordinated main
  clause).
- **referential**: none of these, and an antecedent found with confidence by :func:`find_antecedent` (from the
  English side and the alignment, with the German noun's gender and number), or a gendered form (``er``, ``sie``,
  ``ihn``, ``ihm``, ``ihr``, possessives) or an ``es`` whose search could not be settled: then the antecedent is
  unknown (``None``), never a guess. **no_antecedent**: an ``es`` with no candidate noun.

Dropped (:func:`plural_sie`, :func:`german_case`, :func:`sein_predicate`): ``sie`` next to a plural finite verb (a
subject ``sie`` next to any lower-case word in ``-en``; plural: no gender to contrast), ``es``/``sie`` whose case from
the English relation contradicts the German word order (after ``ich``, ``du``, ``wir``, ``man`` in the same clause:
accusative; first word of the sentence: nominative), and a nominative ``er``/``sie`` that is the subject of a form of
*sein* with a predicate noun ("Sie ist eher eine Chance"): ``es`` is right there too (issue 59), so the ``es``
variant is no error; an object ``es`` before a dative and a verb such as ``erleichtern`` is accusative whatever the
English says (:data:`GERMAN_CASE_WINS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hf_syntax_mt.errors import UserError

__all__ = ["find_antecedent", "german_case", "item_kind", "plural_sie", "sein_predicate"]


BE = {"be", "is", "'s", "was", "were", "been", "being", "am", "are", "'re", "ai"}
RAISING = {"seem", "seems", "seemed", "appear", "appears", "appeared", "happen", "happens", "happened", "become",
           "becomes", "became", "remain", "remains", "remained", "turn", "turns", "turned"}  # fmt: skip
CLAUSE_DEPS = {"ccomp", "xcomp", "csubj"}
PREDICATE_DEPS = {"acomp", "attr", "oprd"}
PLURAL_FINITE = {"sind", "waren", "seien", "wären", "haben", "hatten", "hätten", "werden", "wurden", "würden",
                 "können", "konnten", "könnten", "müssen", "mussten", "müssten", "sollen", "sollten", "wollen",
                 "wollten", "dürfen", "durften", "dürften", "mögen", "möchten"}  # fmt: skip
COPULA = {"ist", "war", "wäre", "sei", "sind", "waren"}
PARTICLES = (
    "ab",
    "an",
    "auf",
    "aus",
    "bei",
    "ein",
    "fest",
    "fort",
    "her",
    "hin",
    "mit",
    "nach",
    "sicher",
    "vor",
    "weg",
    "zurück",
    "zusammen",
    "dar",
    "frei",
    "hervor",
    "heraus",
    "herbei",
    "offen",
    "weiter",
)
WEATHER = {"kalt", "warm", "heiß", "kühl", "dunkel", "hell", "windig", "neblig", "sonnig", "schwül", "spät", "früh"}
NOUN_MARKERS = {"der", "die", "das", "ein", "eine", "kein", "keine"}
#: words that open a clause of its own after a comma (a subordinate, relative or coordinated clause)
CLAUSE_OPENERS = {"und", "aber", "oder", "denn", "sondern", "doch", "dass", "daß", "weil", "wenn", "da", "ob", "als",
                  "der", "die", "das", "dem", "den", "deren", "dessen", "welche", "welcher", "welches", "wie", "wo",
                  "was", "während", "obwohl", "damit", "bis", "nachdem", "bevor", "um", "ohne", "statt"}  # fmt: skip
GEHEN = {"geht", "ging", "gehe", "ginge", "gegangen", "gehen"}
SCHEINEN = {"scheint", "schien", "schiene"}
ADVERBIAL_ZU = {"um", "ohne", "statt", "anstatt", "damit"}
COORDINATORS = {"und", "aber", "oder", "denn", "sondern", "doch"}
PERSONAL_DATIVE = {"mir", "dir", "ihm", "ihr", "uns", "euch", "ihnen"}
#: verbs whose object ``es`` stands before a dative: "Dies wird es den Verbrauchern erleichtern"
DATIVE_OBJECT_VERBS = ("erleichter", "ermöglich", "erlaub", "erschwer", "verdank")
DATIVES = {"den", "dem", "der", "ihnen", "uns", "mir", "dir", "ihm", "euch", "allen", "jedem"}
#: evidence of :func:`german_case` that overrides the English relation
#: words in -en next to ``sie`` that are no plural verb
NOT_VERBS = {"den", "denen", "einen", "keinen", "ihren", "seinen", "diesen", "jenen", "meinen", "unseren", "eben",
             "oben", "unten", "neben", "gegen", "zwischen", "wegen", "trotzdem", "seien", "allen", "vielen", "wenigen",
             "beiden", "anderen", "selben", "gleichen", "morgen", "gestern", "dennoch"}  # fmt: skip
NOMINATIVE_ONLY = {"ich", "du", "wir", "man"}
CLAUSE_BREAK = {",", ";", ":", ".", "!", "?", "und", "aber", "oder", "denn", "dass", "weil", "wenn", "ob"}
QUOTES = {'"', "'", "„", "“", "”", "»", "«", "(", "-", "–"}
GERMAN_CASE_WINS = "german:es + dative + "
#: the singular finite forms of *sein* whose subject ``er``/``sie`` may also be ``es`` before a predicate noun
SEIN_SINGULAR = {"ist", "war", "wäre", "sei"}
#: words that open a predicate noun phrase (besides a capitalised word or a number)
PREDICATE_OPENERS = {"der", "die", "das", "ein", "eine", "kein", "keine", "mein", "meine", "dein", "deine", "sein",
                     "seine", "ihr", "ihre", "unser", "unsere", "euer", "eure", "dieser", "diese", "dieses"}  # fmt: skip
PREPOSITIONS = {"für", "durch", "gegen", "ohne", "um", "wider", "mit", "von", "vom", "zu", "zum", "zur", "aus", "bei",
                "beim", "nach", "seit", "gegenüber", "außer", "an", "am", "auf", "in", "im", "über", "unter", "vor",
                "hinter", "neben", "zwischen", "entlang", "wegen", "trotz", "während", "als", "wie"}  # fmt: skip


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
            return "cleft", "english:it be + predicate noun"  # the rule, whatever form of be
    if dep == "dobj":  # "find it hard to", "makes it possible that"
        for c in _children(heads, h):
            if deprels[c] in PREDICATE_DEPS | {"ccomp"} and upos[c] == "ADJ":
                if any(deprels[g] in CLAUSE_DEPS and g > i for g in _children(heads, c)):
                    return "clausal", f"english:extraposition ({words[h]} it {words[c]})"
    return None, ""


def _clause_end(tokens: Sequence[str], j: int) -> int:
    """The index after the last token of the clause from ``j`` on (up to a comma, colon, semicolon or the end)."""
    for k in range(j + 1, len(tokens)):
        if tokens[k] in (",", ";", ":", ".", "!", "?"):
            return k
    return len(tokens)


def _infinitive_zu(segment: Sequence[str]) -> bool:
    """``zu`` + infinitive in ``segment`` (a clause after a comma): ``zu`` followed by a lower-case word in ``-n``
    that is no determiner (``zu den``, ``zu einem`` are prepositions) and that ends the segment or stands before
    ``und``/``oder``/another ``zu`` infinitive; ``um``/``ohne``/``statt`` ... ``zu`` are adverbial, and a segment
    that starts with a coordinating conjunction is a main clause of its own."""
    if not segment or segment[0] in ADVERBIAL_ZU | COORDINATORS:
        return False
    last = segment[-1]
    if last.isalpha() and any(last.startswith(particle + "zu") and last.endswith("n") for particle in PARTICLES):
        return True  # "einzubeziehen", "festzustellen"
    for k in range(1, len(segment) - 1):
        if segment[k] == "zu":
            verb, after = segment[k + 1], segment[k + 2] if k + 2 < len(segment) else ""
            if verb.isalpha() and verb.endswith("n") and verb not in NOT_VERBS and after in ("", "und", "oder"):
                return True
    return False


def _german_kind(tokens: Sequence[str], j: int) -> tuple[str | None, str]:
    """``tokens``: the reference's lower-cased tokens; ``j``: the pronoun. Evidence names the rule, not the word."""
    if tokens[j] != "es":
        return None, ""
    near = {tokens[k] for k in (j - 1, j + 1) if 0 <= k < len(tokens)}
    end = _clause_end(tokens, j)
    clause = tokens[j + 1 : end]  # the rest of the pronoun's clause
    stop = next((k for k in range(j + 1, len(tokens)) if tokens[k] in (".", "!", "?", ":", ";")), len(tokens))
    rest = tokens[j + 1 : stop]  # the rest of the sentence (up to a colon: "Nebenwirkung: ..., dass" is another)
    if near & {"gibt", "gab", "gäbe", "geben", "gegeben"}:
        return "expletive", "german:es gibt"
    um = next((k for k, t in enumerate(clause) if t in ("um", "ums")), None)
    if um is not None and (near & GEHEN or GEHEN & set(clause[um + 1 :])):
        return "impersonal", "german:es geht um"  # "es geht um ...", "wenn es um ... geht"
    if near & {"handelt", "handelte", "handele"} and "sich" in tokens[max(0, j - 2) : j + 4]:
        return "impersonal", "german:es handelt sich"
    if near & {"regnet", "regnete", "schneit", "schneite"} or (
        near & COPULA and set(clause[:3]) & WEATHER and not set(clause) & NOUN_MARKERS
    ):  # "es regnet", "und es war kalt"
        return "impersonal", "german:weather"
    if near & {"sind", "waren", "seien", "wären"}:
        return "cleft", "german:es + plural verb"
    if near & {"kommt", "kam"} and clause[-1:] == ["an"] and set(clause) & {"auf", "darauf", "drauf"}:
        return "impersonal", "german:es kommt auf ... an"  # not "es kommt an" (arrives)
    if near & {"liegt", "lag"} and ("daran" in clause or any(clause[k] == "an" and clause[k + 1] in PERSONAL_DATIVE
                                                             for k in range(len(clause) - 1))):  # fmt: skip
        return "impersonal", "german:es liegt an"  # "es liegt daran, dass", "es liegt an dir"; not a place
    looks = near & SCHEINEN or (near & {"sieht", "sah"} and "aus" in clause)  # "es scheint" / "es sieht so aus"
    if looks and end + 1 < len(tokens) and tokens[end] == "," and tokens[end + 1] in ("als", "ob", "dass"):
        return "clausal", "german:es scheint, als"
    if "," in rest:
        after = rest.index(",") + 1
        comparison = "so" in rest[: after - 1] and rest[after : after + 1] == ["wie"]  # "so gut, wie es ..."
        if after < len(rest) and rest[after] in ("dass", "daß", "ob", "wie") and not comparison:
            return "clausal", "german:es ..., dass"
        segment = rest[after:]
        for k in range(len(segment)):  # up to the sentence's end or the next comma that opens another clause
            if segment[k] in (".", "!", "?", ";", ":") or (
                segment[k] == "," and k + 1 < len(segment) and segment[k + 1] in CLAUSE_OPENERS
            ):
                segment = segment[:k]
                break
        segment = [t for t in segment if t != ","]  # a list's commas ("für Industrie, Außenhandel, ...")
        if _infinitive_zu(segment):
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


def _check_index(tokens, j) -> None:
    """``j`` a token index of ``tokens`` (a negative index would read from the end)."""
    from hf_syntax_mt.validation import check_count

    check_count(j, "j (the pronoun's token index)", minimum=0, maximum=max(len(tokens) - 1, 0))
    if not tokens:
        raise UserError("tokens is empty: there is no pronoun at index 0")


def plural_sie(
    tokens: Sequence[str], j: int, nominative: bool = False, cased: Sequence[str] | None = None
) -> str | None:
    """The plural finite verb next to ``sie`` (token ``j`` of the lower-cased ``tokens``), or None: an auxiliary or
    modal (``sind``, ``können``), or, for a subject (``nominative``), any word in ``-en`` written lower-case in
    ``cased`` (the tokens as written; a noun such as ``Daten`` is not a verb) but a few determiners and prepositions
    (``sie zeugen``, ``dann gehen sie``)."""
    _check_index(tokens, j)
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


def sein_predicate(tokens: Sequence[str], j: int, cased: Sequence[str]) -> str | None:
    """The predicate noun's first word when the ``er``/``sie`` at token ``j`` of the lower-cased ``tokens`` is the
    subject of a singular form of *sein* with a predicate noun, else None: the form next to the pronoun ("sie ist
    eher eine Chance", "ist sie eine Chance") or ending its clause ("weil sie eine Chance ist"), and in the clause
    after the pronoun (and the form), past lower-case adverbs, a determiner or possessive, a capitalised word
    (``cased``: the tokens as written) or a number, before any preposition, comma or conjunction. There ``es`` is
    right too ("Es ist eher eine Chance"), so such an item has no wrong ``es`` variant."""
    if tokens[j] not in ("er", "sie"):
        return None
    end = _clause_end(tokens, j)
    if j + 1 < end and tokens[j + 1] in SEIN_SINGULAR:
        start = j + 2
    elif j > 0 and tokens[j - 1] in SEIN_SINGULAR:
        start = j + 1
    elif end - 1 > j + 1 and tokens[end - 1] in SEIN_SINGULAR:
        start, end = j + 1, end - 1  # verb-final
    else:
        return None
    for k in range(start, end):
        word = tokens[k]
        if word in PREDICATE_OPENERS or word[:1].isdigit() or (word.isalpha() and cased[k][:1].isupper()):
            return cased[k]
        if not word.isalpha() or word in PREPOSITIONS or word in CLAUSE_BREAK:
            return None
    return None


def german_case(tokens: Sequence[str], j: int) -> tuple[str | None, str]:
    """The case the German word order gives ``es``/``sie`` at token ``j``: accusative after a nominative-only pronoun
    of the same clause (``ich habe es``, ``ob wir sie``), nominative as the sentence's first word; else None."""
    _check_index(tokens, j)
    end = _clause_end(tokens, j)
    if tokens[j] == "es" and j > 0 and j + 1 < end and tokens[j + 1] in DATIVES:
        verb = next((t for t in tokens[j + 2 : end] if t.startswith(DATIVE_OBJECT_VERBS)), None)
        if verb is not None and tokens[j - 1] not in CLAUSE_BREAK:
            return "acc", f"{GERMAN_CASE_WINS}{verb}"
    for k in range(j - 1, max(-1, j - 3), -1):
        if tokens[k] in CLAUSE_BREAK:
            break
        if tokens[k] in NOMINATIVE_ONLY:
            return "acc", f"german:after {tokens[k]}"
    if all(t in QUOTES for t in tokens[:j]):
        return "nom", "german:first word"
    return None, ""


def _clause_head(heads: Sequence[int], upos: Sequence[str], w: int) -> int:
    """The nearest verb (or auxiliary) above word ``w`` (0-based; -1: none): the clause ``w`` belongs to."""
    h, seen = heads[w] - 1, 0
    while h >= 0 and upos[h] not in ("VERB", "AUX") and seen < len(heads):
        h, seen = heads[h] - 1, seen + 1
    return h


#: the relations of a noun that is taken as an antecedent (a subject, object or possessor; ROOT: a fragment)
CORE = {"nsubj", "nsubjpass", "dobj", "obj", "iobj", "dative", "poss", "ROOT", "root", "appos"}


def _role(heads: Sequence[int], deprels: Sequence[str], w: int) -> str:
    """The relation of word ``w`` (0-based), a conjunct taking its first conjunct's ("the Council and Parliament")."""
    seen = 0
    while deprels[w] == "conj" and heads[w] > 0 and seen < len(heads):
        w, seen = heads[w] - 1, seen + 1
    return deprels[w]


def _english_plural(word: str, upos: str) -> bool:
    """A common noun in ``-s`` (not ``-ss``/``-us``/``-is``): plural. Names (``Brussels``) are left alone."""
    w = word.lower()
    return upos == "NOUN" and len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "ics", "ness"))


def _may_hide_antecedent(links, cased, at, words, aligned, lexicon, compatible) -> bool:
    """Whether an English noun without a German noun of known reading could still be the antecedent: it is aligned
    to a capitalised German word the lexicon does not know (a noun of unknown gender), or it is not aligned at all
    and its German sentence has a noun of the pronoun's gender that no English word is aligned to (a missed link).
    An English noun aligned only to lower-case German words was not translated as a noun: no antecedent there."""
    if links:
        return any(cased[t][:1].isupper() and cased[t].isalpha() and lexicon.reading(cased[t]) is None for t in links)
    linked = {t for v in range(len(words[at])) for t in aligned(at, v)}
    for t in range(len(cased)):
        reading = lexicon.noun_at(cased, t)
        if t not in linked and reading not in (None, "plur") and compatible(reading):
            return True
    return False


def _subjects(heads: Sequence[int], deprels: Sequence[str], upos: Sequence[str], i: int) -> list[int]:
    """The subject nouns of the clauses above word ``i``, nearest clause first: each clause head's ``nsubj`` /
    ``nsubjpass``, or for an ``xcomp`` the object that controls it ("asking Frontex to provide ... its ...")."""
    out, h, seen = [], _clause_head(heads, upos, i), 0
    nominal = ("NOUN", "PROPN")
    while h >= 0 and seen < len(heads):
        nouns = [c for c in _children(heads, h) if deprels[c] in ("nsubj", "nsubjpass") and upos[c] in nominal]
        if not nouns and deprels[h] == "xcomp" and heads[h] > 0:
            nouns = [c for c in _children(heads, heads[h] - 1) if deprels[c] in ("dobj", "obj") and upos[c] in nominal]
        out += [c for c in nouns if c != heads[i] - 1]
        h, seen = _clause_head(heads, upos, h), seen + 1
    return out


def find_antecedent(
    line: int,
    i: int,
    j: int,
    start: int,
    k: int,
    parse: Mapping[str, Sequence[Sequence]],
    aligned: Callable[[int, int], list[int]],
    tokens: Sequence[Sequence[tuple[str, int, int]]],
    lexicon,
    compatible: Callable[[str], bool],
) -> tuple[Mapping | None, str]:
    """The antecedent of the pronoun at English word ``i`` / German token ``j`` of ``line``, found from the English
    side and the alignment, with the German gender and number, or None and why.

    Candidates are the English nouns (``NOUN``/``PROPN`` of ``parse``, not a ``compound`` modifier, not a plural in
    ``-s``) before the pronoun in its sentence and in the previous ``k`` sentences of the document (from ``start``),
    nearest first; a personal ``it`` skips the nouns of its own clause (the same nearest verb above: "the agreement
    makes it ..." -- a pronoun is not bound in its clause), a possessive ``its`` the noun it modifies. A possessive
    first tries the subjects of the clauses above it (:func:`_subjects`): the first singular one decides when its
    German noun has the pronoun's gender (the antecedent) or no known gender (None, uncertain); one of another gender
    sends the search on to the nearest noun. Each candidate is read through its aligned German tokens
    (``aligned(line, word)``, with its ``compound`` modifiers' links; ``tokens``: the references' tokens with spans,
    `german_nouns.german_tokens`) with ``lexicon.noun_at``
    (`german_nouns.NounGenders`): the first whose German noun is singular and
    ``compatible`` in gender is the antecedent when it is a subject, object or possessor (:data:`CORE`, by
    :func:`_role`; a noun in a prepositional phrase or a predicate makes the search uncertain); a German plural is
    passed over; one of another gender is passed over and flagged (``other_gender_nearer``).

    With confidence only: None (why ``"uncertain: ..."``) when a nearer candidate may hide the antecedent
    (:func:`_may_hide_antecedent`: aligned to a German noun of unknown gender, or unaligned beside an unaligned German
    noun of the pronoun's gender), or, for an antecedent in an earlier sentence, when a German noun of the pronoun's
    gender stands before the pronoun in its own sentence unaligned to any candidate. ``"plural: ..."`` when the
    nearest candidate's German noun is plural (an object ``sie`` may be that plural), else ``"no ..."``. Returns
    ``({"distance", "line", "english", "english_index", "german", "german_span", "other_gender_nearer",
    "nearest_plural"}, "antecedent")`` (``line`` 1-based; ``nearest_plural``: a plural noun, English or German, was
    the nearest candidate).
    """
    words, upos, deprels, heads = parse["words"], parse["upos"], parse["deprels"], parse["heads"]
    possessive = words[line][i].lower() == "its"
    own_clause = _clause_head(heads[line], upos[line], i)

    def resolve(at: int, w: int) -> tuple[list[tuple[int, str]], list[int]]:
        compounds = [c for c in _children(heads[at], w) if deprels[at][c] == "compound"]
        links = sorted({t for v in (w, *compounds) for t in aligned(at, v)})  # energy consumption: Energieverbrauch
        cased = [x[0] for x in tokens[at]]
        readings = [(t, lexicon.noun_at(cased, t)) for t in links]
        return [(t, r) for t, r in readings if r is not None], links

    def record(at: int, t: int, w: int, distance: int, nearer: bool, plural: bool) -> dict:
        token, s, e = tokens[at][t]
        return {"distance": distance, "line": at + 1, "english": words[at][w], "english_index": w, "german": token,
                "german_span": [s, e], "other_gender_nearer": nearer, "nearest_plural": plural}  # fmt: skip

    if possessive:  # "its" refers to the subject of its clause (or of a clause above it) more often than not
        for w in _subjects(heads[line], deprels[line], upos[line], i):
            if _english_plural(words[line][w], upos[line][w]):
                continue
            readings, _ = resolve(line, w)
            if not readings:
                return (
                    None,
                    f"uncertain: the subject of its clause has no German noun of known gender ({words[line][w]})",
                )
            if any(r == "plur" for _, r in readings):
                continue
            match = next((t for t, r in readings if compatible(r)), None)
            if match is not None:
                return record(line, match, w, 0, False, False), "antecedent"
            break  # a subject of another gender: the possessive refers elsewhere (the nearest noun, below)

    other_gender_nearer, unresolved, first = False, [], None
    seen_german: set[int] = set()  # German tokens of the pronoun's sentence aligned to a candidate
    for distance in range(k + 1):
        at = line - distance
        if at < start:
            break
        positions = range(i - 1, -1, -1) if distance == 0 else range(len(words[at]) - 1, -1, -1)
        for w in positions:
            if upos[at][w] not in ("NOUN", "PROPN") or deprels[at][w] == "compound":
                continue
            if distance == 0:
                seen_german.update(aligned(at, w))
                if possessive and heads[at][i] - 1 == w:
                    continue
                if not possessive and own_clause >= 0 and _clause_head(heads[at], upos[at], w) == own_clause:
                    continue
            if _english_plural(words[at][w], upos[at][w]):
                first = first or "plur"
                continue
            readings, links = resolve(at, w)
            if not readings:
                cased = [x[0] for x in tokens[at]]
                if _may_hide_antecedent(links, cased, at, words, aligned, lexicon, compatible):
                    unresolved.append(words[at][w])
                continue
            if first is None:
                first = readings[0][1]
            match = next((t for t, r in readings if r != "plur" and compatible(r)), None)
            if match is None:
                other_gender_nearer = other_gender_nearer or any(r != "plur" for _, r in readings)
                continue
            if unresolved:
                return None, f"uncertain: a nearer English noun ({unresolved[0]}) has no German noun of known gender"
            if _role(heads[at], deprels[at], w) not in CORE:
                # read by hand (issue 51, seed 52): all 8 wrong antecedents were nouns inside a prepositional
                # phrase or a predicate, against 1 of the 9 right ones
                return None, f"uncertain: the nearest noun of its gender is no subject or object ({words[at][w]})"
            if distance > 0:
                mine = [x[0] for x in tokens[line]]
                for t in range(j):
                    r = lexicon.noun_at(mine, t)
                    if r is not None and r != "plur" and compatible(r) and t not in seen_german:
                        return None, f"uncertain: a noun of its gender before it in its own sentence ({mine[t]})"
            return record(at, match, w, distance, other_gender_nearer, first == "plur"), "antecedent"
    if first == "plur":
        return None, "plural: the nearest noun is plural"
    if unresolved:
        return None, f"uncertain: an English noun ({unresolved[0]}) has no German noun of known gender"
    return None, f"no noun of its gender within {k}"
