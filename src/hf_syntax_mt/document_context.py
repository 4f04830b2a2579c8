"""Kept for compatibility: the document-level context lives in `hf_syntax_mt.methods.document_context`."""

from .methods.document_context import *  # noqa: F401,F403
from .methods.document_context import (  # noqa: F401
    ContextAttention,
    ContextEncoder,
    ContextMasks,
    context_masks,
    context_sublayer,
    has_context,
    is_document_parameter,
)
