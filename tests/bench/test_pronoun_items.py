"""The contrastive pronoun test's builder on hand-made sentences with hand-made alignments (no eflomal): which
`it`/`its` become items, with which gender, case and variants, which are dropped and why, the noun-in-context flag
from a hand-made gender lexicon, the random-context control, and the scorer's grouping on a stub model."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from hf_syntax_mt.evaluation import pronouns
from hf_syntax_mt.evaluation.pronouns import (
    load_pronoun_items,
    random_contexts,
    variant_references,
    write_pronoun_items,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.data.pronoun_builder import NounGenders, build_pronoun_items, german_tokens, pronoun_variants  # noqa: E402

LEXICON = NounGenders({"tisch": Counter(masc=3), "lampe": Counter(fem=2), "haus": Counter(neut=5),
                       "bank": Counter(fem=2, masc=2), "debatte": Counter(fem=1)})  # fmt: skip


#: per line of _pairs(): the English heads (1-based, 0 = root) and UPOS of the hand-made parse
PARSES = [
    ([2, 3, 0, 3, 3], ["DET", "NOUN", "AUX", "ADJ", "PUNCT"]),
    ([3, 3, 0, 5, 3, 3], ["PRON", "AUX", "VERB", "PRON", "NOUN", "PUNCT"]),
    ([2, 5, 5, 5, 0, 5, 5], ["DET", "NOUN", "PUNCT", "PRON", "VERB", "PRON", "PUNCT"]),
    ([2, 0, 2, 3, 2, 2, 6, 7, 2], ["PRON", "VERB", "ADP", "PRON", "CCONJ", "VERB", "ADP", "PRON", "PUNCT"]),
    ([2, 0, 2, 3, 2, 7, 2, 7, 2], ["PRON", "VERB", "ADP", "PRON", "PUNCT", "PRON", "AUX", "ADJ", "PUNCT"]),
    ([2, 0, 2, 2], ["PRON", "VERB", "PRON", "PUNCT"]),
]


def _pairs():
    """Two documents; each pair: English words, their relations, German reference, links (English i, German j)."""
    return [
        # d1 line 1: "Der Tisch ist alt ." -- no pronoun
        (
            "d1",
            "The table is old .",
            ["The", "table", "is", "old", "."],
            ["det", "nsubj", "ROOT", "acomp", "punct"],
            "Der Tisch ist alt .",
            {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)},
        ),
        # d1 line 2: it -> Er (masc nom from the form); "its" -> seine
        (
            "d1",
            "It has lost its legs .",
            ["It", "has", "lost", "its", "legs", "."],
            ["nsubj", "aux", "ROOT", "poss", "dobj", "punct"],
            "Er hat seine Beine verloren .",
            {(0, 0), (1, 1), (2, 4), (3, 2), (4, 3), (5, 5)},
        ),
        # d1 line 3: it (dobj) -> es: accusative from the English relation; a lamp earlier in the sentence
        (
            "d1",
            "The lamp ? I bought it .",
            ["The", "lamp", "?", "I", "bought", "it", "."],
            ["det", "nsubj", "punct", "nsubj", "ROOT", "dobj", "punct"],
            "Die Lampe ? Ich habe es gekauft .",
            {(0, 0), (1, 1), (2, 2), (3, 3), (4, 6), (5, 5), (6, 7)},
        ),
        # d2 line 1: it -> für sie: accusative from the preposition; it (pobj) -> mit ihm: dative from the form
        (
            "d2",
            "I paid for it and went with it .",
            ["I", "paid", "for", "it", "and", "went", "with", "it", "."],
            ["nsubj", "ROOT", "prep", "pobj", "cc", "conj", "prep", "pobj", "punct"],
            "Ich zahlte für sie und ging mit ihm .",
            {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7), (8, 8)},
        ),  # fmt: skip
        # d2 line 2: it (pobj) -> in es: a two-way preposition, case unknown -> dropped; it -> das: no pronoun
        (
            "d2",
            "I went into it , it was big .",
            ["I", "went", "into", "it", ",", "it", "was", "big", "."],
            ["nsubj", "ROOT", "prep", "pobj", "punct", "nsubj", "ccomp", "acomp", "punct"],
            "Ich ging in es , das war groß .",
            {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7), (8, 8)},
        ),
        # d2 line 3: it aligned to two pronouns -> dropped; "They" is never an item
        (
            "d2",
            "They say it .",
            ["They", "say", "it", "."],
            ["nsubj", "ROOT", "dobj", "punct"],
            "Sie sagen es ihm .",
            {(0, 0), (1, 1), (2, 2), (2, 3), (3, 4)},
        ),
    ]


def _build(pairs=None, parses=None, **kwargs):
    pairs = pairs or _pairs()
    parses = parses or PARSES
    return build_pronoun_items(
        "toy", [p[1] for p in pairs], [p[2] for p in pairs], [p[3] for p in pairs], [p[4] for p in pairs],
        [p[0] for p in pairs], [p[5] for p in pairs], LEXICON, source_heads=[h for h, _ in parses],
        source_upos=[u for _, u in parses], **kwargs,
    )  # fmt: skip


def test_items_get_the_pronoun_its_gender_case_and_the_other_genders_forms():
    items, dropped = _build()
    got = {(it["line"], it["english_index"]): (it["pronoun"], it["gender"], it["case"], it["case_evidence"],
                                               it["variants"]) for it in items}  # fmt: skip
    assert got == {
        (2, 0): ("Er", "masc", "nom", "form", ["Es", "Sie"]),
        (2, 3): ("seine", "masc|neut", "poss", "form", ["ihre"]),
        (3, 5): ("es", "neut", "acc", "english_dep:dobj", ["ihn", "sie"]),
        (4, 3): ("sie", "fem", "acc", "preposition:für", ["es", "ihn"]),
        (4, 7): ("ihm", "masc|neut", "dat", "form", ["ihr"]),
    }
    assert dropped == Counter({"it -> es: case unknown (preposition)": 1, "it: no aligned German pronoun(s)": 1,
                               "it: several aligned German pronoun(s)": 1})  # fmt: skip
    first = next(it for it in items if it["id"] == "toy-2-0")
    assert first["doc_id"] == "d1" and first["sentence_in_document"] == 1 and first["span"] == [0, 2]
    assert variant_references(first) == ["Es hat seine Beine verloren .", "Sie hat seine Beine verloren ."]
    assert variant_references(next(it for it in items if it["id"] == "toy-4-7")) == [
        "Ich zahlte für sie und ging mit ihr ."]  # fmt: skip


def test_context_is_the_previous_two_sentences_of_the_same_document_and_nouns_are_checked_by_gender():
    items, _ = _build()
    by_id = {it["id"]: it for it in items}
    er = by_id["toy-2-0"]  # context: "Der Tisch ist alt ." -> Tisch (masc) matches "Er"
    assert er["context"] == ["The table is old ."] and er["context_nouns"] == [["Tisch", "masc"]]
    assert er["noun_in_context"] and not er["noun_in_sentence"]
    es = by_id["toy-3-5"]  # neuter "es": Tisch (masc) in context, Lampe (fem) in the sentence: no neuter noun
    assert es["context"] == ["The table is old .", "It has lost its legs ."] and not es["noun_in_context"]
    assert es["context_nouns"] == [["Tisch", "masc"]]  # "Beine" is unknown to the lexicon
    ihm = by_id["toy-4-7"]  # first sentence of d2: no context across the document boundary
    assert ihm["context"] == [] and ihm["sentence_in_document"] == 0 and not ihm["noun_in_context"]
    one, _ = _build(context_sentences=1)
    assert {it["id"]: it["context"] for it in one}["toy-3-5"] == ["It has lost its legs ."]


def test_noun_lexicon_finds_compound_heads_and_leaves_out_ambiguous_words_and_sentence_starts():
    assert LEXICON.gender("Parlamentsdebatte") == "fem" and LEXICON.gender("Hochhaus") == "neut"
    assert LEXICON.gender("Bank") is None  # 2 fem : 2 masc
    assert LEXICON.gender("Haus") == "neut" and LEXICON.gender("Laus") is None
    # "Sie" and the unknown first word are no nouns; "Lampe" at the start is known
    assert LEXICON.nouns("Tische und Sie sahen das Haus .") == [("Haus", "neut")]
    assert LEXICON.nouns("Lampe und Haus", before=6) == [("Lampe", "fem")]


def test_noun_lexicon_reads_ud_feats(tmp_path):
    conllu = tmp_path / "de.conllu"
    rows = [("1", "Der", "der", "DET", "Gender=Masc"), ("2", "Tisch", "Tisch", "NOUN", "Case=Nom|Gender=Masc"),
            ("3", "Lampen", "Lampe", "NOUN", "Gender=Fem|Number=Plur"), ("4", "Leute", "Leute", "NOUN", "Number=Plur")]  # fmt: skip
    conllu.write_text("# text = x\n" + "".join(f"{i}\t{f}\t{lem}\t{u}\t_\t{feats}\t0\troot\t_\t_\n"
                                               for i, f, lem, u, feats in rows) + "\n", encoding="utf-8")  # fmt: skip
    lexicon = NounGenders.from_conllu([conllu])
    assert lexicon.table == {"tisch": "masc", "lampe": "fem"}  # the plural form "Lampen" is left out


def test_variants_keep_case_and_capitalisation():
    assert pronoun_variants("Sie", "fem", "nom") == ["Er", "Es"]
    assert pronoun_variants("ihn", "masc", "acc") == ["es", "sie"]
    assert pronoun_variants("Ihrem", "fem", "poss") == ["Seinem"]
    assert pronoun_variants("ihr", "fem", "dat") == ["ihm"]
    with pytest.raises(ValueError, match="not a possessive"):
        pronoun_variants("seinetwegen", "masc|neut", "poss")


def test_links_outside_the_sentence_and_misaligned_inputs_are_refused():
    pairs = _pairs()
    pairs[0] = (*pairs[0][:5], {(0, 9)})
    with pytest.raises(ValueError, match=r"toy line 1: link 0-9 is outside the sentence pair \(5 English words, 5 "
                                         "German tokens\\)"):  # fmt: skip
        _build(pairs)
    with pytest.raises(ValueError, match="toy: references has 1 lines but sources has 2 lines"):
        build_pronoun_items("toy", ["a", "b"], [["a"], ["b"]], [["x"], ["x"]], ["a"], ["d", "d"], [set(), set()],
                            LEXICON, source_heads=[[0], [0]], source_upos=[["X"], ["X"]])  # fmt: skip
    with pytest.raises(ValueError, match="toy: doc_ids has 1 lines but sources has 2"):
        build_pronoun_items("toy", ["a", "b"], [["a"], ["b"]], [["x"], ["x"]], ["a", "b"], ["d"], [set(), set()],
                            LEXICON, source_heads=[[0], [0]], source_upos=[["X"], ["X"]])  # fmt: skip


def test_items_file_round_trip_and_a_wrong_span_is_refused(tmp_path):
    items, _ = _build()
    path = write_pronoun_items(tmp_path / "items.jsonl", items)
    assert load_pronoun_items(path) == items
    bad = dict(items[0], span=[1, 3])
    write_pronoun_items(tmp_path / "bad.jsonl", [bad])
    with pytest.raises(ValueError, match=r"characters 1-3 of the reference are 'r ', not the pronoun 'Er'"):
        load_pronoun_items(tmp_path / "bad.jsonl")
    # a line that is not JSON, or not an object, is named by file and line (blank lines are skipped, not counted out)
    text = path.read_text(encoding="utf-8").split("\n")
    for k, (broken, why) in enumerate([("{not json", "invalid JSON"), ("[1, 2]", "expected a JSON object, got list")]):
        lines = [text[0], "", broken]
        (tmp_path / f"broken{k}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=rf"broken{k}.jsonl:3: {re.escape(why)}"):
            load_pronoun_items(tmp_path / f"broken{k}.jsonl")


def test_german_tokens_have_spans():
    assert german_tokens("Er sah's, ja.") == [("Er", 0, 2), ("sah", 3, 6), ("'", 6, 7), ("s", 7, 8), (",", 8, 9),
                                              ("ja", 10, 12), (".", 12, 13)]  # fmt: skip


def test_random_contexts_come_from_another_document_with_the_same_amount():
    doc_ids = ["a"] * 3 + ["b"] * 2 + ["c"] * 4
    sentences = ["a0", "a1", "a2", "b0", "b1", "c0", "c1", "c2", "c3"]
    documents = {"a": sentences[:3], "b": sentences[3:5], "c": sentences[5:]}
    contexts = random_contexts(doc_ids, sentences, k=2, seed=3)
    other = {}  # the document each document takes its contexts from, read off the first sentence of a context
    for doc, ctx in zip(doc_ids, contexts, strict=True):
        if ctx:
            assert other.setdefault(doc, ctx[0][0]) == ctx[0][0] != doc
    assert set(other) == {"a", "b", "c"} and sorted(other.values()) == ["a", "b", "c"]  # a derangement
    position = Counter()
    for doc, ctx in zip(doc_ids, contexts, strict=True):
        i = position[doc]
        position[doc] += 1
        source = documents[other[doc]]
        j = i % len(source)
        assert ctx == source[max(0, j - 2) : j]
    assert contexts[0] == [] and contexts[3] == [] and contexts[5] == []  # first sentences keep no context
    assert random_contexts(doc_ids, sentences, 2, seed=3) == contexts
    with pytest.raises(ValueError, match="at least two documents"):
        random_contexts(["a", "a"], ["x", "y"], 2)


class _StubModel:
    """Never called: score_contrastive is replaced by a stub in which the reference wins unless the variant starts
    with 'Sie'."""


def test_scoring_groups_by_pronoun_and_noun_in_context(monkeypatch):
    items, _ = _build()
    seen = []

    def fake_score(model, tokenizer, examples, batch_size=32):
        seen.extend(examples)
        return {"results": [{"correct": not ex["contrastive"].startswith("Sie")} for ex in examples]}

    monkeypatch.setattr("hf_syntax_mt.evaluation.contrastive.score_contrastive", fake_score)
    result = pronouns.score_pronoun_items(_StubModel(), None, items, context="document")
    # "Er" fails (its variant "Sie hat ..."), the four others pass
    assert result["n"] == 5 and result["correct"] == 4
    assert result["by_pronoun"]["er"] == {"n": 1, "correct": 0, "accuracy": 0.0}
    assert result["by_pronoun"]["sein-"]["accuracy"] == 1.0
    # Tisch (masc) precedes "Er" (fails) and "seine" (masc|neut, passes); the other three have no such noun
    assert result["by_noun_in_context"] == {"false": {"n": 3, "correct": 3, "accuracy": 1.0},
                                            "true": {"n": 2, "correct": 1, "accuracy": 0.5}}  # fmt: skip
    assert len(seen) == sum(len(it["variants"]) for it in items)
    assert seen[0]["context"] == ["The table is old ."]
    seen.clear()
    pronouns.score_pronoun_items(_StubModel(), None, items, context="none")
    assert all(ex["context"] == [] for ex in seen)
    seen.clear()
    pronouns.score_pronoun_items(_StubModel(), None, items, context="random", seed=1)
    # d1's items have context, d2's (first sentence) have none: a d1 item with one context sentence finds no other
    # document's item with one, so it takes any other document's context, here d2's empty one
    assert [ex["context"] for ex in seen][:3] == [[], [], []]


def test_random_item_contexts_come_from_another_document_with_as_many_sentences():
    items = [{"doc_id": d, "corpus": "c", "context": ctx} for d, ctx in (
        ("d1", ["d1 s0"]), ("d1", ["d1 s0", "d1 s1"]), ("d2", ["d2 s0"]), ("d2", ["d2 s0", "d2 s1"]),
        ("d3", ["d3 s4", "d3 s5"]))]  # fmt: skip
    for seed in range(5):
        contexts = pronouns._random_item_contexts(items, seed)
        for item, ctx in zip(items, contexts, strict=True):
            assert len(ctx) == len(item["context"]) and not ctx[0].startswith(item["doc_id"])


# ------------------------------------------------------------------------------------------------------------------
# Kinds (issue 45): referential items and the ones whose German form the construction fixes
# ------------------------------------------------------------------------------------------------------------------
KIND_LEXICON = NounGenders({"haus": Counter(neut=3), "dach": Counter(neut=2), "regel": Counter(fem=2)})


def _identity(n):
    return {(k, k) for k in range(n)}


def _kind_document():
    """One hand-made document: (English words, relations, 1-based heads, UPOS, German reference, links)."""
    return [
        # 1: no pronoun; "Haus" (neut) is the antecedent of line 3's second "it" and line 8's "its"
        (["The", "house", "is", "old", "."], ["det", "nsubj", "ROOT", "acomp", "punct"], [2, 3, 0, 3, 3],
         ["DET", "NOUN", "AUX", "ADJ", "PUNCT"], "Das Haus ist alt .", _identity(5)),
        # 2: weather: German "es regnet" -> impersonal
        (["It", "is", "raining", "."], ["nsubj", "aux", "ROOT", "punct"], [3, 3, 0, 3], ["PRON", "AUX", "VERB", "PUNCT"],
         "Es regnet .", {(0, 0), (2, 1), (3, 2)}),
        # 3: extraposition "It is important to know that ..." -> clausal; the second "it" -> es, antecedent "Haus"
        #    two sentences back (lines 2 and 3 have no noun)
        (["It", "is", "important", "to", "know", "that", "it", "is", "old", "."],
         ["nsubj", "ROOT", "acomp", "aux", "xcomp", "mark", "nsubj", "ccomp", "acomp", "punct"],
         [2, 0, 2, 5, 3, 8, 8, 5, 8, 2], ["PRON", "AUX", "ADJ", "PART", "VERB", "SCONJ", "PRON", "AUX", "ADJ", "PUNCT"],
         "Es ist wichtig zu wissen , dass es alt ist .",
         {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (6, 7), (7, 9), (8, 8), (9, 10)}),
        # 4: cleft "It's the rules that matter" -> "Es sind die Regeln, die zählen" (es next to a plural verb)
        (["It", "'s", "the", "rules", "that", "matter", "."], ["nsubj", "ROOT", "det", "attr", "nsubj", "relcl", "punct"],
         [2, 0, 4, 2, 6, 4, 2], ["PRON", "AUX", "DET", "NOUN", "PRON", "VERB", "PUNCT"],
         "Es sind die Regeln , die zählen .", {(0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (5, 6), (6, 7)}),
        # 5: "I like it" -> "Es gefällt mir": the English object is the German subject -> case conflict, dropped
        (["I", "like", "it", "."], ["nsubj", "ROOT", "dobj", "punct"], [2, 0, 2, 2], ["PRON", "VERB", "PRON", "PUNCT"],
         "Es gefällt mir .", {(0, 2), (1, 1), (2, 0), (3, 3)}),
        # 6: "it" translated by a plural "Sie sind" -> dropped
        (["It", "is", "expensive", "."], ["nsubj", "ROOT", "acomp", "punct"], [2, 0, 2, 2],
         ["PRON", "AUX", "ADJ", "PUNCT"], "Sie sind teuer .", _identity(4)),
        # 7: "es geht um" -> impersonal
        (["It", "is", "about", "the", "house", "."], ["nsubj", "ROOT", "prep", "det", "pobj", "punct"],
         [2, 0, 2, 5, 3, 2], ["PRON", "AUX", "ADP", "DET", "NOUN", "PUNCT"], "Es geht um das Haus .", _identity(6)),
        # 8: "its" -> "Sein": antecedent "Haus" of line 7, one sentence back
        (["Its", "roof", "is", "new", "."], ["poss", "nsubj", "ROOT", "acomp", "punct"], [2, 3, 0, 3, 3],
         ["PRON", "NOUN", "AUX", "ADJ", "PUNCT"], "Sein Dach ist neu .", _identity(5)),
        # 9: "There"-less existential: "It has a garden" -> "Es gibt einen Garten" -> expletive; "its" -> "sein" with
        #    the antecedent "Haus" in its own sentence (distance 0)
        (["It", "has", "a", "garden", "."], ["nsubj", "ROOT", "det", "dobj", "punct"], [2, 0, 4, 2, 2],
         ["PRON", "VERB", "DET", "NOUN", "PUNCT"], "Es gibt einen Garten .", _identity(5)),
        (["The", "house", "lost", "its", "roof", "."], ["det", "nsubj", "ROOT", "poss", "dobj", "punct"],
         [2, 3, 0, 5, 3, 3], ["DET", "NOUN", "VERB", "PRON", "NOUN", "PUNCT"], "Das Haus verlor sein Dach .",
         _identity(6)),
    ]  # fmt: skip


def _build_kinds(rows=None, **kwargs):
    rows = rows or _kind_document()
    return build_pronoun_items(
        "doc", [" ".join(r[0]) for r in rows], [r[0] for r in rows], [r[1] for r in rows], [r[4] for r in rows],
        ["d"] * len(rows), [r[5] for r in rows], KIND_LEXICON, source_heads=[r[2] for r in rows],
        source_upos=[r[3] for r in rows], **kwargs,
    )  # fmt: skip


def test_items_are_marked_referential_with_the_antecedent_distance_or_by_the_construction_that_fixes_the_form():
    items, dropped = _build_kinds()
    got = {(it["line"], it["english_index"]): (it["pronoun"], it["kind"], it["antecedent_distance"]) for it in items}
    assert got == {
        (2, 0): ("Es", "impersonal", None),
        (3, 0): ("Es", "clausal", None),
        (3, 6): ("es", "referential", 2),
        (4, 0): ("Es", "cleft", None),
        (7, 0): ("Es", "impersonal", None),
        (8, 0): ("Sein", "referential", None),  # "house" of line 7 is inside "about the house": not taken
        (9, 0): ("Es", "expletive", None),
        (10, 3): ("sein", "referential", 0),
    }
    assert dropped == Counter({"it -> sie: plural (next to sind)": 1,
                               "it -> es: case conflict (english_dep:dobj says acc, german:first word says nom)": 1})  # fmt: skip
    by_line = {(it["line"], it["english_index"]): it for it in items}
    assert by_line[3, 6]["antecedent"] == {"distance": 2, "line": 1, "english": "house", "english_index": 1,
                                           "german": "Haus", "german_span": [4, 8], "other_gender_nearer": False,
                                           "nearest_plural": False}  # fmt: skip
    assert by_line[3, 0]["kind_evidence"] == "german:es ..., dass"  # the German rules are asked before the English
    assert by_line[4, 0]["kind_evidence"] == "german:es + plural verb"
    assert by_line[9, 0]["kind_evidence"] == "german:es gibt"
    # the antecedent search stops k sentences back: two sentences back is out of reach with k = 1
    near, _ = _build_kinds(antecedent_sentences=1)
    assert {(it["line"], it["english_index"]): it["kind"] for it in near}[3, 6] == "no_antecedent"


def test_a_noun_of_another_gender_is_passed_over_and_flagged():
    rows = _kind_document()
    # line 1 becomes "The house and the rule .": the search goes right to left, so "Regel" (fem) comes first
    rows[0] = (["The", "house", "and", "the", "rule", "."], ["det", "nsubj", "cc", "det", "conj", "punct"],
               [2, 0, 2, 5, 2, 2], ["DET", "NOUN", "CCONJ", "DET", "NOUN", "PUNCT"], "Das Haus und die Regel .",
               _identity(6))  # fmt: skip
    items, _ = _build_kinds(rows)
    it = next(x for x in items if (x["line"], x["english_index"]) == (3, 6))
    # for "es" (also the form for clauses and events) a neuter noun behind "Regel" is too weak: antecedent unknown
    assert (it["kind"], it["kind_evidence"], it["antecedent"]) == (
        "referential", "antecedent unknown: es, a noun of another gender is nearer", None)  # fmt: skip
    # a possessive ("sein", masc./neut.) keeps the same antecedent behind the feminine noun
    rows[2] = (["Its", "roof", "is", "old", "."], ["poss", "nsubj", "ROOT", "acomp", "punct"], [2, 3, 0, 3, 3],
               ["PRON", "NOUN", "AUX", "ADJ", "PUNCT"], "Sein Dach ist alt .", _identity(5))  # fmt: skip
    items, _ = _build_kinds(rows)
    it = next(x for x in items if x["line"] == 3)
    assert (it["kind"], it["antecedent"]["german"], it["antecedent_distance"]) == ("referential", "Haus", 2)
    assert it["antecedent"]["other_gender_nearer"]


def test_english_parse_alone_marks_expletive_and_extraposed_it():
    from benchmarks.data.pronoun_kinds import item_kind

    # "it" as expl (spaCy's label for some extraposed subjects): expletive whatever the German says
    words, heads, deps = ["it", "seems", "odd"], [2, 0, 2], ["expl", "ROOT", "acomp"]
    assert item_kind(words, heads, deps, ["PRON", "VERB", "ADJ"], 0, ["es", "scheint"], 0)[0] == "expletive"
    # "makes it possible to travel": the object's adjective complement has an xcomp after it -> clausal
    words = ["This", "makes", "it", "possible", "to", "travel"]
    heads, deps = [2, 0, 2, 2, 6, 4], ["nsubj", "ROOT", "dobj", "ccomp", "aux", "xcomp"]
    upos = ["PRON", "VERB", "PRON", "ADJ", "PART", "VERB"]
    german = ["das", "macht", "es", "möglich", "zu", "reisen"]
    assert item_kind(words, heads, deps, upos, 2, german, 2) == (
        "clausal",
        "english:extraposition (makes it possible)",
    )
    # "It allows us to travel": a lexical verb with an xcomp is no extraposition
    words, heads = ["It", "allows", "us", "to", "travel"], [2, 0, 2, 5, 2]
    deps, upos = ["nsubj", "ROOT", "dobj", "aux", "xcomp"], ["PRON", "VERB", "PRON", "PART", "VERB"]
    assert item_kind(words, heads, deps, upos, 0, ["es", "erlaubt", "uns", "zu", "reisen"], 0) == (None, "")


def test_scoring_reports_referential_items_by_antecedent_distance_as_computed_by_hand(monkeypatch):
    items, _ = _build_kinds()
    # the stub: a variant wins where it is "ihre" (the masc./neut. possessives' only variant), so the two "sein"
    # items fail and the six others pass
    monkeypatch.setattr(
        "hf_syntax_mt.evaluation.contrastive.score_contrastive",
        lambda model, tokenizer, examples, batch_size=32: {
            "results": [{"correct": " ihr " not in f" {ex['contrastive'].lower()} "} for ex in examples]},
    )  # fmt: skip
    result = pronouns.score_pronoun_items(_StubModel(), None, items, context="document")
    assert (result["correct"], result["referential"]) == (6, {"n": 3, "correct": 1, "accuracy": 1 / 3})
    # by hand, with other outcomes: items in order (2,0) (3,0) (3,6) (4,0) (7,0) (8,0) (9,0) (10,3)
    outcome = [True, True, False, True, True, True, True, False]  # (3,6) and (10,3) wrong
    grouped = pronouns.pronoun_breakdown(items, outcome)
    # referential: (3,6) distance 2 wrong, (8,0) antecedent unknown right, (10,3) distance 0 wrong
    assert grouped["referential"] == {"n": 3, "correct": 1, "accuracy": 1 / 3}
    assert grouped["referential_by_distance"] == {"0": {"n": 1, "correct": 0, "accuracy": 0.0},
                                                  "2": {"n": 1, "correct": 0, "accuracy": 0.0},
                                                  "unknown": {"n": 1, "correct": 1, "accuracy": 1.0}}  # fmt: skip
    assert grouped["by_kind"]["impersonal"] == {"n": 2, "correct": 2, "accuracy": 1.0}
    assert grouped["referential_by_pronoun"] == {"es": {"n": 1, "correct": 0, "accuracy": 0.0},
                                                 "sein-": {"n": 2, "correct": 1, "accuracy": 0.5}}  # fmt: skip
    assert (grouped["n"], grouped["correct"]) == (8, 6)
    far = [dict(items[2], antecedent_distance=5)]
    assert list(pronouns.pronoun_breakdown(far, [True])["referential_by_distance"]) == ["3+"]
    old = [{k: v for k, v in it.items() if k != "kind"} for it in items]  # items of an older file: no kind
    assert pronouns.pronoun_breakdown(old, outcome)["by_kind"] == {"unknown": {"n": 8, "correct": 6, "accuracy": 0.75}}


# ------------------------------------------------------------------------------------------------------------------
# Bad input (issue 44): item files and the builder's inputs are checked, errors name file and line
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"variants": "Es"}, "field 'variants' must be a non-empty list of strings (the contrastive pronoun forms), "
                             "got 'Es'"),
        ({"variants": []}, "field 'variants' must be a non-empty list"),
        ({"context": "The table is old ."}, "field 'context' must be a list of strings (the previous source "
                                            "sentences), got 'The table is old .'"),
        ({"span": 5}, "field 'span' must be [start, end] (two ints, character offsets into the reference), got 5"),
        ({"span": ["0", "2"]}, "field 'span' must be [start, end]"),
        ({"pronoun": 3}, "field 'pronoun' must be a string, got 3"),
        ({"kind": "anaphoric"}, "field 'kind' must be one of ['referential', "),
        ({"kind": "referential", "antecedent_distance": "1"}, "a referential item's 'antecedent_distance' must be "
                                                              "an int >= 0 (or null: antecedent not found with "
                                                              "confidence), got '1'"),
    ],
)  # fmt: skip
def test_an_items_file_with_a_wrong_typed_field_names_file_line_and_field(tmp_path, change, message):
    items, _ = _build()
    path = write_pronoun_items(tmp_path / "items.jsonl", [items[0], dict(items[1], **change)])
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: {message}")):
        load_pronoun_items(path)
    # items given to the scorer directly are checked the same way, before any model runs
    with pytest.raises(ValueError, match=re.escape(f"item 1 (toy-2-3): {message}")):
        pronouns.score_pronoun_items(_StubModel(), None, [items[0], dict(items[1], **change)], context="none")


def test_the_builder_refuses_string_links_short_relation_lists_and_a_returning_document():
    pairs = _pairs()
    pairs[1] = (*pairs[1][:5], ["0-0", "1-1"])
    with pytest.raises(ValueError, match=re.escape("toy line 2: link '0-0' is not a pair of ints (English word, "
                                                   "German token), e.g. (3, 4); parse 'i-j' strings first")):  # fmt: skip
        _build(pairs)
    pairs = _pairs()
    pairs[2] = (*pairs[2][:3], pairs[2][3][:-1], *pairs[2][4:])
    with pytest.raises(ValueError, match=re.escape("toy line 3: source_deps has 6 entries but the line has 7 English "
                                                   "words; give one per word")):  # fmt: skip
        _build(pairs)
    parses = list(PARSES)
    parses[0] = (PARSES[0][0][:2], PARSES[0][1])
    with pytest.raises(ValueError, match=re.escape("toy line 1: source_heads has 2 entries but the line has 5")):
        _build(parses=parses)
    pairs = _pairs()
    pairs[5] = ("d1", *pairs[5][1:])  # d1, d1, d1, d2, d2, d1: d1 comes back after d2
    with pytest.raises(ValueError, match=r"toy: document 'd1' starts at row 0 and appears again at row 5, after "
                                         "another document: documents must be contiguous"):  # fmt: skip
        _build(pairs)


def test_german_rules_for_clefts_infinitives_and_plural_sie():
    from benchmarks.data.pronoun_kinds import item_kind, plural_sie

    words, heads = ["it", "is", "an", "instrument"], [2, 0, 4, 2]
    deps, upos = ["nsubj", "ROOT", "det", "attr"], ["PRON", "AUX", "DET", "NOUN"]
    assert item_kind(words, heads, deps, upos, 0, ["es", "ist", "ein", "instrument"], 0) == (
        "cleft", "english:it be + predicate noun")  # keyed by the rule: "it was a tool" gives the same  # fmt: skip
    # the translator chose a gender ("sie ist kein Instrument": die Konvention): the item is not a cleft
    assert item_kind(words, heads, deps, upos, 0, ["sie", "ist", "kein", "instrument"], 0) == (None, "")
    # an extraposed zu-infinitive after the comma, but not a purpose clause "um ... zu"
    words, heads, deps = ["it", "works"], [2, 0], ["nsubj", "ROOT"]
    upos = ["PRON", "VERB"]
    tokens = "es müsste möglich sein , die leute zu finden".split()
    assert item_kind(words, heads, deps, upos, 0, tokens, 0) == ("clausal", "german:es ..., ... zu")
    tokens = "es wurde gebaut , um sie zu schützen".split()
    assert item_kind(words, heads, deps, upos, 0, tokens, 0) == (None, "")
    assert plural_sie(["sie", "zeugen", "von"], 0, nominative=True) == "zeugen"
    assert plural_sie(["sie", "zeugen", "von"], 0) is None  # an object sie before an infinitive may be singular
    assert plural_sie(["weil", "sie", "den", "tisch"], 1, nominative=True) is None
    assert plural_sie(["dann", "können", "sie"], 2) == "können"
    # a noun in -en after a subject sie is no verb: the case is read from the tokens as written
    assert (
        plural_sie(["wenn", "sie", "daten", "sammelt"], 1, nominative=True, cased=["wenn", "sie", "Daten", "sammelt"])
        is None
    )
    assert (
        plural_sie(["wenn", "sie", "daten", "sammeln"], 1, nominative=True, cased=["wenn", "sie", "daten", "sammeln"])
        == "daten"
    )


def _german_kind(sentence: str, j: int = None):
    """item_kind of a German sentence's first (or ``j``-th) token "es" with an English parse that decides nothing."""
    from benchmarks.data.pronoun_kinds import item_kind

    tokens = [t.lower() for t, _, _ in german_tokens(sentence)]
    j = tokens.index("es") if j is None else j
    return item_kind(["it", "works"], [2, 0], ["nsubj", "ROOT"], ["PRON", "VERB"], 0, tokens, j)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # verb-final "es ... um ... geht" (issue 51: 5 items were missed)
        ("Wenn es um die Umwelt geht , sind wir uns einig .", ("impersonal", "german:es geht um")),
        ("Es geht um die Umwelt .", ("impersonal", "german:es geht um")),
        # "um" of another clause is no "es geht um"
        ("Wenn es geht , fahren wir um acht .", (None, "")),
        # clausal "es scheint, als ..."
        ("Es scheint , als ob niemand zuhört .", ("clausal", "german:es scheint, als")),
        # the zu-infinitive rule: an infinitive fires; zu as a preposition and a coordinated main clause do not
        ("Es ist wichtig , die Leute zu finden .", ("clausal", "german:es ..., ... zu")),
        ("Es gefällt mir , wir gehen zu den Leuten .", (None, "")),
        ("Es ist neu , und wir versuchen zu helfen .", (None, "")),
        # "es kommt auf ... an" is impersonal; "es kommt ... an" (arrives) and a place "es liegt an der Küste" are not
        ("Es kommt auf die Qualität an .", ("impersonal", "german:es kommt auf ... an")),
        ("Es kommt morgen in Berlin an .", (None, "")),
        ("Es liegt an der Küste .", (None, "")),
        ("Es liegt daran , dass niemand kam .", ("impersonal", "german:es liegt an")),
        # read by hand in the first check of issue 51 (seed 51): "ums", the weather, a zu-infinitive past a list's
        # commas or written as one word
        ("Es geht nicht ums Spielen .", ("impersonal", "german:es geht um")),
        ("Ich rief an , und es war kalt .", ("impersonal", "german:weather")),
        ("Es war ein kalter Tag .", (None, "")),
        ("Es ist mir eine Freude , den Bericht für Industrie , Handel und Energie vorstellen zu können .",
         ("clausal", "german:es ..., ... zu")),
        ("Es ist an uns , das sicherzustellen .", ("clausal", "german:es ..., ... zu")),
        # the second check (seed 52): a colon ends the search for the clause; "so gut, wie" is a comparison
        ("Aber es hat eine Nebenwirkung : Ich verstand , dass es half .", (None, "")),
        ("Ich hoffe , Ihnen gefällt es so gut , wie es beschrieben wird .", (None, "")),
        ("Es sieht so aus , als wären sie ausgebucht .", ("clausal", "german:es scheint, als")),
    ],
)  # fmt: skip
def test_german_rules_for_impersonal_and_clausal_es_as_issue_51_fixed_them(sentence, expected):
    assert _german_kind(sentence) == expected


