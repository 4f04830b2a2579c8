"""The train script's steps before training (`hf_syntax_mt.training.script.run` calls them in this order): the output
directory checked, the tokenizer, the parser of the sources, the config and model, the frozen sentence-level
parameters of two-step document training, the guided-alignment file checked, and every split preprocessed (document
context, parse, subwords, alignment targets) with one ``datasets.map`` each."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from ..errors import UserError
from .data import SPLITS, build_parser
from .script_args import SAVED_ONLY, SIZE_DEFAULTS, DataArguments, ModelArguments, parse_config_overrides

logger = logging.getLogger(__name__)


def will_train(training_args) -> bool:
    """Whether the run trains: ``--do_train``, or no ``--do_*`` flag at all (then it trains, evaluates, predicts)."""
    return bool(training_args.do_train or not any_do(training_args))


def any_do(training_args) -> bool:
    return bool(training_args.do_train or training_args.do_eval or training_args.do_predict)


def check_output_dir(training_args, do_train: bool) -> None:
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
            raise UserError(f"--resume_from_checkpoint {resume}: --output_dir {output_dir} holds no checkpoint-* "
                             "folder to resume from. Leave out --resume_from_checkpoint to start a new run (into an "
                             "empty --output_dir), or give the checkpoint folder itself.")  # fmt: skip
    if not do_train or not output_dir.is_dir() or not any(output_dir.iterdir()):
        return
    if _only_leftovers(output_dir) and resume is None:
        logger.warning("--output_dir %s holds only %s/, left by a run that stopped before training: this run "
                       "replaces it", output_dir, LEFTOVER)  # fmt: skip
        return
    if resume is not None:
        return
    checkpoints = sorted(p for p in output_dir.glob("checkpoint-*") if p.is_dir())
    if not training_args.overwrite_output_dir:
        found = f" with {len(checkpoints)} checkpoint(s) ({checkpoints[-1].name}, ...)" if checkpoints else ""
        resume = f" or --resume_from_checkpoint {checkpoints[-1]} to continue that run" if checkpoints else ""
        raise UserError(
            f"--output_dir {output_dir} already exists and is not empty{found}: training would replace its model and "
            f"mix old files with the new run's. Give another --output_dir, --overwrite_output_dir to replace it{resume}."
        )
    if training_args.process_index == 0:
        for path in checkpoints:
            logger.warning("--overwrite_output_dir: removing the old checkpoint %s", path)
            shutil.rmtree(path)


#: what a run writes into --output_dir before training: the tokenizer it trained (the other processes load it)
LEFTOVER = "tokenizer"
_TOKENIZER_FILES = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"}


def _only_leftovers(output_dir: Path) -> bool:
    """Whether ``output_dir`` holds nothing but the tokenizer folder a run writes before training (a run that
    stopped before its first step, e.g. killed while preprocessing): a rerun may replace it."""
    entries = list(output_dir.iterdir())
    folder = output_dir / LEFTOVER
    return entries == [folder] and folder.is_dir() and {p.name for p in folder.iterdir()} <= _TOKENIZER_FILES


@contextlib.contextmanager
def undo_on_failure(training_args):
    """Around the steps before training: if one raises, remove what the run wrote into ``--output_dir`` (the
    tokenizer folder, and the directory itself where the run created it), so that the corrected command runs
    without ``--overwrite_output_dir``. Only what did not exist before is removed (by the main process)."""
    import shutil

    output_dir = Path(training_args.output_dir)
    existed = output_dir.exists()
    had_tokenizer = (output_dir / LEFTOVER).exists()
    try:
        yield
    except BaseException:
        if training_args.process_index == 0:
            if not had_tokenizer and (output_dir / LEFTOVER).is_dir():
                shutil.rmtree(output_dir / LEFTOVER, ignore_errors=True)
            if not existed and output_dir.is_dir() and not any(output_dir.iterdir()):
                output_dir.rmdir()
        raise


# ------------------------------------------------------------------------------------------------------------------
# Tokenizer, parser, config and model
# ------------------------------------------------------------------------------------------------------------------
def _has_tokenizer(path: str | None) -> bool:
    if not path or not Path(path).is_dir():
        return False
    names = ("tokenizer.json", "tokenizer_config.json", "source.spm", "vocab.json")
    return any((Path(path) / n).exists() for n in names)


def load_or_train_tokenizer(model_args: ModelArguments, training_args, train_dataset):
    """A tokenizer from ``--tokenizer_name`` / ``--model_name_or_path``, else a joint BPE trained on the training
    source and target by the main process (saved under ``output_dir/tokenizer``; the other processes load it).
    Padding is on the right (Marian positions start at 0 on the left)."""
    from transformers import AutoTokenizer

    from .factory import train_tokenizer

    path = model_args.tokenizer_name or (
        model_args.model_name_or_path if _has_tokenizer(model_args.model_name_or_path) else None
    )
    directory = Path(training_args.output_dir) / "tokenizer"
    if path:
        tokenizer = AutoTokenizer.from_pretrained(path)
    elif training_args.resume_from_checkpoint is not None and (directory / "tokenizer.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(directory)  # the resumed run's own vocabulary
    else:
        with training_args.main_process_first(desc="training the tokenizer", local=False):
            if training_args.process_index == 0:
                texts = list(train_dataset["source"]) + list(train_dataset["target"])
                tokenizer = train_tokenizer(texts, vocab_size=model_args.vocab_size,
                                            min_frequency=model_args.tokenizer_min_frequency)  # fmt: skip
                tokenizer.save_pretrained(directory)
            else:
                tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.padding_side = "right"
    return tokenizer


def choose_parser(data_args: DataArguments, raw: dict):
    """The parser of the sources (None when every split comes pre-parsed as CoNLL-U and ``--parser`` is ``conllu``)
    and the parser config the saved model records for new text (`portable_parser_config`): one that can parse raw
    text (spaCy or stanza, with its version). CoNLL-U files parse only their own sentences and their paths are
    local, so a model trained on them records none unless ``--parser`` names the parser that produced them; its
    pipeline then asks for ``parser=``."""
    from ..data.parser_config import portable_parser_config

    parser = build_parser(data_args)
    if data_args.parser == "conllu" and all("source_parse" in ds.column_names for ds in raw.values()):
        parser = None
    return parser, portable_parser_config(parser)


def _config_values(config, syntax: dict, source_parser, overrides: dict) -> dict:
    """A config's values with the syntax options on top and the parser to record (``--config_overrides
    source_parser=...`` wins over the script's parser), without the keys only a saved config has."""
    from ..data.parser_config import recordable_parser_config

    values = {**config.to_dict(), **syntax}
    if "source_parser" in overrides:
        values["source_parser"] = recordable_parser_config(overrides["source_parser"])
    elif source_parser is not None:
        values["source_parser"] = source_parser
    for key in SAVED_ONLY:
        values.pop(key, None)
    return values


