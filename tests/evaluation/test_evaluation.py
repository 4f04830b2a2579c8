"""Tests of evaluation: scores equal sacrebleu's functional API, buckets, table, signatures."""

import needs
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
    from importlib.metadata import PackageNotFoundError, version

    import hf_syntax_mt

    try:
        installed = version("hf-syntax-mt")
    except PackageNotFoundError:  # run from src/ without installing it (the GPU check): the source tree's version
        installed = hf_syntax_mt.__version__
    sig = signature(variant="pascal(layer0:4 heads,sigma=1.0)", parser="gold", seed=0)
    assert sig == f"hf-syntax-mt:{installed}|variant:pascal(layer0:4 heads,sigma=1.0)|parser:gold|seed:0"
    assert signature() == f"hf-syntax-mt:{installed}"
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


# ---------------------------------------------------------------------------------------------------------------
# RIBES against NLTK, paired bootstrap against a direct computation, bar chart
# ---------------------------------------------------------------------------------------------------------------
RIBES_CASES = [
    # Isozaki et al. (2010) examples (as in NLTK's doctests)
    ("he read the book because he was interested in world history",
     "he was interested in world history because he read the book"),
    ("Bob hit John yesterday", "John hit Bob yesterday"),
    ("the book was read by the boy", "the boy read the book"),
    # repeated words: the n-gram context search decides the alignment
    ("the cat saw the dog and the dog saw the cat", "the dog saw the cat and the cat saw the dog"),
    ("a a b a c a", "a b a a c a a"),
    ("the the the", "the"),
    ("x y z", "a b c"),  # nothing aligned
    ("one", "one"),  # one aligned word: tau undefined -> 0
    ("short", "a much longer reference sentence with short in it"),  # brevity penalty
    ("Ein Mann , der auf einer Bank sitzt .", "Ein Mann sitzt auf einer Bank ."),  # punctuation split by 13a
]  # fmt: skip


def _tok(text):
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()(text).split()


@pytest.mark.parametrize("hyp, ref", RIBES_CASES)
def test_sentence_ribes_equals_nltk(hyp, ref):
    needs.package("nltk")
    from nltk.translate.ribes_score import sentence_ribes as nltk_sentence_ribes
    from nltk.translate.ribes_score import word_rank_alignment as nltk_worder

    from hf_syntax_mt.evaluation import sentence_ribes, word_rank_alignment

    h, r = _tok(hyp), _tok(ref)
    assert word_rank_alignment(r, h) == nltk_worder(r, h)
    expected = nltk_sentence_ribes([r], h)
    assert sentence_ribes(h, r) == pytest.approx(max(expected, 0.0), abs=1e-12)


def test_corpus_ribes_equals_nltk_on_a_corpus():
    needs.package("nltk")
    from nltk.translate.ribes_score import corpus_ribes as nltk_corpus_ribes

    from hf_syntax_mt.evaluation import corpus_ribes

    hyps = HYPS + [h for h, _ in RIBES_CASES]
    refs = REFS + [r for _, r in RIBES_CASES]
    result = corpus_ribes(hyps, refs)
    expected = nltk_corpus_ribes([[_tok(r)] for r in refs], [_tok(h) for h in hyps])
    assert result["ribes"] == pytest.approx(expected, abs=1e-12)
    assert result["count"] == len(hyps)
    assert "alpha:0.25|beta:0.1" in result["ribes_signature"] and "tok:13a" in result["ribes_signature"]
    assert corpus_ribes(REFS, REFS)["ribes"] == pytest.approx(1.0)


