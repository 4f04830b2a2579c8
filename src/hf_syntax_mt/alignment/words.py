"""Word alignments of a corpus: whitespace-tokenised pairs in, Pharaoh links out (`hf-syntax-mt align`), read off a
model's cross-attention, and symmetrisation of two directions' links.

Pharaoh format (fast_align, GIZA++, eflomal, awesome-align): one line per sentence pair, space-separated links
``i-j`` (source word i, target word j, 0-based unless said otherwise); gold files add possible links ``ipj``. The
readers (`read_pharaoh`, `parse_pharaoh`, `GoldAlignment`) are in `hf_syntax_mt.data.readers`; scoring (AER) is in
`hf_syntax_mt.alignment.aer`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from ..data.readers import Link
from ..errors import UserError
from .targets import token_words

logger = logging.getLogger(__name__)


def format_pharaoh(links: Iterable[Link]) -> str:
    """One Pharaoh line: the links as ``"i-j i-j ..."`` (source-target), sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def symmetrize(forward: set[Link], reverse: set[Link], method: str = "grow-diag-final-and") -> set[Link]:
    """Combine two directions' links (both as (source, target)): ``intersection``, ``union`` or
    ``grow-diag-final-and`` (Koehn et al. 2003, as in Moses and fast_align's atools)."""
    inter, union = forward & reverse, forward | reverse
    if method == "intersection":
        return set(inter)
    if method == "union":
        return set(union)
    if method != "grow-diag-final-and":
        raise UserError(f"symmetrization {method!r}: use intersection, union or grow-diag-final-and")
    links = set(inter)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]

    def src_aligned(i):
        return any(a == i for a, _ in links)

    def tgt_aligned(j):
        return any(b == j for _, b in links)

    added = True
    while added:  # grow-diag: neighbours in the union that align a so far unaligned word
        added = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                cand = (i + di, j + dj)
                if cand in union and cand not in links and (not src_aligned(cand[0]) or not tgt_aligned(cand[1])):
                    links.add(cand)
                    added = True
    for direction in (forward, reverse):  # final-and: links whose words are both still unaligned
        for i, j in sorted(direction):
            if not src_aligned(i) and not tgt_aligned(j):
                links.add((i, j))
    return links


def read_parallel_words(source: str | os.PathLike | None, target: str | os.PathLike | None,
                        joined: str | os.PathLike | None = None) -> tuple[list[list[str]], list[list[str]]]:  # fmt: skip
    """Whitespace-tokenised pairs from two line-aligned files, or one ``src ||| tgt`` file (not both)."""
    from ..data.readers import read_lines

    if joined is not None:
        if source is not None or target is not None:
            raise UserError(f"give either one 'source ||| target' file ({joined}) or a source and a target file "
                             f"({source}, {target}), not both")  # fmt: skip
        src, tgt = [], []
        for k, line in enumerate(read_lines(joined), start=1):
            if line.count(" ||| ") != 1:
                raise UserError(f"{joined}:{k}: expected 'source ||| target', got {line[:80]!r}")
            a, b = line.split(" ||| ")
            src.append(a.split())
            tgt.append(b.split())
        return src, tgt
    if source is None or target is None:
        raise UserError("give a source and a target file, or one 'src ||| tgt' file")
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise UserError(f"{source} has {len(src)} lines but {target} has {len(tgt)}: the files must be line aligned")
    return [s.split() for s in src], [t.split() for t in tgt]


def _encode_words(tokenizer, sentences: list[list[str]], target: bool, max_length: int, lines: list[int]):
    """Tokenise whitespace-joined words (truncated to ``max_length`` tokens, ``</s>`` kept, with a warning naming the
    line) and map every token to its whitespace word by character offsets (a word holding the tokenizer's own
    word-boundary character, e.g. sentencepiece's '▁', stays one word). Returns the encoding and the word lists."""
    texts = [" ".join(words) for words in sentences]
    kwargs = dict(padding=True, truncation=True, max_length=max_length, return_offsets_mapping=True,
                  return_tensors="pt")  # fmt: skip
    enc = tokenizer(text_target=texts, **kwargs) if target else tokenizer(texts, **kwargs)
    full = tokenizer(text_target=texts)["input_ids"] if target else tokenizer(texts)["input_ids"]
    for line, ids in zip(lines, full, strict=True):
        if len(ids) > max_length:
            logger.warning(f"line {line}: the {'target' if target else 'source'} has {len(ids)} tokens, more than the "
                           f"model's max_position_embeddings={max_length}: truncated to its first {max_length - 1} "
                           "tokens and </s>; the words past the cut get no link.")  # fmt: skip
    words = [token_words(text, offsets.tolist(), space_to_next=True) for text, offsets in zip(texts, enc.pop("offset_mapping"),
                                                                         strict=True)]  # fmt: skip
    return enc, words


