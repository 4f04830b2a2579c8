"""Moved to `hf_syntax_mt.training.data`; this module keeps the old import path working."""

import sys as _sys

from .training import data as _module

_sys.modules[__name__] = _module
