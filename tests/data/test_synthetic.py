"""Tests of the built-in synthetic language pair: trees, head-final translation, lengths, outputs."""

import random

import pytest

from hf_syntax_mt.demo.synthetic import CASE_SUFFIXES, DependencyTree, translate_tree
from hf_syntax_mt.demo.synthetic_corpus import (
    contrastive_examples,
    generate_documents,
    load_synthetic_dataset,
    load_synthetic_documents,
    to_conllu,
    write_corpus,
)
from hf_syntax_mt.demo.synthetic_grammar import generate_corpus, generate_pair


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(2000, seed=3)


def tree(conll: str) -> DependencyTree:
    """Build a tree from ``"word/head/deprel/upos"`` items."""
    items = [item.split("/") for item in conll.split()]
    return DependencyTree(
        [w for w, *_ in items], [int(h) for _, h, _, _ in items], [d for *_, d, _ in items], [u for *_, u in items]
    )


def check_tree(words, heads):
    """Independent tree check: one root, heads in range, every word reaches the root."""
    n = len(words)
    assert len(heads) == n
    assert sum(h == 0 for h in heads) == 1
    assert all(0 <= h <= n and h != i for i, h in enumerate(heads, start=1))
    for i in range(1, n + 1):
        steps, j = 0, i
        while j != 0:
            j = heads[j - 1]
            steps += 1
            assert steps <= n, f"cycle from word {i}"


def crossing(heads):
    arcs = [tuple(sorted((i, h))) for i, h in enumerate(heads, start=1) if h]
    return any(a < c < b < d for a, b in arcs for c, d in arcs)


# ---------------------------------------------------------------- hand-built trees, hand-written targets

HAND_BUILT = [
    # "the big X verbs a Y": articles dropped, SOV, nsubj -ga, obj -o.
    (
        "ta/3/det/DET bemish/3/amod/ADJ balani/4/nsubj/NOUN balek/0/root/VERB lo/6/det/DET bemose/4/obj/NOUN",
        "wohuki foheraga jawatuo hajata",
    ),
    # adverb, PP on the object (nmod -ni) vs PP on the verb (obl -de), light verb "bemek" -> "vezisa suru".
    (
        "balani/3/nsubj/NOUN binly/3/advmod/ADV bemek/0/root/VERB bemose/3/obj/NOUN vo/6/case/ADP "
        "binani/4/nmod/NOUN pem/8/case/ADP balose/3/obl/NOUN",
        "foheraga hajane ha vizurani jawatuo ze fohetude vezisa suru",
    ),
    # "very" adjective (balish -> oto huvoki), NP coordination (conj inherits -ga), relative clause
    # before its noun, clause coordination, intransitive light verb (bemumi -> vezisa naru).
    (
        "balish/2/amod/ADJ balani/7/nsubj/NOUN en/4/cc/CCONJ bemose/2/conj/NOUN ke/6/nsubj/PRON "
        "balumi/4/acl:relcl/VERB binek/0/root/VERB binani/7/obj/NOUN en/12/cc/CCONJ lo/11/det/DET "
        "bemani/12/nsubj/NOUN bemumi/7/conj/VERB",
        "oto huvoki ya nu hajamu jawatuga foheraga vizurao ya jawaraga vezisa naru yovuta",
    ),
    # compound noun: bal + bemani -> fohe + jawara
    ("balbemani/2/nsubj/NOUN balumi/0/root/VERB", "fohejawaraga hajamu"),
]


@pytest.mark.parametrize("source, expected", HAND_BUILT)
def test_hand_built_trees_translate_head_final(source, expected):
    target, target_tree = translate_tree(tree(source))
    assert target == expected
    assert target_tree.words == expected.split()
    check_tree(target_tree.words, target_tree.heads)
    assert not crossing(target_tree.heads)


