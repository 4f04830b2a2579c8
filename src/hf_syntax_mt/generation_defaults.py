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


def fill_generation_defaults(model) -> None:
    """In place: the `generation_defaults` of ``model.config`` in ``model.generation_config`` where it leaves them
    unset (None); a value a checkpoint or the user set is kept."""
    generation_config, config = getattr(model, "generation_config", None), getattr(model, "config", None)
    if generation_config is None or getattr(config, "max_position_embeddings", None) is None:
        return
    for key, value in generation_defaults(config).items():
        if getattr(generation_config, key, None) is None:
            setattr(generation_config, key, value)


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


def model_decoding(model_or_config, **extra: object) -> str:
    """`decoding` of a model's generation config (a `GenerationConfig`, or a model holding one): what `translate`
    and the pipeline use when no flag overrides it."""
    config = getattr(model_or_config, "generation_config", model_or_config)
    return decoding(getattr(config, "num_beams", None), getattr(config, "max_length", None), **extra)
