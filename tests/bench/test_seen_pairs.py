"""`benchmarks/studies/seen_pairs.py`: which test pairs occur verbatim in the training data (source and reference both
to the letter; a seen source with another reference is unseen), and BLEU / chrF without them against sacrebleu on a
hand-picked subset."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.data.ende_sentence_data import Part  # noqa: E402
from benchmarks.studies import seen_pairs  # noqa: E402

TRAIN = {"a": [("Thank you!", "Danke!"), ("Hello.", "Hallo."), (" ", "leer")], "b": [("Bye.", "Tschüss.")]}
TEST = [("Thank you!", "Danke!"), ("Thank you!", "Vielen Dank!"), ("Bye.", "Tschüss."), ("A new turn.", "Neu."),
        (" ", "leer")]  # fmt: skip


@pytest.fixture
def data(tmp_path, monkeypatch):
    def write(name, pairs):
        for side, k in (("en", 0), ("de", 1)):
            (tmp_path / f"{name}.{side}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")
        return Part(name, f"{name}.en", f"{name}.de")

    monkeypatch.setattr(seen_pairs, "TRAIN_PARTS", tuple(write(name, pairs) for name, pairs in TRAIN.items()))
    monkeypatch.setattr(seen_pairs, "EVAL_SETS", {"chat.test": write("chat.test", TEST)})
    return tmp_path


def test_seen_pairs_are_whole_pairs_of_the_training_set(data):
    # line 1: the source is in training with another reference; line 4: an empty training pair is dropped, as in build
    assert seen_pairs.seen_lines(data, ["chat.test"]) == {"chat.test": {0, 2}}


def test_scores_without_the_seen_pairs_are_sacrebleu_on_the_unseen_lines(data):
    references = [t for _, t in TEST]
    hyps = ["Danke!", "Danke!", "Tschüss.", "Ein neuer Zug.", "leer"]
    unit = {"kind": "document", "seed": 0, "hypotheses": {"chat.test": hyps},
            "tests": {"chat.test": {**seen_pairs_scores(hyps, references)}}}  # fmt: skip
    seen = seen_pairs.seen_lines(data, ["chat.test"])
    unseen = [1, 3, 4]
    got = seen_pairs.unseen_scores(unit, "chat.test", references, seen["chat.test"])
    expected = seen_pairs_scores([hyps[k] for k in unseen], [references[k] for k in unseen])
    assert got["bleu"] == pytest.approx(expected["bleu"]) and got["chrf"] == pytest.approx(expected["chrf"])
    # a --quick unit translated lines 2 and 3 only: its hypotheses map to those lines, and line 2 is seen
    quick = {**unit, "hypotheses": {"chat.test": ["Tschüss.", "Neu."]},
             "tests": {"chat.test": {"lines": [2, 3], "bleu": 0.0, "chrf": 0.0}}}  # fmt: skip
    only = seen_pairs.unseen_scores(quick, "chat.test", references, seen["chat.test"])
    assert only["bleu"] == pytest.approx(sacrebleu.corpus_bleu(["Neu."], [["Neu."]]).score)
    rows = seen_pairs.table([unit], {"chat.test": references}, seen, ["document", "control"])
    (row,) = [r for r in rows if r.startswith("| chat.test |")]  # no control unit: no row
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["chat.test", "2 of 5 (40.0%)", "document", "0"]
    assert [float(c) for c in cells[4:]] == pytest.approx(
        [unit["tests"]["chat.test"]["bleu"], expected["bleu"], unit["tests"]["chat.test"]["chrf"], expected["chrf"]],
        abs=0.005,
    )


def seen_pairs_scores(hyps, refs):
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score}


def test_the_aggregate_finds_the_training_data_or_leaves_the_table_out(data, tmp_path_factory):
    assert seen_pairs.have_training_data(data)
    assert not seen_pairs.have_training_data(tmp_path_factory.mktemp("only-test-sets"))
