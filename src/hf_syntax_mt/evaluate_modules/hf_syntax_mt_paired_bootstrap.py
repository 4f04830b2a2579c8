"""hf-syntax-mt's paired bootstrap significance as an `evaluate` module (`hf_syntax_mt.evaluation.paired_bootstrap`:
sacrebleu's paired bootstrap of BLEU and chrF), the numbers of `hf-syntax-mt evaluate --baseline`."""

import datasets
import evaluate

from hf_syntax_mt.evaluate_modules import CheckedInputs
from hf_syntax_mt.evaluation.metrics import paired_bootstrap

_CITATION = """@inproceedings{koehn-2004-statistical,
    title = "Statistical Significance Tests for Machine Translation Evaluation",
    author = "Koehn, Philipp",
    booktitle = "Proceedings of the 2004 Conference on Empirical Methods in Natural Language Processing",
    year = "2004",
    pages = "388--395",
}"""

_INPUTS = """
Args:
    predictions: the system's translations, one string per segment.
    baseline_predictions: the baseline's translations of the same segments.
    references: one reference string per segment.
    n_samples: bootstrap resamples (default 1000).
    seed: a positive int (default 12345, the CLI's).
Returns:
    bleu, chrf: each with ``baseline`` and ``system`` scores, their bootstrap means (``*_mean``) and 95%
    half-intervals (``*_ci``), ``p_value`` and sacrebleu's ``signature``.
"""


class HfSyntaxMtPairedBootstrap(CheckedInputs, evaluate.Metric):
    """Inputs checked before `evaluate` reads them (`CheckedInputs`)."""

    columns = ("predictions", "baseline_predictions", "references")
    kind = "text"

    def _info(self):
        return evaluate.MetricInfo(
            description="Paired bootstrap resampling of BLEU and chrF (system against baseline), as hf-syntax-mt "
            "reports it.",
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "baseline_predictions": datasets.Value("string"),
                    "references": datasets.Value("string"),
                }
            ),  # fmt: skip
        )

    def _compute(self, predictions, baseline_predictions, references, n_samples=1000, seed=12345):
        self.check_computed(predictions, baseline_predictions, references)
        return paired_bootstrap(baseline_predictions, predictions, references, n_samples=n_samples, seed=seed)
