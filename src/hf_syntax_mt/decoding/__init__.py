"""Decoding engines for `translate` and the pipeline (``engine=``): transformers' `generate` (the default), or
`onnxruntime`: the model's own encoder in torch, then Marian's decoder with a key/value cache in ONNX Runtime and a
search that gives `generate`'s token ids (for every model whose decoder is Marian's: PASCAL, the tree methods, input
features, the encoder-side heads; docs/deploying.md says what was measured against what)."""

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
    from .onnx import OnnxDecoder

    return OnnxDecoder(model)


__all__ = ["ENGINES", "check_engine", "make_engine"]