def test_an_object_es_before_a_dative_gets_accusative_variants_and_an_object_sie_next_to_a_plural_is_dropped():
    from benchmarks.data.pronoun_kinds import german_case

    tokens = [t.lower() for t, _, _ in german_tokens("Dies wird es den Verbrauchern erleichtern , zu wählen .")]
    assert german_case(tokens, 2) == ("acc", "german:es + dative + erleichtern")
    # a subject es of a verb-second clause is not read as an object
    tokens = [t.lower() for t, _, _ in german_tokens("Morgen wird es den ganzen Tag regnen .")]
    assert german_case(tokens, 2) == (None, "")
    # end to end: the English "it" is the subject of "make it easier" in spaCy's reading (nsubj), German es an object
    lexicon = NounGenders({"verbraucher": Counter(plur=2)})
    words = ["This", "will", "make", "it", "easier", "for", "consumers", "."]
    reference = "Dies wird es den Verbrauchern erleichtern ."
    items, _ = build_pronoun_items(
        "t", [" ".join(words)], [words], [["nsubj", "aux", "ROOT", "nsubj", "ccomp", "prep", "pobj", "punct"]],
        [reference], ["d"], [{(0, 0), (1, 1), (3, 2), (6, 4), (2, 5), (7, 6)}], lexicon,
        source_heads=[[3, 3, 0, 5, 3, 5, 6, 3]],
        source_upos=[["PRON", "AUX", "VERB", "PRON", "ADJ", "ADP", "NOUN", "PUNCT"]],
    )  # fmt: skip
    assert [(it["case"], it["variants"]) for it in items] == [("acc", ["ihn", "sie"])]
    # an object sie whose nearest noun is plural ("the experiments ... we repeated it" -> "wir wiederholten sie")
    lexicon = NounGenders({"versuch": Counter(masc=2), "versuche": Counter(plur=2), "methode": Counter(fem=2)})
    words = ["The", "method", "needs", "experiments", ";", "we", "repeated", "it", "."]
    reference = "Die Methode braucht Versuche ; wir wiederholten sie ."
    args = (["t"], [words], [["det", "nsubj", "ROOT", "dobj", "punct", "nsubj", "ROOT", "dobj", "punct"]], [reference],
            ["d"], [{(k, k) for k in range(9)}])  # fmt: skip
    parse = {"source_heads": [[2, 3, 0, 3, 3, 7, 3, 7, 3]],
             "source_upos": [["DET", "NOUN", "VERB", "NOUN", "PUNCT", "PRON", "VERB", "PRON", "PUNCT"]]}  # fmt: skip
    items, dropped = build_pronoun_items(args[0][0], [" ".join(words)], *args[1:], lexicon, **parse)
    assert items == [] and dropped == Counter({"it -> sie: accusative, the nearest noun is plural": 1})
    # with a singular noun there ("the test") the item stays, referential, with the feminine antecedent behind it
    words[3], reference = "test", "Die Methode braucht Versuch ; wir wiederholten sie ."
    items, _ = build_pronoun_items("t", [" ".join(words)], [words], args[2], [reference], *args[4:], lexicon, **parse)
    assert [(it["kind"], it["antecedent"]["german"]) for it in items] == [("referential", "Methode")]


