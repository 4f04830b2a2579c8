"""Train a syntax-aware (or vanilla) Marian model from the command line: the logic behind `scripts/train.py` and
`hf-syntax-mt train`, in the style of transformers' `examples/pytorch/translation/run_translation.py`.

Three dataclasses are parsed by `HfArgumentParser`: :class:`ModelArguments` (model size or a local model directory,
every syntax option, and a generic ``--config_overrides key=value,...`` passthrough to `SyntaxMTConfig`),
:class:`DataArguments` (local files or a `datasets` name, parser, lengths) and :class:`SyntaxMTTrainingArguments`
(`Seq2SeqTrainingArguments` plus a wall-clock budget and the model card's texts), all in `script_args`. The run:

    raw data -> [document context: previous k source sentences, with --{split}_docid_file and --context_sentences]
    -> parse (CoNLL-U column or a parser, through datasets.map) -> Seq2SeqTrainer (accelerate-ready)
    -> eval/predict with generate (BLEU, chrF, RIBES) -> save model (safetensors) + tokenizer + model card
    + `hf_syntax_mt_run.json` (the model signature, data, parser and scores)

`run` is that list of steps, each a named function: the ones before training are in
:mod:`hf_syntax_mt.training.prepare` (output directory, tokenizer, parser, config and model, preprocessing), the
training, scoring and writing ones here. It runs unchanged under ``accelerate launch --num_processes N --cpu
scripts/train.py ...`` or ``torchrun``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import build_parser, load_raw_datasets
from .prepare import (
    any_do,
    build_config_and_model,
    check_alignment_file,
    check_model_flags,
    check_output_dir,
    check_requirements,
    choose_parser,
    conllu_files,
    describe_recipe,
    freeze_sentence_level,
    load_or_train_tokenizer,
    plan_config,
    preprocess_splits,
    undo_on_failure,
    will_train,
)
from .script_args import DataArguments, ModelArguments, SyntaxMTTrainingArguments, parse_args, parse_config_overrides

logger = logging.getLogger(__name__)


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


def run(model_args: ModelArguments, data_args: DataArguments, training_args: SyntaxMTTrainingArguments) -> dict:
    """Train, evaluate, predict, save; returns the metrics (on every process; files are written by process 0)."""
    from transformers import set_seed

    set_seed(training_args.seed)
    training = will_train(training_args)
    check_output_dir(training_args, do_train=training)
    check_model_flags(model_args)  # before anything is written
    # every split's parses, parsers, alignment and document files, before any data is read or parsed
    check_requirements(plan_config(model_args), data_args, training)
    with undo_on_failure(training_args):  # a run that fails before training leaves --output_dir as it found it
        raw = load_raw_datasets(data_args)
        tokenizer = load_or_train_tokenizer(model_args, training_args, raw["train"])
        parser, source_parser = choose_parser(data_args, raw)
        target_parser = build_parser(data_args, side="target")
        config, model = build_config_and_model(model_args, tokenizer, training_args.seed, source_parser)
        if recipe := describe_recipe(model_args, config):
            logger.warning(recipe)  # what --recipe set, on every run's log (and in the run file and model card)
        freeze_sentence_level(model, config, model_args)
        has_alignments = "alignment" in raw["train"].column_names
        check_alignment_file(config, data_args, has_alignments=has_alignments, training=training)
        processed, kept_raw = preprocess_splits(raw, config, tokenizer, parser, data_args, training_args,
                                                target_parser=target_parser, training=training)  # fmt: skip
    configure_generation(model, data_args, training_args)
    decode = make_decoder(tokenizer)
    trainer, curve, averager = build_run_trainer(model, tokenizer, processed, decode, training_args, training)
    results = Results()
    if training:
        results.metrics = train(trainer, curve, averager, training_args, len(processed["train"]),
                                validation=processed.get("validation"), results=results)  # fmt: skip
    predict_splits(trainer, averager, processed, kept_raw, decode, data_args, training_args, results)
    sign_run(results, config, parser, data_args, raw, training_args.seed, trainer.state.global_step)
    if trainer.is_world_process_zero():
        write_run_file(trainer, curve, averager, model_args, data_args, training_args, source_parser, results)
        if training:
            write_card(trainer, data_args, training_args, raw, source_parser, results)
    return results.metrics


# ------------------------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------------------------
def configure_generation(model, data_args: DataArguments, training_args) -> None:
    """The run's decoding, written into the model's generation config (saved with it, so `translate`, the pipeline
    and `evaluate --model` use it too): the length limit ``--generation_max_length``, else ``--max_target_length``;
    the beams ``--generation_num_beams``, else the generation config's own (a checkpoint's, else
    `generation_defaults.DEFAULT_NUM_BEAMS`). Validation and test decoding read the same values."""
    from ..generation_defaults import fill_generation_defaults

    fill_generation_defaults(model)
    generation = model.generation_config
    generation.max_length = training_args.generation_max_length or data_args.max_target_length
    if training_args.generation_num_beams is not None:
        generation.num_beams = training_args.generation_num_beams
    training_args.generation_max_length = generation.max_length
    training_args.generation_num_beams = generation.num_beams


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


def build_run_trainer(model, tokenizer, processed: dict, decode, training_args, training: bool):
    """`build_trainer` for the run (`SyntaxMTTrainer` for vanilla Marian too: the curve, the time budget and
    checkpoint averaging); the run file reports the tokens seen, so they are counted."""
    from .trainer import build_trainer

    if training_args.include_num_input_tokens_seen == "no":
        training_args.include_num_input_tokens_seen = "non_padding"
    return build_trainer(
        model, tokenizer, training_args,
        train_dataset=processed["train"] if training else None,
        eval_dataset=processed.get("validation"),
        compute_metrics=make_compute_metrics(decode) if training_args.predict_with_generate else None,
    )  # fmt: skip


def resume_checkpoint(training_args) -> str | None:
    """The checkpoint ``--resume_from_checkpoint`` names: ``true`` is the last ``checkpoint-*`` of ``--output_dir``
    (`check_output_dir` made sure there is one)."""
    resume = training_args.resume_from_checkpoint
    if resume in ("true", "True", True):
        from transformers.trainer_utils import get_last_checkpoint

        return get_last_checkpoint(training_args.output_dir)
    return resume


def train(
    trainer, curve, averager, training_args, n_train: int, validation=None, results: Results | None = None
) -> dict:
    """Train (resumed with the curve's minutes and the running average when ``--resume_from_checkpoint``), choose
    between the checkpoint average and the last step (`choose_weights`), save the model, tokenizer and state;
    returns the ``train_*`` metrics."""
    from ..generation_defaults import weights_text
    from .averaging import choose_weights

    resume = resume_checkpoint(training_args)
    for callback in (curve, averager):
        if callback is not None and resume:
            callback.load_from(resume)  # the curve's minutes and the running average go on
    result = trainer.train(resume_from_checkpoint=resume)
    step = trainer.state.global_step
    averaging = None
    if averager is not None and averager.last_state is not None:
        averaging = choose_weights(trainer, averager, validation, keep_average=training_args.keep_average)
    if results is not None:
        results.averaging = averaging
        averaged = averaging is not None and averaging["saved"] == "average"
        results.weights = weights_text(averager.steps if averaged else [step], averaged)
    trainer.save_model()  # model (safetensors), config, pipeline declaration, tokenizer
    train_metrics = dict(result.metrics, train_samples=n_train, global_step=trainer.state.global_step)
    trainer.log_metrics("train", train_metrics)
    trainer.save_metrics("train", train_metrics)
    trainer.save_state()
    return {f"train_{k}" if not k.startswith("train") else k: v for k, v in train_metrics.items()}


# ------------------------------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------------------------------
def splits_to_score(processed: dict, training_args) -> list[str]:
    """The splits scored with generation: validation with ``--do_eval``, test with ``--do_predict`` (both when no
    ``--do_*`` flag is given), if the split exists and ``--predict_with_generate``."""
    if not training_args.predict_with_generate:
        return []
    wanted = {"validation": training_args.do_eval, "test": training_args.do_predict}
    return [s for s in ("validation", "test") if s in processed and (wanted[s] or not any_do(training_args))]


def predict_splits(trainer, averager, processed, kept_raw, decode, data_args, training_args, results: Results) -> None:
    """Generate and score each split of `splits_to_score` (BLEU, chrF, RIBES, length buckets) into ``results``;
    the test set also with the last step's own weights when checkpoints were averaged. Process 0 writes each
    split's generations and metrics."""
    from ..evaluation import DEFAULT_EDGES, bucket_scores
    from ..generation_defaults import decoding

    gen = dict(max_length=training_args.generation_max_length, num_beams=training_args.generation_num_beams)
    signed = decoding(gen["num_beams"], gen["max_length"], results.weights)
    edges = tuple(data_args.length_bucket_edges or DEFAULT_EDGES)
    for split in splits_to_score(processed, training_args):
        prediction = trainer.predict(processed[split], metric_key_prefix=split, **gen)
        _check_order(prediction.label_ids, processed[split]["labels"], split)
        prediction.metrics[f"{split}_decoding"] = signed  # {split}_results.json and all_results.json name it too
        hypotheses = decode(prediction.predictions)
        references = list(kept_raw[split]["target"])
        results.scores[split] = {**_scores_with_ribes(hypotheses, references), "decoding": signed}
        if split == "test" and results.averaging is not None:
            other = results.averaging["other"]  # the weights not saved: the last step's, or the average
            state = averager.last_state if other == "last_step" else averager.average_state
            name = f"test_{other}"
            results.scores[name] = {**_score_other_weights(trainer, state, processed[split], decode, references, gen),
                                    "decoding": decoding(gen["num_beams"], gen["max_length"],
                                                         results.averaging["weights"][other])}  # fmt: skip
            results.metrics.update({f"{name}_{k}": results.scores[name][k] for k in ("bleu", "chrf", "ribes")})
        lengths = [len(s.split()) for s in kept_raw[split]["source"]]
        results.buckets[split] = bucket_scores(lengths, hypotheses, references, edges)
        results.metrics.update({f"{split}_{k}": results.scores[split][k] for k in ("bleu", "chrf", "ribes")})
        if trainer.is_world_process_zero():
            (Path(training_args.output_dir) / f"{split}_generations.txt").write_text(
                "".join(h + "\n" for h in hypotheses), encoding="utf-8")  # fmt: skip
            trainer.log_metrics(split, prediction.metrics)
            trainer.save_metrics(split, prediction.metrics)


def _score_other_weights(trainer, state: dict, dataset, decode, references: list[str], gen: dict) -> dict:
    """The same test set with the weights that were not saved (the last step's, or the average): what the choice
    changed. The saved weights are put back."""
    saved = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(state)
    other = decode(trainer.predict(dataset, metric_key_prefix="test_other_weights", **gen).predictions)
    trainer.model.load_state_dict(saved)
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


def sign_run(results: Results, config, parser, data_args: DataArguments, raw: dict, seed: int, steps: int) -> None:
    """The parser signature (the parser's, else the CoNLL-U files' names and hashes the model was trained on) and
    the model signature (config, parser, seed, split sizes, steps) into ``results``."""
    from ..evaluation import model_signature

    parser_sig = parser.signature() if parser is not None else None
    if parser_sig is None and conllu_files(data_args):
        from ..data.parsers import ConllParser

        parser_sig = ConllParser(conllu_files(data_args)).signature()
    data_sig = ",".join(f"{s}:{len(ds)}" for s, ds in raw.items())
    results.parser_signature = parser_sig
    weights = {}
    if results.weights is not None:  # which weights were saved, and why (checkpoint averaging)
        weights["weights"] = results.weights
        if results.averaging is not None:
            weights["weights_chosen_by"] = results.averaging["chosen_by"]
    results.model_signature = model_signature(config, parser=(parser_sig or "none").replace("|", "/"), seed=seed,
                                              data=data_sig, steps=steps, **weights)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# Writing: the run file and the model card
# ------------------------------------------------------------------------------------------------------------------
def portable_paths(values: dict) -> dict:
    """`values` with every local path (absolute, or a relative path to an existing file) replaced by its file name:
    the run file and the model card travel with the model, the training machine's paths do not."""

    def portable(v):
        if isinstance(v, list):
            return [portable(x) for x in v]
        if isinstance(v, str) and (os.path.isabs(v) or (os.sep in v and os.path.exists(v))):
            return Path(v).resolve().name
        return v

    return {k: portable(v) for k, v in values.items()}


def scrub_local_paths(output_dir: Path, training_args) -> None:
    """Rewrite what the Trainer saved with local paths in it (`training_args.bin`: output_dir, logging_dir, ...;
    `trainer_state.json`: best_model_checkpoint), in `output_dir` and its checkpoints, with file names instead."""
    import copy

    import torch

    args = copy.copy(training_args)
    fields = {f.name: getattr(training_args, f.name) for f in dataclasses.fields(training_args)}
    for name, value in portable_paths(fields).items():
        if value != fields[name]:
            object.__setattr__(args, name, value)
    for path in output_dir.glob("**/training_args.bin"):
        torch.save(args, path)
    for path in output_dir.glob("**/trainer_state.json"):
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("best_model_checkpoint"):
            state["best_model_checkpoint"] = portable_paths({"p": state["best_model_checkpoint"]})["p"]
            path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_run_file(trainer, curve, averager, model_args, data_args, training_args, source_parser,
                   results: Results) -> None:  # fmt: skip
    """``hf_syntax_mt_run.json`` (signatures, scores, buckets, the curve, the averaged steps, the arguments with
    portable paths), the test set's length-bucket plot, and the Trainer's files scrubbed of local paths."""
    from .. import __version__
    from ..evaluation import RUN_INFO, plot_bucket_scores
    from .callbacks import TimeBudgetCallback

    output_dir = Path(training_args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    budget = next((c for c in trainer.callback_handler.callbacks if isinstance(c, TimeBudgetCallback)), None)
    if "test" in results.buckets:
        plot_bucket_scores({"test": results.buckets["test"]}, output_dir / "test_length_buckets.png",
                           footer=f"{results.scores['test']['bleu_signature']}\n{results.model_signature}")  # fmt: skip
    info = {
        "package": __version__, "model_signature": results.model_signature, "parser": results.parser_signature,
        "source_parser": source_parser, "seed": training_args.seed, "world_size": training_args.world_size,
        "global_step": trainer.state.global_step, "scores": results.scores, "buckets": results.buckets,
        "num_input_tokens_seen": trainer.state.num_input_tokens_seen, "curve": curve.points,
        "train_runtime": results.metrics.get("train_runtime"), "train_seconds": round(curve.train_seconds(), 1),
        "averaged_steps": averager.steps if averager is not None else [],
        "weights": results.weights, "averaging": results.averaging,
        "decoding": {"num_beams": training_args.generation_num_beams,
                     "max_length": training_args.generation_max_length},
        "time_budget": budget.record(trainer.state.max_steps) if budget is not None else None,
        "model_args": portable_paths(dataclasses.asdict(model_args)),
        "data_args": portable_paths(dataclasses.asdict(data_args)),
    }  # fmt: skip
    (output_dir / RUN_INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
    scrub_local_paths(output_dir, training_args)


def write_card(trainer, data_args, training_args, raw, source_parser, results: Results) -> None:
    """The model card (``README.md``): data, parser, method and options, scores with signatures, limitations."""
    from ..evaluation.model_card import write_model_card

    output_dir = Path(training_args.output_dir)
    datasets, eval_datasets = card_datasets(data_args, raw, results.scores)
    write_model_card(
        output_dir, model=trainer.model, title=training_args.model_card_title or f"{output_dir.name}",
        data=_describe_data(data_args, raw), scores=results.scores,
        parser=parser_text(data_args, results.parser_signature, source_parser),
        limitations=training_args.model_card_limitations or _default_limitations(trainer.state.global_step),
        training=training_text(trainer.state.global_step, training_args, results.metrics.get("train_runtime", 0),
                               results.averaging),
        model_signature=results.model_signature, languages=card_languages(data_args), datasets=datasets,
        eval_datasets=eval_datasets, license=training_args.model_card_license,
    )  # fmt: skip


#: `datasets.load_dataset` builders that read local files: a `--dataset_name` of one of these is no Hub dataset
_FILE_BUILDERS = {"arrow", "audiofolder", "csv", "imagefolder", "json", "pandas", "parquet", "sql", "text",
                  "videofolder", "webdataset", "xml"}  # fmt: skip


def card_datasets(data_args: DataArguments, raw: dict, scores: dict) -> tuple[list[str], dict[str, dict]]:
    """The model card's training datasets (the Hub id of ``--dataset_name``; local files have none) and, for each
    scored split of the data, the dataset it was read from (the Hub id and split, or the reference file's name)."""
    name = data_args.dataset_name
    hub = name if name and name not in _FILE_BUILDERS and not os.path.exists(name) else None
    evals = {}
    for split in raw:
        if split == "train" or split not in scores:
            continue  # `test_last_step` / `test_average` scored the weights that were not saved: no EvalResult
        if name:
            shown = hub or Path(name).name
            evals[split] = {"type": shown, "name": f"{shown} ({split})", "config": data_args.dataset_config_name,
                            "split": split}  # fmt: skip
        else:
            file = getattr(data_args, f"{split}_target_file") or getattr(data_args, f"{split}_file")
            evals[split] = {"type": Path(file).name, "name": f"{Path(file).name} ({split})", "split": split}
    return ([hub] if hub else []), evals


def card_languages(data_args: DataArguments) -> list[str]:
    """``--source_lang`` and ``--target_lang`` for the card's `language` field, where they are ISO 639 codes (they
    may also be other keys of a JSONL or `datasets` translation column: those are left out, with a warning)."""
    import re

    codes = []
    for flag, code in (("--source_lang", data_args.source_lang), ("--target_lang", data_args.target_lang)):
        if code and re.fullmatch(r"[a-zA-Z]{2,3}([-_][a-zA-Z0-9]+)*", code):
            codes.append(code)
        elif code:
            logger.warning(f"{flag} {code!r} is not an ISO 639 language code: the model card names no language for it")
    return codes


def training_text(steps: int, training_args, train_runtime: float | None, averaging: dict | None = None) -> str:
    """The model card's training line: steps, processes, batch, accumulation, learning rate, seed, budget, time;
    with checkpoint averaging, which weights were saved and why (`averaging.describe_choice`)."""
    from .averaging import describe_choice

    scheduler = getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)
    budget = training_args.time_budget_seconds
    saved = f" {describe_choice(averaging)}" if averaging is not None else ""
    return (
        f"{steps} optimizer steps on {training_args.world_size} process(es), per-device batch "
        f"{training_args.per_device_train_batch_size}, gradient accumulation "
        f"{training_args.gradient_accumulation_steps}, learning rate {training_args.learning_rate} ({scheduler}), "
        f"seed {training_args.seed}" + (f", wall-clock budget {budget:.0f} s" if budget else "")
        + f"; train runtime {train_runtime or 0:.0f} s." + saved
    )  # fmt: skip


def parser_text(data_args: DataArguments, parser_signature: str | None, source_parser: dict | None) -> str:
    """The model card's parser paragraph: the description given, the parser signature, and how new text is parsed
    (the recorded parser, or `parser=` for a model trained on pre-parsed CoNLL-U)."""
    if not parser_signature:
        return data_args.parser_description or "none (the model has no syntax input)"
    inference = (f"At inference the pipeline parses raw text with `{json.dumps(source_parser)}`." if source_parser
                 else "No parser of new text is recorded (the model was trained on pre-parsed CoNLL-U): pass one to "
                 "the pipeline as `parser=`.")  # fmt: skip
    described = f"{data_args.parser_description} " if data_args.parser_description else ""
    return f"{described}Parser signature: `{parser_signature}`. {inference}"


def _describe_data(data_args: DataArguments, raw: dict) -> str:
    lines = []
    for split, ds in raw.items():
        keys = ("file", "source_conllu", "source_file", "target_file", "docid_file")
        files = [portable_paths({"f": getattr(data_args, f"{split}_{k}")})["f"] for k in keys]
        files = [f for f in files if f] or [f"{data_args.dataset_name}[{split}]"]
        lines.append(f"- {split}: {len(ds):,} pairs from {', '.join(f'`{f}`' for f in files)}")
    pair = f"{data_args.source_lang or 'source'} -> {data_args.target_lang or 'target'}"
    text = f"Direction: {pair}.\n" + "\n".join(lines)
    return f"{data_args.data_description}\n\n{text}" if data_args.data_description else text


def _default_limitations(steps: int) -> str:
    return (
        f"Trained for {steps} steps only; scores are those of this run on the data above and say nothing about other "
        "domains. Syntax heads depend on the parser: parses of raw text at inference may be worse than the training "
        "parses."
    )


def _complete_checkpoint(output_dir: str) -> Path | None:
    """The last ``checkpoint-N`` of ``output_dir`` that was written to the end (its ``trainer_state.json`` and
    weights are there: one being written when the run was stopped is passed over)."""
    directory = Path(output_dir)
    if not directory.is_dir():
        return None
    found = [p for p in directory.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit() and p.is_dir()]
    for checkpoint in sorted(found, key=lambda p: int(p.name.split("-", 1)[1]), reverse=True):
        if (checkpoint / "trainer_state.json").is_file() and any(checkpoint.glob("model.safetensors*")):
            return checkpoint
    return None


def interrupted_message(training_args, argv: list[str], prog: str) -> str:
    """What a stopped run (Ctrl-C) says: the checkpoint it can resume from and the command that resumes it (the
    same flags, ``--resume_from_checkpoint`` that checkpoint), or that none was saved yet."""
    import shlex

    checkpoint = _complete_checkpoint(training_args.output_dir)
    if checkpoint is None:
        save = getattr(training_args.save_strategy, "value", training_args.save_strategy)
        when = f"every {training_args.save_steps} steps" if save == "steps" else f"--save_strategy {save}"
        return (f"interrupted before a checkpoint was saved in {training_args.output_dir} ({when}): there is nothing "
                "to resume; run the command again (with --overwrite_output_dir if the directory is not empty)")  # fmt: skip
    if len(argv) == 1 and argv[0].endswith(".json"):  # the arguments in a JSON file
        return (f"interrupted; the last checkpoint is {checkpoint}: resume the run by adding "
                f'"resume_from_checkpoint": "{checkpoint}" to {argv[0]} and running {prog} {argv[0]} again')  # fmt: skip
    kept, skip = [], False
    for arg in argv:  # the same flags, without a --resume_from_checkpoint given before
        if skip:
            skip = False
        elif arg == "--resume_from_checkpoint" or arg == "--resume-from-checkpoint":
            skip = True
        elif not arg.startswith(("--resume_from_checkpoint=", "--resume-from-checkpoint=")):
            kept.append(arg)
    command = shlex.join([*shlex.split(prog), *kept, "--resume_from_checkpoint", str(checkpoint)])
    return f"interrupted; the last checkpoint is {checkpoint}: resume the run with\n  {command}"


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of `scripts/train.py` and `hf-syntax-mt train` (``prog``: how the resume command starts).
    Stopped with Ctrl-C, it prints the checkpoint it can resume from and the command, and returns 130."""
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    prog = prog or (f"python {sys.argv[0]}" if sys.argv[0].endswith(".py") else "hf-syntax-mt train")
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
    )
    try:
        metrics = run(model_args, data_args, training_args)
    except KeyboardInterrupt:
        if training_args.process_index == 0:
            print(f"error: {interrupted_message(training_args, argv, prog)}", file=sys.stderr)
        return 130
    if training_args.process_index == 0:
        print(json.dumps({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, indent=2))
    return 0


__all__ = [
    "DataArguments",
    "ModelArguments",
    "Results",
    "SyntaxMTTrainingArguments",
    "build_config_and_model",
    "load_raw_datasets",
    "main",
    "parse_args",
    "parse_config_overrides",
    "run",
]
