"""hf-syntax-mt's corpus BLEU as an `evaluate` module: sacrebleu's BLEU with its signature, the number
`hf-syntax-mt evaluate` and the train script report (`hf_syntax_mt.evaluation.corpus_scores`)."""

import datasets
import evaluate

from hf_syntax_mt.evaluate_modules import CheckedInputs, sacrebleu_score

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
    references: one reference string per segment, aligned with ``predictions``, or a list of reference strings per
        segment (the same number for each; one each gives the same score).
Returns:
    score: corpus BLEU (sacrebleu's defaults: 13a tokenization, exponential smoothing), signature: sacrebleu's
    signature of the settings, count: the number of segments.
"""


class HfSyntaxMtBleu(CheckedInputs, evaluate.Metric):
    """Inputs checked before `evaluate` reads them (`CheckedInputs`)."""

    kind = "references"

    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus BLEU with sacrebleu's signature, as hf-syntax-mt reports it.",
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
        return sacrebleu_score("bleu", predictions, references)
