"""What a run leaves beside its weights: the run signed (`sign_run`), ``hf_syntax_mt_run.json`` (`write_run_file`:
signatures, scores, buckets, the curve, the averaged steps, the time split, the arguments with portable paths), the
model card (`write_card` and its texts), and the Trainer's files scrubbed of the training machine's paths."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

from .distill import distillation_text
from .prepare import conllu_files
from .scoring import Results
from .script_args import DataArguments

logger = logging.getLogger(__name__)


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
    if results.distillation is not None:  # another model: trained on a teacher's translations
        weights["distilled_from"] = results.distillation["teacher"].replace("|", "/")
    results.model_signature = model_signature(config, parser=(parser_sig or "none").replace("|", "/"), seed=seed,
                                              data=data_sig, steps=steps, **weights)  # fmt: skip


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
    """``hf_syntax_mt_run.json`` (signatures, scores, buckets, the curve, the averaged steps, where the time went:
    ``time`` from `scoring.time_split`, the arguments with portable paths), the test set's length-bucket plot, and
    the Trainer's files scrubbed of local paths."""
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
        "time_budget": budget.record(trainer.state.max_steps) if budget is not None else None, "time": results.time,
        "recipe": results.recipe, "target_parser": results.target_parser_signature,
        "distillation": results.distillation,
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
                               results.averaging) + _recipe_text(results),
        model_signature=results.model_signature, languages=card_languages(data_args), datasets=datasets,
        eval_datasets=eval_datasets, license=training_args.model_card_license,
    )  # fmt: skip


def _recipe_text(results: Results) -> str:
    """The model card's sentences on the recipe (`hf-syntax-mt train --recipe`) and the target parser, if any."""
    text = f" Trained with `--recipe`: {results.recipe}." if results.recipe else ""
    if results.target_parser_signature:
        text += f" Target trees (training only) parsed by `{results.target_parser_signature}`."
    return text + distillation_text(results.distillation)


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
