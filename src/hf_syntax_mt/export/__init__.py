"""Serve what you train: export a model whose inference graph is Marian's to a plain transformers `MarianMTModel`
(`export_to_marian`, `save_marian`) or to CTranslate2 (`export_to_ctranslate2`); `check_exportable` says which
options stand in the way, and why. `hf-syntax-mt export --model DIR --to marian|ctranslate2 --output OUT` is the
command; `hf-syntax-mt translate --model OUT` translates with either kind of directory.

    from hf_syntax_mt.export import export_to_marian, save_marian, export_to_ctranslate2

    marian = export_to_marian(model)                       # a transformers MarianMTModel, same outputs
    save_marian(model, "out/marian", tokenizer)            # loads with plain transformers, no trust_remote_code
    export_to_ctranslate2("out/marian", "out/ct2", quantization="int8")
"""

from .ct2 import QUANTIZATIONS, export_to_ctranslate2
from .marian import blocking_methods, check_exportable, export_to_marian, marian_config, save_marian

__all__ = [
    "QUANTIZATIONS", "blocking_methods", "check_exportable", "export_to_ctranslate2", "export_to_marian",
    "marian_config", "save_marian",
]  # fmt: skip
