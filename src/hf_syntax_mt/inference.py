"""Inference helpers the model classes delegate to, so that the model file imports nothing from the pipeline."""

from __future__ import annotations


def translate_document(model, sentences: list[str], tokenizer, parser=None, **generate_kwargs) -> list[str]:
    """Translate one document with `SyntaxTranslationPipeline.translate_document` (see there)."""
    from .pipeline_syntax_mt import SyntaxTranslationPipeline

    pipe = SyntaxTranslationPipeline(model=model, tokenizer=tokenizer, parser=parser)
    return pipe.translate_document(sentences, **generate_kwargs)
