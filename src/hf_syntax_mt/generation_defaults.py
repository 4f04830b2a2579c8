"""The decoding a model carries, and the one description of a decoding that every recorded score names.

Every model the package builds or loads gets generation defaults where its generation config leaves them unset
(`fill_generation_defaults`): a length limit that fits the model's positions and a beam size. Without them
transformers decodes greedily up to its model-agnostic 20 tokens, with a warning on every call. A training run writes
its decoding into the saved model's generation config, and its test scores, `translate`, the pipeline and
`evaluate --model` read the same one unless a flag overrides it. `decoding` describes a decoding as a signature's
fields (``beams:4|max_length:128|weights:average(200+250+300)``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger(__name__)

#: the beam size of a model whose generation config sets none (opus-mt's and `translate`'s)
DEFAULT_NUM_BEAMS = 4


def generation_defaults(config) -> dict:
    """``max_length``: the model's ``max_position_embeddings`` (the decoder reads every output token but the last,
    so an output that long, decoder start included, fits); ``num_beams``: `DEFAULT_NUM_BEAMS`."""
    return {"max_length": int(config.max_position_embeddings), "num_beams": DEFAULT_NUM_BEAMS}


def fill_generation_defaults(model, generate_kwargs: dict | None = None, length_in_config: bool = False) -> None:
    """In place: the `generation_defaults` of ``model.config`` where nothing sets them; a value a checkpoint, the
    training run or the caller set is kept.

    The beam size goes into ``model.generation_config`` (it is saved with the model). The length limit is added to a
    `generate()` call's ``generate_kwargs`` (as ``max_length``) when neither the call nor the generation config sets a
    length: written into the generation config, transformers would warn on every call that passes ``max_new_tokens``
    ("Both `max_new_tokens` and `max_length` seem to have been set"). A model whose `generate()` is not ours (a
    `MarianMTModel` the package builds) gets it in its generation
    config instead (``length_in_config``), as opus-mt checkpoints carry theirs."""
    generation_config, config = getattr(model, "generation_config", None), getattr(model, "config", None)
    if generation_config is None or getattr(config, "max_position_embeddings", None) is None:
        return
    defaults = generation_defaults(config)
    if getattr(generation_config, "num_beams", None) is None:
        generation_config.num_beams = defaults["num_beams"]
    length_set = generation_config.max_length is not None or generation_config.max_new_tokens is not None
    if generate_kwargs is None:
        if length_in_config and not length_set:
            generation_config.max_length = defaults["max_length"]
        return
    given = generate_kwargs.get("generation_config")
    if length_set or any(generate_kwargs.get(k) is not None for k in ("max_length", "max_new_tokens")):
        return
    if given is not None and (given.max_length is not None or given.max_new_tokens is not None):
        return
    generate_kwargs["max_length"] = defaults["max_length"]


def resolve_generation(model, generate_kwargs: dict | None = None, warn: bool = True) -> tuple:
    """The settings a decoding of ``model`` with ``generate_kwargs`` runs with, and the keyword arguments that are not
    settings (the model inputs): the one source every engine reads (`generate`, the ONNX Runtime search, a Marian
    export's `generation_config.json`, a CTranslate2 directory's options) and the decoding line `translate` prints.

    Starting from the call's ``generation_config`` (else ``model.generation_config``), updated with the call's
    options as transformers' `generate` updates it: a multi-task model's ``"translate"`` token forced first (unless
    the call, or the call's generation config, forces another token, or the call gives ``decoder_input_ids``); `DEFAULT_NUM_BEAMS` where nothing sets a beam
    size; a length limit of ``max_position_embeddings`` where nothing sets one (not transformers' model-agnostic 20
    tokens), and any limit capped (with a warning, ``warn``) where the decoder would run out of positions (it reads
    every output token but the last: an output of L tokens, decoder start included, needs L - 1 positions).

    Args:
        model: anything with ``config`` (``max_position_embeddings``; ``task_token_ids`` for a multi-task model) and
            ``generation_config``: a model, or a CTranslate2 directory's stand-in.
        generate_kwargs: a `generate()` call's keyword arguments; not modified.

    Returns:
        ``(generation_config, inputs)``: a new `GenerationConfig` whose ``num_beams`` and ``max_length`` (or
        ``max_new_tokens``) are set, and the other keyword arguments.
    """
    import copy

    from transformers import GenerationConfig

    kwargs = dict(generate_kwargs or {})
    config = getattr(model, "config", None)
    task_tokens = getattr(config, "task_token_ids", None)
    given = kwargs.pop("generation_config", None)
    forced = "forced_bos_token_id" in kwargs or getattr(given, "forced_bos_token_id", None) is not None
    if task_tokens and not forced and kwargs.get("decoder_input_ids") is None:
        kwargs["forced_bos_token_id"] = task_tokens["translate"]
    base = given or getattr(model, "generation_config", None) or GenerationConfig()
    resolved = copy.deepcopy(base)
    if kwargs.get("max_new_tokens") is not None:  # the call's limit: a saved max_length would only warn
        resolved.max_length = None
    elif kwargs.get("max_length") is not None:
        resolved.max_new_tokens = None
    inputs = resolved.update(**kwargs)  # the keys it does not know: the model inputs
    if resolved.num_beams is None:
        resolved.num_beams = DEFAULT_NUM_BEAMS
    _check_token_ids(resolved, model)
    positions = getattr(config, "max_position_embeddings", None)
    if positions is None:
        return resolved, inputs
    if resolved.max_length is None and resolved.max_new_tokens is None:
        resolved.max_length = generation_defaults(config)["max_length"]
    limit = int(positions) + 1  # the longest output, decoder start token included
    start = inputs["decoder_input_ids"].shape[-1] if inputs.get("decoder_input_ids") is not None else 1
    if resolved.max_new_tokens is not None and start + resolved.max_new_tokens > limit:
        if warn:
            logger.warning(f"max_new_tokens={resolved.max_new_tokens} after {start} decoder token(s) would pass the "
                           f"model's max_position_embeddings={positions}: generating at most {limit - start} new "
                           "tokens.")  # fmt: skip
        resolved.max_new_tokens = limit - start
    elif resolved.max_new_tokens is None and resolved.max_length > limit:
        if warn:
            logger.warning(f"max_length={resolved.max_length} would pass the model's max_position_embeddings="
                           f"{positions}: generating at most {limit} tokens (decoder start included).")  # fmt: skip
        resolved.max_length = limit
    return resolved, inputs


#: the generation settings that name token ids (a list of ids, or of lists of ids, for some)
_TOKEN_FIELDS = ("decoder_start_token_id", "bos_token_id", "pad_token_id", "eos_token_id", "forced_bos_token_id",
                 "forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens", "bad_words_ids")  # fmt: skip


def _check_token_ids(resolved, model) -> None:
    """A `UserError` naming the field and the file for a token id that is not one of the model's (an opaque
    `IndexError` deep in the embedding otherwise)."""
    from .errors import UserError

    config = getattr(model, "config", None)
    vocab = getattr(config, "decoder_vocab_size", None) or getattr(config, "vocab_size", None)
    if not vocab:
        return
    for name in _TOKEN_FIELDS:
        value = getattr(resolved, name, None)
        ids = value if isinstance(value, (list, tuple)) else [value]
        ids = [i for item in ids for i in (item if isinstance(item, (list, tuple)) else [item]) if i is not None]
        bad = [i for i in ids if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab]
        if bad:
            where = getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", None)
            file = f"{where}/generation_config.json" if where else "the model's generation config"
            raise UserError(f"{name}={value!r} (in {file}, or the call's options) is not a token id of this model "
                            f"(its vocabulary has {vocab} tokens, ids 0-{vocab - 1}): set {name} to a token id of "
                            "the model's vocabulary, or leave it out.")  # fmt: skip


#: the settings a decoding line names beside beams and length when they differ from transformers' defaults
_NAMED = ("length_penalty", "early_stopping", "min_length", "min_new_tokens", "no_repeat_ngram_size",
          "repetition_penalty", "forced_bos_token_id")  # fmt: skip


def decoding_of(resolved, weights: str | None = None) -> str:
    """`decoding` of a `resolve_generation` result: beams, the length limit (``max_new_tokens`` N counts as
    ``max_length`` N + 1, the decoder start included) and each of the other search settings that differs from
    transformers' default."""
    from transformers import GenerationConfig

    defaults = GenerationConfig._get_default_generation_params()
    extra = {name: getattr(resolved, name) for name in _NAMED
             if getattr(resolved, name, None) not in (None, defaults.get(name))}  # fmt: skip
    if isinstance(extra.get("early_stopping"), bool):
        extra["early_stopping"] = str(extra["early_stopping"]).lower()
    length = resolved.max_length if resolved.max_new_tokens is None else 1 + resolved.max_new_tokens
    return decoding(resolved.num_beams, length, weights, **extra)


