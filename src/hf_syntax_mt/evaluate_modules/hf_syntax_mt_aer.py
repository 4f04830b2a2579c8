"""hf-syntax-mt's alignment error rate as an `evaluate` module: predicted word links (Pharaoh ``i-j`` lines) against
gold sure (``i-j``) and possible (``ipj``) links (Och & Ney 2000; `hf_syntax_mt.alignment.aer`), the numbers of
`hf-syntax-mt aer`."""

import datasets
import evaluate

from hf_syntax_mt.alignment.aer import alignment_error_rate
from hf_syntax_mt.data.readers import parse_pharaoh
from hf_syntax_mt.evaluate_modules import CheckedInputs

_CITATION = """@inproceedings{och-ney-2000-improved,
    title = "Improved Statistical Alignment Models",
    author = "Och, Franz Josef and Ney, Hermann",
    booktitle = "Proceedings of the 38th Annual Meeting of the Association for Computational Linguistics",
    year = "2000",
    pages = "440--447",
}"""

_INPUTS = """
Args:
    predictions: one Pharaoh line of predicted links per sentence pair ("0-0 1-2 ...").
    references: one gold Pharaoh line per pair: sure links "i-j", possible links "ipj".
    predictions_one_indexed, references_one_indexed: the indices start at 1 (default: 0).
Returns:
    aer, precision (against the possible links), recall (against the sure ones), and the link counts.
"""


class HfSyntaxMtAer(CheckedInputs, evaluate.Metric):
    """Inputs checked before `evaluate` reads them (`CheckedInputs`)."""

    kind = "text"

    def _info(self):
        return evaluate.MetricInfo(
            description="Alignment error rate of predicted word links against gold sure and possible links.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),  # fmt: skip
        )

    def _compute(self, predictions, references, predictions_one_indexed=False, references_one_indexed=False):
        self.check_computed(predictions, references)
        predicted = [parse_pharaoh(line, predictions_one_indexed, f"predictions[{k}]")
                     for k, line in enumerate(predictions)]  # fmt: skip
        gold = [parse_pharaoh(line, references_one_indexed, f"references[{k}]") for k, line in enumerate(references)]
        return alignment_error_rate(predicted, gold)