def align_corpus(model, tokenizer, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                 layer: int | None = None, batch_size: int = 32, progress: bool = True,
                 method: str | None = None, shift: bool = False,
                 heads: int | None = None) -> list[set[Link]]:  # fmt: skip
    """Word-level links read off decoder layer ``layer``'s cross-attention (its first ``heads`` heads averaged:
    by default all, or the heads guided alignment supervised, see `alignment.align`; every subword's row
    averaged into its word, every source word's subword columns summed), each target word linked to its argmax
    source word. Sentences are given as words; character offsets map subwords back to them. ``shift``:
    Shift-Att (Chen et al. 2020), each target word read at the step where it is the decoder input (`alignment.align`).

    With a `SymmetricTranslationModel` both directions are read (each at its own alignment layer, or both at
    ``layer``) and combined with ``method`` (``forward``, ``backward``, ``intersection``, ``union``,
    ``grow-diag-final-and``, the default). A one-direction model gives forward links: ``method`` may only be
    ``forward`` (or None).

    An empty side gives no link. A side longer than the model's ``max_position_embeddings`` is truncated with a
    warning naming its line (1-based): its words past the cut get no link. Models that read parses (PASCAL, tree
    heads) need them as inputs and are refused.
    """
    import torch
    from tqdm.auto import tqdm

    from .cross_attention import align

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
        raise UserError(f"batch_size={batch_size!r} must be an int from 1 to 4096 (more can only exhaust memory)")
    symmetric = hasattr(model, "forward_model") and hasattr(model, "backward_model")
    configs = [model.config.forward, model.config.backward] if symmetric else [model.config]
    if not symmetric and method not in (None, "forward"):
        raise UserError(f"symmetrization {method!r} combines both directions of a symmetric model, but this model "
                         "translates one direction: its links are forward links. Use method 'forward' (or none), or "
                         "a SymmetricTranslationModel.")  # fmt: skip
    if any(getattr(c, "needs_source_parse", False) for c in configs):
        raise UserError("align_corpus runs the model without parses: this model's syntax heads need them")
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("align_corpus needs a fast tokenizer (character offsets) to merge subwords into words")
    max_length = min(c.max_position_embeddings for c in configs)
    out: list[set[Link]] = []
    steps = range(0, len(sources), batch_size)
    for start in tqdm(steps, desc="Aligning", unit="batch", disable=not progress):
        src, tgt = sources[start : start + batch_size], targets[start : start + batch_size]
        keep = [k for k in range(len(src)) if src[k] and tgt[k]]
        links: list[set[Link]] = [set() for _ in src]
        if keep:
            lines = [start + k + 1 for k in keep]
            enc, src_words = _encode_words(tokenizer, [list(src[k]) for k in keep], False, max_length, lines)
            lab, tgt_words = _encode_words(tokenizer, [list(tgt[k]) for k in keep], True, max_length, lines)
            labels = lab["input_ids"].masked_fill(lab["attention_mask"] == 0, -100)
            with torch.no_grad():
                if symmetric:
                    reverse_input_ids = lab["input_ids"]  # the target tokens, padded with pad
                    reverse_labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
                    result = model.align(enc["input_ids"], labels, reverse_input_ids, reverse_labels,
                                         enc["attention_mask"], lab["attention_mask"],
                                         method=method or "grow-diag-final-and", source_word_ids=src_words,
                                         target_word_ids=tgt_words, shift=shift, heads=heads,
                                         layers=None if layer is None else (layer, layer))  # fmt: skip
                else:
                    result = [set(a.links) for a in align(model, enc["input_ids"], labels, enc["attention_mask"],
                                                          layer, src_words, tgt_words, shift=shift,
                                                          heads=heads)]  # fmt: skip
            for b, k in enumerate(keep):
                links[k] = result[b]
        out.extend(links)
    return out


__all__ = ["align_corpus", "format_pharaoh", "read_parallel_words", "symmetrize"]
