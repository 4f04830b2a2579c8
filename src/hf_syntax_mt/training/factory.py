"""The tokenizer and model factory of training runs: a joint BPE tokenizer trained on the fly and small Marian-shaped
configs and models (`SyntaxMTForConditionalGeneration`, or `MarianMTModel` for the baseline) with seeded weights."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

from ..configuration_syntax_mt import SyntaxMTConfig
from ..errors import UserError
from ..modeling_syntax_mt import SyntaxMTForConditionalGeneration
from .script_args import SAVED_ONLY, check_config_fields

logger = logging.getLogger(__name__)

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
#: the attention init of models built from scratch by the train script, the demo and the recipes (a config built by
#: hand keeps `SyntaxMTConfig`'s own default, Marian's "normal": parity with `MarianMTModel`)
DEFAULT_ATTENTION_INIT = "xavier"


def _checked_texts(texts):
    """``texts`` one by one (a generator is not read ahead): a str (read by character) or a non-str entry refused."""
    from ..errors import UserTypeError
    from ..validation import check_sequence, shown

    if isinstance(texts, (str, bytes)) or texts is None or isinstance(texts, dict) or not hasattr(texts, "__iter__"):
        check_sequence(texts, "texts", "strings (the training sentences)")  # raises, naming what to pass
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise UserTypeError(f"texts[{i}] must be a string, got {type(text).__name__}: {shown(text)}")
        yield text


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1000, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a joint source/target BPE tokenizer (sentencepiece-style `▁` word boundaries) that appends `</s>`.

    Ids: `<pad>` = 0 (also Marian's decoder start), `</s>` = 1, `<unk>` = 2. The result is a fast tokenizer, so
    `word_ids()` and offsets are available for the subword mapping.
    """
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[PAD, EOS, UNK], show_progress=False
    )
    tok.train_from_iterator(_checked_texts(texts), trainer=trainer)
    eos_id = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A $B {EOS}", special_tokens=[(EOS, eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK, model_max_length=512
    )


def model_config(
    tokenizer,
    d_model: int = 128,
    layers: int = 3,
    heads: int = 4,
    ffn_dim: int = 256,
    max_position_embeddings: int = 256,
    dropout: float = 0.1,
    marian: bool = False,
    attention_init: str | None = None,
    **syntax_options,
) -> SyntaxMTConfig | MarianConfig:
    """A small Marian-shaped config matching `tokenizer` (shared vocabulary, tied embeddings).

    A `SyntaxMTConfig` starts from `attention_init="xavier"` (fairseq's Xavier q/k/v init, the Multi30k study's
    best start: +1.14 BLEU over Marian's N(0, 0.02), two seeds) unless `attention_init="normal"` asks for Marian's;
    ``marian=True`` gives a plain `MarianConfig` (Marian's own init, no option)."""
    dims = dict(
        vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim, max_position_embeddings=max_position_embeddings, dropout=dropout,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None, scale_embedding=True, activation_function="relu",
    )  # fmt: skip
    if marian:
        if syntax_options or attention_init not in (None, "normal"):
            options = sorted(syntax_options) + (["attention_init"] if attention_init not in (None, "normal") else [])
            raise UserError(f"A vanilla Marian config takes no syntax option, got {options}.")
        return MarianConfig(**dims)
    return SyntaxMTConfig(**dims, attention_init=attention_init or DEFAULT_ATTENTION_INIT, **syntax_options)


def build_model(config: SyntaxMTConfig | MarianConfig, seed: int = 0):
    """`SyntaxMTForConditionalGeneration` (or `MarianMTModel` for a `MarianConfig`) with seeded random weights."""
    import torch

    from ..generation_defaults import fill_generation_defaults

    torch.manual_seed(seed)
    cls = SyntaxMTForConditionalGeneration if isinstance(config, SyntaxMTConfig) else MarianMTModel
    model = cls(config)
    # MarianMTModel too (its length limit in its generation config: no generate() of ours adds it per call)
    fill_generation_defaults(model, length_in_config=cls is MarianMTModel)
    if has_opus_mt_layout(config):  # <pad> is never generated (its zero row: a logit of 0), as opus-mt's configs say
        model.generation_config.bad_words_ids = [[config.pad_token_id]]
    return model


def has_opus_mt_layout(config) -> bool:
    """``<pad>`` last and the decoder's start token (`opus_mt`): the layout whose pad row CTranslate2's stock
    converter drops, starting the decoder from a zero embedding."""
    pad = getattr(config, "pad_token_id", None)
    vocab_size = getattr(config, "vocab_size", None)
    return (
        pad is not None
        and vocab_size is not None
        and pad == vocab_size - 1
        and (getattr(config, "decoder_start_token_id", None) == pad)
    )


