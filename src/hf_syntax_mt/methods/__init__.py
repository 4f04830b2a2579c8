"""The registered methods (one module per family) and the registry they plug into.

    from hf_syntax_mt.methods import Method, register, registered, input_columns

The built-in methods are listed, in head order, in `builtin.py` (`BUILTIN`). See `registry.py` for what a method
owns, CONTRIBUTING.md ("Adding a method") for the steps, and tests/models/test_registry.py for a method added in one
module outside the package.
"""

from . import builtin  # noqa: F401  (registers the built-in methods)
from .columns import Column
from .registry import (
    AttentionContext,
    AttentionRecord,
    ForwardInputs,
    HeadRecord,
    Method,
    Option,
    active_methods,
    checking,
    column_specs,
    describe,
    get_method,
    head_kinds,
    head_layout,
    input_columns,
    input_names,
    loss_names,
    owned_fields,
    parse_columns,
    register,
    registered,
    shared,
    supervision_columns,
    supervision_names,
    unregister,
)

__all__ = [
    "AttentionContext",
    "AttentionRecord",
    "Column",
    "ForwardInputs",
    "HeadRecord",
    "Method",
    "Option",
    "active_methods",
    "checking",
    "column_specs",
    "describe",
    "get_method",
    "head_kinds",
    "head_layout",
    "input_columns",
    "input_names",
    "loss_names",
    "owned_fields",
    "parse_columns",
    "register",
    "registered",
    "shared",
    "supervision_columns",
    "supervision_names",
    "unregister",
]
