"""Moved to `hf_syntax_mt.evaluation.probing`; this module keeps the old import path working."""

import sys as _sys

from .evaluation import probing as _module

_sys.modules[__name__] = _module