def test_one_german_noun_test_for_context_and_antecedents():
    """Sentence-initial verbs are no nouns; the first word counts only when the lexicon knows it; forms of Sie never."""
    lexicon = NounGenders({"wissen": Counter(neut=3), "können": Counter(neut=2), "tisch": Counter(masc=2)})
    words = [t for t, _, _ in german_tokens("Können Sie den Tisch sehen ?")]
    assert [lexicon.noun_at(words, k) for k in range(len(words))] == [None, None, None, "masc", None, None]
    words = [t for t, _, _ in german_tokens("Wissen ist Macht .")]
    assert lexicon.noun_at(words, 0) == "neut"  # the noun "das Wissen", known and not followed by a pronoun
    words = [t for t, _, _ in german_tokens("Tischlampe und Tisch")]
    assert lexicon.noun_at(words, 0) is None and lexicon.noun_at(words, 2) == "masc"  # unknown as it is: not at 0
    assert lexicon.nouns("Können Sie den Tisch sehen ?") == [("Tisch", "masc")]


def test_lexicon_from_treebank_feats_and_determiners_gets_gender_and_number_right(tmp_path):
    """Umwelt feminine, Vorspeisen and Verfahrensweisen plural (issue 51's lexicon errors), from a hand-made
    treebank and hand-made running text."""
    rows = [("1", "Umwelt", "Umwelt", "NOUN", "Gender=Fem|Number=Sing"),
            ("2", "Vorspeise", "Vorspeise", "NOUN", "Gender=Fem|Number=Sing"),
            ("3", "Weise", "Weise", "NOUN", "Gender=Fem|Number=Sing"),
            ("4", "Eisen", "Eisen", "NOUN", "Gender=Neut|Number=Sing"),
            ("5", "Tische", "Tisch", "NOUN", "Gender=Masc|Number=Plur")]  # fmt: skip
    conllu = tmp_path / "de.conllu"
    conllu.write_text("# text = x\n" + "".join(f"{i}\t{f}\t{lem}\t{u}\t_\t{feats}\t0\troot\t_\t_\n"
                                               for i, f, lem, u, feats in rows) + "\n", encoding="utf-8")  # fmt: skip
    texts = ["Wir sahen das Klavier und eine Seidenraupe .", "Er sprach mit den Kollegen und der Kollegin .",
             "Den Kollegen gefällt es .", "Wir sahen die Kollegen ."]  # the first word is never read  # fmt: skip
    lexicon = NounGenders.from_sources([conllu], texts)
    got = {w: lexicon.reading(w) for w in ("Umwelt", "Vorspeisen", "Verfahrensweisen", "Eisen", "Tische", "Tisch",
                                           "Klavier", "Seidenraupe", "Kollegen", "Kollegin")}  # fmt: skip
    assert got == {"Umwelt": "fem", "Vorspeisen": "plur", "Verfahrensweisen": "plur", "Eisen": "neut",
                   "Tische": "plur", "Tisch": "masc", "Klavier": "neut", "Seidenraupe": "fem", "Kollegen": "plur",
                   "Kollegin": None}  # fmt: skip
    assert lexicon.gender("Vorspeisen") is None and lexicon.gender("Umweltschutzbehörde") is None


