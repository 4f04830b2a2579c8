"""A contrastive pronoun test built from real documents, in the spirit of ContraPro (Müller et al. 2018): wherever an
English ``it`` (or ``its``) is word-aligned to a German 3rd-person singular pronoun in the reference, the reference is
paired with contrastive variants that put the other genders' form of the same case in its place. A model passes an
item when it scores the true reference above every variant (teacher-forced log-probability, as
:func:`hf_syntax_mt.evaluation.contrastive.score_contrastive`).

Construction (:func:`build_pronoun_items`; the alignments come from outside, e.g. eflomal):

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
same reference sentence (``noun_in_sentence``). Noun genders and number come from :class:`NounGenders`
(:mod:`~hf_syntax_mt.evaluation.german_nouns`: UD FEATS ``Gender``/``Number`` and the determiners of running text,
compounds by their longest known final part), and one test says what a German noun is (``NounGenders.noun_at``).

Each item also records its ``kind`` (:mod:`~hf_syntax_mt.evaluation.pronoun_kinds`): ``referential`` (an antecedent
noun of the pronoun's gender, found through the English parse and the alignment, in the same or one of the previous
sentences: ``antecedent``, ``antecedent_distance``; both None where it cannot be found with confidence) or fixed by
the construction (``expletive``, ``cleft``,
``clausal``, ``impersonal``) or ``no_antecedent``; a case the German word order contradicts, a plural ``sie`` and a
nominative ``er``/``sie`` with a form of *sein* and a predicate noun (where ``es`` is right too) are dropped. :func:`score_pronoun_items` reports the referential items by antecedent distance beside the whole set, and
:func:`load_pronoun_items` checks every field's type.

Only pointers, the verbatim sentences and the variant *forms* are stored; :func:`variant_references` builds the
variant sentences in memory (the TED part of the test data is CC BY-NC-ND: no modified text is written).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..data.documents import DocumentContext
from ..errors import UserError, UserTypeError
from ..validation import check_count, check_sequence, check_strings
from .german_nouns import NounGenders, german_tokens

__all__ = [
    "NounGenders",
    "build_pronoun_items",
    "german_tokens",
    "check_pronoun_item",
    "load_pronoun_items",
    "pronoun_breakdown",
    "pronoun_variants",
    "random_contexts",
    "score_pronoun_items",
    "variant_references",
    "write_pronoun_items",
]

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
            :mod:`~hf_syntax_mt.evaluation.pronoun_kinds`).
    """
    from .pronoun_kinds import GERMAN_CASE_WINS, find_antecedent, german_case, item_kind, plural_sie, sein_predicate

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


def variant_references(item: Mapping) -> list[str]:
    """The contrastive references of ``item``: its reference with each variant form in the pronoun's span."""
    s, e = item["span"]
    reference = item["reference"]
    if reference[s:e] != item["pronoun"]:
        raise UserError(f"item {item.get('id')}: characters {s}-{e} of the reference are {reference[s:e]!r}, not the "
                         f"pronoun {item['pronoun']!r}")  # fmt: skip
    return [reference[:s] + form + reference[e:] for form in item["variants"]]


