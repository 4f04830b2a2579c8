"""Signatures of what was scored: :func:`signature` (``hf-syntax-mt:<version>|key:value|...``) and
:func:`model_signature` (a model's variant, size, parser and seed), and the run file a training run writes."""

from __future__ import annotations

from ..errors import UserError
from .describe import describe_variant

#: File a training run writes beside the model: the model signature, the parser, the data and the scores.
RUN_INFO = "hf_syntax_mt_run.json"


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hf-syntax-mt")
    except PackageNotFoundError:  # a source tree on the path without install (a GPU machine given the checkout)
        from .. import __version__

        return __version__


def signature(**fields: object) -> str:
    """A model signature, ``hf-syntax-mt:<version>|key:value|...`` in the order the fields are given.

    Example: ``signature(variant="pascal(layer0:4 heads,sigma=1.0)", parser="gold", seed=0)`` ->
    ``"hf-syntax-mt:0.1.0|variant:pascal(layer0:4 heads,sigma=1.0)|parser:gold|seed:0"``.
    """
    parts = [f"hf-syntax-mt:{_package_version()}"]
    for key, value in fields.items():
        text = str(value)
        if "|" in text or "\n" in text:
            raise UserError(f"signature field {key}={text!r} must not contain '|' or a newline")
        parts.append(f"{key}:{text}")
    return "|".join(parts)


def model_signature(config, parser: str | None = None, seed: int | None = None, **fields: object) -> str:
    """:func:`signature` of a model: its variant (:func:`describe_variant`), size, parser and seed.

    ``parser`` defaults to the backend recorded in ``config.source_parser`` (``none`` without one).
    """
    if parser is None:
        recorded = getattr(config, "source_parser", None)
        parser = "none" if not recorded else ":".join(str(v) for v in recorded.values()).replace("|", "/")
    size = f"d{config.d_model}-{config.encoder_layers}+{config.decoder_layers}L-{config.encoder_attention_heads}H"
    extra = {"seed": seed} if seed is not None else {}
    return signature(variant=describe_variant(config), size=size, parser=parser, **extra, **fields)