def check_model_flags(model_args: ModelArguments) -> None:
    """The model flags that contradict each other, checked before anything is written."""
    if model_args.vanilla_marian and model_args.syntax_options():
        raise UserError(f"--vanilla_marian takes no syntax option, got {sorted(model_args.syntax_options())}")
    if model_args.attention_init is not None and (model_args.model_name_or_path or model_args.vanilla_marian):
        where = "--model_name_or_path (the checkpoint keeps its weights)" if model_args.model_name_or_path else (
            "--vanilla_marian (MarianMTModel has Marian's own init)")  # fmt: skip
        raise UserError(f"--attention_init {model_args.attention_init} only applies to a model built from scratch, not "
                         f"with {where}: drop the flag")  # fmt: skip
    if model_args.model_name_or_path and model_args.size_options():
        raise UserError(f"size flags {sorted(model_args.size_options())} conflict with --model_name_or_path: the "
                         "size comes from the checkpoint (use --config_overrides for other fields)")  # fmt: skip


def build_config_and_model(model_args: ModelArguments, tokenizer, seed: int, source_parser: dict | None):
    """Config and model: a new one from the size flags, or ``--model_name_or_path`` with the syntax flags and
    ``--config_overrides`` applied on top. Every syntax option is validated by `SyntaxMTConfig`."""
    from transformers import MarianConfig, MarianMTModel

    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..modeling_syntax_mt import SyntaxMTForConditionalGeneration
    from .factory import DEFAULT_ATTENTION_INIT, build_model, load_pretrained, model_config

    config_class = MarianConfig if model_args.vanilla_marian else SyntaxMTConfig
    overrides = parse_config_overrides(model_args.config_overrides, config_class)
    syntax = {**model_args.syntax_options(), **{k: v for k, v in overrides.items() if k not in ("source_parser",)}}
    check_model_flags(model_args)
    path = model_args.model_name_or_path
    if path and model_args.vanilla_marian:
        config = MarianConfig.from_pretrained(path, **syntax)
        model = load_pretrained(MarianMTModel, path, config, MarianConfig.from_pretrained(path))
    elif path:
        base = SyntaxMTConfig.from_pretrained(path)
        config = SyntaxMTConfig(**_config_values(base, syntax, source_parser, overrides))
        model = load_pretrained(SyntaxMTForConditionalGeneration, path, config, base)
    else:
        size = {**SIZE_DEFAULTS, **model_args.size_options()}
        dims = dict(d_model=size["d_model"], ffn_dim=size["ffn_dim"], heads=size["attention_heads"],
                    max_position_embeddings=size["max_position_embeddings"], dropout=size["dropout"],
                    layers=size["encoder_layers"])  # fmt: skip
        marian = model_config(tokenizer, marian=True, **dims)  # Marian dims, then the overrides on top
        syntax = {"decoder_layers": size["decoder_layers"], **syntax}
        if model_args.vanilla_marian:
            values = {k: v for k, v in {**marian.to_dict(), **syntax}.items() if k not in SAVED_ONLY}
        else:
            values = _config_values(marian, syntax, source_parser, overrides)
            # the study's better start unless asked for Marian's ("normal"); --config_overrides wins over the flag
            values.setdefault("attention_init", model_args.attention_init or DEFAULT_ATTENTION_INIT)
        config = config_class(**values)
        model = build_model(config, seed=seed)
    if isinstance(model, MarianMTModel) and not isinstance(model, SyntaxMTForConditionalGeneration):
        # Marian's loss is a mean over the micro-batch and ignores `num_items_in_batch`: let the Trainer do the
        # gradient-accumulation scaling itself, and do not multiply the loss by the number of processes.
        model.accepts_loss_kwargs = False
    return config, model


