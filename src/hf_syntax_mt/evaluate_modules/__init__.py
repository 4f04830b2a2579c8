"""The package's metrics as Hugging Face `evaluate` modules, loadable offline from the installed package.

Each metric is a module script beside this file, which `evaluate.load` takes by its path (a local script: nothing is
fetched from the Hub, so it works offline)::

    import evaluate
    from hf_syntax_mt.evaluate_modules import metric_path

    bleu = evaluate.load(metric_path("bleu"))
    bleu.compute(predictions=["the cat sleeps"], references=["the cat sleeps"])  # {"score": 100.0, "signature": ...}

The scripts compute with the package's own functions, so they give the numbers of the CLI:

- ``bleu``, ``chrf``: sacrebleu's corpus BLEU / chrF with their signatures (`evaluation.corpus_scores`; one reference
  per prediction), as `hf-syntax-mt evaluate`;
- ``paired_bootstrap``: paired bootstrap significance of ``predictions`` against ``baseline_predictions``
  (`evaluation.paired_bootstrap`), as `hf-syntax-mt evaluate --baseline`;
- ``contrastive``: contrastive (e.g. pronoun) accuracy of scored correct / contrastive candidates
  (`evaluation.contrastive.contrastive_accuracy`), as `hf-syntax-mt contrastive`;
- ``aer``: alignment error rate of Pharaoh lines against gold sure/possible links (`alignment.aer`), as
  `hf-syntax-mt aer`.

`make_compute_metrics` builds a `Seq2SeqTrainer` ``compute_metrics`` on them (the train script's). `evaluate` is an
optional dependency (``pip install "hf-syntax-mt[evaluate]"``); this module imports it only when a metric is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import UserError

#: the shipped metrics: name -> module script (beside this file)
METRICS = {name: f"hf_syntax_mt_{name}.py" for name in ("bleu", "chrf", "paired_bootstrap", "contrastive", "aer")}


def metric_path(name: str) -> str:
    """The path of a shipped metric's module script, for ``evaluate.load(path)``."""
    if name not in METRICS:
        raise UserError(f"no hf-syntax-mt metric {name!r}; the metrics are {', '.join(METRICS)}")
    return str(Path(__file__).with_name(METRICS[name]))


def load_metric(name: str, **kwargs):
    """``evaluate.load(metric_path(name), **kwargs)``: a shipped metric as an `evaluate.EvaluationModule`."""
    try:
        import evaluate
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "the hf-syntax-mt metrics as evaluate modules need the evaluate package: pip install "
            "'hf-syntax-mt[evaluate]' (or pip install evaluate)",
            name="evaluate",
        ) from e
    return evaluate.load(metric_path(name), **kwargs)


