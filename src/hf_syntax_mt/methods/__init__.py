"""The registered methods (one module per family) and the registry they plug into.

    from hf_syntax_mt.methods import Method, register, registered, input_columns

The built-in methods are listed, in head order, in `builtin.py` (`BUILTIN`). See `base.py` for what a method owns
(the `Method` base, its hooks grouped by stage), `registry.py` for the registry's state and lookups, `records.py` for
what one forward keeps, `hf_syntax_mt.validation` for `Option` and the option checks, CONTRIBUTING.md ("Adding a
method") for the steps, and tests/models/test_registry.py for a method added in one module outside the package.
"""

from ..validation import Option, checking
from . import builtin  # noqa: F401  (registers the built-in methods)
from .base import Method
from .columns import Column, DataTransform, SubwordParse, TransformContext
from .records import AttentionContext, AttentionRecord, ForwardInputs, HeadRecord, shared
from .registry import (
    active_methods,
    callbacks,
    column_specs,
    data_transforms,
    describe,
    get_method,
    head_kinds,
    head_layout,
    input_columns,
    input_names,
    loss_names,
    method_of,
    owned_fields,
    parse_columns,
    register,
    registered,
    supervision_columns,
    supervision_names,
    unregister,
)

__all__ = [
    "AttentionContext",
    "AttentionRecord",
    "Column",
    "DataTransform",
    "ForwardInputs",
    "HeadRecord",
    "SubwordParse",
    "TransformContext",
    "Method",
    "Option",
    "active_methods",
    "callbacks",
    "checking",
    "column_specs",
    "data_transforms",
    "describe",
    "get_method",
    "head_kinds",
    "head_layout",
    "input_columns",
    "input_names",
    "loss_names",
    "method_of",
    "owned_fields",
    "parse_columns",
    "register",
    "registered",
    "shared",
    "supervision_columns",
    "supervision_names",
    "unregister",
]