def test_a_possessive_takes_the_subject_of_its_clause_before_a_nearer_noun_of_the_same_gender():
    """ "Parliament asks Frontex to give the number of cases during its operations": its = Frontex (the object that
    controls "to give"), not "number" (Zahl, also feminine), which the nearest-noun search alone would take."""
    words = "Parliament asks Frontex to give the number of cases during its operations .".split()
    heads = [2, 0, 2, 5, 2, 7, 5, 7, 8, 5, 12, 10, 2]
    deps = ["nsubj", "ROOT", "dobj", "aux", "xcomp", "det", "dobj", "prep", "pobj", "prep", "poss", "pobj", "punct"]
    upos = ["PROPN", "VERB", "PROPN", "PART", "VERB", "DET", "NOUN", "ADP", "NOUN", "ADP", "PRON", "NOUN", "PUNCT"]
    reference = "Das Parlament fordert Frontex auf , die Zahl der Fälle bei ihren Einsätzen anzugeben ."
    links = {(0, 1), (1, 2), (2, 3), (4, 13), (6, 7), (8, 9), (9, 10), (10, 11), (11, 12), (12, 14)}
    lexicon = NounGenders({"parlament": Counter(neut=2), "zahl": Counter(fem=2), "frontex": Counter(fem=2),
                           "fälle": Counter(plur=2), "einsätzen": Counter(plur=2)})  # fmt: skip
    items, _ = build_pronoun_items("t", [" ".join(words)], [words], [deps], [reference], ["d"], [links], lexicon,
                                   source_heads=[heads], source_upos=[upos])  # fmt: skip
    assert [(it["pronoun"], it["kind"], it["antecedent"]["german"]) for it in items] == [("ihren", "referential",
                                                                                          "Frontex")]  # fmt: skip
    # a subject of unknown gender: no guess (the nearer "Zahl" is not taken either)
    del lexicon.readings["frontex"]
    items, _ = build_pronoun_items("t", [" ".join(words)], [words], [deps], [reference], ["d"], [links], lexicon,
                                   source_heads=[heads], source_upos=[upos])  # fmt: skip
    assert [(it["kind"], it["antecedent"]) for it in items] == [("referential", None)]
    assert items[0]["kind_evidence"].startswith("antecedent unknown: uncertain: the subject of its clause")