def max_length_of(model) -> int | None:
    """The length limit a model decodes with when the call sets none: its generation config's, else the default."""
    generation_config = getattr(model, "generation_config", None)
    length = getattr(generation_config, "max_length", None)
    if length is None and getattr(getattr(model, "config", None), "max_position_embeddings", None) is not None:
        return generation_defaults(model.config)["max_length"]
    return length


def weights_text(steps: Sequence[int], averaged: bool) -> str:
    """Which weights a score belongs to: ``average(200+250+300)`` or ``last(300)``."""
    return f"average({'+'.join(str(s) for s in steps)})" if averaged else f"last({steps[-1] if steps else 0})"


def decoding(num_beams: int | None, max_length: int | None, weights: str | None = None, **extra: object) -> str:
    """A decoding as signature fields, ``beams:4|max_length:128[|weights:...][|key:value...]``: what each recorded
    score names next to its sacrebleu signature. ``num_beams`` None counts as 1 (transformers' greedy default)."""
    fields = {"beams": num_beams or 1, "max_length": max_length, **({"weights": weights} if weights else {}), **extra}
    for key, value in fields.items():
        if "|" in str(value) or "\n" in str(value):
            raise ValueError(f"decoding field {key}={value!r} must not contain '|' or a newline")
    return "|".join(f"{key}:{value}" for key, value in fields.items())


