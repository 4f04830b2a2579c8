"""Method recipes: the studies' method settings as data, read by `hf-syntax-mt train --recipe` and by the study
scripts (`benchmarks/studies/study_round2.py`, `study_round3.py`), so that what the README reports is what a user
trains (OpenNMT-py ships its experiments as config files; here they are one table).

A recipe is a list of parts; each part sets the options of one method family for a model of a given shape
(`Shape`: layers and heads of each stack), laid out as the Multi30k studies laid them out at 3 layers of 4 heads:

- ``pascal``: PASCAL heads in the first encoder layer, half of its heads (2 of 4; Bugliarello & Okazaki 2020 put
  them in layer 1);
- ``alignment``: Cohn et al.'s position, Markov and fertility biases in every decoder layer's cross-attention;
- ``dbsa_sync``: one DBSA head in the first layer of the encoder and of the decoder, trained with lambda_dep =
  lambda_sync = 0.5 (Deguchi et al.'s En-De weights) and decoder full context (round two's ``dbsa_sync_full``);

and every recipe starts a model built from scratch from fairseq's Xavier attention init (``attention_init=xavier``,
+1.1 BLEU in the Multi30k study), which a checkpoint given with ``--model_name_or_path`` does not take (it keeps its
weights). Standard library only: `train_help` checks a command line's recipe against its parses before transformers is
imported (`missing_parses`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import UserError


@dataclass(frozen=True)
class Shape:
    """The layers and heads of a model's two stacks: what a recipe adapts to."""

    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int

    @classmethod
    def of(cls, config) -> Shape:
        """The shape of a `SyntaxMTConfig` / `MarianConfig`."""
        return cls(config.encoder_layers, config.decoder_layers, config.encoder_attention_heads,
                   config.decoder_attention_heads)  # fmt: skip


#: the Multi30k studies' models (`multi30k_study.RECIPE`: 3 + 3 layers of 4 heads)
STUDY_SHAPE = Shape(3, 3, 4, 4)


def _first_layer(layers: int, heads: int) -> list[int]:
    """``heads`` in the first layer, none in the others: ``[2, 0, 0]``."""
    return [heads] + [0] * (layers - 1)


@dataclass(frozen=True)
class Part:
    """One method family's options in a recipe: ``options(shape)`` gives them; ``parses`` says which parses training
    reads (``"source"``, ``"target"``) and ``inference`` which parse translating reads (the recipe's cost at
    inference); `tests/test_recipes.py` checks both against what the method registry declares."""

    about: str
    options: Callable[[Shape], dict[str, Any]]
    parses: tuple[str, ...]
    inference: tuple[str, ...]


PARTS: dict[str, Part] = {
    "pascal": Part(
        "PASCAL (Bugliarello & Okazaki 2020): half the heads of encoder layer 1 attend around each token's parent",
        lambda s: {"encoder_pascal_heads": _first_layer(s.encoder_layers, max(1, s.encoder_heads // 2))},
        parses=("source",),
        inference=("source",),
    ),
    "alignment": Part(
        "Cohn et al. (2016) position, Markov and fertility biases in every decoder layer's cross-attention",
        lambda s: {"alignment_bias_layers": list(range(s.decoder_layers))},
        parses=(),
        inference=(),
    ),
    "dbsa_sync": Part(
        "DBSA (Deguchi et al. 2019): 1 head of layer 1 in the encoder and the decoder trained on the trees, plus the "
        "synchronous loss (lambda_dep = lambda_sync = 0.5), decoder full context",
        lambda s: {
            "encoder_dbsa_heads": _first_layer(s.encoder_layers, 1),
            "decoder_dbsa_heads": _first_layer(s.decoder_layers, 1),
            "dbsa_loss_weight": 0.5,
            "sync_loss_weight": 0.5,
            "decoder_dbsa_full_context": True,
        },  # fmt: skip
        parses=("source", "target"),
        inference=(),
    ),
}

#: recipe -> its parts, in the order the studies wrote their options (`overrides_text` reproduces the unit files'
#: ``overrides``); ``dbsa_sync`` is round two's ``dbsa_sync_full``
RECIPES: dict[str, tuple[str, ...]] = {
    "vanilla": (),
    "pascal": ("pascal",),
    "alignment": ("alignment",),
    "dbsa_sync": ("dbsa_sync",),
    "pascal_dbsa_sync": ("pascal", "dbsa_sync"),
    "all3": ("pascal", "alignment", "dbsa_sync"),
    "dbsa_sync_align": ("alignment", "dbsa_sync"),
}
#: what the studies found of each recipe (docs/studies), for `--help` and the model card
ABOUT = {
    "vanilla": "no syntax: Marian's architecture",
    "pascal": "PASCAL alone",
    "alignment": "the alignment biases alone",
    "dbsa_sync": "DBSA + synchronous loss: the best single method of round two, and it exports (no parse at inference)",
    "pascal_dbsa_sync": "PASCAL + DBSA + synchronous loss",
    "all3": "PASCAL + the alignment biases + DBSA + synchronous loss: round three's best (needs a parser at inference)",
    "dbsa_sync_align": "the alignment biases + DBSA + synchronous loss (all3 without PASCAL)",
}
#: the init every recipe gives a model built from scratch
INIT = {"attention_init": "xavier"}


def check_recipe(name: str) -> tuple[str, ...]:
    """The parts of recipe ``name``, or a `UserError` listing the recipes."""
    if name not in RECIPES:
        import difflib

        close = difflib.get_close_matches(str(name), RECIPES, n=2)
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise UserError(f"--recipe {name!r} is not a recipe.{hint} The recipes: {', '.join(RECIPES)}.")
    return RECIPES[name]


def recipe_options(name: str, shape: Shape, from_scratch: bool = True) -> dict[str, Any]:
    """The config options recipe ``name`` sets on a model of ``shape``, in the studies' order (the parts', then the
    attention init of a model built from scratch)."""
    options: dict[str, Any] = {}
    for part in check_recipe(name):
        options.update(PARTS[part].options(shape))
    return {**options, **(INIT if from_scratch else {})}


def value_text(value: Any) -> str:
    """An option's value as the studies wrote it: JSON without spaces (``[2,0,0]``, ``true``), strings bare."""
    return json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value


def overrides_text(name: str, shape: Shape = STUDY_SHAPE) -> str:
    """``key=value,...`` of `recipe_options` as the studies' ``--config_overrides`` wrote it (and their unit files
    record), e.g. ``encoder_pascal_heads=[2,0,0],attention_init=xavier``."""
    return ",".join(f"{k}={value_text(v)}" for k, v in recipe_options(name, shape).items())


def describe(name: str, options: dict[str, Any]) -> str:
    """One line: what recipe ``name`` set, e.g. ``recipe all3: encoder_pascal_heads=[2,0,0], ...``."""
    return f"recipe {name} ({ABOUT[name]}): " + ", ".join(f"{k}={value_text(v)}" for k, v in options.items())


def parses_read(name: str, training: bool = True) -> dict[str, list[str]]:
    """Parse side (``"source"``, ``"target"``) -> the parts of recipe ``name`` that read it, for a split that trains
    (``training``) or one that only translates (the recipe's cost at inference)."""
    out: dict[str, list[str]] = {}
    for part in check_recipe(name):
        for side in PARTS[part].parses if training else PARTS[part].inference:
            out.setdefault(side, []).append(part)
    return out


__all__ = ["ABOUT", "PARTS", "RECIPES", "STUDY_SHAPE", "Shape", "check_recipe", "describe", "overrides_text",
           "parses_read", "recipe_options", "value_text"]  # fmt: skip
