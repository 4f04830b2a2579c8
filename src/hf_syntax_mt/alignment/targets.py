"""Guided-alignment targets (Garg et al. 2019): external word alignments (Pharaoh, e.g. eflomal's) mapped onto the
subwords of the preprocessed pairs, as the `decoder_alignment` column the `guided_alignment` method reads.

Pharaoh links `i-j` index the whitespace-separated words of the source (i) and target (j) line; possible links
`ipj` (as in gold files) are read and supervised like sure ones. For every target
subword of word j with links, the column holds the position of the first subword of its aligned source word (the
middle one when j has several links, as one link per target token is supervised); other positions hold -100. The
map runs on rows that already have `input_ids` and `labels` (after `SyntaxMTPreprocessor`), with
the same tokenizer and lengths, so positions match what the model sees; a row whose re-tokenisation differs is an
error naming it.

    from hf_syntax_mt.alignment import AlignmentTargets
    data = data.add_column("alignment", lines_of_the_pharaoh_file)      # one line per training pair
    data = data.map(AlignmentTargets(tokenizer), batched=True, with_indices=True)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..data.readers import parse_pharaoh
from ..errors import UserError

__all__ = ["AlignmentTargets", "add_alignment_targets", "check_alignment_lines", "token_words", "target_alignment"]

logger = logging.getLogger(__name__)


def check_alignment_lines(lines: Sequence[str], sources: Sequence[str], targets: Sequence[str], path: str,
                          one_indexed: bool = False, flag: str = "--alignment_one_indexed") -> list[str]:  # fmt: skip
    """Check a Pharaoh file against the pairs it aligns and return its lines 0-based (sure ``i-j``, possible
    ``ipj``). Raises `ValueError` naming ``path``, the line and the link for a malformed link or a word index past
    its sentence (saying so when the file looks counted from 1: no link uses word 0); warns when no link at all uses
    word 0 (a 1-indexed file whose links all stay inside their sentences). ``flag`` is the option that reads the
    file as 1-indexed."""
    parsed = [parse_pharaoh(line, one_indexed, f"{path}:{k}") for k, line in enumerate(lines, start=1)]
    links = [link for g in parsed for link in g.possible]
    no_zero = bool(links) and min(i for i, _ in links) > 0 and min(j for _, j in links) > 0
    for k, (g, src, tgt) in enumerate(zip(parsed, sources, targets, strict=True), start=1):
        n_src, n_tgt = len((src or "").split()), len((tgt or "").split())
        past = sorted((i, j) for i, j in g.possible if i >= n_src or j >= n_tgt)
        if past:
            i, j = (x + one_indexed for x in past[0])
            base = 1 if one_indexed else 0
            hint = (f" No link in the file uses word 0: it looks counted from 1; give {flag}." if no_zero and not
                    one_indexed else "")  # fmt: skip
            raise UserError(
                f"{path}:{k}: link '{i}-{j}' is past the sentence pair (source {n_src} words, target {n_tgt} words; "
                f"indices count whitespace-separated words from {base}): the file is not aligned with these pairs "
                f"or counts from another index.{hint}"
            )
    if no_zero and not one_indexed and len(links) >= 10:
        logger.warning(f"no link of {path} uses word 0 of either side: if the file counts words from 1, give {flag} "
                       "(it is read as 0-based)")  # fmt: skip
    return [" ".join([f"{i}-{j}" for i, j in sorted(g.sure)] + [f"{i}p{j}" for i, j in sorted(g.possible - g.sure)])
            for g in parsed]  # fmt: skip


def token_words(text: str, offsets: Sequence[tuple[int, int]], space_to_next: bool = False) -> list[int | None]:
    """The whitespace word (0-based) each token's characters fall in; `None` for special tokens (empty spans).
    A token of spaces only (a sentencepiece '▁' on its own) is `None`, or with ``space_to_next`` the word that
    follows it (as a tokenizer's ``word_ids()`` counts it)."""
    word_of_char: list[int | None] = [None] * len(text)
    w, inside = -1, False
    for c, ch in enumerate(text):
        if ch.isspace():
            inside = False
            continue
        if not inside:
            w, inside = w + 1, True
        word_of_char[c] = w
    out = []
    for start, end in offsets:
        words = [word_of_char[c] for c in range(start, min(end, len(text))) if word_of_char[c] is not None]
        if not words and space_to_next and end > start:
            words = [w for w in word_of_char[end:] if w is not None][:1]
        out.append(words[0] if words else None)
    return out


def target_alignment(
    source_words: Sequence[int | None], target_words: Sequence[int | None], links: set[tuple[int, int]]
) -> list[int]:
    """Per target token, the source token it is supervised to attend to (-100: none).

    Args:
        source_words, target_words: the word of each source / target token (`None`: special token).
        links: word links `(i, j)`, source word i - target word j.
    """
    first_subword: dict[int, int] = {}
    for pos, w in enumerate(source_words):
        if w is not None and w not in first_subword:
            first_subword[w] = pos
    aligned: dict[int, list[int]] = {}
    for i, j in links:
        if i in first_subword:
            aligned.setdefault(j, []).append(i)
    out = []
    for w in target_words:
        sources = sorted(aligned.get(w, [])) if w is not None else []
        out.append(first_subword[sources[len(sources) // 2]] if sources else -100)
    return out


class AlignmentTargets:
    """`datasets.map` function (batched) adding `decoder_alignment` from a Pharaoh column.

    Args:
        tokenizer: the fast tokenizer the rows were preprocessed with (offsets are needed).
        column: the Pharaoh column (one string per pair; empty: no link; ``ipj`` possible links are supervised too).
        source_column, target_column: the raw text columns the links index.
        max_source_length, max_target_length: the preprocessing lengths (truncation), if any.
        one_indexed: links count from 1.
    """

    def __init__(self, tokenizer, column: str = "alignment", source_column: str = "source",
                 target_column: str = "target", max_source_length: int | None = None,
                 max_target_length: int | None = None, one_indexed: bool = False):  # fmt: skip
        if not getattr(tokenizer, "is_fast", False):
            raise UserError("AlignmentTargets needs a fast tokenizer (character offsets map subwords to words).")
        self.tokenizer, self.column, self.one_indexed = tokenizer, column, one_indexed
        self.source_column, self.target_column = source_column, target_column
        self.max_source_length, self.max_target_length = max_source_length, max_target_length

    def _encode(self, texts, target: bool, max_length):
        kwargs = dict(truncation=max_length is not None, max_length=max_length, return_offsets_mapping=True)
        return self.tokenizer(text_target=texts, **kwargs) if target else self.tokenizer(texts, **kwargs)

    def __call__(self, batch: dict, indices: Sequence[int] | None = None) -> dict:
        for name in (self.column, self.source_column, self.target_column, "input_ids", "labels"):
            if name not in batch:
                raise KeyError(f"AlignmentTargets needs the column {name!r}; the rows have {sorted(batch)}")
        rows = indices if indices is not None else range(len(batch["labels"]))
        src = self._encode(batch[self.source_column], False, self.max_source_length)
        tgt = self._encode(batch[self.target_column], True, self.max_target_length)
        out = []
        for k, row in enumerate(rows):
            for side, enc, ids in (("source", src, batch["input_ids"][k]), ("target", tgt, batch["labels"][k])):
                if list(enc["input_ids"][k]) != list(ids):
                    raise UserError(
                        f"row {row}: the {side} re-tokenised for the alignment differs from its preprocessed ids; give "
                        "AlignmentTargets the tokenizer and max lengths the rows were preprocessed with."
                    )
            where = f"row {row} of {self.column!r} (0-based: line {row + 1} of a file)"
            links = parse_pharaoh(batch[self.column][k] or "", self.one_indexed, where).possible  # sure ⊆ possible
            source_words = token_words(batch[self.source_column][k], src["offset_mapping"][k])
            target_words = token_words(batch[self.target_column][k], tgt["offset_mapping"][k])
            out.append(target_alignment(source_words, target_words, set(links)))
        return {"decoder_alignment": out}


def add_alignment_targets(processed, context):
    """The train script's guided-alignment step (a method's `DataTransform`, run on the preprocessed training split):
    the Pharaoh links of each pair (the raw split's ``alignment`` column) as `decoder_alignment` (`AlignmentTargets`)."""
    raw = context.raw
    rows = processed.add_column("source", raw["source"]).add_column("target", raw["target"])
    rows = rows.add_column("alignment", raw["alignment"])
    fn = AlignmentTargets(context.tokenizer, max_source_length=context.max_source_length,
                          max_target_length=context.max_target_length)  # fmt: skip
    return rows.map(fn, batched=True, with_indices=True, remove_columns=["source", "target", "alignment"],
                    desc="Guided-alignment targets")  # fmt: skip
