"""The arguments of `scripts/train.py` / `hf-syntax-mt train`, parsed by `HfArgumentParser`: :class:`ModelArguments`
(model size or a local model directory, every syntax option, and a generic ``--config_overrides key=value,...``
passthrough to `SyntaxMTConfig`), :class:`DataArguments` (local files or a `datasets` name, parser, lengths) and
:class:`SyntaxMTTrainingArguments` (`Seq2SeqTrainingArguments` plus a wall-clock budget and the model card's texts).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from ..errors import UserError
from ..recipes import ABOUT, RECIPES

logger = logging.getLogger(__name__)

# keys of a saved config that are not options: never passed back to a config class
SAVED_ONLY = ("model_type", "transformers_version", "architectures", "auto_map", "custom_pipelines")

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


#: the range of every numeric flag of the train script's own arguments (and of the `TrainingArguments` flags where
#: a value past the bound can only exhaust memory or silently mean something else): (minimum, maximum); read by
#: `check_ranges` and by the coverage test (a new numeric flag without a range fails it)
RANGES: dict[str, tuple[float, float]] = {
    # ModelArguments
    "vocab_size": (1, 1_000_000), "tokenizer_min_frequency": (1, 1_000_000), "d_model": (1, 16384),
    "encoder_layers": (1, 128), "decoder_layers": (1, 128), "attention_heads": (1, 1024), "ffn_dim": (1, 131072),
    "max_position_embeddings": (2, 1_048_576),
    # DataArguments
    "max_source_length": (2, 1_048_576), "max_target_length": (2, 1_048_576), "max_train_samples": (1, 10**12),
    "max_eval_samples": (1, 10**12), "max_predict_samples": (1, 10**12), "preprocessing_num_workers": (1, 1024),
    "distill_num_beams": (1, 128), "distill_max_length": (1, 1_048_576), "distill_batch_size": (1, 4096),
    # SyntaxMTTrainingArguments' own
    "max_tokens": (1, 10_000_000), "average_checkpoints": (0, 1000), "average_every": (1, 10**9),
    # TrainingArguments' that matter here
    "per_device_train_batch_size": (1, 4096), "per_device_eval_batch_size": (1, 4096),
    "gradient_accumulation_steps": (1, 1_000_000), "generation_num_beams": (1, 128),
    "generation_max_length": (1, 1_048_576),
}  # fmt: skip


#: the least value of each numeric flag (`train_help` keeps them to check a command line before transformers is
#: imported)
MINIMUMS = {name: low for name, (low, _) in RANGES.items()}


def check_ranges(arguments, names=None) -> None:
    """Each given numeric flag (``None``: not given) inside its `RANGES` entry, else a `UserError` naming the flag,
    the range and the value."""
    for name in names if names is not None else [f.name for f in dataclasses.fields(arguments)]:
        if name not in RANGES or getattr(arguments, name, None) is None:
            continue
        value, (minimum, maximum) = getattr(arguments, name), RANGES[name]
        if value < minimum:
            raise UserError(f"--{name} must be at least {minimum}, got {value}")
        if value > maximum:
            raise UserError(f"--{name} must be at most {maximum:,} (more can only exhaust memory), got {value}")


@dataclass
class BaseModelArguments:
    """Which model to train: a new one of a given size, or a local Marian / SyntaxMT directory, a method recipe, and
    the options of the spine; `model_arguments_class` adds a flag for every option a registered method declares."""

    recipe: str | None = field(
        default=None,
        metadata={"help": "A method recipe, the studies' settings of each method adapted to the model's layers and "
                  "heads (hf_syntax_mt.recipes): " + "; ".join(f"`{k}`: {v}" for k, v in ABOUT.items())
                  + ". Method flags given on the command line override what it sets, --config_overrides overrides "
                  "both.", "choices": list(RECIPES)},
    )  # fmt: skip

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
    tokenizer_layout: str = field(
        default="package",
        metadata={"help": "The layout of a tokenizer trained on the fly: `package` (a BPE tokenizer.json, <pad> = 0 = "
                  "the decoder start; this package's exports serve it) or `opus-mt` (Helsinki-NLP's: a SentencePiece "
                  "source.spm/target.spm + vocab.json beside the tokenizer.json, </s> = 0, <unk> = 1, <pad> last = the "
                  "decoder start with a zero embedding row kept zero), whose Marian export CTranslate2's own "
                  "ct2-transformers-converter and MarianTokenizer take unchanged (docs/deploying.md).",
                  "choices": ["package", "opus-mt"]},
    )  # fmt: skip
    vanilla_marian: bool = field(
        default=False,
        metadata={"help": "Train a plain transformers MarianMTModel (the baseline): no syntax option allowed."},
    )
    attention_init: str | None = field(
        default=None,
        metadata={"help": "Init of the attention projections of a model built from scratch: `xavier` (default: "
                  "fairseq's Xavier q/k/v init, +1.1 BLEU in the Multi30k study) or `normal` (Marian's N(0, init_std)). "
                  "Not with --model_name_or_path (a checkpoint keeps its weights) or --vanilla_marian (Marian's own).",
                  "choices": ["xavier", "normal"]},
    )  # fmt: skip
    d_model: int | None = field(default=None, metadata={"help": f"Hidden size (default {SIZE_DEFAULTS['d_model']})."})
    encoder_layers: int | None = field(default=None, metadata={"help": "Encoder layers (default 3)."})
    decoder_layers: int | None = field(default=None, metadata={"help": "Decoder layers (default 3)."})
    attention_heads: int | None = field(default=None, metadata={"help": "Heads per attention layer (default 4)."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Feed-forward size (default 1024)."})
    max_position_embeddings: int | None = field(default=None, metadata={"help": "Maximum positions (default 256)."})
    dropout: float | None = field(default=None, metadata={"help": "Dropout (default 0.1)."})
    label_smoothing: float | None = field(
        default=None,
        metadata={"help": "Label smoothing computed in the model (use this, not label_smoothing_factor)."},
    )
    freeze_sentence_level: bool = field(
        default=False,
        metadata={"help": "Train only the document-level parameters (the paper's two-step training, Section 2.4): "
                  "start from a sentence-level --model_name_or_path with the document flag of the recipe or the "
                  "method (the number of previous sentences read; listed below with the methods' flags)."},
    )  # fmt: skip
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Any config field as comma-separated key=value pairs, values in JSON when they parse, e.g. "
                  "'dropout=0.3,activation_function=gelu,scale_embedding=true'. Options added to "
                  "SyntaxMTConfig later work here without changing this script."},
    )  # fmt: skip

    #: flag name -> (method name, the option's value is JSON text, a `SyntaxMTConfig` field): the method flags
    #: `model_arguments_class` added
    method_flags: ClassVar[dict[str, tuple[str, bool, bool]]] = {}

    def __post_init__(self):
        check_ranges(self)

    def method_options(self) -> dict[str, Any]:
        """The method flags given (not None), as config values: a built-in method's as `SyntaxMTConfig` fields, a
        method registered outside the package under ``method_options`` (``{"name": {...}}``)."""
        out: dict[str, Any] = {}
        for flag, (method, is_json, builtin) in self.method_flags.items():
            value = getattr(self, flag, None)
            if value is None:
                continue
            if is_json:
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as e:
                    raise UserError(f"--{flag} {value!r} is not JSON ({e.msg}); write lists as [1,0], objects as "
                                    '{"a": 1}, strings in double quotes') from None  # fmt: skip
            if builtin:
                out[flag] = value
            else:
                out.setdefault("method_options", {}).setdefault(method, {})[flag] = value
        return out

    def syntax_options(self) -> dict[str, Any]:
        """The method flags given and ``--label_smoothing``: what the command line sets on the config, over the
        recipe."""
        spine = {"label_smoothing": self.label_smoothing} if self.label_smoothing is not None else {}
        return {**self.method_options(), **spine}

    def size_options(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in SIZE_DEFAULTS if getattr(self, n) is not None}


def _flag_type(option_type: Any) -> tuple[Any, bool]:
    """A method `Option`'s type as a flag's (a type `HfArgumentParser` parses, whether the value is JSON text): numbers,
    booleans, strings and lists of them are typed flags; anything else (a dict, a nested list) is JSON text."""
    text = option_type if isinstance(option_type, str) else getattr(option_type, "__name__", str(option_type))
    parts = {p.strip() for p in text.split("|")} - {"None", "NoneType"}
    simple = {"int": int, "float": float, "bool": bool, "str": str, "list[int]": list[int], "list[float]": list[float],
              "list[str]": list[str]}  # fmt: skip
    if parts == {"float", "int"}:
        return float, False
    if len(parts) == 1 and (name := next(iter(parts))) in simple:
        return simple[name], False
    return str, True


def _flag_help(method, option) -> str:
    doc = " ".join(str(option.doc).split())
    shown = "off" if option.default in (None, 0, False) else json.dumps(option.default)
    return f"[{method.name}] {doc} (default: {shown})"


def model_arguments_class() -> type:
    """`BaseModelArguments` with a flag for every option of every registered method (the registry's `Option`
    declarations: type, default, help text), each ``None`` unless given, so that a recipe's value stands where the
    flag is not given. A method registered later gets its flags the next time this is called; an option named like
    a flag the train script already has keeps only ``--config_overrides`` (with a warning)."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import registered

    taken = {f.name for cls in (BaseModelArguments, DataArguments, SyntaxMTTrainingArguments)
             for f in dataclasses.fields(cls)}  # fmt: skip
    builtin = {f.name for f in dataclasses.fields(SyntaxMTConfig)}
    fields, flags = [], {}
    for method in registered():
        for name, option in method.config_options.items():
            if name in taken or name in flags:
                logger.warning(f"method {method.name}: option {name!r} has the name of another train flag; set it "
                               f"with --config_overrides")  # fmt: skip
                continue
            flag_type, is_json = _flag_type(option.type)
            help_text = _flag_help(method, option) + (" (JSON)" if is_json else "")
            fields.append((name, flag_type | None, field(default=None, metadata={"help": help_text})))
            flags[name] = (method.name, is_json, name in builtin and method.name in _builtin_methods())
    cls = dataclasses.make_dataclass("ModelArguments", fields, bases=(BaseModelArguments,))
    cls.method_flags = flags
    cls.__doc__ = BaseModelArguments.__doc__
    cls.__module__ = __name__
    return cls