def write_pronoun_items(path: str | Path, items: Iterable[Mapping]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)
    path.write_text(text, encoding="utf-8")
    return path


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_pronoun_item(item: Mapping, where: str) -> None:
    """Raise `UserError` naming ``where`` (``file:line``) and the field when ``item`` is not a well-formed pronoun
    item: strings ``source`` / ``reference`` / ``pronoun`` / ``case`` / ``doc_id``, ``span`` two ints inside the reference that hold the
    pronoun, ``variants`` a non-empty list of strings, ``context`` a list of strings, and (when present) ``kind`` one
    of :data:`~hf_syntax_mt.evaluation.pronoun_kinds.KINDS` with ``antecedent_distance`` an int >= 0 for a referential
    item."""
    from .pronoun_kinds import KINDS

    if not isinstance(item, Mapping):
        raise UserTypeError(f"{where}: an item is a JSON object (a dict), got {type(item).__name__}: {item!r:.60}")
    # case: what the scores are grouped by (pronoun_key); doc_id: whose context the random control must not take
    required = ("source", "reference", "pronoun", "span", "variants", "context", "case", "doc_id")
    missing = [f for f in required if f not in item]
    if missing:
        raise UserError(f"{where}: item lacks the field(s) {missing}; items come from build_pronoun_items "
                         "(benchmarks/data/pronoun_items.py), which writes every one of them")  # fmt: skip
    for field in ("source", "reference", "pronoun", "case", "doc_id"):
        if not isinstance(item[field], str):
            raise UserError(f"{where}: field {field!r} must be a string, got {item[field]!r}")
    for field in ("corpus", "kind"):
        if field in item and not isinstance(item[field], str):
            raise UserError(f"{where}: field {field!r} must be a string, got {item[field]!r}")
    span = item["span"]
    if not isinstance(span, list) or len(span) != 2 or not all(_is_int(x) for x in span):
        raise UserError(f"{where}: field 'span' must be [start, end] (two ints, character offsets into the "
                         f"reference), got {span!r}")  # fmt: skip
    if not 0 <= span[0] <= span[1] <= len(item["reference"]):
        raise UserError(f"{where}: field 'span' {span!r} is outside the reference ({len(item['reference'])} "
                         "characters): [start, end] with 0 <= start <= end <= its length")  # fmt: skip
    for field, allow_empty in (("variants", False), ("context", True)):
        value = item[field]
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value) or not (value or allow_empty):
            what = "the contrastive pronoun forms" if field == "variants" else "the previous source sentences"
            raise UserError(f"{where}: field {field!r} must be a {'' if allow_empty else 'non-empty '}list of "
                             f"strings ({what}), got {value!r}")  # fmt: skip
    if "kind" in item:
        if item["kind"] not in KINDS:
            raise UserError(f"{where}: field 'kind' must be one of {list(KINDS)}, got {item['kind']!r}")
        distance = item.get("antecedent_distance")
        if item["kind"] == "referential" and not (distance is None or (_is_int(distance) and distance >= 0)):
            raise UserError(
                f"{where}: a referential item's 'antecedent_distance' must be an int >= 0 (or null: "
                f"antecedent not found with confidence), got {distance!r}"
            )
    try:
        variant_references(item)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def load_pronoun_items(path: str | Path) -> list[dict]:
    """Items written by :func:`write_pronoun_items`, each checked by :func:`check_pronoun_item` (errors name the file
    and line)."""
    from ..data.readers import iter_json_objects

    items = []
    for k, item in iter_json_objects(path):
        check_pronoun_item(item, f"{path}:{k}")
        items.append(item)
    return items


# ------------------------------------------------------------------------------------------------------------------
# Context controls and scoring
# ------------------------------------------------------------------------------------------------------------------
def random_contexts(doc_ids: Sequence[str], sentences: Sequence[str], k: int, seed: int = 0) -> list[list[str]]:
    """For each sentence, the context that a sentence of *another* document has: every document is paired with a
    different one (a seeded random derangement), and sentence i gets the previous ``k`` sentences of sentence
    ``i % len(other)`` of it. The amount of context is kept where the other document is long enough (the first
    sentence still gets none); only its content comes from elsewhere (Li et al. 2020's control)."""
    doc_ids = check_strings(doc_ids, "doc_ids", "document ids, one per sentence")
    sentences = check_strings(sentences, "sentences")
    k = check_count(k, "k (context sentences)", minimum=0)
    if len(doc_ids) != len(sentences):
        raise UserError(f"{len(doc_ids)} document ids but {len(sentences)} sentences")
    documents: dict[str, list[str]] = {}
    for doc, sentence in zip(doc_ids, sentences, strict=True):
        documents.setdefault(doc, []).append(sentence)
    names = list(documents)
    if len(names) < 2:
        raise UserError("random context needs at least two documents")
    rng = random.Random(seed)
    while True:
        shuffled = names[:]
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(names, shuffled, strict=True)):
            break
    other = dict(zip(names, shuffled, strict=True))
    out, position = [], Counter()
    for doc in doc_ids:
        i = position[doc]
        position[doc] += 1
        source = documents[other[doc]]
        j = i % len(source)
        out.append(source[max(0, j - k) : j])
    return out


def _random_item_contexts(items: Sequence[Mapping], seed: int) -> list[list[str]]:
    """Each item gets the context of an item of another document (of the same corpus when there is one) with as many
    context sentences, drawn with a seeded generator."""
    rng = random.Random(seed)
    pools: dict[tuple, list[int]] = defaultdict(list)
    for idx, item in enumerate(items):
        pools[item.get("corpus"), len(item["context"])].append(idx)
    out = []
    for item in items:
        pool = [j for j in pools[item.get("corpus"), len(item["context"])] if items[j]["doc_id"] != item["doc_id"]]
        if not pool:
            pool = [j for j, other in enumerate(items) if other["doc_id"] != item["doc_id"]]
        out.append(list(items[rng.choice(pool)]["context"]) if pool else [])
    return out