def check_metric_inputs(metric: str, columns: dict, kind: str = "text", allow_empty: bool = False) -> None:
    """The inputs of a shipped metric's ``compute`` (or ``add_batch``), checked before `evaluate` makes a dataset of
    them, where a string would be read as a list of one-character segments. Each column (``name -> value``) must be
    a list (or tuple) of the same, non-zero length (``allow_empty``: a batch may be empty); a ``"text"`` column holds
    strings (``"references"`` kind: ``references`` may hold a list of strings per segment, as sacrebleu's), a
    ``"number"`` column real numbers that are not NaN (a NaN compares as a loss). Raises `UserTypeError` /
    `UserError` naming the metric, the column and the fix."""
    import math
    import numbers

    from ..errors import UserTypeError

    for name, value in columns.items():
        if isinstance(value, (str, bytes)):
            raise UserTypeError(f"{metric}: {name} is a string ({_short(value)}), and a list of segments is expected: "
                                f"pass [{_short(value)}] for one segment")  # fmt: skip
        if not isinstance(value, (list, tuple)) and not hasattr(value, "tolist"):
            raise UserTypeError(f"{metric}: {name} must be a list, got {type(value).__name__}")
        values = value.tolist() if hasattr(value, "tolist") else value
        if not isinstance(values, list):  # a 0-d array
            raise UserTypeError(f"{metric}: {name} must be a list, got a single {type(values).__name__}")
        if not values and not allow_empty:
            raise UserError(f"{metric}: {name} is empty: there is nothing to score; give at least one segment")
        for k, item in enumerate(values):
            if kind == "number":
                if isinstance(item, bool) or not isinstance(item, numbers.Real):
                    raise UserTypeError(f"{metric}: {name}[{k}] is {_short(item)}, not a number")
                if math.isnan(item):
                    raise UserError(f"{metric}: {name}[{k}] is NaN (a score that failed): it would count as a loss; "
                                    "drop that example or fix its score")  # fmt: skip
            elif not isinstance(item, str) and not (
                kind == "references"
                and name == "references"
                and isinstance(item, (list, tuple))
                and all(isinstance(r, str) for r in item)
            ):
                what = "a string or a list of strings" if kind == "references" and name == "references" else "a string"
                raise UserTypeError(f"{metric}: {name}[{k}] is {_short(item)}, not {what}")
    lengths = {name: len(value) for name, value in columns.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{n} {v}" for n, v in lengths.items())
        raise UserError(f"{metric}: the inputs must have one entry per segment, got {shown}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class CheckedInputs:
    """Mixed into each module script's `evaluate.Metric` (before it): ``compute`` and ``add_batch`` check their
    inputs (`check_metric_inputs`) before `evaluate` sees them, and ``_compute`` calls `check_computed` on what it
    gets; ``columns`` names them, ``kind`` their type."""

    columns: tuple[str, ...] = ("predictions", "references")
    kind = "text"

    def _check(self, kwargs: dict, allow_empty: bool = False) -> None:
        given = [name for name in self.columns if kwargs.get(name) is not None]
        if not given:
            if not allow_empty and len(self) == 0:  # compute() with nothing added (empty batches add nothing)
                raise UserError(f"{self.name}: {self.columns[0]} is empty: there is nothing to score; give "
                                f"{', '.join(f'{n}=[...]' for n in self.columns)} or add a batch first")  # fmt: skip
            return  # compute() after add_batch / add: checked there
        missing = [name for name in self.columns if name not in given]
        if missing:
            raise UserError(f"{self.name}: compute needs {', '.join(f'{n}=' for n in missing)} too, one entry per "
                            "segment")  # fmt: skip
        check_metric_inputs(self.name, {name: kwargs[name] for name in self.columns}, self.kind, allow_empty)

    def check_computed(self, *values) -> None:
        """In ``_compute``: what `evaluate` gathered (``add_batch`` included) is not empty."""
        check_metric_inputs(self.name, dict(zip(self.columns, values, strict=True)), self.kind)

    def compute(self, *, predictions=None, references=None, **kwargs):
        """The metric of the inputs, checked first (`check_metric_inputs`)."""
        kwargs.update({k: v for k, v in (("predictions", predictions), ("references", references)) if v is not None})
        self._check(kwargs)
        return super().compute(**kwargs)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of inputs, checked first (an empty batch is fine)."""
        kwargs.update({k: v for k, v in (("predictions", predictions), ("references", references)) if v is not None})
        self._check(kwargs, allow_empty=True)
        if all(kwargs.get(name) is not None and len(kwargs[name]) == 0 for name in self.columns):
            return None  # an empty batch adds nothing (evaluate would fail on it with an IndexError)
        return super().add_batch(**kwargs)


def sacrebleu_score(metric: str, predictions: Sequence[str], references: Sequence) -> dict:
    """What the ``bleu`` and ``chrf`` modules compute: ``{"score", "signature", "count"}`` of sacrebleu's corpus BLEU
    (``metric="bleu"``) or chrF (``"chrf"``). ``references`` holds one string per prediction (`corpus_scores`, the
    CLI's numbers), or one list of reference strings per prediction, as transformers' `run_translation.py` passes them
    (one each: the same numbers; several: sacrebleu's multi-reference score, the same count for every prediction)."""
    from ..evaluation.metrics import corpus_scores

    if metric not in ("bleu", "chrf"):
        raise UserError(f"sacrebleu_score: metric must be 'bleu' or 'chrf', got {metric!r}")
    references = list(references)
    if references and isinstance(references[0], (list, tuple)):
        counts = {len(r) for r in references}
        if counts == {1}:
            references = [r[0] for r in references]
        else:
            if len(counts) > 1 or 0 in counts:
                raise UserError(
                    f"references: every prediction needs the same number of references, got {sorted(counts)}"
                )
            from sacrebleu.metrics import BLEU, CHRF

            scorer = BLEU() if metric == "bleu" else CHRF()
            streams = [list(stream) for stream in zip(*references, strict=True)]  # one list per reference position
            score = scorer.corpus_score(list(predictions), streams).score
            return {"score": float(score), "signature": str(scorer.get_signature()), "count": len(predictions)}
    scores = corpus_scores(predictions, references)
    return {"score": scores[metric], "signature": scores[f"{metric}_signature"], "count": scores["count"]}


def make_compute_metrics(
    tokenizer_or_decode, metrics: Sequence[str] = ("bleu", "chrf"), extra: Callable | None = None
):
    """A ``compute_metrics`` for `Seq2SeqTrainer` (``predict_with_generate=True``): the predictions and the labels
    decoded (label padding -100 dropped, special tokens skipped), scored by the shipped ``metrics`` (each loaded
    with `load_metric`) as ``{name: score}``; ``extra(hypotheses, references)`` may add more numbers (the train
    script adds RIBES).

    Args:
        tokenizer_or_decode: the model's tokenizer, or a function from ids to stripped strings.
        metrics: names of shipped metrics that score hypotheses against references (``bleu``, ``chrf``).
    """
    import numpy as np

    if callable(tokenizer_or_decode) and not hasattr(tokenizer_or_decode, "batch_decode"):
        decode = tokenizer_or_decode
    else:
        tokenizer = tokenizer_or_decode

        def decode(ids) -> list[str]:
            ids = np.where(np.asarray(ids) < 0, tokenizer.pad_token_id, ids)
            return [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    modules = {name: load_metric(name) for name in metrics}

    def compute_metrics(eval_preds) -> dict:
        predictions = (
            eval_preds.predictions[0] if isinstance(eval_preds.predictions, tuple) else eval_preds.predictions
        )
        hypotheses, references = decode(predictions), decode(eval_preds.label_ids)
        scores = {name: module.compute(predictions=hypotheses, references=references)["score"]
                  for name, module in modules.items()}  # fmt: skip
        if extra is not None:
            scores.update(extra(hypotheses, references))
        return scores

    return compute_metrics


__all__ = [
    "METRICS",
    "CheckedInputs",
    "check_metric_inputs",
    "load_metric",
    "make_compute_metrics",
    "metric_path",
    "sacrebleu_score",
]
