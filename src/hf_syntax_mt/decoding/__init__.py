"""Decoding engines for `translate` and the pipeline (``engine=``): transformers' `generate` (the default), or
`onnxruntime`: the model's own encoder in torch, then Marian's decoder with a key/value cache in ONNX Runtime and a
search that gives `generate`'s token ids (for every model whose decoder is Marian's: PASCAL, the tree methods, input
features, the encoder-side heads; docs/deploying.md says what was measured against what)."""

from .engines import ENGINES, check_engine, make_engine

__all__ = ["ENGINES", "check_engine", "make_engine"]
