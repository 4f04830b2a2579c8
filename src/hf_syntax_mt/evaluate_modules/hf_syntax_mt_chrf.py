"""hf-syntax-mt's corpus chrF as an `evaluate` module: sacrebleu's chrF with its signature, the number
`hf-syntax-mt evaluate` and the train script report (`hf_syntax_mt.evaluation.corpus_scores`)."""

import datasets
import evaluate

from hf_syntax_mt.evaluate_modules import CheckedInputs, sacrebleu_score

_CITATION = """@inproceedings{popovic-2015-chrf,
    title = "chr{F}: character n-gram {F}-score for automatic {MT} evaluation",
    author = "Popovi{\\'c}, Maja",
    booktitle = "Proceedings of the Tenth Workshop on Statistical Machine Translation",
    year = "2015",
    pages = "392--395",
}"""

_INPUTS = """
Args:
    predictions: the system's translations, one string per segment.
    references: one reference string per segment, aligned with ``predictions``, or a list of reference strings per
        segment (the same number for each; one each gives the same score).
Returns:
    score: corpus chrF (sacrebleu's defaults: character 6-grams, beta 2), signature: sacrebleu's signature,
    count: the number of segments.
"""


class HfSyntaxMtChrf(CheckedInputs, evaluate.Metric):
    """Inputs checked before `evaluate` reads them (`CheckedInputs`)."""

    kind = "references"

    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus chrF with sacrebleu's signature, as hf-syntax-mt reports it.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=[  # one reference string per prediction, or a list of them (as run_translation.py passes)
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string"), id="references"),
                    }
                ),
            ],
            reference_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions, references):
        self.check_computed(predictions, references)
        return sacrebleu_score("chrf", predictions, references)
