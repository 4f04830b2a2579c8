"""hf-syntax-mt's corpus chrF as an `evaluate` module: sacrebleu's chrF with its signature, the number
`hf-syntax-mt evaluate` and the train script report (`hf_syntax_mt.evaluation.corpus_scores`)."""

import datasets
import evaluate

from hf_syntax_mt.evaluation.metrics import corpus_scores

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
    references: one reference string per segment, aligned with ``predictions``.
Returns:
    score: corpus chrF (sacrebleu's defaults: character 6-grams, beta 2), signature: sacrebleu's signature,
    count: the number of segments.
"""


class HfSyntaxMtChrf(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus chrF with sacrebleu's signature, as hf-syntax-mt reports it.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),  # fmt: skip
            reference_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions, references):
        scores = corpus_scores(predictions, references)
        return {"score": scores["chrf"], "signature": scores["chrf_signature"], "count": scores["count"]}
