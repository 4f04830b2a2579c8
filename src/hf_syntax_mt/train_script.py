"""Train a syntax-aware (or vanilla) Marian model from the command line: the logic behind `scripts/train.py` and
`hf-syntax-mt train`, in the style of transformers' `examples/pytorch/translation/run_translation.py`.

Three dataclasses are parsed by `HfArgumentParser`: :class:`ModelArguments` (model size or a local model directory,
every syntax option, and a generic ``--config_overrides key=value,...`` passthrough to `SyntaxMTConfig`),
:class:`DataArguments` (local files or a `datasets` name, parser, lengths) and :class:`SyntaxMTTrainingArguments`
(`Seq2SeqTrainingArguments` plus a wall-clock budget and the model card's texts). The run:

    raw data -> [document context: previous k source sentences, with --{split}_docid_file and --context_sentences]
    -> parse (CoNLL-U column or a parser, through datasets.map) -> Seq2SeqTrainer (accelerate-ready)
    -> eval/predict with generate (BLEU, chrF, RIBES) -> save model (safetensors) + tokenizer + model card
    + `hf_syntax_mt_run.json` (the model signature, data, parser and scores)

It runs unchanged under ``accelerate launch --num_processes N --cpu scripts/train.py ...`` or ``torchrun``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from .train_data import (  # noqa: F401  (the data readers live in train_data; these names stay importable here)
    SPLITS,
    build_parser,
    load_raw_datasets,
    load_split,
    read_jsonl,
    read_tsv,
)

logger = logging.getLogger(__name__)

PARSER_CHOICES = ("auto", "conllu", "spacy", "stanza", "none")

# Defaults of the size flags when no --model_name_or_path is given.
SIZE_DEFAULTS = {
    "d_model": 256,
    "encoder_layers": 3,
    "decoder_layers": 3,
    "attention_heads": 4,
    "ffn_dim": 1024,
    "max_position_embeddings": 256,
    "dropout": 0.1,
}


@dataclass
class ModelArguments:
    """Which model to train: a new one of a given size, or a local Marian / SyntaxMT directory, plus the syntax
    options (flags for today's options; ``--config_overrides`` for any `SyntaxMTConfig` field)."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Local directory of a Marian (opus-mt style) or SyntaxMT model to start from. Without it a "
                  "new model is built from the size flags."},
    )  # fmt: skip
    tokenizer_name: str | None = field(
        default=None,
        metadata={"help": "Local tokenizer directory (default: --model_name_or_path, else a BPE tokenizer trained on "
                  "the training data and saved with the model)."},
    )  # fmt: skip
    vocab_size: int = field(default=8000, metadata={"help": "Vocabulary of a tokenizer trained on the fly."})
    tokenizer_min_frequency: int = field(default=2, metadata={"help": "Minimum pair frequency for BPE merges."})
    vanilla_marian: bool = field(
        default=False,
        metadata={"help": "Train a plain transformers MarianMTModel (the baseline): no syntax option allowed."},
    )
    d_model: int | None = field(default=None, metadata={"help": f"Hidden size (default {SIZE_DEFAULTS['d_model']})."})
    encoder_layers: int | None = field(default=None, metadata={"help": "Encoder layers (default 3)."})
    decoder_layers: int | None = field(default=None, metadata={"help": "Decoder layers (default 3)."})
    attention_heads: int | None = field(default=None, metadata={"help": "Heads per attention layer (default 4)."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Feed-forward size (default 1024)."})
    max_position_embeddings: int | None = field(default=None, metadata={"help": "Maximum positions (default 256)."})
    dropout: float | None = field(default=None, metadata={"help": "Dropout (default 0.1)."})
    encoder_pascal_heads: list[int] | None = field(
        default=None,
        metadata={"help": "PASCAL heads per encoder layer, one number per layer, e.g. `4 0 0`."},
    )
    pascal_sigma: float | None = field(default=None, metadata={"help": "PASCAL Gaussian standard deviation (1.0)."})
    pascal_weighting: str | None = field(
        default=None, metadata={"help": "PASCAL weighting.", "choices": ["gaussian", "parent_only"]}
    )
    parent_ignoring: float | None = field(default=None, metadata={"help": "Parent-ignoring probability q."})
    label_smoothing: float | None = field(
        default=None,
        metadata={"help": "Label smoothing computed in the model (use this, not label_smoothing_factor)."},
    )
    context_sentences: int | None = field(
        default=None,
        metadata={"help": "Document-level context (Zhang et al. 2018): k previous source sentences of the same document "
                  "(needs --{split}_docid_file; 0 = off)."},
    )  # fmt: skip
    freeze_sentence_level: bool = field(
        default=False,
        metadata={"help": "Train only the document-level parameters (the paper's two-step training, Section 2.4): "
                  "start from a sentence-level --model_name_or_path with --context_sentences k."},
    )  # fmt: skip
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Any config field as comma-separated key=value pairs, values in JSON when they parse, e.g. "
                  "'encoder_pascal_heads=[2,0,0],pascal_sigma=0.5,activation_function=gelu'. Options added to "
                  "SyntaxMTConfig later work here without changing this script."},
    )  # fmt: skip

    def syntax_options(self) -> dict[str, Any]:
        names = ("encoder_pascal_heads", "pascal_sigma", "pascal_weighting", "parent_ignoring", "label_smoothing",
                 "context_sentences")  # fmt: skip
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def size_options(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in SIZE_DEFAULTS if getattr(self, n) is not None}