def test_hand_built_target_tree():
    target, t = translate_tree(tree(HAND_BUILT[1][0]))
    # foheraga hajane ha vizurani jawatuo ze fohetude vezisa suru
    assert t.heads == [9, 9, 4, 5, 9, 7, 9, 9, 0]
    assert t.deprels == ["nsubj", "advmod", "case", "nmod", "obj", "case", "obl", "compound", "root"]
    assert t.upos == ["NOUN", "ADV", "ADP", "NOUN", "NOUN", "ADP", "NOUN", "NOUN", "VERB"]
    # head-final: every head comes after all its dependents
    assert all(h == 0 or h > i for i, h in enumerate(t.heads, start=1))


@pytest.mark.parametrize(
    "relation, suffix",
    [("nsubj", "ga"), ("obj", "o"), ("nmod", "ni"), ("obl", "de")],
)
def test_case_suffix_per_relation(relation, suffix):
    assert CASE_SUFFIXES[relation] == suffix
    # "balani" -> "fohera"; attach it by `relation` under the object or the verb of "X balek Y".
    if relation in ("nsubj", "obj"):
        other = "obj" if relation == "nsubj" else "nsubj"
        source = f"balani/2/{relation}/NOUN balek/0/root/VERB bemose/2/{other}/NOUN"
    else:
        head = 3 if relation == "nmod" else 2
        source = f"bemani/2/nsubj/NOUN balek/0/root/VERB bemose/2/obj/NOUN ar/5/case/ADP balani/{head}/{relation}/NOUN"
    target, _ = translate_tree(tree(source))
    assert "fohera" + suffix in target.split()


def test_unknown_word_is_rejected():
    with pytest.raises(ValueError, match="not a word"):
        translate_tree(tree("hello/2/nsubj/NOUN balumi/0/root/VERB"))


# ---------------------------------------------------------------- generated corpus


def test_deterministic_per_seed_and_different_across_seeds():
    a = generate_corpus(50, seed=7)
    b = generate_corpus(50, seed=7)
    c = generate_corpus(50, seed=8)
    assert [(p.source, p.target) for p in a] == [(p.source, p.target) for p in b]
    assert [p.source for p in a] != [p.source for p in c]
    # a prefix does not depend on n
    assert [p.source for p in generate_corpus(20, seed=7)] == [p.source for p in a[:20]]
    # generate_pair draws only from the rng it is given
    assert generate_pair(random.Random(1)).source == generate_pair(random.Random(1)).source


def test_trees_are_valid_and_projective(corpus):
    for pair in corpus:
        for text, t in ((pair.source, pair.source_tree), (pair.target, pair.target_tree)):
            assert text.split() == t.words
            check_tree(t.words, t.heads)
            assert not crossing(t.heads)
            assert len(t.deprels) == len(t.upos) == len(t.words)
        assert set(pair.source_tree.upos) <= {"NOUN", "VERB", "ADJ", "ADV", "DET", "ADP", "CCONJ", "PRON"}


def test_target_is_head_final_without_articles(corpus):
    for pair in corpus:
        t = pair.target_tree
        assert all(h == 0 or h > i for i, h in enumerate(t.heads, start=1))
        assert "DET" not in t.upos
        n_det = pair.source_tree.upos.count("DET")
        assert len(t.words) >= len(pair.source_tree.words) - n_det
        # every target noun except compound parts carries a case suffix
        for word, upos, rel in zip(t.words, t.upos, t.deprels, strict=True):
            if upos == "NOUN" and rel != "compound":
                assert word.endswith(tuple(CASE_SUFFIXES.values())), word


def test_generated_target_equals_translation_of_source_tree(corpus):
    for pair in corpus[:300]:
        target, target_tree = translate_tree(pair.source_tree)
        assert target == pair.target
        assert target_tree == pair.target_tree


def test_two_word_translations_occur(corpus):
    targets = [p.target_tree for p in corpus]
    light = sum(w in ("suru", "naru") for t in targets for w in t.words)
    very = sum(w == "oto" for t in targets for w in t.words)
    assert light > 100 and very > 100
    for t in targets[:200]:
        for i, (word, head) in enumerate(zip(t.words, t.heads, strict=True), start=1):
            if word == "oto":  # "very" attaches to the following adjective
                assert head == i + 1 and t.upos[i] == "ADJ"
            if t.deprels[i - 1] == "compound":
                assert t.words[head - 1] in ("suru", "naru") and head == i + 1