def test_ribes_of_an_empty_hypothesis_is_zero_and_bad_input_is_named():
    from hf_syntax_mt.evaluation import corpus_ribes

    assert corpus_ribes(["", "a b"], ["a b", "a b"])["ribes"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_ribes(["a", "b"], ["a"])


def _direct_paired_bootstrap(base, system, refs, n_samples, seed):
    """Moses-style paired bootstrap written out: resample indices, corpus BLEU/chrF of each resample (sacrebleu's
    functional API on the resampled lists), p = (#{|d_i| - mean|d| > |d_obs|} + 1) / (N + 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    idx = rng.choice(len(refs), size=(n_samples, len(refs)), replace=True)
    out = {}
    for key, fn in (("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)):
        observed = abs(fn(system, [refs]).score - fn(base, [refs]).score)
        b = np.array([fn([base[i] for i in row], [[refs[i] for i in row]]).score for row in idx])
        s = np.array([fn([system[i] for i in row], [[refs[i] for i in row]]).score for row in idx])
        d = np.abs(s - b)
        p = (np.sum(d - d.mean() > observed) + 1) / (n_samples + 1)
        out[key] = {"p_value": p, "system_mean": s.mean(), "baseline_mean": b.mean()}
    return out


def test_paired_bootstrap_equals_a_direct_computation():
    from hf_syntax_mt.evaluation import paired_bootstrap

    refs = REFS * 4
    system = HYPS * 4
    base = [h if i % 3 else " ".join(h.split()[::-1]) for i, h in enumerate(system)]  # a worse baseline
    result = paired_bootstrap(base, system, refs, n_samples=200, seed=7)
    expected = _direct_paired_bootstrap(base, system, refs, 200, 7)
    for key in ("bleu", "chrf"):
        assert result[key]["p_value"] == pytest.approx(expected[key]["p_value"], abs=1e-12)
        assert result[key]["system_mean"] == pytest.approx(expected[key]["system_mean"], abs=1e-3)
        assert result[key]["baseline_mean"] == pytest.approx(expected[key]["baseline_mean"], abs=1e-3)
        assert "bs:200" in result[key]["signature"] and "seed:7" in result[key]["signature"]
    assert result["bleu"]["system"] == pytest.approx(sacrebleu.corpus_bleu(system, [refs]).score)
    assert result["bleu"]["p_value"] < 0.05
    # a system against itself is never significant
    same = paired_bootstrap(system, system, refs, n_samples=50, seed=3)
    assert same["bleu"]["p_value"] == pytest.approx(1.0)


def _direct_length_gap(base, system, refs, lengths, short_max, long_min, n_samples, seed):
    """The stratified bootstrap of `length_gain_gap` written out with sacrebleu's functional API: the same draws
    (short group first, then long), each resample scored by `corpus_bleu` on the drawn sentences."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def delta(idx):
        r = [[refs[i] for i in idx]]
        return (sacrebleu.corpus_bleu([system[i] for i in idx], r).score
                - sacrebleu.corpus_bleu([base[i] for i in idx], r).score)  # fmt: skip

    groups = {"short": [i for i, n in enumerate(lengths) if n <= short_max],
              "long": [i for i, n in enumerate(lengths) if n >= long_min]}  # fmt: skip
    draws = {k: np.asarray(g)[rng.integers(0, len(g), (n_samples, len(g)))] for k, g in groups.items()}
    gaps = np.array([delta(lo) - delta(sh) for sh, lo in zip(draws["short"], draws["long"], strict=True)])
    gap = delta(groups["long"]) - delta(groups["short"])
    p = (np.sum(np.abs(gaps - gaps.mean()) >= abs(gap)) + 1) / (n_samples + 1)
    return gap, [np.percentile(gaps, 2.5), np.percentile(gaps, 97.5)], p


def test_length_gain_gap_equals_a_direct_stratified_bootstrap():
    """A system that equals the baseline on short sources and beats it on long ones: a positive gap, every figure
    equal to the bootstrap written out with sacrebleu's public API, and the group deltas equal to corpus BLEU on
    each group."""
    from hf_syntax_mt.evaluation import length_gain_gap

    long_refs = [" ".join(f"w{i}" for i in range(n)) + " ." for n in (32, 35, 40, 45)]
    long_base = [" ".join(r.split()[: len(r.split()) // 2]) for r in long_refs]  # half of each reference
    refs = REFS + long_refs
    system = HYPS + long_refs[:3] + [long_base[3]]
    base = HYPS[:1] + REFS[1:2] + HYPS[2:] + long_base
    lengths = [6, 12, 2, 15, 2, 11, 33, 36, 41, 47]
    out = length_gain_gap(base, system, refs, lengths, short_max=10, long_min=31, n_samples=40, seed=5)
    short = [0, 2, 4]
    assert out["short"]["count"] == 3 and out["long"]["count"] == 4
    assert out["short"]["delta"] == pytest.approx(
        sacrebleu.corpus_bleu([system[i] for i in short], [[refs[i] for i in short]]).score
        - sacrebleu.corpus_bleu([base[i] for i in short], [[refs[i] for i in short]]).score
    )
    assert out["long"]["delta"] == pytest.approx(
        sacrebleu.corpus_bleu(system[6:], [long_refs]).score - sacrebleu.corpus_bleu(long_base, [long_refs]).score
    )
    gap, ci, p = _direct_length_gap(base, system, refs, lengths, 10, 31, 40, 5)
    assert out["gap"] == pytest.approx(gap) and out["gap"] > 20
    assert out["ci"] == pytest.approx(ci) and out["p_value"] == pytest.approx(p)
    # the same outputs: no gap, p 1
    same = length_gain_gap(system, system, refs, lengths, n_samples=10)
    assert same["gap"] == 0 and same["p_value"] == 1.0
    # two seeds that translated alike, with each source sentence one cluster: every figure as for one copy (the
    # statistics of a cluster are twice one sentence's, and BLEU does not change when every count doubles) ...
    keys = [("test", i) for i in range(len(refs))] * 2
    twice = length_gain_gap(base * 2, system * 2, refs * 2, lengths * 2, clusters=keys, n_samples=40, seed=5)
    assert twice["gap"] == pytest.approx(out["gap"]) and twice["ci"] == pytest.approx(out["ci"])
    assert twice["p_value"] == pytest.approx(out["p_value"]) and twice["long"]["count"] == 8
    assert twice["long"]["clusters"] == 4
    # ... while counting each copy as its own sentence makes the interval narrower than it is
    naive = length_gain_gap(base * 2, system * 2, refs * 2, lengths * 2, n_samples=200, seed=5)
    clustered = length_gain_gap(base * 2, system * 2, refs * 2, lengths * 2, clusters=keys, n_samples=200, seed=5)
    assert naive["ci"][1] - naive["ci"][0] < clustered["ci"][1] - clustered["ci"][0]


def test_length_gain_gap_names_what_is_missing():
    from hf_syntax_mt.evaluation import length_gain_gap

    with pytest.raises(ValueError, match="no long sources"):
        length_gain_gap(HYPS, HYPS, REFS, SOURCE_LENGTHS, long_min=50)
    with pytest.raises(ValueError, match="short_max < long_min"):
        length_gain_gap(HYPS, HYPS, REFS, SOURCE_LENGTHS, short_max=31, long_min=31)
    with pytest.raises(ValueError, match="source lengths"):
        length_gain_gap(HYPS, HYPS, REFS, SOURCE_LENGTHS[:-1])
    with pytest.raises(ValueError, match="cluster 'a' has sentences on both sides"):
        length_gain_gap(HYPS, HYPS, REFS, [2, 2, 2, 35, 35, 35], clusters=["a", "a", "b", "a", "c", "c"])


@pytest.mark.parametrize("seed", [0, -1, 1.5])
def test_paired_bootstrap_rejects_unusable_seeds(seed):
    from hf_syntax_mt.evaluation import paired_bootstrap

    with pytest.raises(ValueError, match="seed"):
        paired_bootstrap(HYPS, HYPS, REFS, n_samples=10, seed=seed)


def test_bucket_chart_is_a_png(tmp_path):
    from hf_syntax_mt.evaluation import plot_bucket_scores

    buckets = {"a": bucket_scores(SOURCE_LENGTHS, HYPS, REFS), "b": bucket_scores(SOURCE_LENGTHS, REFS, REFS)}
    path = plot_bucket_scores(buckets, tmp_path / "chart.png", footer="BLEU sig")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_signature_names_the_source_tree_version_where_the_package_is_not_installed(monkeypatch):
    import importlib.metadata

    import hf_syntax_mt
    from hf_syntax_mt.evaluation.signature import signature

    installed = signature(seed=0)
    assert installed.startswith("hf-syntax-mt:") and installed.endswith("|seed:0")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert signature(seed=0) == f"hf-syntax-mt:{hf_syntax_mt.__version__}|seed:0"
