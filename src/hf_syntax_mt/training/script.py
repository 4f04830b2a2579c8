"""Train a syntax-aware (or vanilla) Marian model from the command line: the logic behind `scripts/train.py` and
`hf-syntax-mt train`, in the style of transformers' `examples/pytorch/translation/run_translation.py`.

Three dataclasses are parsed by `HfArgumentParser`: :class:`ModelArguments` (model size or a local model directory,
every syntax option, and a generic ``--config_overrides key=value,...`` passthrough to `SyntaxMTConfig`),
:class:`DataArguments` (local files or a `datasets` name, parser, lengths) and :class:`SyntaxMTTrainingArguments`
(`Seq2SeqTrainingArguments` plus a wall-clock budget and the model card's texts), all in `script_args`. The run:

    raw data -> [the methods' raw data steps, e.g. a document's previous k source sentences (--{split}_docid_file)]
    -> parse (CoNLL-U column or a parser, through datasets.map) -> Seq2SeqTrainer (accelerate-ready)
    -> eval/predict with generate (BLEU, chrF, RIBES) -> save model (safetensors) + tokenizer + model card
    + `hf_syntax_mt_run.json` (the model signature, data, parser and scores)

`run` is that list of steps, each a named function: the ones before training are in
:mod:`hf_syntax_mt.training.prepare` (output directory, tokenizer, parser, config and model, preprocessing), the
training ones here, scoring in :mod:`~hf_syntax_mt.training.scoring` (every decode labelled, timed, batched by length
and made once per split and weights) and the run file and model card in :mod:`~hf_syntax_mt.training.run_outputs`;
their names are importable from here too. It runs unchanged under ``accelerate launch --num_processes N --cpu
scripts/train.py ...`` or ``torchrun``.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from contextvars import ContextVar
from pathlib import Path

from .data import build_parser, load_raw_datasets
from .distill import check_teacher, distill_training_targets
from .prepare import (
    any_do,  # noqa: F401  (importable from here, as before the split)
    build_config_and_model,
    check_flag_columns,
    check_model_flags,
    check_output_dir,
    check_requirements,
    choose_parser,
    conllu_files,  # noqa: F401
    describe_recipe,
    freeze_sentence_level,
    load_or_train_tokenizer,
    parses_read,
    plan_config,
    preprocess_splits,
    undo_on_failure,
    will_train,
)
from .run_outputs import (  # noqa: F401  (importable from here, as before the split)
    _default_limitations,
    _describe_data,
    card_datasets,
    card_languages,
    parser_text,
    portable_paths,
    scrub_local_paths,
    sign_run,
    training_text,
    write_card,
    write_run_file,
)
from .scoring import (  # noqa: F401  (importable from here, as before the split)
    Decodes,
    Results,
    _check_order,
    _scores_with_ribes,
    decode_batch_size,
    make_compute_metrics,
    make_decoder,
    predict_splits,
    splits_to_score,
    time_split,
)
from .script_args import DataArguments, ModelArguments, SyntaxMTTrainingArguments, parse_args, parse_config_overrides

logger = logging.getLogger(__name__)

#: when the current `run` was called (`time.perf_counter`): the run file's ``time.total_seconds`` counts from it
_RUN_STARTED: ContextVar[float | None] = ContextVar("run_started", default=None)


def _clocked(function):
    """``function`` (`run`) with its start time in `_RUN_STARTED` while it runs."""

    @functools.wraps(function)
    def clocked(*args, **kwargs):
        token = _RUN_STARTED.set(time.perf_counter())
        try:
            return function(*args, **kwargs)
        finally:
            _RUN_STARTED.reset(token)

    return clocked


def use_flex_attention(enabled: bool) -> bool:
    """``--flex_attention``: import the opt-in `hf_syntax_mt.flex` (FlexAttention registered in transformers'
    `AttentionInterface`), so that the attentions built after it run their score_mod heads there where it runs
    compiled (CUDA). Returns whether it is on in this process (a user's own import counts)."""
    if enabled:
        import hf_syntax_mt.flex as flex  # the one place the package imports it: the user's flag

        logger.warning(f"--flex_attention: score_mod heads run in FlexAttention where it runs compiled "
                       f"({', '.join(sorted(flex.COMPILED_DEVICES))}); elsewhere they take the eager path")  # fmt: skip
    return "hf_syntax_mt.flex" in sys.modules


@_clocked
def run(model_args: ModelArguments, data_args: DataArguments, training_args: SyntaxMTTrainingArguments) -> dict:
    """Train, evaluate, predict, save; returns the metrics (on every process; files are written by process 0)."""
    from transformers import set_seed

    set_seed(training_args.seed)
    training = will_train(training_args)
    check_output_dir(training_args, do_train=training)
    check_model_flags(model_args)  # before anything is written
    teacher = check_teacher(data_args, training)  # --distill_from: before the requirements name the target trees
    # every split's parses, parsers, alignment and document files, before any data is read or parsed
    check_requirements(plan_config(model_args), data_args, training)
    with undo_on_failure(training_args):  # a run that fails before training leaves --output_dir as it found it
        raw = load_raw_datasets(data_args)
        distillation = distill_training_targets(raw, data_args, training_args, teacher) if teacher else None
        tokenizer = load_or_train_tokenizer(model_args, training_args, raw["train"])
        parser, source_parser = choose_parser(data_args, raw)
        target_parser = build_parser(data_args, side="target")
        # before the attentions are built: each chooses its kernel at construction
        use_flex_attention(training_args.flex_attention)
        config, model = build_config_and_model(model_args, tokenizer, training_args.seed, source_parser)
        recipe = describe_recipe(model_args, config)
        if recipe:
            logger.warning(recipe)  # what --recipe set, on every run's log (and in the run file and model card)
        freeze_sentence_level(model, config, model_args)
        check_flag_columns(config, data_args, raw["train"].column_names, training=training)
        processed, kept_raw = preprocess_splits(raw, config, tokenizer, parser, data_args, training_args,
                                                target_parser=target_parser, training=training)  # fmt: skip
    configure_generation(model, data_args, training_args)
    decode = make_decoder(tokenizer)
    trainer, curve, averager = build_run_trainer(model, tokenizer, processed, decode, training_args, training)
    results = Results(recipe=recipe, target_parser_signature=(target_parser.signature() if target_parser is not None
                                                              and "target" in parses_read(config, training) else None))  # fmt: skip
    results.distillation = distillation
    gen = dict(max_length=training_args.generation_max_length, num_beams=training_args.generation_num_beams)
    decodes = Decodes(trainer, splits_to_score(processed, training_args), gen, training_args.predict_with_generate)
    if training:
        results.metrics = train(trainer, curve, averager, training_args, len(processed["train"]),
                                validation=processed.get("validation"), results=results, decodes=decodes)  # fmt: skip
    predict_splits(trainer, averager, processed, kept_raw, decode, data_args, training_args, results, decodes)
    sign_run(results, config, parser, data_args, raw, training_args.seed, trainer.state.global_step)
    started = _RUN_STARTED.get()
    results.time = time_split(curve, decodes, time.perf_counter() - started if started else None, trained=training)
    logger.info(f"time: training {results.time['training_seconds']:.0f} s, {len(decodes.records)} decode(s) "
                f"{results.time['decoding_seconds']:.0f} s, the run {results.time['total_seconds'] or 0:.0f} s")  # fmt: skip
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


def build_run_trainer(model, tokenizer, processed: dict, decode, training_args, training: bool):
    """`build_trainer` for the run (`SyntaxMTTrainer` for vanilla Marian too: the curve, the time budget and
    checkpoint averaging); the run file reports the tokens seen, so they are counted; decoding batches hold
    `decode_batch_size` sentences (sorted by length, `scoring.Decodes`)."""
    from .trainer import build_trainer

    if training_args.include_num_input_tokens_seen == "no":
        training_args.include_num_input_tokens_seen = "non_padding"
    training_args.per_device_eval_batch_size = decode_batch_size(training_args)
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


def train(trainer, curve, averager, training_args, n_train: int, validation=None, results: Results | None = None,
          decodes: Decodes | None = None) -> dict:  # fmt: skip
    """Train (resumed with the curve's minutes and the running average when ``--resume_from_checkpoint``), choose
    between the checkpoint average and the last step (`choose_weights`, its validation decodes made by ``decodes``
    where given, so the chosen weights' decode is kept for `predict_splits`), save the model, tokenizer and state;
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
        predict = None
        if decodes is not None:
            decodes.plan_averaging(compared=validation is not None)

            def predict(dataset, weights):
                return decodes.predict("validation", dataset, weights)

        averaging = choose_weights(trainer, averager, validation, keep_average=training_args.keep_average,
                                   predict=predict)  # fmt: skip
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
# Stopped runs and the entry point
# ------------------------------------------------------------------------------------------------------------------
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
    "Decodes",
    "ModelArguments",
    "Results",
    "SyntaxMTTrainingArguments",
    "build_config_and_model",
    "load_raw_datasets",
    "main",
    "parse_args",
    "parse_config_overrides",
    "predict_splits",
    "run",
    "write_run_file",
]
