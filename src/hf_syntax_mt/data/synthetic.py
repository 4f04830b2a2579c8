"""Kept for compatibility: the synthetic demo language pair moved to :mod:`hf_syntax_mt.demo`.

- :mod:`hf_syntax_mt.demo.synthetic` -- the language: lexicon, dependency trees, head-final translation;
- :mod:`hf_syntax_mt.demo.synthetic_grammar` -- sampling sentences (``generate_pair``, ``generate_corpus``);
- :mod:`hf_syntax_mt.demo.synthetic_corpus` -- documents, contrastive examples, CoNLL-U/text files, ``datasets``.

Every name this module had is still importable from here (the public ones below; any other one through the module
``__getattr__``). New code should import from :mod:`hf_syntax_mt.demo`.
"""

from __future__ import annotations

from typing import Any

from ..demo import synthetic as _language
from ..demo import synthetic_corpus as _corpus
from ..demo import synthetic_grammar as _grammar
from ..demo.synthetic import (
    CASE_SUFFIXES,
    PRONOUN,
    PRONOUN_TARGETS,
    DependencyTree,
    Lexeme,
    SyntheticPair,
    noun_class,
    translate_tree,
)
from ..demo.synthetic_corpus import (
    PronounLink,
    SyntheticDocument,
    contrastive_examples,
    generate_documents,
    gold_parses,
    gold_source_parses,
    load_synthetic_dataset,
    load_synthetic_documents,
    to_conllu,
    write_corpus,
)
from ..demo.synthetic_grammar import generate_corpus, generate_pair

__all__ = [
    "CASE_SUFFIXES",
    "DependencyTree",
    "Lexeme",
    "PRONOUN",
    "PRONOUN_TARGETS",
    "PronounLink",
    "SyntheticDocument",
    "SyntheticPair",
    "contrastive_examples",
    "generate_corpus",
    "generate_documents",
    "generate_pair",
    "gold_parses",
    "gold_source_parses",
    "load_synthetic_dataset",
    "load_synthetic_documents",
    "noun_class",
    "to_conllu",
    "translate_tree",
    "write_corpus",
]


def __getattr__(name: str) -> Any:
    """The module's other old names (``LEXICON``, ``SOURCE_STEMS``, ``_SentenceBuilder``...), from their new home."""
    for module in (_language, _grammar, _corpus):
        if name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
