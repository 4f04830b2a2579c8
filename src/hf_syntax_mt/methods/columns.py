"""The data columns a method declares (`Method.inputs`, `Method.supervision`): each a `Column`, a name with what its
values are aligned with, how they are padded and which parse they are computed from. The collator, the
preprocessor and the pipeline read these declarations (`registry.column_specs`) and nothing else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import UserError

#: what a column's values are aligned with, and so how the collator pads it:
#: "source": one value per `input_ids` token, padded with `pad`; "source_position": one per `input_ids` token, each a
#: position in the same sequence (a padding token points to itself; left padding shifts the others); "word": one per
#: syntactic word of the source, its own length, padded with `pad`; "target" / "target_position": the same for
#: `labels`; "context": one per `context_input_ids` token (document context, length M >= 0), padded with `pad`
COLUMN_KINDS = ("source", "source_position", "word", "target", "target_position", "context")
#: the `Column.parse` a column is computed from: the source or the target sentence's parse (`data.subwords.align_parse`
#: computes it by name), or neither (None: another part of the data side makes it, e.g. the document context)
PARSE_SIDES = ("source", "target")


class Column(str):
    """A data column a method reads: its name (a `str`: every reader of names takes it as one) with how the data side
    treats it. `kind` (one of `COLUMN_KINDS`) says what the values are aligned with and how they are padded; `pad`
    the padding value (`"pad_token_id"`: the tokenizer's); `dtype` `"int64"` or `"float32"`; `parse` whether the
    preprocessor and the pipeline compute it from the source or the target parse (`PARSE_SIDES`, None: not from a
    parse): by name where `data.subwords.align_parse` knows it (`PARSE_COLUMNS`), else by `compute(parse, word_ids)`,
    the column's values for each subword from the sentence's parse and each subword's word index (None for special
    tokens). The collator, the preprocessor and the pipeline read these and nothing else."""

    kind: str
    pad: Any
    dtype: str
    parse: str | None
    compute: Callable[[Any, list[int | None]], list] | None

    def __new__(
        cls,
        name: str,
        kind: str,
        pad: Any = 0,
        dtype: str = "int64",
        parse: str | None = None,
        compute: Callable[[Any, list[int | None]], list] | None = None,
    ):
        if kind not in COLUMN_KINDS:
            raise UserError(f"Column {name!r}: kind={kind!r} must be one of {COLUMN_KINDS}.")
        if parse is not None and parse not in PARSE_SIDES:
            raise UserError(f"Column {name!r}: parse={parse!r} must be one of {PARSE_SIDES} or None.")
        if compute is not None and (parse != "source" or kind != "source"):
            raise UserError(f"Column {name!r}: compute= makes one value per source subword: give kind='source' and "
                            "parse='source'.")  # fmt: skip
        column = super().__new__(cls, name)
        column.kind, column.pad, column.dtype, column.parse, column.compute = kind, pad, dtype, parse, compute
        return column

    def __reduce__(self):  # picklable (datasets hashes and pickles the preprocessor)
        return (Column, (str(self), self.kind, self.pad, self.dtype, self.parse, self.compute))

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("float")