def test_length_range_and_coverage(corpus):
    lengths = [len(p.source_tree) for p in corpus]
    assert min(lengths) >= 3 and max(lengths) <= 60
    assert sum(n <= 10 for n in lengths) > 400
    assert sum(n >= 40 for n in lengths) > 100
    short = generate_corpus(200, seed=0, min_words=5, max_words=8)
    assert all(5 <= len(p.source_tree) <= 8 for p in short)


def test_sources_are_distinct(corpus):
    assert len({p.source for p in corpus}) == len(corpus)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"n": 5, "max_words": 2}, ValueError),
        ({"n": 5, "min_words": 9, "max_words": 8}, ValueError),
        ({"n": -1}, ValueError),
    ],
)
def test_invalid_arguments(kwargs, error):
    with pytest.raises(error):
        generate_corpus(**kwargs)


def test_words_split_into_subwords(corpus):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = [p.source for p in corpus] + [p.target for p in corpus]
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"], show_progress=False)
    )
    words = [w for text in texts for w in text.split()]
    pieces = {w: len(tokenizer.encode(w).tokens) for w in set(words)}
    assert sum(pieces[w] >= 2 for w in words) / len(words) > 0.15  # running words
    assert sum(n >= 2 for n in pieces.values()) / len(pieces) > 0.5  # word types


# ---------------------------------------------------------------- outputs


def read_conllu(text):
    """A tiny independent CoNLL-U reader: [(comments, [(id, form, upos, head, deprel)])]."""
    sentences = []
    for block in text.strip("\n").split("\n\n"):
        comments, rows = {}, []
        for line in block.split("\n"):
            if line.startswith("# "):
                key, _, value = line[2:].partition(" = ")
                comments[key] = value
            else:
                cols = line.split("\t")
                assert len(cols) == 10
                rows.append((int(cols[0]), cols[1], cols[3], int(cols[6]), cols[7]))
        sentences.append((comments, rows))
    return sentences


def test_conllu_round_trip(corpus):
    pair = corpus[5]
    [(comments, rows)] = read_conllu(to_conllu(pair.source_tree, "s-5", pair.source))
    assert comments == {"sent_id": "s-5", "text": pair.source}
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert [r[1] for r in rows] == pair.source_tree.words
    assert [r[3] for r in rows] == pair.source_tree.heads
    assert [r[4] for r in rows] == pair.source_tree.deprels


def test_write_corpus(tmp_path):
    paths = write_corpus(tmp_path, {"train": 30, "validation": 5, "test": 5}, seed=2)
    assert set(paths) == {"train", "validation", "test"}
    seen = set()
    for files in paths.values():
        src = files["src"].read_text().splitlines()
        tgt = files["tgt"].read_text().splitlines()
        assert len(src) == len(tgt) and all(src) and all(tgt)
        assert not seen & set(src)
        seen |= set(src)
        for key, lines in (("src_conllu", src), ("tgt_conllu", tgt)):
            sentences = read_conllu(files[key].read_text())
            assert [c["text"] for c, _ in sentences] == lines
            assert [" ".join(r[1] for r in rows) for _, rows in sentences] == lines
            for _, rows in sentences:
                check_tree([r[1] for r in rows], [r[3] for r in rows])
    assert len(seen) == 40


def test_load_synthetic_dataset():
    ds = load_synthetic_dataset(n_train=40, n_valid=10, n_test=0, seed=1)
    assert {k: len(v) for k, v in ds.items()} == {"train": 40, "validation": 10, "test": 0}
    row = ds["train"][0]
    assert row["source"].split() == row["source_words"]
    assert row["target"].split() == row["target_words"]
    check_tree(row["source_words"], row["source_heads"])
    check_tree(row["target_words"], row["target_heads"])
    assert len(row["source_deprels"]) == len(row["source_upos"]) == len(row["source_words"])
    assert not set(ds["train"]["source"]) & set(ds["validation"]["source"])
    expected = generate_corpus(50, seed=1)
    assert ds["validation"]["target"] == [p.target for p in expected[40:]]