def _builtin_methods() -> set[str]:
    from ..methods.builtin import BUILTIN

    return {m.name for m in BUILTIN}


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
    validation_source_file: str | None = field(
        default=None, metadata={"help": "The validation split's source text, as --train_source_file."}
    )
    validation_target_file: str | None = field(
        default=None, metadata={"help": "The validation split's target text, as --train_target_file."}
    )
    test_source_file: str | None = field(
        default=None, metadata={"help": "The test split's source text, as --train_source_file."}
    )
    test_target_file: str | None = field(
        default=None, metadata={"help": "The test split's target text, as --train_target_file."}
    )
    train_source_conllu: str | None = field(
        default=None, metadata={"help": "Pre-parsed source (CoNLL-U, .gz ok), one sentence per target line."}
    )
    validation_source_conllu: str | None = field(
        default=None, metadata={"help": "The validation split's parsed source, as --train_source_conllu."}
    )
    test_source_conllu: str | None = field(
        default=None, metadata={"help": "The test split's parsed source, as --train_source_conllu."}
    )
    train_target_conllu: str | None = field(
        default=None,
        metadata={"help": "Pre-parsed target (CoNLL-U, .gz ok), line aligned with the split's rows: the target trees "
                  "that decoder DBSA heads and the synchronous loss are trained on. Without --{split}_target_file "
                  "the target text is its `# text`."},
    )  # fmt: skip
    validation_target_conllu: str | None = field(
        default=None, metadata={"help": "The validation split's parsed target, as --train_target_conllu."}
    )
    test_target_conllu: str | None = field(
        default=None, metadata={"help": "The test split's parsed target, as --train_target_conllu."}
    )
    train_docid_file: str | None = field(
        default=None,
        metadata={"help": "Document ids, one a line, aligned with the split's rows; consecutive equal ids = one "
                  "document (for a method that reads the previous sentences of a document)."},
    )  # fmt: skip
    validation_docid_file: str | None = field(
        default=None, metadata={"help": "The validation split's document ids, as --train_docid_file."}
    )
    test_docid_file: str | None = field(
        default=None, metadata={"help": "The test split's document ids, as --train_docid_file."}
    )
    train_alignment_file: str | None = field(
        default=None,
        metadata={"help": "Word alignments (Pharaoh 'i-j', 0-based, e.g. eflomal's; possible links 'ipj' are "
                  "supervised like sure ones), one line per training pair: the targets of guided alignment "
                  "(its weight flag is listed below with the methods' flags)."},
    )  # fmt: skip
    alignment_one_indexed: bool = field(
        default=False, metadata={"help": "--train_alignment_file counts words from 1 (e.g. the Hansards gold set)."}
    )
    parser: str = field(
        default="auto",
        metadata={"help": "Source parser: 'auto' (CoNLL-U sources when given, none for a model without syntax "
                  "heads), 'spacy', 'stanza', 'conllu' (--parser_model = CoNLL-U file(s), comma separated), "
                  "'none'.", "choices": list(PARSER_CHOICES)},
    )  # fmt: skip
    parser_model: str | None = field(
        default=None, metadata={"help": "spaCy package, stanza language or CoNLL-U path(s) for --parser."}
    )
    target_parser: str = field(
        default="auto",
        metadata={"help": "Target parser, for the methods trained on target trees (decoder DBSA heads, the synchronous "
                  "loss; e.g. --recipe dbsa_sync or all3): 'auto' (CoNLL-U targets when given, else none), 'spacy', "
                  "'stanza', 'conllu' (--target_parser_model = CoNLL-U file(s)), 'none'. Only the training split's "
                  "targets are parsed: translating reads no target tree.", "choices": list(PARSER_CHOICES)},
    )  # fmt: skip
    target_parser_model: str | None = field(
        default=None, metadata={"help": "spaCy package, stanza language or CoNLL-U path(s) for --target_parser."}
    )
    parser_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Cache parses on disk (CachedParser), both sides: each parser's parses in a folder of their "
                  "own (keyed by the parser's signature), so one folder serves --parser and --target_parser."},
    )  # fmt: skip
    distill_from: str | None = field(
        default=None,
        metadata={"help": "Sequence-level knowledge distillation (Kim and Rush 2016): a teacher model's directory; the "
                  "teacher beam-translates the training sources (batched, longest first, cached under "
                  "--distill_cache_dir and resumed if stopped) and the model trains on its translations instead of "
                  "the training targets (their trees from --target_parser); validation and test keep the "
                  "references. The model card names the teacher and its decoding."},
    )  # fmt: skip
    distill_num_beams: int | None = field(
        default=None, metadata={"help": "--distill_from: the teacher's beams (default: its generation config's)."}
    )
    distill_max_length: int | None = field(
        default=None,
        metadata={"help": "--distill_from: the teacher's length limit (default: its generation config's)."},
    )
    distill_batch_size: int = field(default=32, metadata={"help": "--distill_from: sentences per teacher batch."})
    distill_cache_dir: str | None = field(
        default=None,
        metadata={"help": "--distill_from: where the teacher's translations are kept, one file per teacher, decoding "
                  "and training sources (default: $HF_SYNTAX_MT_CACHE/distill, else ~/.cache/hf_syntax_mt/distill)."},
    )  # fmt: skip
    parser_description: str | None = field(
        default=None, metadata={"help": "Free text for the model card: which parser and model made the parses."}
    )
    data_description: str | None = field(default=None, metadata={"help": "Free text for the model card."})
    max_source_length: int = field(default=128, metadata={"help": "Source truncation, in tokens."})
    max_target_length: int = field(default=128, metadata={"help": "Target truncation, in tokens (and generation)."})
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Train on the first N pairs of the training split only (default: all)."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Score the first N pairs of the validation split only (default: all)."}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "Score the first N pairs of the test split only (default: all)."}
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes of `datasets.map` (parsing, tokenizing; default: one)."}
    )
    length_bucket_edges: list[int] | None = field(
        default=None, metadata={"help": "Source-length bucket upper bounds in words (default 10 20 30 40)."}
    )

    def __post_init__(self):
        check_ranges(self)
        for split in ("train", "validation", "test"):  # the same file twice: a model trained to copy its input
            named = [(f"--{split}_{kind}", getattr(self, f"{split}_{kind}", None))
                     for kind in ("source_file", "source_conllu", "target_file", "target_conllu", "docid_file")]  # fmt: skip
            named = [(flag, path) for flag, path in named if path]
            for i, (flag, path) in enumerate(named):
                for other, other_path in named[:i]:
                    if os.path.realpath(path) == os.path.realpath(other_path):
                        raise UserError(f"{flag} {path} is the file that {other} names too: the {split} split needs "
                                        "a different file for each (source sentences, their translations, ...)")  # fmt: skip


