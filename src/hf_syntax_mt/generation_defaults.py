"""The decoding a model carries, and the one description of a decoding that every recorded score names.

Every model the package builds or loads gets generation defaults where its generation config leaves them unset
(`fill_generation_defaults`): a length limit that fits the model's positions and a beam size. Without them
transformers decodes greedily up to its model-agnostic 20 tokens, with a warning on every call. A training run writes
its decoding into the saved model's generation config, and its test scores, `translate`, the pipeline and
`evaluate --model` read the same one unless a flag overrides it. `decoding` describes a decoding as a signature's
fields (``beams:4|max_length:128|weights:average(200+250+300)``).
"""

from __future__ import annotations

from collections.abc import Sequence

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