@pytest.mark.parametrize(
    ("sentence", "j", "expected"),
    [
        # issue 59's items: a nominative er/sie, a form of sein and a predicate noun, where es is right too
        ("Sie ist eher eine Chance .", 0, "eine"),
        ("Sie ist sogar Hauptgegenstand des ersten Artikels .", 0, "Hauptgegenstand"),
        ("Mal sehen . Sie ist 1521 Geronimo Avenue , Dallas .", 3, "1521"),
        # the form before the pronoun, and verb-final
        ("Heute ist er ein Konflikt .", 2, "ein"),
        ("Ich weiß , dass sie eine Chance ist .", 4, "eine"),
        # an adjective, a place, another verb, a plural form, and es itself: no predicate noun of sein
        ("Sie ist sehr wichtig .", 0, None),
        ("Sie ist in der Stadt .", 0, None),
        ("Er hat eine Chance .", 0, None),
        ("Sie sind eine Chance .", 0, None),
        ("Es ist eine Chance .", 0, None),
    ],
)  # fmt: skip
def test_sein_predicate_finds_the_predicate_noun_of_a_nominative_er_or_sie(sentence, j, expected):
    from benchmarks.data.pronoun_kinds import sein_predicate

    cased = [t for t, _, _ in german_tokens(sentence)]
    assert sein_predicate([t.lower() for t in cased], j, cased) == expected


