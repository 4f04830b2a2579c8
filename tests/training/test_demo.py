"""The demo language, its attachment diagnostic, the demo's table/figure and CLI (the end-to-end run is slow)."""

import json
import random

import pytest

from hf_syntax_mt.cli import build_parser
from hf_syntax_mt.demo.diagnostic import build_diagnostic, marked_attachment, score_diagnostic
from hf_syntax_mt.demo.language import (
    ATTACHMENTS,
    DemoSentence,
    attachment_of,
    draw_sentence,
    generate_corpus,
    make_pair,
    translate,
)
from hf_syntax_mt.demo.report import format_table, plot_curves
from hf_syntax_mt.demo.run import DemoSettings
from hf_syntax_mt.demo.synthetic import DependencyTree

# "the dog saw the cat with a telescope", PP attached to the verb (obl), written out by hand
TELESCOPE = DemoSentence(
    words="the dog saw the cat with a telescope".split(),
    heads=[2, 3, 0, 5, 3, 8, 8, 3],
    deprels=["det", "nsubj", "root", "det", "obj", "case", "det", "obl"],
    upos=["DET", "NOUN", "VERB", "DET", "NOUN", "ADP", "DET", "NOUN"],
    final_pp=8,
    ambiguous=True,
)


def test_translation_of_a_hand_built_sentence():
    """Head-final order, articles dropped, particles: the verb reading and the noun reading by hand."""
    verb, noun = make_pair(TELESCOPE, "verb"), make_pair(TELESCOPE, "noun")
    assert verb.source == noun.source == "the dog saw the cat with a telescope"
    assert verb.target == "peki ga tamu o rezo to mita"
    assert noun.target == "peki ga rezo to no tamu o mita"
    assert noun.source_tree.heads == [2, 3, 0, 5, 3, 8, 8, 5]  # the PP noun now hangs from "cat"
    assert noun.source_tree.deprels[7] == "nmod"
    # target trees by hand: peki ga tamu o rezo to mita / peki ga rezo to no tamu o mita
    assert verb.target_tree.heads == [7, 1, 7, 3, 7, 5, 0]
    assert noun.target_tree.heads == [8, 1, 6, 3, 3, 8, 6, 0]
    assert noun.target_tree.deprels == ["nsubj", "case", "nmod", "case", "case", "obj", "case", "root"]


def test_an_unambiguous_sentence_takes_no_attachment():
    sentence = draw_sentence(random.Random(0), ambiguous=False)
    with pytest.raises(ValueError, match="no ambiguous PP"):
        sentence.tree("noun")
    with pytest.raises(ValueError, match="attachment must be one of"):
        TELESCOPE.tree("adverb")


def test_corpus_shape_and_balance():
    pairs = generate_corpus(4000, seed=3)
    assert [p.target for p in pairs[:50]] == [p.target for p in generate_corpus(50, seed=3)]  # seeded
    lengths = [len(p.source.split()) for p in pairs]
    assert 3 <= min(lengths) and max(lengths) <= 15
    assert len({w for p in pairs for w in p.source.split()}) == 43  # the small lexicon, every word used
    ambiguous = [p for p in pairs if p.source.split()[-3] in ("with", "near") and "obj" in p.source_tree.deprels]
    noun = sum(attachment_of(p.source_tree) == "noun" for p in ambiguous)
    assert len(ambiguous) > 800 and abs(noun / len(ambiguous) - 0.5) < 0.05  # 1/2 each: the string cannot tell
    for p in pairs[:500]:
        for tree in (p.source_tree, p.target_tree):
            tree.validate()
            assert tree.is_projective()
        assert translate(p.source_tree)[0] == p.target
        assert len(p.target_tree.words) == len(p.target.split())


def test_diagnostic_construction():
    """For every item: the other attachment gives the same source string and a different reference; the gold tree
    says the item's attachment, and the two trees differ only in the PP noun's head and relation."""
    items = build_diagnostic(60, seed=5)
    assert len(items) == 120 and len({it.pair.source for it in items}) == 60
    by_pair = {}
    for it in items:
        by_pair.setdefault(it.pair_id, []).append(it)
    for first, second in by_pair.values():
        assert {first.attachment, second.attachment} == set(ATTACHMENTS)
        assert first.pair.source == second.pair.source
        assert first.pair.target != second.pair.target
        assert first.other_reference == second.pair.target and second.other_reference == first.pair.target
        for it in (first, second):
            assert attachment_of(it.pair.source_tree) == it.attachment
            it.pair.source_tree.validate()
            # swapping the attachment in the gold tree changes the reference
            swapped = next(a for a in ATTACHMENTS if a != it.attachment)
            tree = it.pair.source_tree
            words = tree.words
            heads, deprels = list(tree.heads), list(tree.deprels)
            heads[-1] = deprels.index("root") + 1 if swapped == "verb" else deprels.index("obj") + 1
            deprels[-1] = "obl" if swapped == "verb" else "nmod"
            other = DependencyTree(words, heads, deprels, tree.upos)
            assert " ".join(other.words) == it.pair.source
            assert translate(other)[0] == it.other_reference != it.pair.target
        heads = zip(first.pair.source_tree.heads, second.pair.source_tree.heads, strict=True)
        assert [k for k, (a, b) in enumerate(heads) if a != b] == [len(first.pair.source_tree.words) - 1]


