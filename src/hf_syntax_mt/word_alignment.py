"""Word alignments you can measure: Pharaoh files, alignment error rate, symmetrisation, and word-level alignments of a
corpus read off a model's cross-attention (`hf-syntax-mt align`, `hf-syntax-mt aer`).

Pharaoh format (fast_align, GIZA++, eflomal, awesome-align): one line per sentence pair, space-separated links
``i-j`` (source word i, target word j, 0-based unless said otherwise); gold files add possible links ``ipj``.

AER (Och & Ney 2000): ``1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)``, with A the predicted links, S the sure gold links
and P the possible ones (sure links are possible too), summed over the corpus.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from .data.readers import GoldAlignment, Link, parse_pharaoh, read_pharaoh  # noqa: F401  (Pharaoh reading)


def format_pharaoh(links: Iterable[Link]) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def alignment_error_rate(predicted: Sequence[Iterable[Link] | GoldAlignment], gold: Sequence[GoldAlignment]) -> dict:
    """Corpus AER, precision (against P) and recall (against S), with the link counts. ``predicted[k]`` is a set of
    links or a `GoldAlignment` (its sure links count)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones: the files must be line aligned")
    a = s = a_s = a_p = 0
    for pred, g in zip(predicted, gold, strict=True):
        links = set(pred.sure if isinstance(pred, GoldAlignment) else pred)
        a, s = a + len(links), s + len(g.sure)
        a_s, a_p = a_s + len(links & g.sure), a_p + len(links & g.possible)
    return {
        "aer": 1.0 - (a_s + a_p) / (a + s) if a + s else 0.0,
        "precision": a_p / a if a else 0.0,
        "recall": a_s / s if s else 0.0,
        "predicted_links": a, "sure_links": s, "predicted_sure": a_s, "predicted_possible": a_p, "pairs": len(gold),
    }  # fmt: skip


def symmetrize(forward: set[Link], reverse: set[Link], method: str = "grow-diag-final-and") -> set[Link]:
    """Combine two directions' links (both as (source, target)): ``intersection``, ``union`` or
    ``grow-diag-final-and`` (Koehn et al. 2003, as in Moses and fast_align's atools)."""
    inter, union = forward & reverse, forward | reverse
    if method == "intersection":
        return set(inter)
    if method == "union":
        return set(union)
    if method != "grow-diag-final-and":
        raise ValueError(f"symmetrization {method!r}: use intersection, union or grow-diag-final-and")
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
    """Whitespace-tokenised pairs from two line-aligned files, or one ``src ||| tgt`` file."""
    from .evaluation.files import read_lines

    if joined is not None:
        src, tgt = [], []
        for k, line in enumerate(read_lines(joined), start=1):
            if line.count(" ||| ") != 1:
                raise ValueError(f"{joined}:{k}: expected 'source ||| target', got {line[:80]!r}")
            a, b = line.split(" ||| ")
            src.append(a.split())
            tgt.append(b.split())
        return src, tgt
    if source is None or target is None:
        raise ValueError("give a source and a target file, or one 'src ||| tgt' file")
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise ValueError(f"{source} has {len(src)} lines but {target} has {len(tgt)}: the files must be line aligned")
    return [s.split() for s in src], [t.split() for t in tgt]


def align_corpus(model, tokenizer, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]],
                 layer: int | None = None, batch_size: int = 32, progress: bool = True,
                 method: str = "grow-diag-final-and", shift: bool = False,
                 heads: int | None = None) -> list[set[Link]]:  # fmt: skip
    """Word-level links read off decoder layer ``layer``'s cross-attention (its first ``heads`` heads averaged:
    by default all, or the heads guided alignment supervised, see `alignment.align`; every subword's row
    averaged into its word, every source word's subword columns summed), each target word linked to its argmax
    source word. Sentences are given as words; the tokenizer's ``word_ids()`` maps subwords back to them. ``shift``:
    Shift-Att (Chen et al. 2020), each target word read at the step where it is the decoder input (`alignment.align`).

    With a `SymmetricTranslationModel` both directions are read (each at its own alignment layer) and combined with
    ``method`` (``forward``, ``backward``, ``intersection``, ``union``, ``grow-diag-final-and``).

    An empty side gives no link. Models that read parses (PASCAL, tree heads) need them as inputs and are refused.
    """
    import torch
    from tqdm.auto import tqdm

    from .alignment import align

    symmetric = hasattr(model, "forward_model") and hasattr(model, "backward_model")
    configs = [model.config.forward, model.config.backward] if symmetric else [model.config]
    if any(getattr(c, "needs_source_parse", False) for c in configs):
        raise ValueError("align_corpus runs the model without parses: this model's syntax heads need them")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("align_corpus needs a fast tokenizer (word_ids()) to merge subwords into words")
    out: list[set[Link]] = []
    pad = tokenizer.pad_token_id
    steps = range(0, len(sources), batch_size)
    for start in tqdm(steps, desc="Aligning", unit="batch", disable=not progress):
        src, tgt = sources[start : start + batch_size], targets[start : start + batch_size]
        keep = [k for k in range(len(src)) if src[k] and tgt[k]]
        links: list[set[Link]] = [set() for _ in src]
        if keep:
            enc = tokenizer([" ".join(src[k]) for k in keep], text_target=[" ".join(tgt[k]) for k in keep],
                            padding=True, return_tensors="pt")  # fmt: skip
            src_words = [enc.word_ids(b) for b in range(len(keep))]
            lab = tokenizer(text_target=[" ".join(tgt[k]) for k in keep], padding=True)
            tgt_words = [lab.word_ids(b) for b in range(len(keep))]
            labels = enc["labels"].masked_fill(enc["labels"] == pad, -100)
            with torch.no_grad():
                if symmetric:
                    reverse_input_ids = enc["labels"]  # the target tokens, padded with pad
                    reverse_labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
                    result = model.align(enc["input_ids"], labels, reverse_input_ids, reverse_labels,
                                         enc["attention_mask"], (labels != -100).long(), method=method,
                                         source_word_ids=src_words, target_word_ids=tgt_words, shift=shift,
                                         heads=heads)  # fmt: skip
                else:
                    result = [set(a.links) for a in align(model, enc["input_ids"], labels, enc["attention_mask"],
                                                          layer, src_words, tgt_words, shift=shift,
                                                          heads=heads)]  # fmt: skip
            for b, k in enumerate(keep):
                links[k] = result[b]
        out.extend(links)
    return out


__all__ = [
    "GoldAlignment",
    "align_corpus",
    "alignment_error_rate",
    "format_pharaoh",
    "parse_pharaoh",
    "read_parallel_words",
    "read_pharaoh",
    "symmetrize",
]
