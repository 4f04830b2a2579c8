"""The engines `translate --engine` and `pipeline(..., engine=...)` take (see `hf_syntax_mt.decoding`)."""

from __future__ import annotations

from ..errors import UserError

#: the engines `translate --engine` and `pipeline(..., engine=...)` take
ENGINES = ("generate", "onnxruntime")


def check_engine(name: str) -> str:
    """``name`` if it is one of `ENGINES`, else a `UserError` listing them."""
    if name not in ENGINES:
        raise UserError(f"engine={name!r} is not an engine; give one of {', '.join(ENGINES)}")
    return name


def make_engine(name: str, model):
    """The decoder object of engine ``name`` for ``model`` (`None` for `generate`, which is the model's own)."""
    if check_engine(name) == "generate":
        return None
    from .onnx_engine import OnnxDecoder

    return OnnxDecoder(model)


__all__ = ["ENGINES", "check_engine", "make_engine"]
