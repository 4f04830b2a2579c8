"""The contrastive pronoun test's builder on hand-made sentences with hand-made alignments (no eflomal): which
`it`/`its` become items, with which gender, case and variants, which are dropped and why, the noun-in-context flag
from a hand-made gender lexicon, the random-context control, and the scorer's grouping on a stub model."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from hf_syntax_mt.evaluation import pronouns
from hf_syntax_mt.evaluation.pronouns import (
    NounGenders,
    build_pronoun_items,
    german_tokens,
    load_pronoun_items,
    pronoun_variants,
    random_contexts,
    variant_references,
    write_pronoun_items,
)

LEXICON = NounGenders({"tisch": Counter(masc=3), "lampe": Counter(fem=2), "haus": Counter(neut=5),
                       "bank": Counter(fem=2, masc=2), "debatte": Counter(fem=1)})  # fmt: skip


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


def _build(pairs=None, **kwargs):
    pairs = pairs or _pairs()
    return build_pronoun_items(
        "toy", [p[1] for p in pairs], [p[2] for p in pairs], [p[3] for p in pairs], [p[4] for p in pairs],
        [p[0] for p in pairs], [p[5] for p in pairs], LEXICON, **kwargs,
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
    with pytest.raises(ValueError, match="toy: doc_ids has 1 lines but sources has 2"):
        build_pronoun_items(
            "toy", ["a", "b"], [["a"], ["b"]], [["x"], ["x"]], ["a", "b"], ["d"], [set(), set()], LEXICON
        )


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
