"""Moved to `hf_syntax_mt.training.script`; this module keeps the old import path working."""

import sys as _sys

from .training import script as _module

_sys.modules[__name__] = _module