def test_a_subject_er_or_sie_of_sein_with_a_predicate_noun_is_dropped_as_es_is_right_too():
    """A nominative sie with a form of sein and a predicate noun ("Sie ist eher eine Chance", issue 59): "Es ist eher
    eine Chance" is right German too, so the item's `es` variant is no error; with a predicate adjective it stays."""
    words = ["It", "is", "an", "opportunity", "."]
    parse = {"source_heads": [[2, 0, 4, 2, 2]], "source_upos": [["PRON", "AUX", "DET", "NOUN", "PUNCT"]]}
    deps = [["nsubj", "ROOT", "det", "attr", "punct"]]
    lexicon = NounGenders({"chance": Counter(fem=2)})
    items, dropped = build_pronoun_items("t", [" ".join(words)], [words], deps, ["Sie ist eine Chance ."], ["d"],
                                         [_identity(5)], lexicon, **parse)  # fmt: skip
    assert items == [] and dropped == Counter({"it -> sie: subject of sein + predicate noun, es right too": 1})
    words[2:4] = ["very", "good"]
    deps = [["nsubj", "ROOT", "advmod", "acomp", "punct"]]
    parse["source_upos"] = [["PRON", "AUX", "ADV", "ADJ", "PUNCT"]]
    items, dropped = build_pronoun_items("t", [" ".join(words)], [words], deps, ["Sie ist sehr gut ."], ["d"],
                                         [_identity(5)], lexicon, **parse)  # fmt: skip
    assert [(it["pronoun"], it["variants"]) for it in items] == [("Sie", ["Er", "Es"])] and not dropped
