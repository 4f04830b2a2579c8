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

It runs unchanged under ``accelerate launch --num_processes N --cpu scripts/train.py ...`` or ``torchrun``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from .data import SPLITS, build_parser, load_raw_datasets
from .script_args import (
    SIZE_DEFAULTS,
    DataArguments,
    ModelArguments,
    SyntaxMTTrainingArguments,
    parse_args,
    parse_config_overrides,
)

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------------------------
# Tokenizer and model
# ------------------------------------------------------------------------------------------------------------------
def _has_tokenizer(path: str | None) -> bool:
    if not path or not Path(path).is_dir():
        return False
    names = ("tokenizer.json", "tokenizer_config.json", "source.spm", "vocab.json")
    return any((Path(path) / n).exists() for n in names)


def load_or_train_tokenizer(model_args: ModelArguments, training_args, train_dataset):
    """A tokenizer from ``--tokenizer_name`` / ``--model_name_or_path``, else a joint BPE trained on the training
    source and target by the main process (saved under ``output_dir/tokenizer``; the other processes load it)."""
    from transformers import AutoTokenizer

    from .factory import train_tokenizer

    path = model_args.tokenizer_name or (
        model_args.model_name_or_path if _has_tokenizer(model_args.model_name_or_path) else None
    )
    if path:
        return AutoTokenizer.from_pretrained(path)
    directory = Path(training_args.output_dir) / "tokenizer"
    if training_args.resume_from_checkpoint is not None and (directory / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(directory)  # the resumed run's own vocabulary
    with training_args.main_process_first(desc="training the tokenizer", local=False):
        if training_args.process_index == 0:
            texts = list(train_dataset["source"]) + list(train_dataset["target"])
            tokenizer = train_tokenizer(texts, vocab_size=model_args.vocab_size,
                                        min_frequency=model_args.tokenizer_min_frequency)  # fmt: skip
            tokenizer.save_pretrained(directory)
        else:
            tokenizer = AutoTokenizer.from_pretrained(directory)
    return tokenizer


def build_config_and_model(model_args: ModelArguments, tokenizer, seed: int, source_parser: dict | None):
    """Config and model: a new one from the size flags, or ``--model_name_or_path`` with the syntax flags and
    ``--config_overrides`` applied on top. Every syntax option is validated by `SyntaxMTConfig`."""
    from transformers import MarianConfig, MarianMTModel

    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..data.parser_config import recordable_parser_config
    from ..modeling_syntax_mt import SyntaxMTForConditionalGeneration
    from .factory import DEFAULT_ATTENTION_INIT, build_model, load_pretrained, model_config

    config_class = MarianConfig if model_args.vanilla_marian else SyntaxMTConfig
    overrides = parse_config_overrides(model_args.config_overrides, config_class)
    syntax = {**model_args.syntax_options(), **{k: v for k, v in overrides.items() if k not in ("source_parser",)}}
    if model_args.vanilla_marian and model_args.syntax_options():
        raise ValueError(f"--vanilla_marian takes no syntax option, got {sorted(model_args.syntax_options())}")
    if model_args.attention_init is not None and (model_args.model_name_or_path or model_args.vanilla_marian):
        where = "--model_name_or_path (the checkpoint keeps its weights)" if model_args.model_name_or_path else (
            "--vanilla_marian (MarianMTModel has Marian's own init)")  # fmt: skip
        raise ValueError(f"--attention_init {model_args.attention_init} only applies to a model built from scratch, not "
                         f"with {where}: drop the flag")  # fmt: skip
    if model_args.model_name_or_path:
        if model_args.size_options():
            raise ValueError(f"size flags {sorted(model_args.size_options())} conflict with --model_name_or_path: the "
                             "size comes from the checkpoint (use --config_overrides for other fields)")  # fmt: skip
        if model_args.vanilla_marian:
            config = MarianConfig.from_pretrained(model_args.model_name_or_path, **syntax)
            base = MarianConfig.from_pretrained(model_args.model_name_or_path)
            model = load_pretrained(MarianMTModel, model_args.model_name_or_path, config, base)
        else:
            base = SyntaxMTConfig.from_pretrained(model_args.model_name_or_path)
            values = {**base.to_dict(), **syntax}
            if source_parser is not None and "source_parser" not in overrides:
                values["source_parser"] = source_parser
            elif "source_parser" in overrides:
                values["source_parser"] = recordable_parser_config(overrides["source_parser"])
            for key in ("model_type", "transformers_version", "architectures", "auto_map", "custom_pipelines"):
                values.pop(key, None)
            config = SyntaxMTConfig(**values)
            model = load_pretrained(SyntaxMTForConditionalGeneration, model_args.model_name_or_path, config, base)
    else:
        size = {**SIZE_DEFAULTS, **model_args.size_options()}
        dims = dict(d_model=size["d_model"], ffn_dim=size["ffn_dim"], heads=size["attention_heads"],
                    max_position_embeddings=size["max_position_embeddings"], dropout=size["dropout"],
                    layers=size["encoder_layers"])  # fmt: skip
        config = model_config(tokenizer, marian=True, **dims)  # Marian dims, then the overrides on top
        values = {**config.to_dict(), "decoder_layers": size["decoder_layers"], **syntax}
        for key in ("model_type", "transformers_version", "architectures"):
            values.pop(key, None)
        if not model_args.vanilla_marian:
            # the study's better start unless asked for Marian's ("normal"); --config_overrides wins over the flag
            values.setdefault("attention_init", model_args.attention_init or DEFAULT_ATTENTION_INIT)
            parser_config = source_parser
            if "source_parser" in overrides:
                parser_config = recordable_parser_config(overrides["source_parser"])
            if parser_config is not None:
                values["source_parser"] = parser_config
        config = config_class(**values)
        model = build_model(config, seed=seed)
    if isinstance(model, MarianMTModel) and not isinstance(model, SyntaxMTForConditionalGeneration):
        # Marian's loss is a mean over the micro-batch and ignores `num_items_in_batch`: let the Trainer do the
        # gradient-accumulation scaling itself, and do not multiply the loss by the number of processes.
        model.accepts_loss_kwargs = False
    return config, model


# ------------------------------------------------------------------------------------------------------------------
# The run
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


def _scores_with_ribes(hypotheses: list[str], references: list[str]) -> dict:
    from ..evaluation import corpus_ribes, corpus_scores

    return {**corpus_scores(hypotheses, references), **corpus_ribes(hypotheses, references)}


def check_output_dir(training_args: SyntaxMTTrainingArguments, do_train: bool) -> None:
    """Refuse to train into a non-empty ``--output_dir`` (its model and checkpoints would be silently mixed with
    the new run's) unless ``--overwrite_output_dir`` or ``--resume_from_checkpoint`` is given. With
    ``--overwrite_output_dir`` the old ``checkpoint-*`` folders are removed (by the main process). Refuses
    ``--resume_from_checkpoint true`` when there is no checkpoint to resume (it would train from scratch)."""
    import shutil

    output_dir = Path(training_args.output_dir)
    resume = training_args.resume_from_checkpoint
    if do_train and resume in ("true", "True", True):
        from transformers.trainer_utils import get_last_checkpoint

        if not output_dir.is_dir() or get_last_checkpoint(str(output_dir)) is None:
            raise ValueError(f"--resume_from_checkpoint {resume}: --output_dir {output_dir} holds no checkpoint-* "
                             "folder to resume from. Leave out --resume_from_checkpoint to start a new run (into an "
                             "empty --output_dir), or give the checkpoint folder itself.")  # fmt: skip
    if not do_train or not output_dir.is_dir() or not any(output_dir.iterdir()):
        return
    if resume is not None:
        return
    checkpoints = sorted(p for p in output_dir.glob("checkpoint-*") if p.is_dir())
    if not training_args.overwrite_output_dir:
        found = f" with {len(checkpoints)} checkpoint(s) ({checkpoints[-1].name}, ...)" if checkpoints else ""
        resume = f" or --resume_from_checkpoint {checkpoints[-1]} to continue that run" if checkpoints else ""
        raise ValueError(
            f"--output_dir {output_dir} already exists and is not empty{found}: training would replace its model and "
            f"mix old files with the new run's. Give another --output_dir, --overwrite_output_dir to replace it{resume}."
        )
    if training_args.process_index == 0:
        for path in checkpoints:
            logger.warning("--overwrite_output_dir: removing the old checkpoint %s", path)
            shutil.rmtree(path)


def run(model_args: ModelArguments, data_args: DataArguments, training_args: SyntaxMTTrainingArguments) -> dict:
    """Train, evaluate, predict, save; returns the metrics (on every process; files are written by process 0)."""
    import numpy as np
    from transformers import set_seed

    from .. import __version__
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..data.documents import add_document_context
    from ..data.parser_config import portable_parser_config
    from ..data.preprocess import SyntaxMTPreprocessor, TokenizeOnly
    from ..evaluation import DEFAULT_EDGES, RUN_INFO, bucket_scores, model_signature, plot_bucket_scores
    from ..evaluation.model_card import write_model_card
    from .trainer import build_trainer

    set_seed(training_args.seed)
    output_dir = Path(training_args.output_dir)
    check_output_dir(training_args, do_train=training_args.do_train or not _any_do(training_args))
    raw = load_raw_datasets(data_args)
    tokenizer = load_or_train_tokenizer(model_args, training_args, raw["train"])
    tokenizer.padding_side = "right"  # Marian positions start at 0 on the left

    pre_parsed = {split: "source_parse" in ds.column_names for split, ds in raw.items()}
    parser = build_parser(data_args)
    if data_args.parser == "conllu" and all(pre_parsed.values()):
        parser = None
    # What the saved model's pipeline should parse new text with: a parser that can (spaCy or stanza, with its
    # version). CoNLL-U files parse only their own sentences and their paths are local, so a model trained on them
    # records none unless --parser names the parser that produced them; its pipeline then asks for `parser=`.
    source_parser = portable_parser_config(parser)
    conllu_files = [
        getattr(data_args, f"{s}_source_conllu") for s in SPLITS if getattr(data_args, f"{s}_source_conllu")
    ]
    config, model = build_config_and_model(model_args, tokenizer, training_args.seed, source_parser)
    is_syntax = isinstance(config, SyntaxMTConfig)
    if model_args.freeze_sentence_level:
        if not is_syntax:
            raise ValueError(
                "--freeze_sentence_level needs a SyntaxMT model with --context_sentences, not --vanilla_marian"
            )
        trainable = model.freeze_sentence_level_parameters()  # Section 2.4: train theta_d only
        n = sum(p.numel() for p in model.parameters() if p.requires_grad)
        logger.info("sentence-level parameters frozen: %d trainable tensors (%d parameters)", len(trainable), n)
    context_k = config.context_sentences if is_syntax else 0
    needs_syntax = is_syntax and config.needs_source_parse
    lengths = dict(max_source_length=data_args.max_source_length, max_target_length=data_args.max_target_length)

    from ..methods.registry import supervision_columns

    def make_preprocessor(split: str, **source):
        """Every column the config's options consume (SyntaxMTPreprocessor.for_config), in one map pass."""
        if not is_syntax:
            return SyntaxMTPreprocessor(tokenizer, **source, **lengths)
        if "decoder_dbsa_heads" in supervision_columns(config):  # trained on target trees
            if "target_parse" not in raw[split].column_names:
                raise ValueError(f"decoder_dbsa_heads={config.decoder_dbsa_heads} is trained on target trees: give "
                                 f"--{split}_target_conllu (the {split} targets parsed, CoNLL-U)")  # fmt: skip
            source = {**source, "target_parse_column": "target_parse"}
        return SyntaxMTPreprocessor.for_config(config, tokenizer, **source, **lengths)

    def with_context(split: str, ds):
        """Section 2.2: each sentence's context is the previous k source sentences of its document."""
        if not context_k:
            return ds
        if "doc_id" not in ds.column_names:
            raise ValueError(f"context_sentences={context_k} needs document boundaries: give --{split}_docid_file "
                             "(one document id a line)")  # fmt: skip
        return add_document_context(ds, context_k, num_proc=data_args.preprocessing_num_workers)

    supervised = supervision_columns(config) if is_syntax else []
    will_train = training_args.do_train or not _any_do(training_args)
    has_alignments = "alignment" in raw["train"].column_names
    if "decoder_alignment" in supervised and will_train and not has_alignments:
        raise ValueError(f"guided_alignment_weight={config.guided_alignment_weight} trains on word alignments: give "
                         "--train_alignment_file (Pharaoh, one line per training pair, e.g. from eflomal)")  # fmt: skip
    if has_alignments and will_train and "decoder_alignment" not in supervised:
        raise ValueError(f"--train_alignment_file {data_args.train_alignment_file} is read only by guided alignment, "
                         "which this model does not train: add --config_overrides guided_alignment_weight=0.05 (Garg "
                         "et al.'s weight), or leave out --train_alignment_file.")  # fmt: skip

    # parse + tokenize + align, one datasets.map per split
    processed, kept_raw = {}, {}
    for split, ds in raw.items():
        kept_raw[split] = ds.select_columns(["source", "target"])
        with training_args.main_process_first(desc=f"document context {split}"):
            ds = with_context(split, ds)
        if pre_parsed[split] and data_args.parser in ("auto", "conllu"):
            fn = make_preprocessor(split, source_parse_column="source_parse")
        elif parser is not None:
            fn = make_preprocessor(split, parser=parser)
        elif needs_syntax:
            raise ValueError(f"the model has syntax heads but the {split} split has no parses: give CoNLL-U sources "
                             f"(--{split}_source_conllu) or a parser (--parser spacy --parser_model ...)")  # fmt: skip
        elif is_syntax:
            fn = make_preprocessor(
                split
            )  # nothing needs a parse: for_config gives TokenizeOnly (with the context length)
        else:
            fn = TokenizeOnly(tokenizer, data_args.max_source_length, data_args.max_target_length)
        with training_args.main_process_first(desc=f"preprocessing {split}"):
            processed[split] = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names,
                                      num_proc=data_args.preprocessing_num_workers,
                                      features=fn.output_features(ds.column_names),
                                      desc=f"Parsing and aligning ({split})")  # fmt: skip
        if "decoder_alignment" in supervised and split == "train" and has_alignments:
            processed[split] = _with_alignment_targets(processed[split], ds, tokenizer, data_args)

    model.generation_config.max_length = data_args.max_target_length
    if training_args.generation_num_beams is not None:
        model.generation_config.num_beams = training_args.generation_num_beams
    if training_args.generation_max_length is None:
        training_args.generation_max_length = data_args.max_target_length
    pad = tokenizer.pad_token_id

    def decode(ids) -> list[str]:
        ids = np.where(np.asarray(ids) < 0, pad, ids)
        return [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def compute_metrics(eval_preds) -> dict:
        preds, labels = eval_preds.predictions, eval_preds.label_ids
        preds = preds[0] if isinstance(preds, tuple) else preds
        scores = _scores_with_ribes(decode(preds), decode(labels))
        return {"bleu": scores["bleu"], "chrf": scores["chrf"], "ribes": scores["ribes"]}

    if training_args.include_num_input_tokens_seen == "no":
        training_args.include_num_input_tokens_seen = "non_padding"  # the run file reports the tokens seen
    # SyntaxMTTrainer for vanilla Marian too, with the curve, the time budget and checkpoint averaging
    trainer, curve, averager = build_trainer(
        model, tokenizer, training_args,
        train_dataset=processed["train"] if training_args.do_train or not _any_do(training_args) else None,
        eval_dataset=processed.get("validation"),
        compute_metrics=compute_metrics if training_args.predict_with_generate else None,
    )  # fmt: skip

    metrics: dict[str, Any] = {}
    do_train = training_args.do_train or not _any_do(training_args)
    if do_train:
        resume = training_args.resume_from_checkpoint
        if resume is not None:
            if resume in ("true", "True", True):
                from transformers.trainer_utils import get_last_checkpoint

                resume = get_last_checkpoint(training_args.output_dir)  # there is one: check_output_dir
            for callback in (curve, averager):
                if callback is not None and resume:
                    callback.load_from(resume)  # the curve's minutes and the running average go on
        result = trainer.train(resume_from_checkpoint=resume)
        trainer.save_model()  # model (safetensors), config, pipeline declaration, tokenizer
        train_metrics = dict(
            result.metrics, train_samples=len(processed["train"]), global_step=trainer.state.global_step
        )
        trainer.log_metrics("train", train_metrics)
        trainer.save_metrics("train", train_metrics)
        trainer.save_state()
        metrics.update({f"train_{k}" if not k.startswith("train") else k: v for k, v in train_metrics.items()})
    gen = dict(max_length=training_args.generation_max_length, num_beams=training_args.generation_num_beams or 1)
    scores: dict[str, dict] = {}
    buckets: dict[str, list] = {}
    edges = tuple(data_args.length_bucket_edges or DEFAULT_EDGES)
    for split in ("validation", "test"):
        if split not in processed or not training_args.predict_with_generate:
            continue
        if split == "validation" and not (training_args.do_eval or not _any_do(training_args)):
            continue
        if split == "test" and not (training_args.do_predict or not _any_do(training_args)):
            continue
        prediction = trainer.predict(processed[split], metric_key_prefix=split, **gen)
        _check_order(prediction.label_ids, processed[split]["labels"], split)
        hypotheses = decode(prediction.predictions)
        references = list(kept_raw[split]["target"])
        lengths = [len(s.split()) for s in kept_raw[split]["source"]]
        scores[split] = _scores_with_ribes(hypotheses, references)
        if split == "test" and averager is not None and averager.last_state is not None:
            # the same test set with the last step's own weights: what the averaging changed
            averaged = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
            trainer.model.load_state_dict(averager.last_state)
            last = decode(trainer.predict(processed[split], metric_key_prefix="test_last_step", **gen).predictions)
            trainer.model.load_state_dict(averaged)
            scores["test_last_step"] = _scores_with_ribes(last, references)
            metrics.update({f"test_last_step_{k}": scores["test_last_step"][k] for k in ("bleu", "chrf", "ribes")})
        buckets[split] = bucket_scores(lengths, hypotheses, references, edges)
        metrics.update({f"{split}_{k}": scores[split][k] for k in ("bleu", "chrf", "ribes")})
        if trainer.is_world_process_zero():
            (output_dir / f"{split}_generations.txt").write_text("".join(h + "\n" for h in hypotheses),
                                                                 encoding="utf-8")  # fmt: skip
            trainer.log_metrics(split, prediction.metrics)
            trainer.save_metrics(split, prediction.metrics)

    parser_sig = parser.signature() if parser is not None else None
    if parser_sig is None and conllu_files:  # the parses the model was trained on: file names and hashes
        from ..data.parsers import ConllParser

        parser_sig = ConllParser(conllu_files).signature()
    data_sig = ",".join(f"{s}:{len(ds)}" for s, ds in raw.items())
    model_sig = model_signature(config, parser=(parser_sig or "none").replace("|", "/"), seed=training_args.seed,
                                data=data_sig, steps=trainer.state.global_step)  # fmt: skip
    if trainer.is_world_process_zero():
        output_dir.mkdir(parents=True, exist_ok=True)
        if "test" in buckets:
            plot_bucket_scores({"test": buckets["test"]}, output_dir / "test_length_buckets.png",
                               footer=f"{scores['test']['bleu_signature']}\n{model_sig}")  # fmt: skip
        info = {
            "package": __version__, "model_signature": model_sig, "parser": parser_sig,
            "source_parser": source_parser, "seed": training_args.seed, "world_size": training_args.world_size,
            "global_step": trainer.state.global_step, "scores": scores, "buckets": buckets,
            "num_input_tokens_seen": trainer.state.num_input_tokens_seen, "curve": curve.points,
            "train_runtime": metrics.get("train_runtime"), "train_seconds": round(curve.train_seconds(), 1),
            "averaged_steps": averager.steps if averager is not None else [],
            "model_args": portable_paths(dataclasses.asdict(model_args)),
            "data_args": portable_paths(dataclasses.asdict(data_args)),
        }  # fmt: skip
        (output_dir / RUN_INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
        scrub_local_paths(output_dir, training_args)
        if do_train:
            training_text = (
                f"{trainer.state.global_step} optimizer steps on {training_args.world_size} process(es), per-device "
                f"batch {training_args.per_device_train_batch_size}, gradient accumulation "
                f"{training_args.gradient_accumulation_steps}, learning rate {training_args.learning_rate} "
                f"({getattr(training_args.lr_scheduler_type, 'value', training_args.lr_scheduler_type)}), "
                f"seed {training_args.seed}"
                + (f", wall-clock budget {training_args.time_budget_seconds:.0f} s"
                   if training_args.time_budget_seconds else "")
                + f"; train runtime {metrics.get('train_runtime', 0):.0f} s."
            )  # fmt: skip
            parser_text = data_args.parser_description or "none (the model has no syntax input)"
            if parser_sig:
                inference = (f"At inference the pipeline parses raw text with `{json.dumps(source_parser)}`."
                             if source_parser else "No parser of new text is recorded (the model was trained on "
                             "pre-parsed CoNLL-U): pass one to the pipeline as `parser=`.")  # fmt: skip
                parser_text = (f"{data_args.parser_description + ' ' if data_args.parser_description else ''}"
                               f"Parser signature: `{parser_sig}`. {inference}")  # fmt: skip
            write_model_card(
                output_dir, model=trainer.model, title=training_args.model_card_title or f"{output_dir.name}",
                data=_describe_data(data_args, raw), parser=parser_text, scores=scores,
                limitations=training_args.model_card_limitations or _default_limitations(trainer, training_args),
                training=training_text, model_signature=model_sig,
            )  # fmt: skip
    return metrics


def _with_alignment_targets(processed, raw, tokenizer, data_args):
    """Guided alignment: the Pharaoh links of each pair as `decoder_alignment` (`alignment.targets.AlignmentTargets`)."""
    from ..alignment.targets import AlignmentTargets

    rows = processed.add_column("source", raw["source"]).add_column("target", raw["target"])
    rows = rows.add_column("alignment", raw["alignment"])
    fn = AlignmentTargets(tokenizer, max_source_length=data_args.max_source_length,
                          max_target_length=data_args.max_target_length)  # fmt: skip
    return rows.map(fn, batched=True, with_indices=True, remove_columns=["source", "target", "alignment"],
                    desc="Guided-alignment targets")  # fmt: skip


def _check_order(label_ids, labels: list[list[int]], split: str) -> None:
    """Raise if the predictions did not come back in dataset order (each row's labels must be the dataset's)."""
    import numpy as np

    label_ids = np.asarray(label_ids)
    for k, row in enumerate(labels):
        got = [t for t in label_ids[k].tolist() if t >= 0][: len(row)]
        if got != list(row)[: len(got)] or len(got) != len(row):
            raise RuntimeError(f"{split} predictions are out of dataset order (row {k}): the hypotheses would be scored "
                               "against other sentences' references. Please report this with the training arguments.")  # fmt: skip


def _any_do(training_args) -> bool:
    return bool(training_args.do_train or training_args.do_eval or training_args.do_predict)


def _default_limitations(trainer, training_args) -> str:
    return (
        f"Trained for {trainer.state.global_step} steps only; scores are those of this run on the data above and say "
        "nothing about other domains. Syntax heads depend on the parser: parses of raw text at inference may be "
        "worse than the training parses."
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `scripts/train.py` and `hf-syntax-mt train`."""
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
    )
    metrics = run(model_args, data_args, training_args)
    if training_args.process_index == 0:
        print(json.dumps({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, indent=2))
    return 0


__all__ = [
    "DataArguments",
    "ModelArguments",
    "SyntaxMTTrainingArguments",
    "build_config_and_model",
    "load_raw_datasets",
    "main",
    "parse_args",
    "parse_config_overrides",
    "run",
]
