"""Training: the tokenizer and model factory (`factory`), the opus-mt layout of a tokenizer trained on the fly
(`opus_mt`), `SyntaxMTTrainer` and :func:`build_trainer` (`trainer`), the wall-clock budget, checkpoint averaging and
learning-curve callbacks (`callbacks`), token batches (`batching`), and the command-line run behind
`scripts/train.py` and `hf-syntax-mt train` (`script`, its arguments in `script_args`, its data readers in `data`).
Used by `scripts/train.py`, `hf-syntax-mt demo`, the benchmarks and the tests."""

# ruff: noqa: F401  (the old module's names, re-exported: `from hf_syntax_mt.training import ...` keeps working)

from __future__ import annotations

from .callbacks import CheckpointAverageCallback, CurveCallback, TimeBudgetCallback
from .factory import EOS, PAD, UNK, build_model, load_with_options, model_config, train_tokenizer
from .opus_mt import PadRowCallback, train_opus_mt_tokenizer
from .trainer import SyntaxMTTrainer, build_trainer

__all__ = [
    "CheckpointAverageCallback",
    "CurveCallback",
    "PadRowCallback",
    "SyntaxMTTrainer",
    "TimeBudgetCallback",
    "build_model",
    "build_trainer",
    "load_with_options",
    "model_config",
    "train_opus_mt_tokenizer",
    "train_tokenizer",
]
