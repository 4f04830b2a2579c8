"""hf-syntax-mt's corpus BLEU as an `evaluate` module: sacrebleu's BLEU with its signature, the number
`hf-syntax-mt evaluate` and the train script report (`hf_syntax_mt.evaluation.corpus_scores`)."""

import datasets
import evaluate

from hf_syntax_mt.evaluation.metrics import corpus_scores

_CITATION = """@inproceedings{post-2018-call,
    title = "A Call for Clarity in Reporting {BLEU} Scores",
    author = "Post, Matt",
    booktitle = "Proceedings of the Third Conference on Machine Translation: Research Papers",
    year = "2018",
    pages = "186--191",
}"""

_INPUTS = """
Args:
    predictions: the system's translations, one string per segment.
    references: one reference string per segment, aligned with ``predictions``.
Returns:
    score: corpus BLEU (sacrebleu's defaults: 13a tokenization, exponential smoothing), signature: sacrebleu's
    signature of the settings, count: the number of segments.
"""


class HfSyntaxMtBleu(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus BLEU with sacrebleu's signature, as hf-syntax-mt reports it.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),  # fmt: skip
            reference_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions, references):
        scores = corpus_scores(predictions, references)
        return {"score": scores["bleu"], "signature": scores["bleu_signature"], "count": scores["count"]}