def _accuracy(flags: list[bool]) -> dict:
    return {"n": len(flags), "correct": sum(flags), "accuracy": sum(flags) / len(flags) if flags else float("nan")}


def pronoun_key(item: Mapping) -> str:
    """The German pronoun an item is grouped by: the form (``er``, ``ihm``), possessives as ``sein-``/``ihr-``."""
    if item["case"] == "poss":
        return "ihr-" if item["pronoun"].lower().startswith("ihr") else "sein-"
    return item["pronoun"].lower()


def pronoun_breakdown(items: Sequence[Mapping], outcome: Sequence[bool]) -> dict:
    """The accuracy of per-item outcomes overall and by group: ``by_pronoun`` (:func:`pronoun_key`),
    ``by_noun_in_context``, ``by_corpus``, ``by_kind`` (items without a ``kind``: ``"unknown"``), and ``referential``
    (the referential items only) with ``referential_by_distance`` (antecedent distance ``"0"``, ``"1"``, ``"2"``,
    ``"3+"``) and ``referential_by_pronoun``. Each group maps to ``{"n", "correct", "accuracy"}``; ``results`` is ``outcome``."""
    from .pronoun_kinds import distance_bucket

    if len(items) != len(outcome):
        raise UserError(f"{len(items)} items but {len(outcome)} outcomes")
    names = ("by_pronoun", "by_noun_in_context", "by_corpus", "by_kind", "referential_by_distance",
             "referential_by_pronoun")  # fmt: skip
    groups: dict[str, dict[str, list[bool]]] = {name: defaultdict(list) for name in names}
    referential = []
    for item, ok in zip(items, outcome, strict=True):
        ok = bool(ok)
        groups["by_pronoun"][pronoun_key(item)].append(ok)
        groups["by_noun_in_context"][str(bool(item.get("noun_in_context"))).lower()].append(ok)
        groups["by_corpus"][item.get("corpus", "")].append(ok)
        groups["by_kind"][item.get("kind", "unknown")].append(ok)
        if item.get("kind") == "referential":
            referential.append(ok)
            groups["referential_by_distance"][distance_bucket(item["antecedent_distance"])].append(ok)
            groups["referential_by_pronoun"][pronoun_key(item)].append(ok)
    return {
        **_accuracy([bool(x) for x in outcome]), "referential": _accuracy(referential),
        **{name: {key: _accuracy(flags) for key, flags in sorted(g.items())} for name, g in groups.items()},
        "results": [bool(x) for x in outcome],
    }  # fmt: skip


def score_pronoun_items(model, tokenizer, items: Sequence[Mapping], context: str = "document", seed: int = 0,
                        batch_size: int = 32) -> dict:  # fmt: skip
    """Accuracy of ``model`` on pronoun items: an item is right when its reference scores strictly higher than every
    variant (:func:`~hf_syntax_mt.evaluation.contrastive.score_contrastive`).

    Args:
        context: ``"document"`` (the item's previous sentences), ``"random"`` (the context of an item of another
            document, seeded by ``seed``) or ``"none"``. A model without document context ignores it.

    Returns:
        ``{"context", "accuracy", "n", "correct", ...}`` with the groups of :func:`pronoun_breakdown` (by pronoun, by
        ``noun_in_context``, by corpus, by kind, and the referential items by antecedent distance);
        ``results[i]`` is item ``i``'s outcome (bool).
    """
    from .contrastive import score_contrastive

    if context not in ("document", "random", "none"):
        raise UserError(f"context must be 'document', 'random' or 'none', got {context!r}")
    items = check_sequence(items, "items", "pronoun items (dicts, as load_pronoun_items returns)")
    for idx, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise UserTypeError(f"item {idx} must be a dict (a line of load_pronoun_items), got {type(item).__name__}")
        check_pronoun_item(item, f"item {idx} ({item.get('id', 'no id')})")
    if context == "document":
        contexts = [list(item["context"]) for item in items]
    elif context == "random":
        contexts = _random_item_contexts(items, seed)
    else:
        contexts = [[] for _ in items]
    examples, owner = [], []
    for idx, (item, ctx) in enumerate(zip(items, contexts, strict=True)):
        for variant in variant_references(item):
            examples.append({"source": item["source"], "correct": item["reference"], "contrastive": variant,
                             "context": ctx})  # fmt: skip
            owner.append(idx)
    scored = score_contrastive(model, tokenizer, examples, batch_size=batch_size)["results"] if examples else []
    outcome = [True] * len(items)
    for idx, result in zip(owner, scored, strict=True):
        outcome[idx] = outcome[idx] and result["correct"]
    return {"context": context, **pronoun_breakdown(items, outcome)}
