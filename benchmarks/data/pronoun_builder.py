"""The builder of the pronoun study's contrastive items (`pronoun_items.py` runs it; the items are scored by
`hf_syntax_mt.evaluation.pronouns.score_pronoun_items`). German only: its rules and noun lexicon live beside it
(`pronoun_kinds.py`, `german_nouns.py`).

Construction (`build_pronoun_items`; the alignments come from outside, e.g. eflomal):

- ``it`` -> personal pronoun. The German form tells gender and case where it can: ``er`` (masc. nom.), ``ihn``
  (masc. acc.), ``ihm`` (masc. or neut. dat.), ``ihr`` (fem. dat.). ``es`` and ``sie`` are nominative or accusative:
  the case is taken from the token before (an accusative preposition -> acc.; a dative or two-way preposition -> the
  item is dropped) or else from the English ``it``'s dependency relation (``nsubj``/``nsubjpass``/``expl`` -> nom.,
  ``dobj`` -> acc.); anything else is dropped as a case we cannot tell. Variants: the other genders' forms in that
  case (nom. er/sie/es, acc. ihn/sie/es, dat. ihm/ihr; masculine and neuter share the dative, so an ``ihm`` item has
  the one variant ``ihr``).
- ``its`` -> possessive ``sein-``/``ihr-`` with its ending (``seinem`` <-> ``ihrem``): masc./neut. against fem.
- ``they`` is left out: its German ``sie`` (plural) has no gender, so there is no gender contrast to make.
- An item needs exactly one aligned German pronoun of the right kind; variants keep the capitalisation of the form.

Each item records its document id, line, the previous (up to) two source sentences of its document as ``context``,
the true pronoun with gender and case (and how the case was decided), its variants, and whether a German noun of the
true gender occurs in the previous two *reference* sentences of the document (``noun_in_context``) or earlier in the
same reference sentence (``noun_in_sentence``). Noun genders and number come from `NounGenders`
(`german_nouns.py`: UD FEATS ``Gender``/``Number`` and the determiners of running text,
compounds by their longest known final part), and one test says what a German noun is (``NounGenders.noun_at``).

Each item also records its ``kind`` (`pronoun_kinds.py`): ``referential`` (an antecedent
noun of the pronoun's gender, found through the English parse and the alignment, in the same or one of the previous
sentences: ``antecedent``, ``antecedent_distance``; both None where it cannot be found with confidence) or fixed by
the construction (``expletive``, ``cleft``,
``clausal``, ``impersonal``) or ``no_antecedent``; a case the German word order contradicts and a plural ``sie`` are
dropped. `score_pronoun_items` reports the referential items by antecedent distance beside the whole set, and
`load_pronoun_items` checks every field's type.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from benchmarks.data.german_nouns import NounGenders, german_tokens
from hf_syntax_mt.data.documents import DocumentContext
from hf_syntax_mt.errors import UserError

__all__ = ["NounGenders", "build_pronoun_items", "german_tokens", "pronoun_variants"]

#: (gender, case) -> form; masculine and neuter share the dative (``ihm``)
FORMS = {
    ("masc", "nom"): "er", ("fem", "nom"): "sie", ("neut", "nom"): "es",
    ("masc", "acc"): "ihn", ("fem", "acc"): "sie", ("neut", "acc"): "es",
    ("masc|neut", "dat"): "ihm", ("fem", "dat"): "ihr",
}  # fmt: skip
#: personal pronoun form -> (gender, case); case None: nominative or accusative, decided from the context
PERSONAL = {"er": ("masc", "nom"), "ihn": ("masc", "acc"), "ihm": ("masc|neut", "dat"), "ihr": ("fem", "dat"),
            "es": ("neut", None), "sie": ("fem", None)}  # fmt: skip
POSSESSIVE = re.compile(r"^(sein|ihr)(e|em|en|er|es)?$")
ACCUSATIVE_PREPOSITIONS = {"für", "durch", "gegen", "ohne", "um", "wider"}
OTHER_PREPOSITIONS = {"mit", "von", "zu", "aus", "bei", "nach", "seit", "gegenüber", "außer", "an", "auf", "in",
                      "über", "unter", "vor", "hinter", "neben", "zwischen", "entlang"}  # fmt: skip
NOMINATIVE_DEPS = {"nsubj", "nsubjpass", "expl", "csubj"}
ACCUSATIVE_DEPS = {"dobj", "obj"}


def _match_case(form: str, like: str) -> str:
    return form[:1].upper() + form[1:] if like[:1].isupper() else form


def pronoun_variants(pronoun: str, gender: str, case: str) -> list[str]:
    """The contrastive forms of ``pronoun`` (its gender and case as :data:`FORMS` names them, or case ``"poss"``),
    capitalised as ``pronoun`` is."""
    if case == "poss":
        m = POSSESSIVE.match(pronoun.lower())
        if m is None:
            raise UserError(f"{pronoun!r} is not a possessive sein-/ihr- form")
        other = "ihr" if m.group(1) == "sein" else "sein"
        return [_match_case(other + (m.group(2) or ""), pronoun)]
    forms = {f for (g, c), f in FORMS.items() if c == case and g != gender}
    if (gender, case) not in FORMS:
        raise UserError(f"no German pronoun of gender {gender!r} and case {case!r}")
    return [_match_case(f, pronoun) for f in sorted(forms - {FORMS[gender, case]})]


def _compatible(noun_gender: str, gender: str) -> bool:
    return noun_gender in gender.split("|")


# ------------------------------------------------------------------------------------------------------------------
# Items
# ------------------------------------------------------------------------------------------------------------------
def _case_of(form: str, previous: str | None, english_dep: str) -> tuple[str | None, str]:
    """(case, evidence) of ``es``/``sie``; case None when it cannot be told."""
    if previous in ACCUSATIVE_PREPOSITIONS:
        return "acc", f"preposition:{previous}"
    if previous in OTHER_PREPOSITIONS:
        return None, f"preposition:{previous}"
    if english_dep in NOMINATIVE_DEPS:
        return "nom", f"english_dep:{english_dep}"
    if english_dep in ACCUSATIVE_DEPS:
        return "acc", f"english_dep:{english_dep}"
    return None, f"english_dep:{english_dep}"


def _check_build_inputs(corpus, sources, source_words, per_word, references, doc_ids, links) -> list[int]:
    """Line counts, per-word lists as long as their line, links as pairs of ints, documents contiguous; returns the
    first line of each line's document."""
    n = len(sources)
    lines = (("source_words", source_words), *per_word.items(), ("references", references), ("doc_ids", doc_ids),
             ("links", links))  # fmt: skip
    for name, seq in lines:
        if isinstance(seq, str) or len(seq) != n:
            got = "a string" if isinstance(seq, str) else f"{len(seq)} lines"
            raise UserError(f"{corpus}: {name} has {got} but sources has {n} lines")
    for line in range(n):
        width = len(source_words[line])
        for name, seq in per_word.items():
            if isinstance(seq[line], str) or len(seq[line]) != width:
                raise UserError(f"{corpus} line {line + 1}: {name} has {len(seq[line])} entries but the line has "
                                 f"{width} English words; give one per word")  # fmt: skip
        for link in links[line]:
            if (isinstance(link, str) or len(link) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in link)):  # fmt: skip
                raise UserError(f"{corpus} line {line + 1}: link {link!r} is not a pair of ints (English word, "
                                 "German token), e.g. (3, 4); parse 'i-j' strings first")  # fmt: skip
    try:
        return DocumentContext(sources, doc_ids, k=0).starts  # the readers' contiguity check
    except ValueError as e:
        raise UserError(f"{corpus}: {e}") from None


