"""Document-level context (Zhang et al., 2018, "Improving the Transformer Translation Model with Document-Level
Context").

Section 2.2 of the paper: the context of source sentence ``X^(k)`` is the previous ``k`` source sentences of the
same document, ``X^(<k)``; the first sentence of a document has none. This module turns that into model inputs:

- :func:`encode_context`: the previous sentences -> ``context_input_ids`` (each sentence tokenized with the
  tokenizer's special tokens, Marian-style ending in ``</s>``, concatenated oldest first, left-truncated so that
  the most recent tokens are kept).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["encode_context"]


def encode_context(tokenizer, sentences: Sequence[str], max_length: int | None) -> list[int]:
    """Token ids of the context sentences, concatenated oldest first, keeping the last ``max_length`` ids.

    Each sentence is tokenized on its own with the tokenizer's special tokens (Marian: ``... </s>``) and without
    truncation; the concatenation is then cut from the left, so the kept window is the most recent part of the
    context (it may begin inside a sentence).

    Empty (or whitespace-only, or ``None``) sentences contribute nothing: an empty line carries no context, and
    a context made only of empty lines is no context at all (``[]``, the model's "first sentence" case).

    Args:
        tokenizer: the model's tokenizer (fast or sentencepiece ``MarianTokenizer``).
        sentences: the previous source sentences of the document, oldest first.
        max_length: the most tokens to keep (``None``: keep all).

    Returns:
        ``(M,)`` token ids, ``M <= max_length``; ``[]`` when there is no non-empty sentence.
    """
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 0):
        raise ValueError(f"max_length must be a non-negative int or None, got {max_length!r}")
    if isinstance(sentences, str):
        raise TypeError(f"sentences must be a list of strings, got the string {sentences!r}")
    texts = [s for s in sentences if s is not None and str(s).strip()]
    if not texts or max_length == 0:
        return []
    ids: list[int] = []
    for sentence_ids in tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]:
        ids.extend(int(i) for i in sentence_ids)
    if max_length is not None and len(ids) > max_length:
        ids = ids[len(ids) - max_length :]
    return ids