def test_to_parsed():
    pytest.importorskip("hf_syntax_mt.data.parsers")
    pair = generate_corpus(1, seed=0)[0]
    parsed = pair.source_tree.to_parsed()
    assert parsed.words == pair.source_tree.words and parsed.heads == pair.source_tree.heads
    assert parsed.text == pair.source
    assert [parsed.text[a:b] for a, b in parsed.spans] == parsed.words


# ---------------------------------------------------------------- documents (context-dependent pronouns)

FORMS = {"ani": "ira", "ose": "itu"}  # antecedent noun suffix -> target pronoun form, written out independently


@pytest.fixture(scope="module")
def documents():
    return generate_documents(600, seed=5)


def main_subject(words, heads, deprels):
    """Independent: the word attached to the root by ``nsubj``."""
    root = heads.index(0) + 1
    [subject] = [w for w, h, d in zip(words, heads, deprels, strict=True) if h == root and d == "nsubj"]
    return subject


def pronoun_sentences(documents):
    """(previous source tree, source tree, target tree) for every source sentence containing "ul"."""
    for doc in documents:
        for previous, pair in zip(doc.sentences, doc.sentences[1:], strict=False):
            if "ul" in pair.source_tree.words:
                yield previous.source_tree, pair.source_tree, pair.target_tree
        assert "ul" not in doc.sentences[0].source_tree.words  # the first sentence has no context


def test_documents_deterministic_and_shaped(documents):
    again = generate_documents(600, seed=5)
    assert [d.targets for d in again] == [d.targets for d in documents]
    assert [d.sources for d in generate_documents(50, seed=6)] != [d.sources for d in documents[:50]]
    assert [d.doc_id for d in documents] == [f"doc-{i}" for i in range(600)]
    assert {len(d) for d in documents} == {2, 3, 4, 5, 6}
    assert all(3 <= len(p.source_tree) <= 12 for d in documents for p in d.sentences)
    short = generate_documents(30, sentences_per_doc=(1, 1), seed=0, min_words=3, max_words=5)
    assert all(len(d) == 1 and d.pronouns == [None] for d in short)  # one sentence: no antecedent
    plain = generate_documents(30, seed=0, pronoun_probability=0.0)
    assert not any("ul" in s.split() for d in plain for s in d.sources)


def test_document_trees_valid(documents):
    for doc in documents:
        for pair, link in zip(doc.sentences, doc.pronouns, strict=True):
            for text, t in ((pair.source, pair.source_tree), (pair.target, pair.target_tree)):
                assert text.split() == t.words
                check_tree(t.words, t.heads)
                assert not crossing(t.heads)
            assert all(h == 0 or h > i for i, h in enumerate(pair.target_tree.heads, start=1))  # still head-final
            assert ("ul" in pair.source_tree.words) == (link is not None)
            if link is None:
                assert translate_tree(pair.source_tree)[0] == pair.target
                continue
            src, tgt = pair.source_tree, pair.target_tree
            i, j = link.word, link.target_word
            root = src.heads.index(0) + 1
            assert src.words[i] == "ul" and src.upos[i] == "PRON" and src.deprels[i] in ("nsubj", "obj")
            assert src.heads[i] == root and src.words.count("ul") == 1
            # the translation: PRON, same relation, attached to the target's main verb, case-marked
            assert (
                tgt.upos[j] == "PRON" and tgt.deprels[j] == src.deprels[i] and tgt.heads[j] == tgt.heads.index(0) + 1
            )
            assert tgt.words[j] == ("ira", "itu")[link.noun_class] + CASE_SUFFIXES[src.deprels[i]]
            assert translate_tree(src, pronoun_class=link.noun_class) == (pair.target, tgt)


