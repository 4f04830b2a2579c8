"""Target dependency-relation labels: a linear classifier on the decoder's output states predicts, at each target
position, the universal dependency relation of the token being generated there (its word's relation in the target
parse), trained with cross-entropy beside the translation loss. Training only: the classifier is dropped at export and
nothing runs at inference. Column: `decoder_deprel_ids` `(B, T)`, aligned with `labels` (-100: no label), computed from
the target parse with the label vocabulary of the config (`decoder_deprel_labels`)."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from ..validation import Option, check_weight, checking
from ..vocabularies import DEPRELS
from .base import Method
from .columns import Column, SubwordParse


def _labels(config) -> tuple[str, ...]:
    return tuple(getattr(config, "decoder_deprel_labels", None) or DEPRELS)


def deprel_ids(sentence: SubwordParse, config) -> list[int]:
    """The `decoder_deprel_ids` column: each target subword's word's relation, as its index in the config's label
    vocabulary (universal part: "nmod:poss" -> "nmod"); -100 for special tokens and relations outside it."""
    ids = {rel: k for k, rel in enumerate(_labels(config))}
    rels = sentence.parse.deprels
    return [-100 if w is None else ids.get(rels[w].split(":")[0].lower(), -100) for w in sentence.word_ids]


def _check_labels(config, name: str) -> None:
    labels = getattr(config, name)
    if labels is not None and (not isinstance(labels, list) or not labels or len(set(labels)) != len(labels)
                               or not all(isinstance(x, str) and x for x in labels)):  # fmt: skip
        raise UserError(f"{name}={labels!r} must be a list of distinct relation names (e.g. [\"nsubj\", \"obj\"]), "
                        "or None for the universal relations.")  # fmt: skip


class DecoderDeprel(Method):
    name = "decoder_deprel"
    inference_needs = None  # a training-only loss: export drops its classifier
    config_options = {
        "decoder_deprel_weight": Option(
            "float | int",
            0.0,
            """Weight of the target dependency-relation loss: a classifier on the decoder's output states predicts
            the relation (in the target parse) of each target token; 0 (default) switches it off.""",
            check=checking(check_weight, "0 switches the target relation labels off"),
        ),
        "decoder_deprel_labels": Option(
            "list[str] | None",
            None,
            """The relation labels the classifier predicts (their order is the classifier's); `None`: the universal
            dependency relations. A relation outside the list is not supervised.""",
            check=_check_labels,
        ),
    }
    supervision = (Column("decoder_deprel_ids", "target", pad=-100, parse="target", compute=deprel_ids),)
    losses = ("decoder_deprel_loss",)
    tester_config = {"decoder_deprel_weight": 0.5}
    trainable = ("decoder_deprel_head",)

    def active(self, config) -> bool:
        return config.decoder_deprel_weight > 0

    def describe(self, config):
        if not self.active(config):
            return None
        return (f"Target dependency-relation labels: a classifier on the decoder output predicts each target token's "
                f"relation ({len(_labels(config))} labels), weight {config.decoder_deprel_weight}; training only.")  # fmt: skip

    def build_model(self, model, config):
        model.decoder_deprel_head = nn.Linear(config.d_model, len(_labels(config))) if self.active(config) else None

    def check_batch(self, batch):
        ids = batch.get("decoder_deprel_ids")
        if ids is None:
            return
        bad = (ids < 0) & (ids != -100)  # the classifier's size is the config's, checked by cross-entropy
        if bad.any():
            row, t = (int(i) for i in bad.nonzero()[0])
            raise UserError(f"decoder_deprel_ids[{row}, {t}] = {int(ids[row, t])} is not a label index or -100: make "
                            "the column with SyntaxMTPreprocessor.for_config.")  # fmt: skip

    def loss(self, model, record, batch, outputs):
        target, labels = batch.get("decoder_deprel_ids"), batch.get("labels")
        if target is None or labels is None or getattr(model, "decoder_deprel_head", None) is None:
            return {}
        # not a method of ../shared/papers (the example of a new column kind): a token-level cross-entropy,
        # -sum_t log p(r_t | s_t) over the labelled target positions, s_t the decoder's output state
        logits = model.decoder_deprel_head(outputs.last_hidden_state)  # (B, T, L): position t predicts labels[t]'s
        target = target.to(logits.device).masked_fill(labels.to(logits.device) == -100, -100)  # (B, T)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=-100,
                                           reduction="sum")  # fmt: skip
        return {"decoder_deprel_loss": loss}

    def loss_weights(self, config):
        return {"decoder_deprel_loss": config.decoder_deprel_weight}

    def export_state(self, model, state: dict[str, torch.Tensor]) -> None:
        for key in [k for k in state if k.startswith("decoder_deprel_head.")]:  # training only
            del state[key]
