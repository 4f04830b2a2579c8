"""Moved to `hf_syntax_mt.evaluation.model_card`; this module keeps the old import path working."""

import sys as _sys

from .evaluation import model_card as _module

_sys.modules[__name__] = _module
