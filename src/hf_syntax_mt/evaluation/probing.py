"""Read the dependency trees a model's DBSA (or LISA) heads predict, and score them against gold trees (UAS).

DBSA heads are trained so that A_h[t, q] = P(q = head(t)) on subwords (Eq. 4-5): a word's *final* subword points
to the *first* subword of its head word, the root's final subword to itself (LISA: every subword points to the
first subword of the head word, the root to its own first subword). Reading a word's head therefore takes
the attention row of its final subword, restricted to the first subwords of the other words (and to itself for
the root), and picks the most probable word (greedy, per word; no tree constraint).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..data.parsers import ParsedSentence, read_conllu
from ..data.subwords import align_parse, word_representatives
from ..errors import UserError
from ..methods.registry import head_kinds, input_names

__all__ = ["attachment_score", "read_trees", "word_heads_from_attention", "uas_against_conllu"]


def word_heads_from_attention(
    attention: torch.Tensor, word_index: Sequence[int], root: str = "last"
) -> list[int | None]:
    """Word-level heads from one sentence's subword attention.

    Args:
        attention: `(S, S)` probabilities, rows = queries (P(q = head(t)) at [t, q]).
        word_index: `(S,)` 1-based word of each subword, 0 for special / padding tokens.
        root: where a root word's row points: its `"last"` subword (DBSA rule) or its `"first"` (LISA rule).

    Returns:
        one entry per word 1..max(word_index): the predicted head (1-based, 0 = root), `None` for a word without
        subwords.
    """
    n = max((int(w) for w in word_index), default=0)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t, w in enumerate(word_index):
        w = int(w)
        if w > 0:
            first.setdefault(w, t)
            last[w] = t
    words = sorted(first)
    heads: list[int | None] = [None] * n
    if not words:
        return heads
    columns = torch.tensor([first[w] for w in words])  # (W,) first subword of each candidate head
    for w in words:
        scores = attention[last[w]].index_select(0, columns).clone()  # (W,)
        scores[words.index(w)] = attention[last[w], last[w] if root == "last" else first[w]]  # itself = root
        best = words[int(scores.argmax())]
        heads[w - 1] = 0 if best == w else best
    return heads


@torch.no_grad()
def read_trees(model, inputs: dict, kind: str = "dbsa") -> list[list[int | None]]:
    """Trees predicted by the encoder's `kind` heads (`"dbsa"` or `"lisa"`) for a batch.

    Args:
        model: a `SyntaxMTForConditionalGeneration` (or `SyntaxMTModel`) with such heads.
        inputs: the encoder inputs of the batch (`input_ids`, `attention_mask`, `word_index`, and whatever else the
            model's options need, e.g. `parent_positions`) as the preprocessor and collator make them.
        kind: which supervised heads to read; the attention of all such heads (every layer) is averaged.

    Returns:
        per sentence, the predicted head of each word (1-based, 0 = root; `None` for a word without subwords).
    """
    config = model.config
    # where the `kind` heads sit in each layer: the registry's head order, the one the attention modules use
    spans = [
        [(start, stop) for name, start, stop in head_kinds(config, "encoder", layer, config.encoder_attention_heads)
         if name == kind]
        for layer in range(config.encoder_layers)
    ]  # fmt: skip
    if not any(spans):
        heads = getattr(config, f"encoder_{kind}_heads", None)
        raise UserError(f"the model has no encoder {kind.upper()} heads (encoder_{kind}_heads={heads}).")
    if "word_index" not in inputs:
        raise UserError(
            "read_trees needs `word_index` (B, S): prepare data with `SyntaxMTPreprocessor` (its `word_index` column)."
        )
    encoder = model.get_encoder()
    names = ("input_ids", "attention_mask", *input_names())  # every input a registered method reads
    out = encoder(**{k: inputs[k] for k in names if k in inputs}, output_attentions=True)
    maps = [
        out.attentions[layer][:, start:stop].mean(1)  # (B, S, S)
        for layer, layer_spans in enumerate(spans)
        for start, stop in layer_spans
    ]
    attention = torch.stack(maps).mean(0)  # (B, S, S)
    root = "first" if kind == "lisa" else "last"
    return [
        word_heads_from_attention(attention[b], inputs["word_index"][b].tolist(), root) for b in range(len(attention))
    ]


def _representative_heads(parse: ParsedSentence) -> list[int]:
    """Gold heads with every word of a multi-word token replaced by the token's representative (the word its
    subwords belong to, see `hf_syntax_mt.data.subwords`)."""
    rep = {}
    for ws, we, r in word_representatives(parse):
        for w in range(ws, we):
            rep[w + 1] = r + 1
    return [0 if h == 0 else rep[h] for h in parse.heads]


def attachment_score(predicted: Sequence[Sequence[int | None]], gold: Sequence[Sequence[int]]) -> dict[str, float]:
    """Unlabelled attachment score over the words that have a prediction.

    Returns ``{"uas": correct / scored, "correct", "scored", "skipped"}`` (``skipped``: words without subwords).
    """
    if len(predicted) != len(gold):
        raise UserError(f"{len(predicted)} predicted trees but {len(gold)} gold trees")
    correct = scored = skipped = 0
    for k, (p, g) in enumerate(zip(predicted, gold, strict=True)):
        if len(p) > len(g):
            raise UserError(f"sentence {k}: {len(p)} predicted heads for {len(g)} gold words")
        for w, gold_head in enumerate(g):
            head = p[w] if w < len(p) else None
            if head is None:
                skipped += 1
                continue
            scored += 1
            correct += int(head == gold_head)
    return {"uas": correct / scored if scored else 0.0, "correct": correct, "scored": scored, "skipped": skipped}


def uas_against_conllu(
    model, tokenizer, conllu_path, kind: str = "dbsa", batch_size: int = 32, limit: int | None = None,
    max_length: int | None = None,
) -> dict[str, float]:  # fmt: skip
    """UAS of the trees read from the model's `kind` heads against a gold CoNLL-U file (e.g. a UD treebank).

    The model needs no parser: sentences are tokenized from their ``# text`` and the gold tree only serves to
    score (and to tie words to subwords). Multi-word tokens are scored at their representative word.
    """
    from tqdm.auto import tqdm

    from ..data.collator import DataCollatorForSyntaxMT

    sentences = read_conllu(conllu_path)[:limit]
    if not sentences:
        raise UserError(f"{conllu_path} has no sentences")
    max_length = max_length or model.config.max_position_embeddings
    collator = DataCollatorForSyntaxMT(tokenizer)
    predicted, gold = [], []
    model.eval()
    for start in tqdm(range(0, len(sentences), batch_size), desc="Reading trees", unit="batch"):
        chunk = sentences[start : start + batch_size]
        rows = []
        for s in chunk:
            a = align_parse(tokenizer, s, max_length=max_length)  # every source column
            rows.append({k: a[k] for k in ("input_ids", "attention_mask", "parent_positions", "word_index",
                                           "word_heads", "pos_ids", "deprel_ids", "subword_tag_ids")})  # fmt: skip
        batch = collator(rows)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        predicted += read_trees(model, batch, kind=kind)
        gold += [_representative_heads(s) for s in chunk]
    # words cut by truncation or without subwords have no prediction
    predicted = [p + [None] * (len(g) - len(p)) for p, g in zip(predicted, gold, strict=True)]
    return attachment_score(predicted, gold)