def _preprocessing_step(config, parser) -> str:
    """What preprocessing does, for its progress bar: a model without syntax input only tokenizes (issue 56: it
    showed "Parsing and aligning")."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import active_methods

    if parser is not None:
        return "Parsing and aligning"
    reads_parses = isinstance(config, SyntaxMTConfig) and {m.name for m in active_methods(config)} - {
        "document_context"
    }
    return "Aligning the parses" if reads_parses else "Tokenizing"


def freeze_sentence_level(model, config, model_args: ModelArguments) -> None:
    """``--freeze_sentence_level``: two-step document training (Section 2.4), train theta_d only."""
    from ..configuration_syntax_mt import SyntaxMTConfig

    if not model_args.freeze_sentence_level:
        return
    if not isinstance(config, SyntaxMTConfig):
        raise UserError(
            "--freeze_sentence_level needs a SyntaxMT model with --context_sentences, not --vanilla_marian"
        )
    trainable = model.freeze_sentence_level_parameters()
    n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info("sentence-level parameters frozen: %d trainable tensors (%d parameters)", len(trainable), n)


# ------------------------------------------------------------------------------------------------------------------
# Preprocessing
# ------------------------------------------------------------------------------------------------------------------
def supervised_columns(config) -> list[str]:
    """The training-only columns the config's methods read (none for vanilla Marian)."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import supervision_columns

    return supervision_columns(config) if isinstance(config, SyntaxMTConfig) else []


def check_alignment_file(config, data_args: DataArguments, has_alignments: bool, training: bool) -> None:
    """Guided alignment trains on ``--train_alignment_file``, and only guided alignment reads it: either alone is
    an error saying what to add or drop (checked before any preprocessing)."""
    if not training:
        return
    supervised = "decoder_alignment" in supervised_columns(config)
    if supervised and not has_alignments:
        raise UserError(f"guided_alignment_weight={config.guided_alignment_weight} trains on word alignments: give "
                         "--train_alignment_file (Pharaoh, one line per training pair, e.g. from eflomal)")  # fmt: skip
    if has_alignments and not supervised:
        raise UserError(f"--train_alignment_file {data_args.train_alignment_file} is read only by guided alignment, "
                         "which this model does not train: add --config_overrides guided_alignment_weight=0.05 (Garg "
                         "et al.'s weight), or leave out --train_alignment_file.")  # fmt: skip


