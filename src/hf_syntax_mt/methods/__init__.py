"""The registered methods (one module per family) and the registry they plug into.

    from hf_syntax_mt.methods import Method, register, registered, input_columns

The built-in families, in head order: `pascal`, `tree_distance`, `biaffine` (LISA + DBSA), `synchronous`,
`input_features`, `alignment_bias`, `fertility`, `document_context`. See `registry.py` for what a method owns and
tests/models/test_registry.py for a method added in one module.
"""

from . import builtin  # noqa: F401  (registers the built-in methods)
from .registry import (
    AttentionContext,
    AttentionRecord,
    HeadRecord,
    Method,
    active_methods,
    describe,
    get_method,
    head_layout,
    input_columns,
    input_names,
    loss_names,
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
    "HeadRecord",
    "Method",
    "active_methods",
    "describe",
    "get_method",
    "head_layout",
    "input_columns",
    "input_names",
    "loss_names",
    "parse_columns",
    "register",
    "registered",
    "supervision_columns",
    "supervision_names",
    "unregister",
]
