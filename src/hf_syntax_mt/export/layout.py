"""The names a CTranslate2 folder and its readers share (`ct2` writes it; `serve`, `ct2_usage` and
`model_files.check_ctranslate2_folder` read it), and the guarded import of CTranslate2, in a module that imports
nothing else of the package's export code, so that the readers and the writer import no circle."""

from __future__ import annotations

from ..cli_engine_args import CT2_QUANTIZATIONS as QUANTIZATIONS
from ..errors import UserError

#: the oldest CTranslate2 release the export was tested with (the `deploy` extra's floor)
MIN_CTRANSLATE2 = "4.0.0"
#: written beside CTranslate2's files: what the directory was exported from (read by `translate`)
EXPORT_INFO = "hf_syntax_mt_export.json"


def _ctranslate2():
    """`ctranslate2` and its converter module, or a `UserError` naming the extra to install / the release to use."""
    try:
        import ctranslate2
        from ctranslate2.converters import transformers as converters
    except ImportError as e:
        raise UserError(f"Exporting to CTranslate2 needs the ctranslate2 package ({e}): pip install "
                        "'hf-syntax-mt[deploy]' (or pip install ctranslate2).") from None  # fmt: skip
    needed = {
        "TransformersConverter": ("convert",), "MarianMTLoader": ("get_model_spec", "set_config", "set_decoder",
        "get_vocabulary", "_remove_pad_weights"), "BartLoader": ("get_model_spec", "set_config", "set_decoder",
        "get_vocabulary", "set_encoder", "set_linear"), "transformer_spec": ("TransformerSpec",),
        "_SUPPORTED_ACTIVATIONS": ("get",),
    }  # fmt: skip
    missing = [f"{cls}.{attr}" if hasattr(converters, cls) else cls for cls, attrs in needed.items()
               for attr in attrs if not hasattr(getattr(converters, cls, None), attr)]  # fmt: skip
    if not isinstance(getattr(converters, "_MODEL_LOADERS", None), dict):
        missing.append("_MODEL_LOADERS")
    if missing:
        raise UserError(f"ctranslate2 {ctranslate2.__version__} lacks the converter API the export uses "
                        f"({', '.join(dict.fromkeys(missing))}); install a release this package was tested with: pip "
                        f"install 'ctranslate2>={MIN_CTRANSLATE2},<5'.")  # fmt: skip
    return ctranslate2, converters


__all__ = ["EXPORT_INFO", "MIN_CTRANSLATE2", "QUANTIZATIONS"]