def choose_preprocessor(split: str, columns: list[str], config, tokenizer, parser, data_args: DataArguments):
    """The ``datasets.map`` function of one split: every column the config's methods consume
    (`SyntaxMTPreprocessor.for_config`), from the split's CoNLL-U parses (a ``source_parse`` column), else from
    ``parser``; tokenize-only (``columns=()``) for vanilla Marian without parses. A syntax model without parses, or
    a DBSA model without target trees, is an error naming the flag to give."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..data.preprocess import SyntaxMTPreprocessor

    is_syntax = isinstance(config, SyntaxMTConfig)
    lengths = dict(max_source_length=data_args.max_source_length, max_target_length=data_args.max_target_length)
    if "source_parse" in columns and data_args.parser in ("auto", "conllu"):
        source = {"source_parse_column": "source_parse"}
    elif parser is not None:
        source = {"parser": parser}
    elif is_syntax and config.needs_source_parse:
        raise UserError(f"the model has syntax heads but the {split} split has no parses: give CoNLL-U sources "
                         f"(--{split}_source_conllu) or a parser (--parser spacy --parser_model ...)")  # fmt: skip
    elif is_syntax:
        source = {}  # nothing needs a parse: for_config tokenizes only (with the context length)
    else:
        return SyntaxMTPreprocessor(tokenizer, columns=(), **lengths)
    if not is_syntax:
        return SyntaxMTPreprocessor(tokenizer, **source, **lengths)
    if "decoder_dbsa_heads" in supervised_columns(config):  # trained on target trees
        if "target_parse" not in columns:
            raise UserError(f"decoder_dbsa_heads={config.decoder_dbsa_heads} is trained on target trees: give "
                             f"--{split}_target_conllu (the {split} targets parsed, CoNLL-U)")  # fmt: skip
        source["target_parse_column"] = "target_parse"
    return SyntaxMTPreprocessor.for_config(config, tokenizer, **source, **lengths)


def with_document_context(split: str, ds, context_k: int, num_proc: int | None = None):
    """Section 2.2: each sentence's context is the previous k source sentences of its document."""
    from ..data.documents import add_document_context

    if not context_k:
        return ds
    if "doc_id" not in ds.column_names:
        raise UserError(f"context_sentences={context_k} needs document boundaries: give --{split}_docid_file "
                         "(one document id a line)")  # fmt: skip
    return add_document_context(ds, context_k, num_proc=num_proc)


def preprocess_splits(raw: dict, config, tokenizer, parser, data_args: DataArguments, training_args):
    """Every split: document context, then parse + tokenize + align in one ``datasets.map``, then the
    guided-alignment targets of the training split. Returns the model-ready splits and each split's raw
    ``source`` / ``target`` columns (for scoring)."""
    from ..configuration_syntax_mt import SyntaxMTConfig

    context_k = config.context_sentences if isinstance(config, SyntaxMTConfig) else 0
    alignments = "decoder_alignment" in supervised_columns(config)
    processed, kept_raw = {}, {}
    for split, ds in raw.items():
        kept_raw[split] = ds.select_columns(["source", "target"])
        with training_args.main_process_first(desc=f"document context {split}"):
            ds = with_document_context(split, ds, context_k, num_proc=data_args.preprocessing_num_workers)
        fn = choose_preprocessor(split, ds.column_names, config, tokenizer, parser, data_args)
        with training_args.main_process_first(desc=f"preprocessing {split}"):
            processed[split] = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names,
                                      num_proc=data_args.preprocessing_num_workers,
                                      features=fn.output_features(ds.column_names),
                                      desc=f"{_preprocessing_step(config, parser)} ({split})")  # fmt: skip
        if alignments and split == "train" and "alignment" in ds.column_names:
            processed[split] = _with_alignment_targets(processed[split], ds, tokenizer, data_args)
    return processed, kept_raw


def _with_alignment_targets(processed, raw, tokenizer, data_args):
    """Guided alignment: the Pharaoh links of each pair as `decoder_alignment` (`alignment.targets.AlignmentTargets`)."""
    from ..alignment.targets import AlignmentTargets

    rows = processed.add_column("source", raw["source"]).add_column("target", raw["target"])
    rows = rows.add_column("alignment", raw["alignment"])
    fn = AlignmentTargets(tokenizer, max_source_length=data_args.max_source_length,
                          max_target_length=data_args.max_target_length)  # fmt: skip
    return rows.map(fn, batched=True, with_indices=True, remove_columns=["source", "target", "alignment"],
                    desc="Guided-alignment targets")  # fmt: skip


def conllu_files(data_args: DataArguments) -> list[str]:
    """The CoNLL-U source files of the run (their names and hashes sign a model trained on them)."""
    return [getattr(data_args, f"{s}_source_conllu") for s in SPLITS if getattr(data_args, f"{s}_source_conllu")]