def model_decoding(model, **extra: object) -> str:
    """`decoding` of a model's generation config, with the defaults where it sets none: what `translate` and the
    pipeline use when no flag overrides it."""
    beams = getattr(model.generation_config, "num_beams", None) or DEFAULT_NUM_BEAMS
    return decoding(beams, max_length_of(model), **extra)


#: `GenerationConfig` fields that change no token of a greedy or beam search as the engines run it: bookkeeping,
#: caching and compilation, the sampling-only settings (applied only with ``do_sample=True``, which no engine but
#: `generate` implements, so it is refused) and the assistant model's settings (read only when `generate` is given an
#: assistant model, which the engines never are)
INERT_GENERATION_FIELDS = frozenset({
    "_from_model_config", "transformers_version", "use_cache", "cache_implementation", "cache_config",
    "compile_config", "disable_compile", "max_cache_len", "prefill_chunk_size", "continuous_batching_config",
    "temperature", "top_k", "top_p", "typical_p", "min_p", "top_h", "epsilon_cutoff", "eta_cutoff",
    "assistant_confidence_threshold", "assistant_lookbehind", "target_lookbehind", "num_assistant_tokens",
    "num_assistant_tokens_schedule", "is_assistant",
})  # fmt: skip


def _is_default(name: str, value, defaults: dict) -> bool:
    default = defaults.get(name)
    if value is None or (default is None and (value is False or value == [] or value == {})):  # an unset flag or list
        return True
    return default is not None and value == default and isinstance(value, bool) == isinstance(default, bool)


def refused_generation_options(resolved, implemented) -> list[str]:
    """``name=value`` of each field of the `GenerationConfig` ``resolved`` that is set to something other than its
    default and that the engine neither implements (``implemented``: field names) nor may ignore
    (`INERT_GENERATION_FIELDS`): an allow-list, so an option transformers adds later is refused, not ignored."""
    from transformers import GenerationConfig

    defaults = GenerationConfig._get_default_generation_params()
    allowed = INERT_GENERATION_FIELDS | set(implemented)
    return [f"{name}={value!r}" for name, value in resolved.to_dict().items()
            if name not in allowed and not _is_default(name, value, defaults)]  # fmt: skip


def check_generation_options(resolved, implemented, engine: str, instead: str) -> None:
    """Raise a `UserError` naming every option `refused_generation_options` finds, the engine and what to do
    (``instead``: e.g. ``"translate with engine='generate'"``)."""
    from .errors import UserError

    refused = refused_generation_options(resolved, implemented)
    if refused:
        raise UserError(f"{engine} does not implement {', '.join(refused)}: leave {'it' if len(refused) == 1 else 'them'} "
                        f"out (the call's options or the model's generation_config.json), or {instead}")  # fmt: skip
