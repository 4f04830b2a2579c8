"""Data preparation: parsing, subword alignment, document context, ``datasets.map`` preprocessing and batch
collation."""

from .collator import DataCollatorForSyntaxMT
from .documents import DocumentContext, add_document_context, encode_context, read_doc_ids, read_documents
from .parsers import (
    PARSER_BACKENDS,
    CachedParser,
    ConllParser,
    MissingParseError,
    ParsedSentence,
    Parser,
    ParserNotAvailableError,
    SpacyParser,
    StanzaParser,
    get_parser,
    merge_sentences,
    read_conllu,
)
from .preprocess import SyntaxMTPreprocessor, TokenizeOnly, load_parallel_files, prepare_dataset, read_parallel_conllu
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
    "TokenizeOnly",
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
