"""The train script's steps before training (`hf_syntax_mt.training.script.run` calls them in this order): the output
directory checked, the tokenizer, the parser of the sources, the config and model, the frozen sentence-level
parameters of two-step document training, the files the methods' data steps read checked, and every split
preprocessed: the methods' raw steps (`methods.DataTransform`, e.g. document context), parse, subwords and columns in
one ``datasets.map``, then their steps on the preprocessed rows (e.g. alignment targets)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from ..errors import UserError
from ..run_requirements import any_do, will_train  # noqa: F401  (importable from here, as before)
from .data import SPLITS, build_parser
from .script_args import SAVED_ONLY, SIZE_DEFAULTS, DataArguments, ModelArguments, parse_config_overrides

logger = logging.getLogger(__name__)


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
_TOKENIZER_FILES = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                    "source.spm", "target.spm", "vocab.json"}  # fmt: skip


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
    """A tokenizer from ``--tokenizer_name`` / ``--model_name_or_path``, else a joint tokenizer trained on the
    training source and target by the main process (saved under ``output_dir/tokenizer``; the other processes load
    it): a BPE, or with ``--tokenizer_layout opus-mt`` a SentencePiece model in opus-mt's layout (`opus_mt`). Padding
    is on the right (Marian positions start at 0 on the left)."""
    from transformers import AutoTokenizer

    from .factory import train_tokenizer
    from .opus_mt import train_opus_mt_tokenizer

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
                if model_args.tokenizer_layout == "opus-mt":
                    tokenizer = train_opus_mt_tokenizer(texts, directory, vocab_size=model_args.vocab_size)
                else:
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
    if model_args.vanilla_marian and (model_args.syntax_options() or model_args.recipe):
        given = sorted(model_args.syntax_options()) + ([f"--recipe {model_args.recipe}"] if model_args.recipe else [])
        raise UserError(f"--vanilla_marian takes no syntax option, got {given}: drop --vanilla_marian to train a "
                        "SyntaxMT model (--recipe vanilla is the studies' plain baseline)")  # fmt: skip
    if model_args.attention_init is not None and (model_args.model_name_or_path or model_args.vanilla_marian):
        where = "--model_name_or_path (the checkpoint keeps its weights)" if model_args.model_name_or_path else (
            "--vanilla_marian (MarianMTModel has Marian's own init)")  # fmt: skip
        raise UserError(f"--attention_init {model_args.attention_init} only applies to a model built from scratch, not "
                         f"with {where}: drop the flag")  # fmt: skip
    if model_args.tokenizer_layout != "package" and (model_args.tokenizer_name or model_args.model_name_or_path):
        given = "--tokenizer_name" if model_args.tokenizer_name else "--model_name_or_path"
        raise UserError(f"--tokenizer_layout {model_args.tokenizer_layout} is the layout of a tokenizer trained on the "
                        f"fly, but {given} gives the model its tokenizer and vocabulary: drop --tokenizer_layout (a "
                        "model keeps the layout it was trained with)")  # fmt: skip
    if model_args.model_name_or_path and model_args.size_options():
        raise UserError(f"size flags {sorted(model_args.size_options())} conflict with --model_name_or_path: the "
                         "size comes from the checkpoint (use --config_overrides for other fields)")  # fmt: skip


def recipe_options(model_args: ModelArguments, values: dict, from_scratch: bool) -> dict:
    """What ``--recipe`` sets on a model whose config values (with ``--config_overrides``) are ``values``: the
    recipe adapted to its layers and heads (`hf_syntax_mt.recipes`), the attention init only for a model built from
    scratch; {} without ``--recipe``."""
    from ..recipes import Shape
    from ..recipes import recipe_options as options_of

    if not model_args.recipe:
        return {}
    shape = Shape(values["encoder_layers"], values["decoder_layers"], values["encoder_attention_heads"],
                  values["decoder_attention_heads"])  # fmt: skip
    return options_of(model_args.recipe, shape, from_scratch=from_scratch)


class _PlannedVocabulary:
    """What `factory.model_config` reads of a tokenizer, before there is one (`plan_config`): its size and the ids
    of its padding and end tokens (``--tokenizer_layout``'s: pad 0 and end 1, or end 0 and pad last)."""

    def __init__(self, size: int, layout: str = "package"):
        self.size = max(size, 2)
        self.pad_token_id, self.eos_token_id = (self.size - 1, 0) if layout == "opus-mt" else (0, 1)

    def __len__(self) -> int:
        return self.size


def plan_config(model_args: ModelArguments):
    """The run's config before any data is read or tokenizer trained: the recipe, the flags and the overrides on the
    checkpoint's config or on the size flags (with ``--vocab_size`` standing for the tokenizer's): its methods and
    shape are those of the config `build_config_and_model` makes, so every requirement of the data can be checked
    first (`check_requirements`), and a wrong option is refused before any work."""
    return build_config(model_args, _PlannedVocabulary(model_args.vocab_size, model_args.tokenizer_layout), None)


def build_config(model_args: ModelArguments, tokenizer, source_parser: dict | None):
    """The config of the run: a new one from the size flags, or ``--model_name_or_path``'s, with (in this order,
    each over the last) the recipe's options, the method flags and ``--config_overrides`` applied on top. Every
    syntax option is validated by `SyntaxMTConfig`."""
    from transformers import MarianConfig

    from ..configuration_syntax_mt import SyntaxMTConfig
    from .factory import DEFAULT_ATTENTION_INIT, model_config

    check_model_flags(model_args)
    config_class = MarianConfig if model_args.vanilla_marian else SyntaxMTConfig
    overrides = parse_config_overrides(model_args.config_overrides, config_class)
    flags = {**model_args.syntax_options(), **{k: v for k, v in overrides.items() if k not in ("source_parser",)}}
    path = model_args.model_name_or_path
    if path and model_args.vanilla_marian:
        return MarianConfig.from_pretrained(path, **flags)
    if path:
        base = SyntaxMTConfig.from_pretrained(path)
        syntax = {**recipe_options(model_args, {**base.to_dict(), **overrides}, from_scratch=False), **flags}
        return SyntaxMTConfig(**_config_values(base, syntax, source_parser, overrides))
    size = {**SIZE_DEFAULTS, **model_args.size_options()}
    dims = dict(d_model=size["d_model"], ffn_dim=size["ffn_dim"], heads=size["attention_heads"],
                max_position_embeddings=size["max_position_embeddings"], dropout=size["dropout"],
                layers=size["encoder_layers"])  # fmt: skip
    marian = model_config(tokenizer, marian=True, **dims)  # Marian dims, then the recipe, flags, overrides on top
    flags = {"decoder_layers": size["decoder_layers"], **flags}
    if model_args.vanilla_marian:
        return config_class(**{k: v for k, v in {**marian.to_dict(), **flags}.items() if k not in SAVED_ONLY})
    init = {"attention_init": model_args.attention_init} if model_args.attention_init else {}
    recipe = recipe_options(model_args, {**marian.to_dict(), **flags}, from_scratch=True)
    values = _config_values(marian, {**recipe, **init, **flags}, source_parser, overrides)
    # the study's better start unless asked for Marian's ("normal"); --config_overrides wins over the flag
    values.setdefault("attention_init", DEFAULT_ATTENTION_INIT)
    return config_class(**values)


def build_config_and_model(model_args: ModelArguments, tokenizer, seed: int, source_parser: dict | None):
    """Config (`build_config`) and model: a new one with seeded random weights, or ``--model_name_or_path``'s
    weights."""
    from transformers import MarianConfig, MarianMTModel

    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..modeling_syntax_mt import SyntaxMTForConditionalGeneration
    from .factory import build_model, load_pretrained

    config = build_config(model_args, tokenizer, source_parser)
    path = model_args.model_name_or_path
    if path and model_args.vanilla_marian:
        model = load_pretrained(MarianMTModel, path, config, MarianConfig.from_pretrained(path))
    elif path:
        model = load_pretrained(SyntaxMTForConditionalGeneration, path, config, SyntaxMTConfig.from_pretrained(path))
    else:
        model = build_model(config, seed=seed)
    if isinstance(model, MarianMTModel) and not isinstance(model, SyntaxMTForConditionalGeneration):
        # Marian's loss is a mean over the micro-batch and ignores `num_items_in_batch`: let the Trainer do the
        # gradient-accumulation scaling itself, and do not multiply the loss by the number of processes.
        model.accepts_loss_kwargs = False
    return config, model


def describe_recipe(model_args: ModelArguments, config) -> str | None:
    """One line: what ``--recipe`` set on ``config`` (None without a recipe); the options a flag or
    ``--config_overrides`` changed afterwards are named with their final value."""
    from ..recipes import describe, value_text

    if not model_args.recipe:
        return None
    values = config.to_dict()
    planned = recipe_options(model_args, values, from_scratch=not model_args.model_name_or_path)
    changed = {k: values.get(k) for k in planned if values.get(k) != planned[k]}
    text = describe(model_args.recipe, planned)
    return text + ("; then changed by flags: " + ", ".join(f"{k}={value_text(v)}" for k, v in changed.items())
                   if changed else "")  # fmt: skip


def _preprocessing_step(config, preprocessor) -> str:
    """What preprocessing does, for its progress bar: a split that parses says which side (a model
    without syntax input would show "Parsing and aligning" and mislead)."""
    if preprocessor.tokenize_only:
        return "Tokenizing"
    parsing = [side for side, p in (("sources", preprocessor.parser), ("targets", preprocessor.target_parser))
               if p is not None and (preprocessor.source_columns if side == "sources" else preprocessor.target_columns)]  # fmt: skip
    return f"Parsing the {' and '.join(parsing)} and aligning" if parsing else "Aligning the parses"


def freeze_sentence_level(model, config, model_args: ModelArguments) -> None:
    """``--freeze_sentence_level``: two-step document training (Section 2.4), train theta_d only."""
    from ..configuration_syntax_mt import SyntaxMTConfig

    if not model_args.freeze_sentence_level:
        return
    if not isinstance(config, SyntaxMTConfig):
        from ..methods.registry import registered

        flags = " or ".join(f"--{m.document_option}" for m in registered() if m.document_option)
        raise UserError(f"--freeze_sentence_level needs a SyntaxMT model with {flags}, not --vanilla_marian")
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


def method_transforms(config) -> list:
    """The data steps the config's methods add (`methods.DataTransform`; none for vanilla Marian)."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import data_transforms

    return data_transforms(config) if isinstance(config, SyntaxMTConfig) else []


def check_flag_columns(config, data_args: DataArguments, columns, training: bool) -> None:
    """The training split's raw ``columns`` against the data steps of the config's methods (`method_transforms`): a
    step whose raw column is missing (``alignment``: ``--train_alignment_file``), or a training-only column a flag gave
    that no step of this model reads, is an error saying what to add or drop (checked before any preprocessing)."""
    from ..methods.registry import registered

    if not training:
        return
    steps = method_transforms(config)
    for step in steps:
        if step.runs_on("train", training) and step.reads and step.reads not in columns:
            raise UserError(step.missing_message(config, "train"))
    read = {step.reads for step in steps}
    for method in registered():
        for step in method.transforms:
            if step.training_only and step.flag and step.reads in columns and step.reads not in read:
                flag = step.flag.format(split="train")
                raise UserError(f"--{flag} {getattr(data_args, flag, None)} is read only by "
                                f"{method.name.replace('_', ' ')}, which this model does not train: add {step.enable}, "
                                f"or leave out --{flag}.")  # fmt: skip


def run_transforms(steps, stage: str, dataset, config, context, training: bool = True):
    """Run the data steps of `stage` (``"raw"``, ``"processed"``) that run on `context.split` over `dataset`, in
    order; a step whose raw column is missing is the error it declares."""
    import importlib

    for step in steps:
        if step.stage != stage or not step.runs_on(context.split, training):
            continue
        if step.reads and step.reads not in context.raw.column_names:
            raise UserError(step.missing_message(config, context.split))
        module, _, name = step.apply.partition(":")
        dataset = getattr(importlib.import_module(module), name)(dataset, context, **step.kwargs(config))
    return dataset


# ------------------------------------------------------------------------------------------------------------------
# What each split must bring, checked before any work
# ------------------------------------------------------------------------------------------------------------------
def parses_read(config, training: bool) -> dict[str, list[str]]:
    """Parse side (``"source"``, ``"target"``) -> the methods that read it, for a split that trains (``training``:
    the inputs and the supervision) or only decodes (the inputs: what translating reads)."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..methods.registry import active_methods, column_specs

    if not isinstance(config, SyntaxMTConfig):
        return {}
    specs, out = column_specs(), {}
    for method in active_methods(config):
        columns = [*method.input_columns(config), *(method.supervision_columns(config) if training else ())]
        for side in dict.fromkeys(specs[c].parse for c in columns if c in specs and specs[c].parse):
            out.setdefault(side, []).append(method.name)
    return out


def check_requirements(config, data_args: DataArguments, training: bool) -> None:
    """Every split's requirements, before any data is read, tokenizer trained or sentence parsed
    (`run_requirements`): the parses each split reads (`parses_read`: the training split what its methods read and
    learn from, validation and test what translating reads, so never a target tree), the parser flags, and the files
    the methods' data steps read (`method_transforms`: e.g. an alignment file, document ids). Everything missing is
    one `UserError`, a line each, naming the flags to give."""
    from ..run_requirements import given_splits, missing_parses, refuse

    problems = missing_parses({True: parses_read(config, True), False: parses_read(config, False)}, data_args,
                              training)  # fmt: skip
    if not data_args.dataset_name:  # a dataset from the hub brings its own columns, checked when a step runs
        problems += [step.missing_message(config, split) for step in method_transforms(config) if step.flag
                     for split in given_splits(data_args) if step.runs_on(split, training)
                     and not getattr(data_args, step.flag.format(split=split), None)]  # fmt: skip
    refuse(problems)
    if data_args.target_parser not in ("auto", "none") and "target" not in parses_read(config, training):
        logger.warning(f"--target_parser {data_args.target_parser}: no method of this model reads target trees, so "
                       "no target is parsed")  # fmt: skip


def split_columns(config, training_split: bool, free: set[str]) -> list[str]:
    """The columns of a split computed from parses: a training split's inputs and supervision; a decoding split's
    inputs, plus the supervision of the sides whose parses it has at no cost (``free``: a CoNLL-U column it brings,
    or a source parse its inputs make anyway)."""
    from ..methods.registry import column_specs, input_columns

    specs = column_specs()
    inputs = set(input_columns(config))
    wanted = [c for c in dict.fromkeys([*input_columns(config), *supervised_columns(config)])
              if c in specs and specs[c].parse is not None]  # fmt: skip
    return [c for c in wanted if training_split or c in inputs or specs[c].parse in free]


def choose_preprocessor(split: str, columns: list[str], config, tokenizer, parser, data_args: DataArguments,
                        target_parser=None, training: bool = True):  # fmt: skip
    """The ``datasets.map`` function of one split: the columns the config's methods read from the parses
    (`split_columns`: a training split everything they read and learn from, a decoding split what translating
    reads), from the split's CoNLL-U parses (``source_parse``, ``target_parse`` columns), else from ``parser`` /
    ``target_parser`` (the training split's targets only); tokenize-only (``columns=()``) for vanilla Marian without
    parses. A parse that is needed and missing is an error naming the flags to give (`check_requirements` has said
    so before any work)."""
    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..data.preprocess import SyntaxMTPreprocessor
    from ..methods.registry import column_specs, input_columns

    lengths = dict(max_source_length=data_args.max_source_length, max_target_length=data_args.max_target_length)
    source_column = "source_parse" in columns and data_args.parser in ("auto", "conllu")
    if not isinstance(config, SyntaxMTConfig):
        if source_column:
            return SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse", **lengths)
        if parser is not None:
            return SyntaxMTPreprocessor(tokenizer, parser=parser, **lengths)
        return SyntaxMTPreprocessor(tokenizer, columns=(), **lengths)
    trains = split == "train" and training
    specs = column_specs()
    inputs_read = {specs[c].parse for c in input_columns(config) if c in specs and specs[c].parse}
    sides: dict[str, dict] = {}
    if source_column:
        sides["source"] = {"source_parse_column": "source_parse"}
    elif parser is not None:
        sides["source"] = {"parser": parser}
    if "target_parse" in columns and data_args.target_parser in ("auto", "conllu"):
        sides["target"] = {"target_parse_column": "target_parse"}
    elif target_parser is not None and trains:  # only the training targets are parsed: translating reads none
        sides["target"] = {"target_parser": target_parser}
    free = {s for s, how in sides.items() if "parser" not in how or s in inputs_read}
    wanted = split_columns(config, trains, free)
    read = {specs[c].parse for c in wanted}
    for side in sorted(read - sides.keys()):
        flags = (f"--{split}_source_conllu or --parser spacy --parser_model ..." if side == "source" else
                 f"--{split}_target_conllu or --target_parser spacy --target_parser_model ...")  # fmt: skip
        raise UserError(f"the model {'trains on' if trains else 'translates with'} {side} trees but the {split} "
                        f"split has none: give {flags}")  # fmt: skip
    kwargs = {k: v for side in read for k, v in sides[side].items()}
    # the config drives each column's compute (its options) and the document methods' columns (their limits)
    return SyntaxMTPreprocessor(tokenizer, columns=wanted, config=config, **kwargs, **lengths)


def preprocess_splits(raw: dict, config, tokenizer, parser, data_args: DataArguments, training_args,
                      target_parser=None, training: bool = True):  # fmt: skip
    """Every split: the methods' raw data steps (`method_transforms`, e.g. document context), then parse + tokenize +
    align in one ``datasets.map`` (`choose_preprocessor`: ``target_parser`` parses the training split's targets), then
    their steps on the preprocessed rows (e.g. the guided-alignment targets of the training split). Returns the model-ready splits and each split's raw ``source`` / ``target`` columns (for scoring)."""
    from dataclasses import replace

    from ..methods.columns import TransformContext

    steps = method_transforms(config)
    processed, kept_raw = {}, {}
    for split, ds in raw.items():
        kept_raw[split] = ds.select_columns(["source", "target"])
        context = TransformContext(split, ds, tokenizer, data_args.max_source_length, data_args.max_target_length,
                                   data_args.preprocessing_num_workers)  # fmt: skip
        with training_args.main_process_first(desc=f"data steps {split}"):
            ds = run_transforms(steps, "raw", ds, config, context, training)
        fn = choose_preprocessor(split, ds.column_names, config, tokenizer, parser, data_args,
                                 target_parser=target_parser, training=training)  # fmt: skip
        with training_args.main_process_first(desc=f"preprocessing {split}"):
            processed[split] = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names,
                                      num_proc=data_args.preprocessing_num_workers,
                                      features=fn.output_features(ds.column_names),
                                      desc=f"{_preprocessing_step(config, fn)} ({split})")  # fmt: skip
        processed[split] = run_transforms(steps, "processed", processed[split], config, replace(context, raw=ds),
                                          training)  # fmt: skip
    return processed, kept_raw


def conllu_files(data_args: DataArguments) -> list[str]:
    """The CoNLL-U source files of the run (their names and hashes sign a model trained on them)."""
    return [getattr(data_args, f"{s}_source_conllu") for s in SPLITS if getattr(data_args, f"{s}_source_conllu")]