def test_pronoun_form_matches_antecedent_class(documents):
    n = 0
    for previous, _, target in pronoun_sentences(documents):
        antecedent = main_subject(previous.words, previous.heads, previous.deprels)
        first_noun = next(w for w, u in zip(previous.words, previous.upos, strict=True) if u == "NOUN")
        assert antecedent == first_noun  # the learnable cue: the first noun of the previous sentence
        [form] = [w for w in target.words if w[:3] in ("ira", "itu")]
        assert form.startswith(FORMS[antecedent[-3:]])
        n += 1
    assert n > 300


def test_current_sentence_alone_does_not_determine_the_pronoun(documents):
    forms: dict[str, list[str]] = {}
    for _, source, target in pronoun_sentences(documents):
        [form] = [w[:3] for w in target.words if w[:3] in ("ira", "itu")]
        forms.setdefault(" ".join(source.words), []).append(form)
    total = sum(len(v) for v in forms.values())
    assert sum(len(v) for v in forms.values() if set(v) == {"ira", "itu"}) / total > 0.9
    # the best context-free oracle: the most frequent form of each source sentence
    oracle = sum(max(v.count("ira"), v.count("itu")) for v in forms.values()) / total
    assert oracle < 0.55
    # and unpaired, sentences are mostly unique: the pairing is what makes both forms occur
    unpaired = generate_documents(600, seed=5, paired=False)
    sources = [" ".join(s.words) for _, s, _ in pronoun_sentences(unpaired)]
    assert len(set(sources)) > 0.9 * len(sources)


def test_translating_a_pronoun_sentence_needs_the_antecedent(documents):
    _, source, _ = next(pronoun_sentences(documents))
    with pytest.raises(ValueError, match="antecedent"):
        translate_tree(source)
    with pytest.raises(ValueError, match="pronoun_class"):
        translate_tree(source, pronoun_class=2)


def test_contrastive_examples(documents):
    examples = list(contrastive_examples(documents))
    assert len(examples) == sum(link is not None for d in documents for link in d.pronouns)
    by_id = {d.doc_id: d for d in documents}
    for ex in examples:
        doc = by_id[ex["doc_id"]]
        i = ex["sentence_index"]
        assert ex["context"] == doc.sources[:i] and ex["source"] == doc.sources[i] and ex["correct"] == doc.targets[i]
        right, wrong = ex["correct"].split(), ex["contrastive"].split()
        [k] = [k for k, (a, b) in enumerate(zip(right, wrong, strict=True)) if a != b]
        assert {right[k][:3], wrong[k][:3]} == {"ira", "itu"} and right[k][3:] == wrong[k][3:]
        # the antecedent is the first noun of the last context sentence
        noun = next(w for w in ex["context"][-1].split() if w.endswith(("ani", "ose")))
        assert right[k].startswith(FORMS[noun[-3:]])
    last = list(contrastive_examples(documents, context_sentences=1))
    assert [ex["context"] for ex in last] == [ex["context"][-1:] for ex in examples]
    with pytest.raises(ValueError, match="context_sentences"):
        list(contrastive_examples(documents, context_sentences=0))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_docs": -1},
        {"n_docs": 2, "sentences_per_doc": (0, 3)},
        {"n_docs": 2, "sentences_per_doc": (4, 3)},
        {"n_docs": 2, "pronoun_probability": 1.5},
        {"n_docs": 2, "max_words": 2},
    ],
)
def test_invalid_document_arguments(kwargs):
    with pytest.raises(ValueError):
        generate_documents(**kwargs)


def test_load_synthetic_documents():
    ds = load_synthetic_documents(n_train=30, n_valid=5, n_test=5, seed=2)
    docs = generate_documents(40, seed=2)
    assert ds["test"]["target"] == [t for d in docs[35:] for t in d.targets]
    rows = ds["train"]
    assert rows["doc_id"] == [d.doc_id for d in docs[:30] for _ in d.sentences]
    assert rows["sentence_index"] == [i for d in docs[:30] for i in range(len(d))]
    for row in rows:
        check_tree(row["source_words"], row["source_heads"])
        has_pronoun = "ul" in row["source_words"]
        assert (row["pronoun_class"] >= 0) == has_pronoun == bool(row["contrastive_target"])
