"""`benchmarks/alignment_study.known_word_aer`: AER split into the gold cells whose two words occur in the training
data and the others, checked on a hand-built two-pair corpus."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hf_syntax_mt.alignment import GoldAlignment, alignment_error_rate

ROOT = Path(__file__).resolve().parents[2]


def load_study():
    spec = importlib.util.spec_from_file_location(
        "alignment_study", ROOT / "benchmarks" / "studies" / "alignment_study.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_known_word_aer_splits_every_link_set_by_the_same_cells():
    hansards = (["the cat", "a dog"], ["le chat", "un chien"])
    vocab = ({"the", "a", "dog"}, {"le", "chat", "un"})  # unseen: "cat" (en), "chien" (fr)
    gold = [GoldAlignment(frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (0, 1), (1, 1)})),
            GoldAlignment(frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (1, 1)}))]  # fmt: skip
    predicted = [{(0, 0), (1, 0)}, {(0, 0), (1, 1)}]
    split = load_study().known_word_aer(predicted, gold, hansards, vocab)
    # known cells: pair 1 the-le, the-chat; pair 2 a-un, dog-un. A = {the-le, a-un}, S = {the-le, a-un}: AER 0
    assert split["known"]["predicted_links"] == 2 and split["known"]["sure_links"] == 2
    assert split["known"]["aer"] == 0.0
    # unseen cells: A = {cat-le, dog-chien}, S = P = {cat-chat, dog-chien}: 1 - (1 + 1) / (2 + 2)
    assert split["unseen"]["predicted_links"] == 2 and split["unseen"]["sure_links"] == 2
    assert split["unseen"]["aer"] == 0.5
    whole = alignment_error_rate(predicted, gold)
    for count in ("predicted_links", "sure_links", "predicted_sure", "predicted_possible"):
        assert split["known"][count] + split["unseen"][count] == whole[count]
