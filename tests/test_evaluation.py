"""Tests of evaluation: scores equal sacrebleu's functional API, buckets, table, signatures."""

import pytest
import sacrebleu

from hf_syntax_mt.evaluation import (
    bucket_labels,
    bucket_scores,
    corpus_scores,
    format_comparison,
    length_buckets,
    signature,
)

REFS = [
    "the cat sat on the mat",
    "a dog barks loudly at night in the park near the river",
    "she reads",
    "they built a small house next to the old mill by the lake last summer",
    "it rains",
    "birds sing in the early morning when the sun rises over the hills",
]
HYPS = [
    "the cat sat on a mat",
    "a dog barks at night in a park near the river",
    "she is reading",
    "they built a house next to an old mill near the lake last summer",
    "it is raining",
    "birds sing early in the morning as the sun rises above the hills",
]
SOURCE_LENGTHS = [6, 12, 2, 15, 2, 41]


def test_corpus_scores_equal_sacrebleu_functions():
    scores = corpus_scores(HYPS, REFS)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score, abs=1e-9)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-9)
    assert scores["count"] == len(HYPS)
    assert (
        scores["bleu_signature"].startswith("nrefs:1|")
        and f"version:{sacrebleu.__version__}" in scores["bleu_signature"]
    )
    assert "nc:6" in scores["chrf_signature"]
    assert 0 < scores["bleu"] < 100 and 0 < scores["chrf"] < 100


def test_perfect_translation_scores_100():
    scores = corpus_scores(REFS, REFS)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)


@pytest.mark.parametrize(
    "hyps, refs",
    [
        (["", ""], ["a b c d", "e f g h"]),  # empty hypotheses
        (["", "e f g h"], ["a b c d", "e f g h"]),  # one empty hypothesis
        (["a b c d", "x"], ["a b c d", ""]),  # empty reference
        (["a"], ["a"]),  # single short segment
    ],
)
def test_edge_cases_match_sacrebleu(hyps, refs):
    scores = corpus_scores(hyps, refs)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)


@pytest.mark.parametrize(
    "hyps, refs, error, message",
    [
        (["a", "b"], ["a"], ValueError, "2 hypotheses but 1 references"),
        (["a"], ["a", "b", "c"], ValueError, "1 hypotheses but 3 references"),
        ([], [], ValueError, "empty corpus"),
        (["a", None], ["a", "b"], TypeError, r"hypotheses\[1\]"),
    ],
)
def test_invalid_inputs(hyps, refs, error, message):
    with pytest.raises(error, match=message):
        corpus_scores(hyps, refs)


@pytest.mark.parametrize(
    "lengths, edges, expected",
    [
        (
            [1, 10, 11, 20, 21, 30, 31, 40, 41, 100],
            (10, 20, 30, 40),
            ["1-10", "1-10", "11-20", "11-20", "21-30", "21-30", "31-40", "31-40", "41+", "41+"],
        ),
        ([0, 5, 6], (5,), ["1-5", "1-5", "6+"]),
        ([], (10, 20), []),
    ],
)
def test_length_buckets(lengths, edges, expected):
    assert length_buckets(lengths, edges) == expected


@pytest.mark.parametrize("edges", [(), (10, 10), (20, 10), (0, 10), (10.5,)])
def test_invalid_edges(edges):
    with pytest.raises(ValueError, match="edges"):
        length_buckets([3], edges)


def test_bucket_labels():
    assert bucket_labels() == ["1-10", "11-20", "21-30", "31-40", "41+"]


def test_bucket_scores_equal_sacrebleu_on_filtered_subsets():
    result = bucket_scores(SOURCE_LENGTHS, HYPS, REFS)
    # by hand: 1-10 -> segments 0, 2, 4; 11-20 -> 1, 3; 41+ -> 5 (21-30 and 31-40 empty, left out)
    members = {"1-10": [0, 2, 4], "11-20": [1, 3], "41+": [5]}
    assert [b["bucket"] for b in result] == list(members)
    for entry in result:
        idx = members[entry["bucket"]]
        hyps, refs = [HYPS[i] for i in idx], [REFS[i] for i in idx]
        assert entry["count"] == len(idx)
        assert entry["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
        assert entry["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)


def test_bucket_scores_rejects_misaligned_lengths():
    with pytest.raises(ValueError, match="5 source lengths but 6 hypotheses"):
        bucket_scores(SOURCE_LENGTHS[:5], HYPS, REFS)


def test_signature():
    from importlib.metadata import version

    sig = signature(variant="pascal(layer0:4 heads,sigma=1.0)", parser="gold", seed=0)
    assert sig == f"hf-syntax-mt:{version('hf-syntax-mt')}|variant:pascal(layer0:4 heads,sigma=1.0)|parser:gold|seed:0"
    assert signature() == f"hf-syntax-mt:{version('hf-syntax-mt')}"
    with pytest.raises(ValueError, match="must not contain"):
        signature(parser="a|b")


def test_format_comparison():
    worse = [h.split()[0] for h in HYPS]
    results = {"baseline": corpus_scores(worse, REFS), "pascal": corpus_scores(HYPS, REFS)}
    results["pascal"]["model_signature"] = signature(variant="pascal", seed=0)
    buckets = {
        "baseline": bucket_scores(SOURCE_LENGTHS, worse, REFS),
        "pascal": bucket_scores(SOURCE_LENGTHS, HYPS, REFS),
    }
    table = format_comparison(results, buckets)
    lines = table.splitlines()
    assert "baseline" in lines[0] and "pascal" in lines[0]
    assert lines[0].index("baseline") < lines[0].index("pascal")
    all_row = next(line for line in lines if line.startswith("all"))
    assert all_row.split() == [
        "all",
        "6",
        f"{results['baseline']['bleu']:.2f}",
        f"{results['baseline']['chrf']:.2f}",
        f"{results['pascal']['bleu']:.2f}",
        f"{results['pascal']['chrf']:.2f}",
    ]
    bucket_row = next(line for line in lines if line.startswith("11-20"))
    assert bucket_row.split()[1] == "2"
    assert f"BLEU signature: {results['pascal']['bleu_signature']}" in lines
    assert f"chrF signature: {results['pascal']['chrf_signature']}" in lines
    assert any(line.startswith("model (pascal): hf-syntax-mt:") for line in lines)
    # score rows line up under the header
    widths = {len(line) for line in lines[1 : 3 + len(buckets["pascal"]) + 1]}
    assert len(widths) == 1


def test_format_comparison_without_buckets_and_errors():
    table = format_comparison({"only": corpus_scores(HYPS, REFS)})
    assert table.splitlines()[3].startswith("all")
    with pytest.raises(ValueError, match="results is empty"):
        format_comparison({})
    with pytest.raises(ValueError, match="missing from results"):
        format_comparison({"a": corpus_scores(HYPS, REFS)}, {"b": []})
