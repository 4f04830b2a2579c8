"""Moved to `hf_syntax_mt.evaluation.contrastive`; this module keeps the old import path working."""

import sys as _sys

from .evaluation import contrastive as _module

_sys.modules[__name__] = _module