def test_diagnostic_excludes_sources():
    items = build_diagnostic(5, seed=5)
    again = build_diagnostic(5, seed=5, exclude={items[0].pair.source})
    assert items[0].pair.source not in {it.pair.source for it in again}


def test_diagnostic_scores():
    items = build_diagnostic(20, seed=7)
    oracle = [it.pair.target for it in items]
    assert score_diagnostic(oracle, items) | {"chance": None} == {
        "accuracy": 1.0, "n": 40, "correct": 40, "undecided": 0, "both_right": 20, "pairs": 20, "exact": 40,
        "chance": None,
    }  # fmt: skip
    # a tree-blind model: one output per source string (here always the verb reading) -> exactly half, no pair
    blind = {it.pair.source: it.pair.target for it in items if it.attachment == "verb"}
    result = score_diagnostic([blind[it.pair.source] for it in items], items)
    assert result["accuracy"] == 0.5 and result["both_right"] == 0
    # nearer by word edit distance: one word off the noun reading still marks the noun reading
    noun = next(it for it in items if it.attachment == "noun")
    assert marked_attachment(noun.pair.target.replace(" ga ", " o ", 1), noun) == "noun"
    assert marked_attachment(noun.other_reference, noun) == "verb"
    assert marked_attachment("", noun) == "verb"  # the verb reading is one word shorter (no "no")
    assert marked_attachment(" ".join(["x"] * 20), noun) is None  # 20 edits from either: a tie marks neither
    with pytest.raises(ValueError, match="hypotheses for"):
        score_diagnostic(oracle[:3], items)


def _record(acc_items, steps=100):
    items = build_diagnostic(2, seed=1)
    hyps = [it.pair.target if k < acc_items else it.other_reference for k, it in enumerate(items)]
    return {"bleu": 12.345, "chrf": 67.89, "steps": steps, "train_seconds": 41.6,
            "diagnostic": score_diagnostic(hyps, items), "loss_curve": [(10, 3.0), (20, 2.0)],
            "diagnostic_curve": [(10, 0.5), (20, 0.75)]}  # fmt: skip


def test_table_and_figure(tmp_path):
    table = format_table({"vanilla": _record(2), "PASCAL": _record(4, steps=90)})
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["model", "BLEU", "chrF"]
    assert lines[2].split()[:6] == ["vanilla", "12.3", "67.9", "50.0%", "(1/2", "pairs"]
    assert lines[3].split()[:4] == ["PASCAL", "12.3", "67.9", "100.0%"] and lines[3].split()[-2:] == ["90", "42"]
    assert "chance and majority baseline 50%" in table
    path = plot_curves({"vanilla": _record(2)}, tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_flags_reach_the_settings():
    args = build_parser().parse_args(["demo", "--max-steps", "7", "--pascal-heads", "4", "--only", "PASCAL",
                                      "--budget", "30"])  # fmt: skip
    settings = DemoSettings(**{k: v for k, v in vars(args).items() if k not in ("command", "func", "only")},
                            systems=tuple(args.only))  # fmt: skip
    assert (settings.max_steps, settings.pascal_heads, settings.systems, settings.budget) == (7, 4, ("PASCAL",), 30)
    with pytest.raises(ValueError, match="pascal_heads=5"):
        DemoSettings(pascal_heads=5)
    with pytest.raises(ValueError, match="pascal_layer=2"):
        DemoSettings(pascal_layer=2, layers=2)


@pytest.mark.slow
def test_tiny_demo_end_to_end(tmp_path, capsys):
    from hf_syntax_mt.cli import main

    out = tmp_path / "demo"
    argv = ["demo", "--output-dir", str(out), "--train-size", "300", "--test-size", "20", "--diagnostic-size", "4",
            "--max-steps", "6", "--curve-every", "3", "--d-model", "32", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "attachment acc." in printed and "pipeline('translation'" in printed
    summary = json.loads((out / "results.json").read_text())
    for name in ("vanilla", "PASCAL"):
        record = summary["results"][name]
        assert record["steps"] == 6 and record["diagnostic"]["n"] == 8
        assert [s for s, _ in record["diagnostic_curve"]] == [3, 6, 6]
    assert (out / "demo.png").exists() and (out / "pascal" / "config.json").exists()
    assert (out / "pascal" / "test.src.conllu").exists()  # the pipeline's parser travels with the model
