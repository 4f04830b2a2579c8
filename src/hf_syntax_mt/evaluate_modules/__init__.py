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


__all__ = ["METRICS", "load_metric", "make_compute_metrics", "metric_path", "sacrebleu_score"]