@dataclass
class SyntaxMTTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` plus a wall-clock training budget and the model card's free texts."""

    predict_with_generate: bool = field(default=True, metadata={"help": "Generate in eval/predict (BLEU, chrF)."})
    per_device_eval_batch_size: int = field(
        default=32,
        metadata={"help": "Sentences per evaluation and decoding batch (default 32; the scored splits are decoded "
                  "longest source first, so a batch holds sentences of similar length)."},
    )  # fmt: skip
    time_budget_seconds: float | None = field(
        default=None, metadata={"help": "Stop training after this many seconds (all processes stop together)."}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={"help": "Token-based batches (fairseq --max-tokens): pairs of similar length, at most this many "
                  "padded tokens per batch and process (hf_syntax_mt.training.batching); per_device_train_batch_size is then "
                  "unused for training."},
    )  # fmt: skip
    average_checkpoints: int = field(
        default=0,
        metadata={"help": "Average the weights of the last N checkpoints, --average_every steps apart, ending at "
                  "max_steps (in memory). The average and the last step's own weights are both scored on the "
                  "validation set and the better is saved (--keep_average: the average regardless); the test set is "
                  "scored with both (`test` the saved weights, `test_last_step` or `test_average` the other). "
                  "0 = off."},
    )  # fmt: skip
    average_every: int = field(default=100, metadata={"help": "Steps between averaged checkpoints."})
    keep_average: bool = field(
        default=False,
        metadata={"help": "With --average_checkpoints: save the average even where the last step's own weights score "
                  "better on the validation set."},
    )  # fmt: skip
    flex_attention: bool = field(
        default=False,
        metadata={"help": "Run the score_mod heads (PASCAL) in FlexAttention, compiled once with dynamic shapes "
                  "(imports the opt-in hf_syntax_mt.flex before the model is built). It runs compiled on CUDA only: "
                  "there PASCAL otherwise trains on the eager path; elsewhere the flag changes nothing. The values "
                  "equal the eager path's (the fused-vs-eager tests)."},
    )  # fmt: skip
    missing_supervision: str = field(
        default="warn",
        metadata={"help": "A method whose supervision columns are missing from the training data (DBSA or LISA "
                  "trees, guided alignment's links, multi-task rows): `warn` once at the first step, or `error`.",
                  "choices": ["warn", "error"]},
    )  # fmt: skip
    model_card_title: str | None = field(
        default=None, metadata={"help": "The model card's title (default: the --output_dir folder's name)."}
    )
    model_card_limitations: str | None = field(
        default=None,
        metadata={"help": "The model card's Limitations section (default: the steps trained, and that the syntax "
                  "heads depend on the parser)."},
    )  # fmt: skip
    model_card_license: str = field(
        default="apache-2.0",
        metadata={"help": "The model card's licence, a Hub licence id (apache-2.0, cc-by-sa-4.0, other, ...): a model "
                  "trained on a corpus keeps that corpus's terms."},
    )  # fmt: skip
    # transformers 5 removed `overwrite_output_dir` from TrainingArguments; the script keeps run_translation.py's flag
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train into a non-empty --output_dir (its old checkpoint-* folders are removed first). "
                          "Without it such a directory is refused, unless --resume_from_checkpoint is given."},
    )  # fmt: skip

    def __post_init__(self):
        if self.max_steps < -1 or self.max_steps == 0:
            raise UserError(f"--max_steps must be a number of steps >= 1 (or -1, the default: train for "
                            f"--num_train_epochs), got {self.max_steps}")  # fmt: skip
        check_ranges(self)
        self.do_eval_given = bool(self.do_eval)  # before TrainingArguments sets it for an --eval_strategy (any_do)
        super().__post_init__()
        if self.time_budget_seconds is not None and not self.time_budget_seconds > 0:
            raise UserError(
                f"--time_budget_seconds must be a positive number of seconds, got {self.time_budget_seconds}"
            )
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise UserError(f"--max_tokens must be positive, got {self.max_tokens}")
        if self.average_checkpoints < 0 or self.average_every < 1:
            raise UserError(f"--average_checkpoints {self.average_checkpoints} / --average_every {self.average_every}: "
                             "need N >= 0 checkpoints and >= 1 step apart")  # fmt: skip
        if self.average_checkpoints and self.max_steps <= 0:
            raise UserError("--average_checkpoints needs --max_steps (the averaged steps end there)")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", self.model_card_license):
            raise UserError(f"--model_card_license {self.model_card_license!r} is not a Hub licence id: give one such as "
                             "apache-2.0, mit, cc-by-sa-4.0 or other (lower case)")  # fmt: skip


#: the train script's model arguments with a flag for every option of the methods registered when this module was
#: imported (the built-in ones); `train_parser` makes the class again from the registry as it is then
ModelArguments = model_arguments_class()


def train_parser() -> HfArgumentParser:
    """The parser of the train script's flags, a flag for every option of every method registered now
    (``hf_syntax_mt.train_help`` keeps its help for a fast ``--help``)."""
    from ..cli_args import TrainHelpFormatter  # no "(default: None)" after a help that says the default

    return HfArgumentParser(
        (model_arguments_class(), DataArguments, SyntaxMTTrainingArguments), formatter_class=TrainHelpFormatter
    )


def _arguments_file(path: str) -> dict:
    """The flags of a ``train args.json`` file: a JSON object of flag names and values, named when it is not."""
    from ..data.readers import read_text

    try:
        values = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise UserError(f"train {path}: not valid JSON ({e}); the file holds one object of flag names and values, "
                        'e.g. {"output_dir": "runs/x", "max_steps": 100}') from None  # fmt: skip
    if not isinstance(values, dict):
        raise UserError(f"train {path}: holds a JSON {type(values).__name__}, not an object of flag names and values "
                        '(e.g. {"output_dir": "runs/x", "max_steps": 100})')  # fmt: skip
    return values


def parse_args(argv: list[str] | None = None):
    """Parse ``argv`` (or a single ``.json`` file of arguments) into the three dataclasses. A flag no dataclass
    has, or a combination `TrainingArguments` refuses (its ``ValueError``), is a `UserError` naming it."""
    parser = train_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if len(argv) == 1 and argv[0].endswith(".json"):
            return parser.parse_dict(_arguments_file(argv[0]))
        *parsed, remaining = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    except UserError:
        raise
    except (ValueError, TypeError) as e:  # transformers' checks of the training arguments: about the flags given
        raise UserError(f"train: {e}") from e
    if remaining:
        known = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
        close = difflib.get_close_matches(remaining[0].split("=")[0], known, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else " (hf-syntax-mt train --help lists them)"
        raise UserError(f"train: unrecognized arguments: {' '.join(remaining)}{hint}")
    return tuple(parsed)


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


_JSON_STARTS = tuple('[{"-0123456789')  # a value starting so is JSON or an error, never a plain string


def parse_config_overrides(text: str | None, config_class=None) -> dict[str, Any]:
    """``"a=1,b=[2,0],c=gelu"`` -> ``{"a": 1, "b": [2, 0], "c": "gelu"}`` (JSON values, else plain words as strings;
    a value that starts like JSON, ``[`` ``{`` ``"`` or a number, and does not parse raises `ValueError` naming the
    key).

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
            raise UserError(f"--config_overrides entry {part!r} is not key=value (in {text!r})")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError as e:
            if value.strip()[:1] in _JSON_STARTS:  # meant as a list, object, string or number: not a bare word
                raise UserError(f"--config_overrides {key}={value.strip()!r} is not valid JSON ({e.msg} at character "
                                 f"{e.pos + 1}): write lists as [2,0,0], strings as plain words or in double quotes, "
                                 "and quote the whole --config_overrides value for the shell.") from e  # fmt: skip
            out[key] = value.strip()
    if config_class is not None:
        check_config_fields(out, config_class, "--config_overrides")
    return out


def check_config_fields(keys, config_class, what: str) -> None:
    """Every key is a field of ``config_class``, or a `UserError` that starts with ``what`` and names the closest."""
    known = sorted(f.name for f in dataclasses.fields(config_class))
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UserError(f"{what}: {config_class.__name__} has no field {key!r}{hint}")
