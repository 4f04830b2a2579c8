"""Checkpoint averaging that cannot silently lose: after training, the average (`CheckpointAverageCallback`) and the
last step's own weights are both scored on the validation set, the better is kept (``--keep_average`` keeps the
average regardless), both scores are logged, and the run file, the model card and the model signature say which
weights were saved and why (`choose_weights`, `describe_choice`)."""

from __future__ import annotations

import logging

from ..generation_defaults import weights_text

logger = logging.getLogger(__name__)


def _validation_scores(predict, dataset, weights: str) -> dict:
    """BLEU and chrF (when the run generates: ``--predict_with_generate``) and the loss of the model as it is now
    (``weights``), decoded as the run decodes (the generation config `configure_generation` wrote)."""
    metrics = predict(dataset, weights).metrics
    return {k: float(metrics[f"validation_{k}"]) for k in ("bleu", "chrf", "loss") if f"validation_{k}" in metrics}


def _rank(scores: dict) -> tuple:
    """Higher is better: BLEU first where there is one, the loss breaks ties (or decides alone)."""
    return (scores["bleu"], -scores.get("loss", 0.0)) if "bleu" in scores else (-scores.get("loss", 0.0),)


def choose_weights(trainer, averager, dataset, keep_average: bool = False, predict=None) -> dict:
    """Score the average (in the model when training ends) and the last step's own weights (``averager.last_state``)
    on ``dataset`` (the validation split; None: nothing to compare on, the average is kept), leave the chosen ones in
    the model, and keep the average in ``averager.average_state``.

    The last step is chosen only where it scores strictly better (BLEU, then the loss); ``keep_average`` keeps the
    average regardless. Returns the record the run file holds: ``saved`` and ``other`` (``"average"`` or
    ``"last_step"``), ``chosen_by`` (``validation-bleu``, ``validation-loss``, ``keep_average``,
    ``no-validation-set``), ``weights`` (each one's `weights_text`), ``validation`` (each one's scores, or None) and
    ``averaged_steps``.

    ``predict(dataset, weights)`` passes over the validation set with the weights in the model (``weights``: their
    `weights_text`) and returns the `PredictionOutput`, metrics prefixed ``validation``; the run gives
    `scoring.Decodes` ``("validation", ...)``, which keeps the decode of the weights chosen here as the run's
    validation score. Default: ``trainer.predict``."""
    if predict is None:

        def predict(data, weights):
            return trainer.predict(data, metric_key_prefix="validation")

    model = trainer.model
    steps, last = list(averager.steps), trainer.state.global_step
    averager.average_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    record = {"averaged_steps": steps, "validation": None,
              "weights": {"average": weights_text(steps, True), "last_step": weights_text([last], False)}}  # fmt: skip
    if dataset is None:
        saved, chosen_by = "average", "no-validation-set"
    else:
        scores = {"average": _validation_scores(predict, dataset, record["weights"]["average"])}
        model.load_state_dict(averager.last_state)
        scores["last_step"] = _validation_scores(predict, dataset, record["weights"]["last_step"])
        record["validation"] = scores
        better = "last_step" if _rank(scores["last_step"]) > _rank(scores["average"]) else "average"
        saved = "average" if keep_average else better
        chosen_by = "keep_average" if keep_average else ("validation-bleu" if "bleu" in scores["average"] else
                                                          "validation-loss")  # fmt: skip
    model.load_state_dict(averager.average_state if saved == "average" else averager.last_state)
    record.update(saved=saved, other="last_step" if saved == "average" else "average", chosen_by=chosen_by)
    text = describe_choice(record)
    if saved == "last_step" or (record["validation"] and _rank(record["validation"]["last_step"]) >
                                _rank(record["validation"]["average"])):  # fmt: skip
        logger.warning(f"checkpoint averaging: {text}")
    else:
        logger.info(f"checkpoint averaging: {text}")
    return record


def _scores_text(scores: dict) -> str:
    return ", ".join(f"{name} {scores[key]:.2f}" if key != "loss" else f"loss {scores[key]:.4f}"
                     for key, name in (("bleu", "BLEU"), ("chrf", "chrF"), ("loss", "loss")) if key in scores)  # fmt: skip


def describe_choice(record: dict) -> str:
    """One paragraph for the model card and the log: which weights were saved and why, with both validation
    scores."""
    steps = ", ".join(str(s) for s in record["averaged_steps"])
    last = record["weights"]["last_step"][len("last(") : -1]
    names = {"average": f"the average of the weights of steps {steps}", "last_step": f"the last step's own weights "
             f"(step {last})"}  # fmt: skip
    saved, other = names[record["saved"]], names[record["other"]]
    validation = record["validation"]
    if validation is None:
        return (f"Saved weights: {saved} (checkpoint averaging); there was no validation set to compare them with "
                f"{other}.")  # fmt: skip
    compared = (f"on the validation set {_scores_text(validation[record['saved']])}, against "
                f"{_scores_text(validation[record['other']])} for {other}")  # fmt: skip
    if record["chosen_by"] == "keep_average":
        return f"Saved weights: {saved}, kept by --keep_average ({compared})."
    return f"Saved weights: {saved}, the better of the two {compared}, which are not saved."
