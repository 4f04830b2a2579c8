"""Data preparation: parsing, subword alignment, document context, ``datasets.map`` preprocessing and batch
collation.

The modules, in the order the data flows (each imports only modules before it; ``tests/data/test_layout.py``
checks it):

- :mod:`.parsed` -- :class:`ParsedSentence`, the dependency tree every reader and parser produces;
- :mod:`.readers` -- every file reader: text lines, parallel text, TSV, JSONL, document ids, CoNLL-U;
- :mod:`.stanza_resources` -- locally trained stanza models registered for offline loading, model digests;
- :mod:`.parsers` -- the parser backends (stanza, spaCy, pre-parsed CoNLL-U, a cache); :mod:`.parser_config` --
  a parser from a model config, checked;
- :mod:`.subwords` -- word-level trees mapped onto subword tokens (PASCAL parents, LISA, DBSA, features);
- :mod:`.documents` -- document-level context (previous source sentences);
- :mod:`.preprocess` -- the batched ``datasets.map`` function; :mod:`.multitask` -- parse + translate rows;
- :mod:`.collator` -- padding a batch.

The synthetic demo language is in :mod:`hf_syntax_mt.demo`.
"""

from .collator import DataCollatorForSyntaxMT
from .documents import DocumentContext, add_document_context, encode_context
from .parsed import ParsedSentence, merge_sentences
from .parsers import (
    PARSER_BACKENDS,
    CachedParser,
    ConllParser,
    MissingParseError,
    Parser,
    ParserNotAvailableError,
    SpacyParser,
    StanzaParser,
    get_parser,
)
from .preprocess import SyntaxMTPreprocessor, prepare_dataset
from .readers import load_parallel_files, read_conllu, read_doc_ids, read_documents, read_parallel_conllu
from .subwords import (
    align_parse,
    dbsa_heads_from_word_ids,
    lisa_parents_from_word_ids,
    parent_positions_from_word_ids,
    word_middle_positions,
)

__all__ = [
    "PARSER_BACKENDS",
    "CachedParser",
    "ConllParser",
    "DataCollatorForSyntaxMT",
    "DocumentContext",
    "MissingParseError",
    "ParsedSentence",
    "Parser",
    "ParserNotAvailableError",
    "SpacyParser",
    "StanzaParser",
    "SyntaxMTPreprocessor",
    "add_document_context",
    "align_parse",
    "dbsa_heads_from_word_ids",
    "encode_context",
    "get_parser",
    "lisa_parents_from_word_ids",
    "load_parallel_files",
    "merge_sentences",
    "parent_positions_from_word_ids",
    "prepare_dataset",
    "read_conllu",
    "read_doc_ids",
    "read_documents",
    "read_parallel_conllu",
    "word_middle_positions",
]
