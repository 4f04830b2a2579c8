"""Scoring what a run trained: every pass over a split after training goes through :class:`Decodes` (labelled with
its split, weights and "k of n", timed, batched by source length, and never repeated for the same weights), and
:func:`predict_splits` scores the splits of `splits_to_score` with it (BLEU, chrF, RIBES, length buckets).

Checkpoint averaging decodes the validation set with the average and with the last step (`averaging.choose_weights`);
the decode of the weights it keeps is the run's validation score, and the test set is decoded once with each."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .prepare import any_do

logger = logging.getLogger(__name__)

#: sentences per decoding batch when ``--per_device_eval_batch_size`` is left at its default: the splits are sorted by
#: source length, so a batch holds sentences of similar length and wastes little on padding (on 2 CPU threads, 32
#: sentences x 4 beams decode faster per sentence than transformers' default of 8)
DECODE_BATCH_SIZE = 32


@dataclass
class Results:
    """What a run measured and how it is signed: the metrics it returns, each scored split's scores and length
    buckets, and the parser and model signatures (the run file and the model card are written from it)."""

    metrics: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, dict] = field(default_factory=dict)
    buckets: dict[str, list] = field(default_factory=dict)
    parser_signature: str | None = None
    model_signature: str = ""
    #: the saved weights (`generation_defaults.weights_text`: ``last(300)``, ``average(200+250+300)``), None for a
    #: model that was not trained here
    weights: str | None = None
    #: checkpoint averaging: which weights were saved and why, with both validation scores (`choose_weights`)
    averaging: dict | None = None
    #: where the run's time went (`time_split`): training, each decode, the total; written to the run file
    time: dict | None = None
    #: what ``--recipe`` set (`prepare.describe_recipe`), None without one
    recipe: str | None = None
    #: the signature of the parser of the training targets (``--target_parser``), None without one
    target_parser_signature: str | None = None
    #: ``--distill_from``: the teacher and how its translations were made (`distill.teacher_translations`)
    distillation: dict | None = None


def decode_batch_size(training_args) -> int:
    """The decoding batch: ``--per_device_eval_batch_size`` where it was changed from its default, else
    `DECODE_BATCH_SIZE`."""
    given = training_args.per_device_eval_batch_size
    fields = dataclasses.fields(training_args) if dataclasses.is_dataclass(training_args) else ()
    default = next((f.default for f in fields if f.name == "per_device_eval_batch_size"), None)
    return DECODE_BATCH_SIZE if given == default else given


def splits_to_score(processed: dict, training_args) -> list[str]:
    """The splits scored with generation: validation with ``--do_eval``, test with ``--do_predict`` (both when no
    ``--do_*`` flag is given), if the split exists and ``--predict_with_generate``."""
    if not training_args.predict_with_generate:
        return []
    wanted = {"validation": training_args.do_eval, "test": training_args.do_predict}
    return [s for s in ("validation", "test") if s in processed and (wanted[s] or not any_do(training_args))]


def by_length(dataset) -> list[int]:
    """The rows of ``dataset`` longest source first (ties in dataset order): the order a split is decoded in, so that
    each batch holds sentences of similar length."""
    lengths = [len(ids) for ids in dataset["input_ids"]]
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def _reorder(array, inverse):
    """Rows of ``array`` (or of each array of a tuple) put back in dataset order; None stays None."""
    if array is None:
        return None
    if isinstance(array, tuple):
        return tuple(_reorder(a, inverse) for a in array)
    return array[inverse]


class Decodes:
    """Every pass over a split after training: `predict` decodes ``(split, weights)`` once and hands the same
    prediction back when asked again, labels the progress bar (``decoding validation: average(200+250+300) (1 of
    4)``), decodes the split sorted by source length (the predictions come back in dataset order) and records each
    pass's seconds for the run file (`records`).

    Args:
        trainer: the run's `SyntaxMTTrainer`; its progress callback (`LabelledProgressCallback`) shows the label.
        splits: the splits `predict_splits` scores (`splits_to_score`): how many passes to expect.
        gen: ``max_length`` and ``num_beams`` for `Seq2SeqTrainer.predict`.
        generate: False where the run does not ``--predict_with_generate`` (a pass then computes the loss only).
    """

    def __init__(self, trainer, splits: list[str], gen: dict, generate: bool = True):
        self.trainer, self.splits, self.gen, self.generate = trainer, list(splits), dict(gen), generate
        self.compared = False  # `choose_weights` passes over validation with both the average and the last step
        self.test_twice = False  # checkpoint averaging: the test set is scored with both weights too
        self.records: list[dict] = []
        self._kept: dict[tuple[str, str | None], Any] = {}

    def plan_averaging(self, compared: bool) -> None:
        """Checkpoint averaging happened: validation is passed over with both weights where ``compared``, and the
        test set is scored with both."""
        self.compared, self.test_twice = compared, True

    @property
    def total(self) -> int:
        """The passes the run makes after training (the n of "k of n")."""
        n = len(self.splits) + (self.test_twice and "test" in self.splits)
        return n + (self.compared and (1 if "validation" in self.splits else 2))

    def label(self, split: str, weights: str | None) -> str:
        verb = "decoding" if self.generate else "scoring (loss)"
        total = max(self.total, len(self.records) + 1)  # never "5 of 4", should a caller decode more than planned
        return f"{verb} {split}: {weights or 'the loaded weights'} ({len(self.records) + 1} of {total})"

    def predict(self, split: str, dataset, weights: str | None):
        """The `PredictionOutput` of ``dataset`` (the split ``split``) under ``weights`` (the `weights_text` of what is
        in the model now; None: weights this run did not train), in dataset order, with metrics prefixed ``split``:
        decoded now, or the one decoded before for the same split and weights."""
        import numpy as np

        key = (split, weights)
        if key in self._kept:
            logger.info(f"{split}: the decode of {weights or 'the loaded weights'} is reused, not repeated")
            return self._kept[key]
        label = self.label(split, weights)
        logger.info(f"{label}: {len(dataset)} sentences")
        progress = next((c for c in self.trainer.callback_handler.callbacks if hasattr(c, "decode_label")), None)
        order = by_length(dataset)
        if progress is not None:
            progress.decode_label = label
        start = time.perf_counter()
        try:
            prediction = self.trainer.predict(dataset.select(order), metric_key_prefix=split, **self.gen)
        finally:
            if progress is not None:
                progress.decode_label = None
        seconds = time.perf_counter() - start
        inverse = np.argsort(np.asarray(order, dtype=np.int64), kind="stable")
        prediction = prediction._replace(predictions=_reorder(prediction.predictions, inverse),
                                         label_ids=_reorder(prediction.label_ids, inverse))  # fmt: skip
        self.records.append({"split": split, "weights": weights, "sentences": len(dataset),
                             "generate": self.generate, "seconds": round(seconds, 2)})  # fmt: skip
        logger.info(f"{label}: {seconds:.1f} s")
        self._kept[key] = prediction
        return prediction


def time_split(curve, decodes: Decodes | None, total_seconds: float | None, trained: bool) -> dict:
    """The run file's ``time``: training seconds (evaluation during training left out, as in the curve), the seconds
    of evaluation during training (``--eval_strategy``), each decode after training (split, weights, sentences,
    seconds), all decoding together, and the whole run (`run` from its call to the run file)."""
    records = list(decodes.records) if decodes is not None else []
    return {
        "training_seconds": round(curve.train_seconds(), 1) if trained else 0.0,
        "evaluation_during_training_seconds": round(curve.eval_seconds, 1) if trained else 0.0,
        "decoding_seconds": round(sum(r["seconds"] for r in records), 1), "decodes": records,
        "total_seconds": round(total_seconds, 1) if total_seconds is not None else None,
    }  # fmt: skip


def make_decoder(tokenizer):
    """ids (labels or predictions, -100 padding) -> stripped strings, special tokens dropped."""
    import numpy as np

    pad = tokenizer.pad_token_id

    def decode(ids) -> list[str]:
        ids = np.where(np.asarray(ids) < 0, pad, ids)
        return [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    return decode


def make_compute_metrics(decode):
    """The Trainer's ``compute_metrics``: BLEU, chrF and RIBES of the decoded predictions against the labels; BLEU and
    chrF by the package's `evaluate` modules (`hf_syntax_mt.evaluate_modules.make_compute_metrics`) where the
    optional `evaluate` package is installed, else by the same functions directly (the same numbers)."""

    def ribes(hypotheses, references) -> dict:
        from ..evaluation import corpus_ribes

        return {"ribes": corpus_ribes(hypotheses, references)["ribes"]}

    try:
        from ..evaluate_modules import make_compute_metrics as built_on_modules

        return built_on_modules(decode, extra=ribes)
    except ModuleNotFoundError as error:
        if error.name != "evaluate":
            raise

    def compute_metrics(eval_preds) -> dict:
        preds, labels = eval_preds.predictions, eval_preds.label_ids
        preds = preds[0] if isinstance(preds, tuple) else preds
        scores = _scores_with_ribes(decode(preds), decode(labels))
        return {"bleu": scores["bleu"], "chrf": scores["chrf"], "ribes": scores["ribes"]}

    return compute_metrics


def predict_splits(trainer, averager, processed, kept_raw, decode, data_args, training_args, results: Results,
                   decodes: Decodes | None = None) -> None:  # fmt: skip
    """Generate and score each split of `splits_to_score` (BLEU, chrF, RIBES, length buckets) into ``results``;
    the test set also with the weights not saved when checkpoints were averaged. Every decode goes through
    ``decodes`` (one is made when None), so the validation decode of the saved weights that `choose_weights` made is
    reused. Process 0 writes each split's generations and metrics."""
    from ..evaluation import DEFAULT_EDGES, bucket_scores
    from ..generation_defaults import decoding

    gen = dict(max_length=training_args.generation_max_length, num_beams=training_args.generation_num_beams)
    if decodes is None:
        decodes = Decodes(trainer, splits_to_score(processed, training_args), gen)
    signed = decoding(gen["num_beams"], gen["max_length"], results.weights)
    edges = tuple(data_args.length_bucket_edges or DEFAULT_EDGES)
    for split in splits_to_score(processed, training_args):
        prediction = decodes.predict(split, processed[split], results.weights)
        _check_order(prediction.label_ids, processed[split]["labels"], split)
        prediction.metrics[f"{split}_decoding"] = signed  # {split}_results.json and all_results.json name it too
        hypotheses = decode(prediction.predictions)
        references = list(kept_raw[split]["target"])
        results.scores[split] = {**_scores_with_ribes(hypotheses, references), "decoding": signed}
        if split == "test" and results.averaging is not None:
            other = results.averaging["other"]  # the weights not saved: the last step's, or the average
            state = averager.last_state if other == "last_step" else averager.average_state
            weights = results.averaging["weights"][other]
            name = f"test_{other}"
            results.scores[name] = {**_score_other_weights(decodes, state, processed[split], decode, references,
                                                           weights),
                                    "decoding": decoding(gen["num_beams"], gen["max_length"], weights)}  # fmt: skip
            results.metrics.update({f"{name}_{k}": results.scores[name][k] for k in ("bleu", "chrf", "ribes")})
        lengths = [len(s.split()) for s in kept_raw[split]["source"]]
        results.buckets[split] = bucket_scores(lengths, hypotheses, references, edges)
        results.metrics.update({f"{split}_{k}": results.scores[split][k] for k in ("bleu", "chrf", "ribes")})
        if trainer.is_world_process_zero():
            (Path(training_args.output_dir) / f"{split}_generations.txt").write_text(
                "".join(h + "\n" for h in hypotheses), encoding="utf-8")  # fmt: skip
            trainer.log_metrics(split, prediction.metrics)
            trainer.save_metrics(split, prediction.metrics)