def build_pronoun_items(
    corpus: str,
    sources: Sequence[str],
    source_words: Sequence[Sequence[str]],
    source_deps: Sequence[Sequence[str]],
    references: Sequence[str],
    doc_ids: Sequence[str],
    links: Sequence[Iterable[tuple[int, int]]],
    nouns: NounGenders,
    context_sentences: int = 2,
    *,
    source_heads: Sequence[Sequence[int]],
    source_upos: Sequence[Sequence[str]],
    antecedent_sentences: int = 3,
) -> tuple[list[dict], Counter]:
    """The pronoun items of one test set (see the module docstring) and a count of the candidates left out, by reason.

    Args:
        corpus: the test set's name (item ids are ``{corpus}-{line}-{word}``).
        sources: the English sentences; ``source_words`` / ``source_deps`` / ``source_heads`` (1-based, 0 = root) /
            ``source_upos``: their parse, one entry per word.
        references: the German reference sentences (tokenised with :func:`german_tokens`).
        doc_ids: one document id per line (documents contiguous).
        links: per line, the alignment links ``(English word index, German token index)``, both 0-based.
        nouns: the noun-gender lexicon.
        context_sentences: how many previous sentences of the document are the context (source) and are searched
            for nouns (reference).
        antecedent_sentences: how many previous sentences are searched for an antecedent (the item's ``kind``,
            `benchmarks/data/pronoun_kinds.py`).
    """
    from benchmarks.data.pronoun_kinds import (
        GERMAN_CASE_WINS,
        find_antecedent,
        german_case,
        item_kind,
        plural_sie,
        sein_predicate,
    )

    per_word = {"source_deps": source_deps, "source_heads": source_heads, "source_upos": source_upos}
    starts = _check_build_inputs(corpus, sources, source_words, per_word, references, doc_ids, links)
    n = len(sources)
    tokens_of = [german_tokens(r) for r in references]
    aligned: list[dict[int, list[int]]] = []
    for line in range(n):
        words, tokens = source_words[line], tokens_of[line]
        table: dict[int, list[int]] = defaultdict(list)
        for i, j in links[line]:
            if not (0 <= i < len(words) and 0 <= j < len(tokens)):
                raise UserError(f"{corpus} line {line + 1}: link {i}-{j} is outside the sentence pair "
                                 f"({len(words)} English words, {len(tokens)} German tokens)")  # fmt: skip
            table[i].append(j)
        aligned.append(table)

    cased_of = [[t for t, _, _ in tokens] for tokens in tokens_of]
    parse = {"words": source_words, "upos": source_upos, "deprels": source_deps, "heads": source_heads}
    items, dropped = [], Counter()
    for line in range(n):
        start = starts[line]  # first line of the current document
        words, tokens = source_words[line], tokens_of[line]
        lowered = [t.lower() for t, _, _ in tokens]
        for i, word in enumerate(words):
            english = word.lower()
            if english not in ("it", "its"):
                continue
            if english == "it":
                found = [j for j in aligned[line][i] if lowered[j] in PERSONAL]
            else:
                found = [j for j in aligned[line][i] if POSSESSIVE.match(lowered[j])]
            if len(found) != 1:
                dropped[f"{english}: {'no' if not found else 'several'} aligned German pronoun(s)"] += 1
                continue
            j = found[0]
            form, s, e = tokens[j]
            kind, kind_evidence = None, ""
            if english == "its":
                gender, case, evidence = ("fem" if form.lower().startswith("ihr") else "masc|neut"), "poss", "form"
            else:
                subject = source_deps[line][i] in NOMINATIVE_DEPS
                if (verb := plural_sie(lowered, j, nominative=subject, cased=cased_of[line])) is not None:
                    dropped[f"it -> sie: plural (next to {verb})"] += 1
                    continue
                gender, case = PERSONAL[form.lower()]
                evidence = "form"
                if case is None:
                    previous = lowered[j - 1] if j else None
                    case, evidence = _case_of(form.lower(), previous, source_deps[line][i])
                    german, why = german_case(lowered, j)
                    if german is not None and why.startswith(GERMAN_CASE_WINS):
                        case, evidence = german, why  # "wird es den Verbrauchern erleichtern": an object es
                    if case is None:
                        dropped[f"it -> {form.lower()}: case unknown ({evidence.split(':')[0]})"] += 1
                        continue
                    if german is not None and german != case:
                        dropped[f"it -> {form.lower()}: case conflict ({evidence} says {case}, {why} says "
                                f"{german})"] += 1  # fmt: skip
                        continue
                if case == "nom" and sein_predicate(lowered, j, cased_of[line]) is not None:
                    dropped[f"it -> {form.lower()}: subject of sein + predicate noun, es right too"] += 1
                    continue  # "Sie ist eher eine Chance": "Es ist eher eine Chance" is right German too
                kind, kind_evidence = item_kind(words, source_heads[line], source_deps[line], source_upos[line], i,
                                                lowered, j)  # fmt: skip
            antecedent = None
            if kind is None:
                antecedent, why = find_antecedent(line, i, j, start, antecedent_sentences, parse,
                                                  lambda at, w: aligned[at].get(w, []), tokens_of, nouns,
                                                  lambda g, gender=gender: _compatible(g, gender))  # fmt: skip
                if (
                    form.lower() == "sie"
                    and case == "acc"
                    and (why.startswith("plural") or (antecedent and antecedent["nearest_plural"]))
                ):  # an object sie has no verb to agree with: its nearest noun being plural makes it doubtful
                    dropped["it -> sie: accusative, the nearest noun is plural"] += 1
                    continue
                if antecedent is not None and form.lower() == "es" and antecedent["other_gender_nearer"]:
                    # es is also the form for a clause or an event: a neuter noun behind a nearer noun of another
                    # gender is too weak a sign for the antecedent, and too strong to say there is none (read by
                    # hand, issue 51: 2 of 3 such items referred to the neuter noun)
                    kind, kind_evidence = "referential", "antecedent unknown: es, a noun of another gender is nearer"
                    antecedent = None
                elif antecedent is not None:
                    kind, kind_evidence = "referential", "antecedent"
                elif why.startswith("uncertain") or form.lower() != "es":
                    # er/sie/ihn/ihm/ihr/sein-/ihr- refer (an expletive or clausal pronoun is es); so does an es
                    # with a candidate the search could not settle: referential, antecedent unknown
                    kind, kind_evidence = "referential", f"antecedent unknown: {why}"
                else:
                    kind, kind_evidence = "no_antecedent", why
            context_lines = range(max(start, line - context_sentences), line)
            context_nouns = [(noun, g) for k in context_lines for noun, g in nouns.nouns(references[k])]
            sentence_nouns = nouns.nouns(references[line], before=s)
            items.append({
                "id": f"{corpus}-{line + 1}-{i}", "corpus": corpus, "doc_id": doc_ids[line], "line": line + 1,
                "sentence_in_document": line - start, "context": [sources[k] for k in context_lines],
                "source": sources[line], "reference": references[line], "english": word, "english_index": i,
                "english_dep": source_deps[line][i], "pronoun": form, "span": [s, e], "gender": gender, "case": case,
                "case_evidence": evidence, "variants": pronoun_variants(form, gender, case),
                "kind": kind, "kind_evidence": kind_evidence, "antecedent": antecedent,
                "antecedent_distance": antecedent["distance"] if antecedent else None,
                "context_nouns": [list(x) for x in context_nouns],
                "noun_in_context": any(_compatible(g, gender) for _, g in context_nouns),
                "noun_in_sentence": any(_compatible(g, gender) for _, g in sentence_nouns),
            })  # fmt: skip
    return items, dropped