def load_pretrained(model_class, path: str, config, base_config):
    """``model_class.from_pretrained(path, config=config)`` for a ``config`` that may add options to the checkpoint's
    own ``base_config`` (two-step document training: a sentence-level checkpoint loaded with the option that makes it
    read documents). The parameters those options add are expected to be missing: instead of transformers'
    load report (a "MISSING" row for each of them) one line names how many were initialised, in which modules, for
    which options. Keys missing although the checkpoint's own architecture has them and keys of the checkpoint this
    model does not use are still reported (a warning naming them); a shape mismatch or a conversion error keeps
    transformers' own report, which names the keys before `from_pretrained` raises."""
    import torch

    with torch.device("meta"):  # the names alone: the parameters a model of the checkpoint's own config has
        base_names = set(model_class(base_config).state_dict())
    hide = _DropLoadReport()
    transformers_logger = logging.getLogger("transformers.modeling_utils")
    transformers_logger.addFilter(hide)
    try:
        model, info = model_class.from_pretrained(path, config=config, output_loading_info=True)
    finally:
        transformers_logger.removeFilter(hide)
    missing = set(info["missing_keys"])
    new = missing - base_names
    if new:
        changed = sorted(k for k, v in config.to_dict().items() if k not in _NOT_OPTIONS and
                         base_config.to_dict().get(k) != v)  # fmt: skip
        options = ", ".join(f"{k}={getattr(config, k)!r}" for k in changed[:4]) + (", ..." if len(changed) > 4 else "")
        modules = _new_modules(new, base_names)
        logger.warning(f"initialised {len(new)} new parameters of {len(modules)} module(s) that {path} does not have, "
                       f"as the options added to its config ({options or 'none'}) need them: {', '.join(modules)}")  # fmt: skip
    problems = []
    if missing - new:
        problems.append(f"missing from the checkpoint although its own config has them (newly initialised): "
                        f"{_collapse(missing - new)}")  # fmt: skip
    if info["unexpected_keys"]:
        problems.append(f"in the checkpoint but not used by this model: {_collapse(info['unexpected_keys'])}")
    if problems:
        logger.warning(f"{model_class.__name__} load report from {path}: " + "; ".join(problems))
    return model


def load_with_options(path: str, **options) -> SyntaxMTForConditionalGeneration:
    """A saved SyntaxMT or Marian (opus-mt style) checkpoint as `SyntaxMTForConditionalGeneration`, with ``options``
    (any `SyntaxMTConfig` fields) added to its config: the first load of two-step document training
    (``load_with_options("runs/sentence-level", **{document_option: 2})``, the option `methods.registry.
    document_settings` names). The parameters the options add start from
    the init, and one log line names them instead of transformers' load report (a "MISSING" row for each,
    `load_pretrained`). An unknown option is a `UserError` naming the closest fields."""
    from pathlib import Path

    from ..model_files import check_model_files

    what = f"load_with_options({str(path)!r}, ...)"
    check_config_fields(options, SyntaxMTConfig, what)
    if not Path(path).is_dir():
        raise UserError(f"{what}: no such directory {path}; give the directory a training run or save_pretrained "
                        "wrote (it holds config.json and model.safetensors)")  # fmt: skip
    check_model_files(path, what)  # a damaged or mismatched file named before transformers reads it
    base = SyntaxMTConfig.from_pretrained(path)
    values = {k: v for k, v in {**base.to_dict(), **options}.items() if k not in SAVED_ONLY}
    return load_pretrained(SyntaxMTForConditionalGeneration, path, SyntaxMTConfig(**values), base)


_NOT_OPTIONS = {*SAVED_ONLY, "_name_or_path", "dtype"}  # never "an option added" to the checkpoint's config


class _DropLoadReport:
    """A logging filter dropping transformers' load report (`load_pretrained` writes its own), except a report with
    an error row (a shape mismatch, a failed conversion): `from_pretrained` raises after it, pointing at it."""

    def filter(self, record) -> bool:
        message = record.getMessage()
        return "LOAD REPORT" not in message or "MISMATCH" in message or "CONVERSION" in message


def _collapse(names) -> str:
    """Parameter names with layer indices as `*`, each pattern once: `model.encoder.layers.*.fc1.weight, ...`."""
    import re

    return ", ".join(sorted({re.sub(r"\.\d+(?=\.|$)", ".*", n) for n in names}))


def _new_modules(new: set[str], base_names: set[str]) -> list[str]:
    """The outermost modules of the ``new`` parameters that a model of the checkpoint's config does not have at all,
    with layer indices as `*` (`model.encoder.layers.*.context_attn`, `model.encoder.context_encoder`)."""
    base_prefixes = {".".join(n.split(".")[:k]) for n in base_names for k in range(1, n.count(".") + 1)}
    modules = set()
    for name in new:
        parts = name.split(".")
        k = next((k for k in range(1, len(parts)) if ".".join(parts[:k]) not in base_prefixes), len(parts))
        modules.add(".".join(parts[:k]))
    return _collapse(modules).split(", ")
