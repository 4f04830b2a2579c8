"""Issue 65, item 7: the shipped `evaluate` modules refuse, with the package's user error, a string where a list of
segments is expected (`evaluate` would read it as one-character segments), empty inputs (an empty corpus scored a
"perfect" AER of 0.0), inputs of different lengths and NaN scores (which compared as a silent loss). Hypothesis draws
the boundaries; valid inputs still give the numbers of a direct computation."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_syntax_mt.errors import UserError, UserTypeError
from hf_syntax_mt.evaluate_modules import check_metric_inputs, load_metric
from hf_syntax_mt.evaluation.contrastive import contrastive_accuracy

pytest.importorskip("evaluate", reason="the evaluate modules need the evaluate package: pip install evaluate")

TEXT_METRICS = {"bleu": ("predictions", "references"), "chrf": ("predictions", "references"),
                "aer": ("predictions", "references"),
                "paired_bootstrap": ("predictions", "baseline_predictions", "references")}  # fmt: skip
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WORDS = st.lists(st.sampled_from(["the", "cat", "sleeps", "a", "dog"]), min_size=1, max_size=5).map(" ".join)


@pytest.fixture(scope="module")
def modules():
    return {name: load_metric(name) for name in [*TEXT_METRICS, "contrastive"]}


def test_the_issues_cases(modules):
    with pytest.raises(UserTypeError, match=r"predictions is a string \('the cat'\).*pass \['the cat'\]"):
        modules["bleu"].compute(predictions="the cat", references="the cat")
    with pytest.raises(UserError, match="predictions is empty: there is nothing to score"):
        modules["aer"].compute(predictions=[], references=[])
    with pytest.raises(UserError, match=r"correct_scores\[0\] is NaN"):
        modules["contrastive"].compute(correct_scores=[math.nan, 1.0], contrastive_scores=[0.0, 0.0])
    with pytest.raises(UserError, match="example 0: its correct score is NaN"):
        contrastive_accuracy([math.nan, 1.0], [0.0, 0.0])  # the function the module and the CLI call


@FAST
@given(name=st.sampled_from(sorted(TEXT_METRICS)), text=st.text(min_size=1, max_size=30), column=st.integers(0, 2))
def test_a_string_for_any_column_is_refused_naming_it(modules, name, text, column):
    columns = TEXT_METRICS[name]
    column %= len(columns)
    kwargs = {c: ["0-0"] if name == "aer" else ["the cat"] for c in columns}
    kwargs[columns[column]] = text
    with pytest.raises(UserTypeError, match=f"{columns[column]} is a string"):
        modules[name].compute(**kwargs)


@FAST
@given(name=st.sampled_from(sorted(TEXT_METRICS)), lengths=st.lists(st.integers(0, 4), min_size=3, max_size=3))
def test_empty_or_mismatched_columns_are_refused(modules, name, lengths):
    columns = TEXT_METRICS[name]
    lengths = lengths[: len(columns)]
    if len(set(lengths)) == 1 and lengths[0] > 0:
        lengths[0] += 1  # always a bad case: the drawn lengths differ, or one is 0
    kwargs = {c: ["0-0" if name == "aer" else "the cat"] * n for c, n in zip(columns, lengths, strict=True)}
    message = "is empty" if 0 in lengths else "one entry per segment"
    with pytest.raises(UserError, match=message):
        modules[name].compute(**kwargs)


@FAST
@given(
    scores=st.lists(st.tuples(st.floats(-50, 0), st.floats(-50, 0)), min_size=1, max_size=8),
    nan_at=st.integers(0, 15),
)
def test_contrastive_refuses_a_nan_and_scores_the_rest_as_a_direct_count(modules, scores, nan_at):
    good, bad = [g for g, _ in scores], [b for _, b in scores]
    result = modules["contrastive"].compute(correct_scores=good, contrastive_scores=bad)
    wins = sum(g > b and abs(g - b) > 1e-6 for g, b in scores)  # the definition: strictly better, not a tie
    assert (result["n"], result["correct"]) == (len(scores), wins)
    column, k = ("correct_scores", good) if nan_at % 2 else ("contrastive_scores", bad), nan_at // 2 % len(scores)
    name, values = column
    values[k] = math.nan
    with pytest.raises(UserError, match=rf"{name}\[{k}\] is NaN"):
        modules["contrastive"].compute(correct_scores=good, contrastive_scores=bad)


@FAST
@given(predictions=st.lists(WORDS, min_size=1, max_size=4), data=st.data())
def test_valid_lists_score_as_before(modules, predictions, data):
    """A list of strings (or of one-reference lists) still scores as sacrebleu does directly."""
    from sacrebleu.metrics import BLEU

    references = data.draw(st.lists(WORDS, min_size=len(predictions), max_size=len(predictions)))
    expected = BLEU().corpus_score(predictions, [references]).score
    assert modules["bleu"].compute(predictions=predictions, references=references)["score"] == pytest.approx(expected)
    nested = modules["bleu"].compute(predictions=predictions, references=[[r] for r in references])
    assert nested["score"] == pytest.approx(expected)


@given(
    value=st.one_of(st.integers(), st.none(), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
)
def test_a_non_list_is_a_type_error(value):
    with pytest.raises(UserTypeError, match="predictions must be a list"):
        check_metric_inputs("m", {"predictions": value, "references": ["a"]})


@given(item=st.one_of(st.integers(), st.floats(allow_nan=True), st.none(), st.lists(st.text(max_size=3), max_size=2)))
def test_a_non_string_segment_is_named_by_its_index(item):
    with pytest.raises(UserTypeError, match=r"predictions\[1\] is .*not a string"):
        check_metric_inputs("m", {"predictions": ["a", item], "references": ["a", "b"]})
    if isinstance(item, list):  # a list of references per segment: only where the metric takes several
        if all(isinstance(r, str) for r in item):
            check_metric_inputs("m", {"predictions": ["a", "b"], "references": ["a", item]}, "references")


def test_streamed_batches_are_checked_and_an_empty_stream_is_refused(modules):
    bleu = modules["bleu"]
    with pytest.raises(UserTypeError, match="predictions is a string"):
        bleu.add_batch(predictions="the cat", references=["the cat"])
    line = "the cat sleeps on the red sofa today"
    bleu.add_batch(predictions=[line], references=[line])
    bleu.add_batch(predictions=[], references=[])  # an empty batch is fine while others come
    assert bleu.compute()["score"] == pytest.approx(100.0)
    bleu.add_batch(predictions=[], references=[])
    with pytest.raises(UserError, match="predictions is empty"):
        bleu.compute()  # only empty batches: nothing to score
