"""hf-syntax-mt's contrastive accuracy as an `evaluate` module: of pairs of scored candidates (the correct
translation, e.g. with the right pronoun, and a contrastive one), the fraction whose correct candidate scores
strictly higher (`hf_syntax_mt.evaluation.contrastive.contrastive_accuracy`), the number of `hf-syntax-mt
contrastive`. The scores are a model's log-probabilities of the candidates (`score_contrastive` computes them)."""

import datasets
import evaluate

from hf_syntax_mt.evaluate_modules import CheckedInputs
from hf_syntax_mt.evaluation.contrastive import contrastive_accuracy

_CITATION = """@inproceedings{bawden-etal-2018-evaluating,
    title = "Evaluating Discourse Phenomena in Neural Machine Translation",
    author = "Bawden, Rachel and Sennrich, Rico and Birch, Alexandra and Haddow, Barry",
    booktitle = "Proceedings of the 2018 Conference of the North {A}merican Chapter of the Association for
                 Computational Linguistics: Human Language Technologies, Volume 1 (Long Papers)",
    year = "2018",
    pages = "1304--1313",
}"""

_INPUTS = """
Args:
    correct_scores: the score (e.g. summed log-probability) of each example's correct candidate.
    contrastive_scores: the score of its contrastive candidate.
    tie_tolerance: differences at most this large are ties, which count as wrong (default 1e-6, the CLI's).
Returns:
    accuracy, n, correct, ties.
"""


class HfSyntaxMtContrastive(CheckedInputs, evaluate.Metric):
    """Inputs checked before `evaluate` reads them (`CheckedInputs`)."""

    columns = ("correct_scores", "contrastive_scores")
    kind = "number"

    def _info(self):
        return evaluate.MetricInfo(
            description="Contrastive accuracy: how often the correct candidate outscores the contrastive one.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features(
                {"correct_scores": datasets.Value("float64"), "contrastive_scores": datasets.Value("float64")}
            ),  # fmt: skip
        )

    def _compute(self, correct_scores, contrastive_scores, tie_tolerance=1e-6):
        self.check_computed(correct_scores, contrastive_scores)
        result = contrastive_accuracy(correct_scores, contrastive_scores, tie_tolerance)
        return {k: result[k] for k in ("accuracy", "n", "correct", "ties")}