def _score_other_weights(decodes: Decodes, state: dict, dataset, decode, references: list[str], weights: str) -> dict:
    """The same test set with the weights that were not saved (the last step's, or the average: ``weights`` names
    them): what the choice changed. The saved weights are put back."""
    model = decodes.trainer.model
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    try:
        other = decode(decodes.predict("test", dataset, weights).predictions)
    finally:
        model.load_state_dict(saved)
    return _scores_with_ribes(other, references)


def _scores_with_ribes(hypotheses: list[str], references: list[str]) -> dict:
    from ..evaluation import corpus_ribes, corpus_scores

    return {**corpus_scores(hypotheses, references), **corpus_ribes(hypotheses, references)}


def _check_order(label_ids, labels: list[list[int]], split: str) -> None:
    """Raise if the predictions did not come back in dataset order (each row's labels must be the dataset's)."""
    import numpy as np

    label_ids = np.asarray(label_ids)
    for k, row in enumerate(labels):
        got = [t for t in label_ids[k].tolist() if t >= 0][: len(row)]
        if got != list(row)[: len(got)] or len(got) != len(row):
            raise RuntimeError(f"{split} predictions are out of dataset order (row {k}): the hypotheses would be scored "
                               "against other sentences' references. Please report this with the training arguments.")  # fmt: skip