@dataclass
class DataArguments:
    """Where the data comes from, how the source is parsed, and lengths. For each split (train, validation, test)
    give one of: ``--{split}_file`` (TSV or JSONL), ``--{split}_source_file`` + ``--{split}_target_file`` (line
    aligned text), ``--{split}_source_conllu`` + ``--{split}_target_file`` (pre-parsed source); or
    ``--dataset_name`` for every split. ``--{split}_docid_file`` (one document id a line, line aligned with the
    split's rows) gives the document boundaries that document context needs."""

    source_lang: str | None = field(default=None, metadata={"help": "Source language code (JSONL/datasets keys)."})
    target_lang: str | None = field(default=None, metadata={"help": "Target language code."})
    dataset_name: str | None = field(default=None, metadata={"help": "A `datasets.load_dataset` name or path."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration name."})
    train_file: str | None = field(default=None, metadata={"help": "TSV (source<TAB>target) or JSONL training file."})
    validation_file: str | None = field(default=None, metadata={"help": "TSV or JSONL validation file."})
    test_file: str | None = field(default=None, metadata={"help": "TSV or JSONL test file."})
    train_source_file: str | None = field(default=None, metadata={"help": "Source text, one sentence a line."})
    train_target_file: str | None = field(default=None, metadata={"help": "Target text, line aligned."})
    validation_source_file: str | None = None
    validation_target_file: str | None = None
    test_source_file: str | None = None
    test_target_file: str | None = None
    train_source_conllu: str | None = field(
        default=None, metadata={"help": "Pre-parsed source (CoNLL-U, .gz ok), one sentence per target line."}
    )
    validation_source_conllu: str | None = None
    test_source_conllu: str | None = None
    train_target_conllu: str | None = field(
        default=None,
        metadata={"help": "Pre-parsed target (CoNLL-U, .gz ok), line aligned with the split's rows: the target trees "
                  "that decoder DBSA heads and the synchronous loss are trained on. Without --{split}_target_file "
                  "the target text is its `# text`."},
    )  # fmt: skip
    validation_target_conllu: str | None = None
    test_target_conllu: str | None = None
    train_docid_file: str | None = field(
        default=None,
        metadata={"help": "Document ids, one a line, aligned with the split's rows; consecutive equal ids = one "
                  "document (for --context_sentences)."},
    )  # fmt: skip
    validation_docid_file: str | None = None
    test_docid_file: str | None = None
    parser: str = field(
        default="auto",
        metadata={"help": "Source parser: 'auto' (CoNLL-U sources when given, none for a model without syntax "
                  "heads), 'spacy', 'stanza', 'conllu' (--parser_model = CoNLL-U file(s), comma separated), "
                  "'none'.", "choices": list(PARSER_CHOICES)},
    )  # fmt: skip
    parser_model: str | None = field(
        default=None, metadata={"help": "spaCy package, stanza language or CoNLL-U path(s) for --parser."}
    )
    parser_cache_dir: str | None = field(default=None, metadata={"help": "Cache parses on disk (CachedParser)."})
    parser_description: str | None = field(
        default=None, metadata={"help": "Free text for the model card: which parser and model made the parses."}
    )
    data_description: str | None = field(default=None, metadata={"help": "Free text for the model card."})
    max_source_length: int = field(default=128, metadata={"help": "Source truncation, in tokens."})
    max_target_length: int = field(default=128, metadata={"help": "Target truncation, in tokens (and generation)."})
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    max_predict_samples: int | None = None
    preprocessing_num_workers: int | None = None
    length_bucket_edges: list[int] | None = field(
        default=None, metadata={"help": "Source-length bucket upper bounds in words (default 10 20 30 40)."}
    )


@dataclass
class SyntaxMTTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` plus a wall-clock training budget and the model card's free texts."""

    predict_with_generate: bool = field(default=True, metadata={"help": "Generate in eval/predict (BLEU, chrF)."})
    time_budget_seconds: float | None = field(
        default=None, metadata={"help": "Stop training after this many seconds (all processes stop together)."}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={"help": "Token-based batches (fairseq --max-tokens): pairs of similar length, at most this many "
                  "padded tokens per batch and process (hf_syntax_mt.batching); per_device_train_batch_size is then "
                  "unused for training."},
    )  # fmt: skip
    average_checkpoints: int = field(
        default=0,
        metadata={"help": "Average the weights of the last N checkpoints, --average_every steps apart, ending at "
                  "max_steps (in memory), and save and score the average; the test set is also scored with the "
                  "last step's weights (`test_last_step`). 0 = off."},
    )  # fmt: skip
    average_every: int = field(default=100, metadata={"help": "Steps between averaged checkpoints."})
    model_card_title: str | None = None
    model_card_limitations: str | None = None
    # transformers 5 removed `overwrite_output_dir` from TrainingArguments; the script keeps run_translation.py's flag
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train into a non-empty --output_dir (its old checkpoint-* folders are removed first). "
                          "Without it such a directory is refused, unless --resume_from_checkpoint is given."},
    )  # fmt: skip

    def __post_init__(self):
        super().__post_init__()
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ValueError(f"--max_tokens must be positive, got {self.max_tokens}")
        if self.average_checkpoints < 0 or self.average_every < 1:
            raise ValueError(f"--average_checkpoints {self.average_checkpoints} / --average_every {self.average_every}: "
                             "need N >= 0 checkpoints and >= 1 step apart")  # fmt: skip
        if self.average_checkpoints and self.max_steps <= 0:
            raise ValueError("--average_checkpoints needs --max_steps (the averaged steps end there)")


def parse_args(argv: list[str] | None = None):
    """Parse ``argv`` (or a single ``.json`` file of arguments) into the three dataclasses."""
    parser = HfArgumentParser((ModelArguments, DataArguments, SyntaxMTTrainingArguments))
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        return parser.parse_json_file(os.path.abspath(argv[0]))
    return parser.parse_args_into_dataclasses(args=argv)


# ------------------------------------------------------------------------------------------------------------------
# Config overrides
# ------------------------------------------------------------------------------------------------------------------
def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets, braces or quotes."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_config_overrides(text: str | None, config_class=None) -> dict[str, Any]:
    """``"a=1,b=[2,0],c=gelu"`` -> ``{"a": 1, "b": [2, 0], "c": "gelu"}`` (JSON values, else strings).

    With ``config_class``, every key must be one of its fields; an unknown key raises ``ValueError`` naming the
    closest fields.
    """
    if not text:
        return {}
    out = {}
    for part in _split_top_level(text):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--config_overrides entry {part!r} is not key=value (in {text!r})")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value.strip()
    if config_class is not None:
        known = {f.name for f in dataclasses.fields(config_class)}
        for key in out:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=3)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                raise ValueError(f"--config_overrides: {config_class.__name__} has no field {key!r}{hint}")
    return out


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

    from .training import train_tokenizer

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

    from .configuration_syntax_mt import SyntaxMTConfig
    from .data.parser_config import recordable_parser_config
    from .modeling_syntax_mt import SyntaxMTForConditionalGeneration
    from .training import build_model, model_config

    config_class = MarianConfig if model_args.vanilla_marian else SyntaxMTConfig
    overrides = parse_config_overrides(model_args.config_overrides, config_class)
    syntax = {**model_args.syntax_options(), **{k: v for k, v in overrides.items() if k not in ("source_parser",)}}
    if model_args.vanilla_marian and model_args.syntax_options():
        raise ValueError(f"--vanilla_marian takes no syntax option, got {sorted(model_args.syntax_options())}")
    if model_args.model_name_or_path:
        if model_args.size_options():
            raise ValueError(f"size flags {sorted(model_args.size_options())} conflict with --model_name_or_path: the "
                             "size comes from the checkpoint (use --config_overrides for other fields)")  # fmt: skip
        if model_args.vanilla_marian:
            config = MarianConfig.from_pretrained(model_args.model_name_or_path, **syntax)
            model = MarianMTModel.from_pretrained(model_args.model_name_or_path, config=config)
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
            model = SyntaxMTForConditionalGeneration.from_pretrained(model_args.model_name_or_path, config=config)
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
    from .evaluation import corpus_ribes, corpus_scores

    return {**corpus_scores(hypotheses, references), **corpus_ribes(hypotheses, references)}


def check_output_dir(training_args: SyntaxMTTrainingArguments, do_train: bool) -> None:
    """Refuse to train into a non-empty ``--output_dir`` (its model and checkpoints would be silently mixed with
    the new run's) unless ``--overwrite_output_dir`` or ``--resume_from_checkpoint`` is given. With
    ``--overwrite_output_dir`` the old ``checkpoint-*`` folders are removed (by the main process)."""
    import shutil

    output_dir = Path(training_args.output_dir)
    if not do_train or not output_dir.is_dir() or not any(output_dir.iterdir()):
        return
    if training_args.resume_from_checkpoint is not None:
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

    from . import __version__
    from .configuration_syntax_mt import SyntaxMTConfig
    from .data.collator import DataCollatorForSyntaxMT
    from .data.documents import add_document_context
    from .data.parser_config import portable_parser_config
    from .data.preprocess import SyntaxMTPreprocessor, TokenizeOnly
    from .evaluation import DEFAULT_EDGES, RUN_INFO, bucket_scores, model_signature, plot_bucket_scores
    from .model_card import write_model_card
    from .training import CheckpointAverageCallback, CurveCallback, SyntaxMTTrainer, TimeBudgetCallback

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
    conllu_files = [getattr(data_args, f"{s}_source_conllu") for s in SPLITS if getattr(data_args, f"{s}_source_conllu")]
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

    def make_preprocessor(split: str, **source):
        """Every column the config's options consume (SyntaxMTPreprocessor.for_config), in one map pass."""
        if not is_syntax:
            return SyntaxMTPreprocessor(tokenizer, **source, **lengths)
        if config.uses_decoder_dbsa and config.dbsa_loss_weight > 0:  # trained on target trees
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
            fn = make_preprocessor(split)  # nothing needs a parse: for_config gives TokenizeOnly (with the context length)
        else:
            fn = TokenizeOnly(tokenizer, data_args.max_source_length, data_args.max_target_length)
        with training_args.main_process_first(desc=f"preprocessing {split}"):
            processed[split] = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names,
                                      num_proc=data_args.preprocessing_num_workers,
                                      features=fn.output_features(ds.column_names),
                                      desc=f"Parsing and aligning ({split})")  # fmt: skip

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
    curve = CurveCallback()
    callbacks = [curve]
    if training_args.time_budget_seconds is not None:
        callbacks.append(TimeBudgetCallback(training_args.time_budget_seconds))
    averager = None
    if training_args.average_checkpoints:
        averager = CheckpointAverageCallback(training_args.average_checkpoints, training_args.average_every)
        callbacks.append(averager)
    # SyntaxMTTrainer for vanilla Marian too: predictions in dataset order, token batches, each loss term logged
    trainer = SyntaxMTTrainer(
        model=model,
        args=training_args,
        train_dataset=processed["train"] if training_args.do_train or not _any_do(training_args) else None,
        eval_dataset=processed.get("validation"),
        data_collator=DataCollatorForSyntaxMT(tokenizer, model=model),
        processing_class=tokenizer,
        compute_metrics=compute_metrics if training_args.predict_with_generate else None,
        callbacks=callbacks,
    )

    metrics: dict[str, Any] = {}
    do_train = training_args.do_train or not _any_do(training_args)
    if do_train:
        resume = training_args.resume_from_checkpoint
        if resume is not None:
            if resume in ("true", "True", True):
                from transformers.trainer_utils import get_last_checkpoint

                resume = get_last_checkpoint(training_args.output_dir)
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
        from .data.parsers import ConllParser

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
    "read_jsonl",
    "read_tsv",
    "run",
]
