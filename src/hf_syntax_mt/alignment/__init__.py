"""Word alignment: alignments out of a model's cross-attention, alignment files as guided-alignment targets, a
corpus aligned word by word (`hf-syntax-mt align`) and its alignment error rate (`hf-syntax-mt aer`).

The modules, by concern (the methods that shape the cross-attention stay in `hf_syntax_mt.methods`:
`alignment_bias`, `fertility`, `guided_alignment`):

- :mod:`.cross_attention` -- `align` / `Alignment` (soft matrix and argmax links of a decoder layer),
  `recording_alignment`, `plot_alignment`, `symmetry_trace`, `AlignmentTrainingCallback`;
- :mod:`.targets` -- Pharaoh files checked against their pairs and mapped onto subwords as the `decoder_alignment`
  column of guided alignment (`AlignmentTargets`, `add_alignment_targets`, `check_alignment_lines`, `token_words`, `target_alignment`);
- :mod:`.words` -- word-level links of a corpus (`align_corpus`, `read_parallel_words`, `format_pharaoh`,
  `symmetrize`);
- :mod:`.aer` -- scoring against gold sure and possible links (`alignment_error_rate`, `index_base_hint`,
  `no_sure_link_warning`).

Pharaoh files are read by `hf_syntax_mt.data.readers` (`read_pharaoh`, `parse_pharaoh`, `GoldAlignment`), also
exported here. Inside the package, import from the module that defines a name (saved models bundle modules, not
this ``__init__``).
"""

from ..data.readers import GoldAlignment, parse_pharaoh, read_pharaoh
from .aer import alignment_error_rate, index_base_hint, no_sure_link_warning
from .cross_attention import (
    Alignment,
    AlignmentTrainingCallback,
    align,
    alignment_read,
    plot_alignment,
    recording_alignment,
    symmetry_trace,
)
from .targets import AlignmentTargets, add_alignment_targets, check_alignment_lines, target_alignment, token_words
from .words import align_corpus, format_pharaoh, read_parallel_words, symmetrize

__all__ = [
    "Alignment",
    "AlignmentTargets",
    "add_alignment_targets",
    "AlignmentTrainingCallback",
    "GoldAlignment",
    "align",
    "align_corpus",
    "alignment_error_rate",
    "alignment_read",
    "check_alignment_lines",
    "format_pharaoh",
    "index_base_hint",
    "no_sure_link_warning",
    "parse_pharaoh",
    "plot_alignment",
    "read_pharaoh",
    "read_parallel_words",
    "recording_alignment",
    "symmetrize",
    "symmetry_trace",
    "target_alignment",
    "token_words",
]

_MOVED = {
    "StructuralAlignmentBias": "methods.alignment_bias", "AlignmentStateLayer": "methods.alignment_bias",
    "ALIGNMENT_BIASES": "methods.alignment_bias", "GlobalFertility": "methods.fertility",
    "SymmetricTranslationModel": "symmetric", "SymmetricTranslationOutput": "symmetric",
    "SymmetricTranslationConfig": "symmetric", "DataCollatorForSymmetricTranslation": "symmetric",
}  # fmt: skip


def __getattr__(name: str):
    # names that moved to the methods and to `symmetric` before this package existed; the old path still works
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(f"{__name__.rpartition('.')[0]}.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
