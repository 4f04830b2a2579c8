"""Batch padding for syntax-aware seq2seq training (works with ``Seq2SeqTrainer``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..methods.columns import Column
from ..methods.registry import column_specs, registered

__all__ = ["DataCollatorForSyntaxMT"]

# The spine's own columns; every other column is declared by the method that reads it (`Method.inputs` /
# `supervision`, a `methods.Column` each: its kind says what it is aligned with and how it is padded).
_SPINE_COLUMNS = {
    column: column
    for column in (
        Column("input_ids", "source", pad="pad_token_id"),
        Column("attention_mask", "source"),
        Column("special_tokens_mask", "source", pad=1),
        Column("token_type_ids", "source", pad="pad_token_type_id"),
        Column("labels", "target", pad="label_pad_token_id"),
        Column("decoder_input_ids", "target", pad="pad_token_id"),
        Column("decoder_attention_mask", "target"),
    )
}
# the column each kind of column is aligned with (has the length of); a kind not here (a document method's
# "context" columns) is aligned with the first column of its kind that its method declares
_REFERENCE = {"source": "input_ids", "target": "labels"}


def _reference(kind: str, name: str) -> str:
    """The column that column `name`, of `kind`, is aligned with."""
    if kind in _REFERENCE:
        return _REFERENCE[kind]
    declared = next(m.inputs + m.supervision for m in registered() if name in m.inputs + m.supervision)
    return next(str(c) for c in declared if isinstance(c, Column) and c.kind == kind)


def _round_up(n: int, multiple: int | None) -> int:
    return n if not multiple else -(-n // multiple) * multiple


@dataclass
class DataCollatorForSyntaxMT:
    """Pad ``input_ids``, ``labels`` and every column the registered methods declare, each as its kind says
    (`methods.Column`, `methods.columns.COLUMN_KINDS`):

    - ``input_ids``: the tokenizer's pad id; ``attention_mask``: 0; ``labels``: ``label_pad_token_id`` (-100);
    - a *position* column (kind ``source_position`` / ``target_position``: a parent or head per token): the padding
      token's **own position** (DESIGN.md); with left padding the real tokens' positions are shifted by the padding
      length;
    - a *word* column (one value per syntactic word, e.g. a UD head, its own length): its pad value;
    - a *context* column (a document method's, made from the previous sentences: its pad value, e.g. the pad id for
      token ids; a batch whose contexts are all empty gives ``(B, 0)`` tensors), aligned with the first context
      column its method declares;
    - any other column: its declared pad value; a list field no method declares is aligned with ``input_ids`` and
      padded with 0 (0.0 for floats).

    Target columns are aligned with ``labels``, source columns with ``input_ids``. A row whose field length differs
    from its reference raises ``ValueError``. Scalar fields are stacked; non-numeric fields are returned as lists.
    Each registered method then checks the values of its columns (`Method.check_batch`, on the CPU). When ``model``
    has ``prepare_decoder_input_ids_from_labels``, ``decoder_input_ids`` are built from the padded labels.

    Returns:
        dict of tensors: ``(B, S)`` source-side fields, ``(B, L)`` target-side fields, ``(B, M)`` context fields,
        ``(B, W)`` word fields.
    """

    tokenizer: Any
    model: Any = None
    label_pad_token_id: int = -100
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def _column(self, name: str, values: list) -> Column:
        """The column `name` as declared (by the spine or a method); undeclared: source-aligned, 0 or 0.0."""
        column = _SPINE_COLUMNS.get(name) or column_specs().get(name)
        if column is not None:
            return column
        is_float = any(isinstance(v, float) for row in values for v in row)
        return Column(name, "source", pad=0.0 if is_float else 0, dtype="float32" if is_float else "int64")

    def _pad_value(self, column: Column) -> Any:
        if column.pad == "pad_token_id":
            if self.tokenizer.pad_token_id is None:
                raise UserError("the tokenizer has no pad_token_id; set tokenizer.pad_token")
            return self.tokenizer.pad_token_id
        if column.pad == "label_pad_token_id":
            return self.label_pad_token_id
        if column.pad == "pad_token_type_id":
            return getattr(self.tokenizer, "pad_token_type_id", 0)
        return column.pad

    def _pad(self, column: Column, rows: list[list], width: int, side: str) -> list[list]:
        """`rows` padded to `width` on `side`: positions point to themselves (and shift on the left), others take
        the pad value."""
        out = []
        for values in rows:
            n_pad = width - len(values)
            if column.kind.endswith("_position"):
                shift = n_pad if side == "left" else 0
                real = [v + shift for v in values]
                pads = list(range(n_pad)) if side == "left" else list(range(len(values), width))
                row = pads + real if side == "left" else real + pads
            else:
                pads = [self._pad_value(column)] * n_pad
                row = pads + values if side == "left" else values + pads
            out.append(row)
        return out

    def __call__(self, features: list[dict[str, Any]], return_tensors: str | None = None) -> dict[str, Any]:
        import torch

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

        lists = {}  # name -> rows, for the list fields
        out: dict[str, Any] = {}
        for name in names:
            column = [f[name] for f in features]
            if isinstance(column[0], (list, tuple)) or hasattr(column[0], "tolist"):
                lists[name] = [c.tolist() if hasattr(c, "tolist") else list(c) for c in column]
            elif all(isinstance(v, (int, float, bool)) for v in column):
                out[name] = torch.tensor(column)
            else:
                out[name] = column  # strings and other non-numeric fields
        for name, rows in lists.items():
            column = self._column(name, rows)
            kind = column.kind.removesuffix("_position")
            if kind == "word":
                reference, lengths = name, [len(values) for values in rows]
            else:
                reference = _reference(kind, name)
                if kind == "target" and "labels" not in lists:
                    reference = "input_ids"  # target columns without labels (generation): as the source
                if reference not in lists:
                    raise UserError(f"field {name!r} is a {column.kind} column but the features have no {reference!r}")
                lengths = [len(values) for values in lists[reference]]
            for i, (values, n) in enumerate(zip(rows, lengths, strict=True)):
                if len(values) != n:
                    raise UserError(
                        f"field {name!r} in row {i} has length {len(values)} but {reference} has length {n}"
                    )
            width = _round_up(max(lengths), self.pad_to_multiple_of)  # 0 when every context is empty
            dtype = torch.float32 if column.is_float else torch.long
            out[name] = torch.tensor(self._pad(column, rows, width, side), dtype=dtype)

        for method in registered():  # values checked on the CPU: the model's forward does not read device tensors'
            method.check_batch(out)
        if (
            self.model is not None
            and "labels" in out
            and "decoder_input_ids" not in out
            and hasattr(self.model, "prepare_decoder_input_ids_from_labels")
        ):
            out["decoder_input_ids"] = self.model.prepare_decoder_input_ids_from_labels(labels=out["labels"])
        return out
