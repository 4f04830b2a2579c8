"""Batch padding for syntax-aware seq2seq training (works with ``Seq2SeqTrainer``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

__all__ = ["DataCollatorForSyntaxMT"]

# Fields whose values are positions in the same sequence: a padding token points to itself.
_POSITION_FIELDS = ("parent_positions", "lisa_parents")
_POSITION_SUFFIX = "_heads"
# Word-level fields: one entry per syntactic word (UD heads), padded to the longest sentence with 0.
_WORD_FIELDS = ("word_heads",)
# Fields aligned with the decoder side (``labels``) rather than ``input_ids``.
_TARGET_PREFIXES = ("decoder_", "target_")
# Fields aligned with ``context_input_ids`` (document context, its own length M; may be 0).
_CONTEXT_PREFIX = "context_"


def _is_position_field(name: str) -> bool:
    if name in _WORD_FIELDS:
        return False
    return name in _POSITION_FIELDS or name.endswith(_POSITION_SUFFIX) or name.endswith("_parent_positions")


def _is_target_field(name: str) -> bool:
    return name == "labels" or name.startswith(_TARGET_PREFIXES)


def _is_context_field(name: str) -> bool:
    return name.startswith(_CONTEXT_PREFIX)


def _round_up(n: int, multiple: int | None) -> int:
    return n if not multiple else -(-n // multiple) * multiple


@dataclass
class DataCollatorForSyntaxMT:
    """Pad ``input_ids``, ``labels`` and every extra per-token field of a batch.

    Padding values:

    - ``input_ids``: the tokenizer's pad id; ``attention_mask``: 0; ``labels``: ``label_pad_token_id`` (-100);
    - ``parent_positions`` (float), ``lisa_parents`` and ``*_heads`` (int): the padding token's **own position**
      (DESIGN.md); with left padding the real tokens' positions are shifted by the padding length;
    - ``word_heads`` (one UD head per syntactic word, its own length): 0;
    - any other list field: 0 for ints, 0.0 for floats (``word_index`` and the feature ids: 0 = none).

    Fields named ``labels``, ``decoder_*`` or ``target_*`` are aligned with ``labels``; ``context_*`` fields with
    ``context_input_ids`` (document context: ``context_input_ids`` padded with the pad id, ``context_attention_mask``
    with 0; a batch whose contexts are all empty gives ``(B, 0)`` tensors); every other list field with
    ``input_ids``. A row whose field length differs from its reference raises ``ValueError``. Scalar fields
    are stacked; non-numeric fields are returned as lists. When ``model`` has
    ``prepare_decoder_input_ids_from_labels``, ``decoder_input_ids`` are built from the padded labels.

    Returns:
        dict of tensors: ``(B, S)`` source-side fields, ``(B, L)`` target-side fields, ``(B, M)`` context fields.
    """

    tokenizer: Any
    model: Any = None
    label_pad_token_id: int = -100
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def _pad_value(self, name: str, values: Sequence[Any]) -> Any:
        if name in ("input_ids", "decoder_input_ids", "context_input_ids"):
            pad = self.tokenizer.pad_token_id
            if pad is None:
                raise UserError("the tokenizer has no pad_token_id; set tokenizer.pad_token")
            return pad
        if name == "labels":
            return self.label_pad_token_id
        if name == "special_tokens_mask":
            return 1
        if name == "token_type_ids":
            return getattr(self.tokenizer, "pad_token_type_id", 0)
        is_float = any(isinstance(v, float) for v in values)
        return 0.0 if is_float else 0

    def __call__(self, features: list[dict[str, Any]], return_tensors: str | None = None) -> dict[str, Any]:
        return_tensors = return_tensors or self.return_tensors
        if return_tensors != "pt":
            raise UserError(f"return_tensors must be 'pt' (torch tensors), got {return_tensors!r}")
        if not features:
            raise UserError("cannot collate an empty list of features")
        if "input_ids" not in features[0]:
            raise UserError(f"features need 'input_ids'; got keys {sorted(features[0])}")
        names = list(features[0])
        for i, f in enumerate(features):
            if set(f) != set(names):
                raise UserError(f"row {i} has fields {sorted(f)} but row 0 has {sorted(names)}")
        side = getattr(self.tokenizer, "padding_side", "right")

        lengths = {"source": [len(f["input_ids"]) for f in features]}
        if "labels" in features[0] and isinstance(features[0]["labels"], (list, tuple)):
            lengths["target"] = [len(f["labels"]) for f in features]
        if "context_input_ids" in features[0]:
            lengths["context"] = [len(f["context_input_ids"]) for f in features]
        batch: dict[str, Any] = {}
        for name in names:
            column = [f[name] for f in features]
            if not isinstance(column[0], (list, tuple)) and not hasattr(column[0], "tolist"):
                batch[name] = column  # scalars / strings, converted below
                continue
            column = [c.tolist() if hasattr(c, "tolist") else list(c) for c in column]
            if name in _WORD_FIELDS:
                lengths[name] = [len(values) for values in column]
                ref, ref_name = name, name
            elif _is_context_field(name):
                if "context" not in lengths:
                    raise UserError(f"field {name!r} is a context field but the features have no 'context_input_ids'")
                ref, ref_name = "context", "context_input_ids"
            else:
                ref = "target" if _is_target_field(name) and "target" in lengths else "source"
                ref_name = "labels" if ref == "target" else "input_ids"
            for i, (values, n) in enumerate(zip(column, lengths[ref], strict=True)):
                if len(values) != n:
                    raise UserError(
                        f"field {name!r} in row {i} has length {len(values)} but {ref_name} has length {n}"
                    )
            width = _round_up(max(lengths[ref]), self.pad_to_multiple_of)  # 0 when every context is empty
            flat = [v for values in column for v in values]
            pad_value = self._pad_value(name, flat)
            position = _is_position_field(name)
            is_float = name == "parent_positions" or any(isinstance(v, float) for v in flat)
            padded = []
            for values in column:
                n_pad = width - len(values)
                if position:
                    shift = n_pad if side == "left" else 0
                    real = [v + shift for v in values]
                    pads = list(range(n_pad)) if side == "left" else list(range(len(values), width))
                    if is_float:
                        real, pads = [float(v) for v in real], [float(p) for p in pads]
                    row = pads + real if side == "left" else real + pads
                else:
                    row = [pad_value] * n_pad + values if side == "left" else values + [pad_value] * n_pad
                padded.append(row)
            batch[name] = (padded, is_float)

        import torch

        def array(rows, is_float=None):
            dtype = None if is_float is None else torch.float32 if is_float else torch.long
            return torch.tensor(rows, dtype=dtype)

        out: dict[str, Any] = {}
        for name, value in batch.items():
            if isinstance(value, tuple):
                out[name] = array(*value)
            elif all(isinstance(v, (int, float, bool)) for v in value):
                out[name] = array(value)
            else:
                out[name] = value
        if "parent_positions" in out and "input_ids" in out:
            # the values are checked here, on the CPU: the model's forward does not read those of device tensors
            from ..methods.pascal import check_parent_positions

            mask = out.get("attention_mask")
            check_parent_positions(
                torch.as_tensor(out["parent_positions"]), tuple(out["input_ids"].shape),
                None if mask is None else torch.as_tensor(mask),
            )  # fmt: skip
        if (
            self.model is not None
            and "labels" in out
            and "decoder_input_ids" not in out
            and hasattr(self.model, "prepare_decoder_input_ids_from_labels")
        ):
            out["decoder_input_ids"] = self.model.prepare_decoder_input_ids_from_labels(labels=out["labels"])
        return out
