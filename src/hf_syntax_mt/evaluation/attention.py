"""Attention to the syntactic parent: word-level attention (Clark et al. 2019), per-head attachment scores against
gold trees, the encoder run that collects them (:func:`model_attachment_scores`) and the report of a saved model with
its figures (:func:`attention_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import UserError
from .plots import plot_attachment_heatmap, plot_attention_arcs


def word_attention(attention, word_ids: Sequence[int | None], num_words: int):
    """Aggregate a subword attention matrix to words (Clark et al. 2019): attention *to* a word is the sum over its
    subwords, attention *from* a word the mean over its subwords. Special tokens (``word_ids`` None) are dropped.

    Args:
        attention: ``(T, T)`` probabilities, rows = queries.
        word_ids: ``T`` word indices (0-based) or None.

    Returns:
        ``(num_words, num_words)`` float array; rows of words with no subword are NaN.
    """
    import numpy as np

    attention = np.asarray(attention, dtype=np.float64)
    T = len(word_ids)
    if attention.shape != (T, T):
        raise UserError(f"attention has shape {attention.shape} but word_ids has {T} entries: expected ({T}, {T})")
    member = np.zeros((T, num_words))  # (T, n) one-hot subword -> word
    for t, w in enumerate(word_ids):
        if w is not None:
            if not 0 <= w < num_words:
                raise UserError(f"word_ids[{t}] = {w} is outside 0..{num_words - 1}")
            member[t, w] = 1.0
    counts = member.sum(0)  # (n,)
    to_words = attention @ member  # (T, n): sum over the subwords of the attended word
    with np.errstate(invalid="ignore", divide="ignore"):
        return (member.T @ to_words) / counts[:, None]  # (n, n): mean over the subwords of the attending word


def attachment_scores(attentions: Sequence, word_ids: Sequence[Sequence[int | None]], heads: Sequence[Sequence[int]]):
    """Per-head attention-to-parent attachment: for every layer and head, the fraction of words whose most-attended
    word (:func:`word_attention`) is their gold head.

    Roots (head 0), words with no subword left after truncation and words whose head was truncated away are not
    counted. A word attending most to itself counts as wrong.

    Args:
        attentions: one ``(L, H, T, T)`` array per sentence.
        word_ids: one ``T``-list of 0-based word indices (None for special tokens) per sentence.
        heads: one list of 1-based gold heads (0 = root) per sentence.

    Returns:
        ``{"scores": (L, H) float array, "correct": (L, H) int array, "count": int}``.
    """
    import numpy as np

    if not (len(attentions) == len(word_ids) == len(heads)):
        raise UserError(
            f"got {len(attentions)} attention arrays, {len(word_ids)} word_ids lists and {len(heads)} trees; "
            "give one of each per sentence"
        )
    if not attentions:
        raise UserError("no sentence to score")
    correct, count = None, 0
    for k, (att, wids, tree) in enumerate(zip(attentions, word_ids, heads, strict=True)):
        att = np.asarray(att)
        if att.ndim != 4:
            raise UserError(f"sentence {k}: attention must be (layers, heads, T, T), got shape {att.shape}")
        L, H = att.shape[:2]
        if correct is None:
            correct = np.zeros((L, H), dtype=np.int64)
        elif correct.shape != (L, H):
            raise UserError(f"sentence {k} has {L}x{H} layers x heads but sentence 0 has {correct.shape}")
        n = len(tree)
        present = {w for w in wids if w is not None}
        scored = [i for i in range(n) if tree[i] != 0 and i in present and tree[i] - 1 in present]
        if not scored:
            continue
        for layer in range(L):
            for head in range(H):
                words = word_attention(att[layer, head], wids, n)  # (n, n)
                words = np.where(np.isnan(words), -np.inf, words)
                predicted = words[scored].argmax(axis=1)
                correct[layer, head] += int(sum(p == tree[i] - 1 for p, i in zip(predicted, scored, strict=True)))
        count += len(scored)
    scores = correct / count if count else np.full(correct.shape, np.nan)
    return {"scores": scores, "correct": correct, "count": count}


def model_attachment_scores(
    model,
    tokenizer,
    gold,
    input_parses=None,
    batch_size: int = 16,
    max_length: int | None = None,
    return_attentions: int = 0,
    contexts: Sequence[Sequence[str]] | None = None,
) -> dict:
    """Run the encoder of ``model`` over the gold sentences and score every encoder head with
    :func:`attachment_scores`.

    Args:
        model: a ``SyntaxMTForConditionalGeneration`` or ``MarianMTModel`` (loaded with ``attn_implementation=
            "eager"`` for Marian, so that attentions are returned).
        tokenizer: its tokenizer.
        gold: ``ParsedSentence`` list (gold trees, e.g. :func:`~hf_syntax_mt.data.read_conllu` of a treebank).
        input_parses: the parses that feed the model's syntax heads (default: ``gold``; give a parser's output to
            measure what the model sees at test time). Must be aligned with ``gold`` (same words).
        max_length: source truncation in tokens (default: the model's ``max_position_embeddings``).
        return_attentions: also return the word-level attention of the first ``return_attentions`` sentences
            (``(L, H, n, n)`` arrays) for :func:`plot_attention_arcs`.
        contexts: for a document-level model, the previous source sentences of each sentence (oldest first, as
            :class:`~hf_syntax_mt.data.documents.DocumentContext` gives them): the encoder reads them as context.

    Returns:
        :func:`attachment_scores` output plus ``"layers"``, ``"heads"``, ``"sentences"`` and optionally
        ``"examples"`` (``[{"words", "heads", "attention"}]``).
    """
    import numpy as np
    import torch
    from tqdm.auto import tqdm

    from ..configuration_syntax_mt import SyntaxMTConfig
    from ..data.collator import DataCollatorForSyntaxMT
    from ..data.subwords import align_parse

    input_parses = gold if input_parses is None else input_parses
    if len(input_parses) != len(gold):
        raise UserError(f"{len(input_parses)} input parses but {len(gold)} gold trees: they must be aligned")
    for k, (a, b) in enumerate(zip(input_parses, gold, strict=True)):
        if a.words != b.words:
            raise UserError(f"sentence {k}: input parse words {a.words} differ from the gold words {b.words}")
    max_length = max_length or model.config.max_position_embeddings
    # what the model's encoder reads from the parse (PASCAL parents, tree words, input features): the registry decides
    columns = model.config.parse_columns() if isinstance(model.config, SyntaxMTConfig) else []
    keep = ["input_ids", "attention_mask", *columns]
    rows = [align_parse(tokenizer, p, max_length=max_length, columns=columns) for p in input_parses]
    if contexts is not None:
        from ..data.documents import encode_context

        if len(contexts) != len(rows):
            raise UserError(f"{len(contexts)} contexts but {len(rows)} sentences: give one context per sentence")
        length = model.config.resolved_max_context_length
        for row, context in zip(rows, contexts, strict=True):
            row["context_input_ids"] = encode_context(tokenizer, context, length)
            row["context_attention_mask"] = [1] * len(row["context_input_ids"])
        keep += ["context_input_ids", "context_attention_mask"]
    collate = DataCollatorForSyntaxMT(tokenizer)
    encoder = model.get_encoder()
    model.eval()
    attentions, examples = [], []
    for start in tqdm(range(0, len(rows), batch_size), desc="Encoder attentions", unit="batch"):
        chunk = rows[start : start + batch_size]
        inputs = {k: v.to(model.device) for k, v in collate([{k: r[k] for k in keep} for r in chunk]).items()}
        with torch.no_grad():
            out = encoder(**inputs, output_attentions=True, return_dict=True)
        if not out.attentions or out.attentions[0] is None:
            raise UserError(
                "the encoder returned no attentions: load the model with attn_implementation='eager' "
                "(AutoModelForSeq2SeqLM.from_pretrained(dir, attn_implementation='eager'))"
            )
        stacked = torch.stack(out.attentions, dim=1).float().cpu().numpy()  # (B, L, H, S, S)
        for b, row in enumerate(chunk):
            n = len(row["input_ids"])
            attentions.append(stacked[b, :, :, :n, :n])
    result = attachment_scores(attentions, [r["word_ids"] for r in rows], [g.heads for g in gold])
    L, H = result["scores"].shape
    result.update(layers=L, heads=H, sentences=len(gold))
    for k in range(min(return_attentions, len(gold))):
        n = len(gold[k].words)
        att = np.stack(
            [[word_attention(attentions[k][layer, head], rows[k]["word_ids"], n) for head in range(H)]
             for layer in range(L)]
        )  # fmt: skip
        examples.append({"words": gold[k].words, "heads": gold[k].heads, "attention": att})
    if return_attentions:
        result["examples"] = examples
    return result


def attention_report(model_dir, gold_conllu, input_conllu, heatmap, arcs, arcs_sentence, arcs_layer_head,
                     max_sentences, model_sig, docids=None, no_context: bool = False,
                     device=None) -> dict:  # fmt: skip
    """Attachment scores of the model in ``model_dir`` on the trees of ``gold_conllu`` (first ``max_sentences``),
    with the heatmap and arc figures written when their paths are given; every number comes with a signature (model
    signature + scoring method + gold file hash + number of words). JSON-ready.

    A document-level model (``context_sentences = k > 0``) reads each sentence with the previous k sentences of its
    document: ``docids`` is a doc-id file with one id per gold sentence. Without it such a model is refused unless
    ``no_context`` (every sentence then without context). ``device``: where the model runs (default: the CPU)."""
    import numpy as np
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ..data.parsers import read_conllu
    from ..data.stanza_resources import file_sha256
    from ..model_files import check_model_files

    gold = read_conllu(gold_conllu)
    if not gold:
        raise UserError(f"gold CoNLL-U file {gold_conllu} has no sentence")
    parses = read_conllu(input_conllu) if input_conllu is not None else None
    if parses is not None and len(parses) != len(gold):
        raise UserError(f"input CoNLL-U file {input_conllu} has {len(parses)} sentences and the gold file "
                        f"{gold_conllu} {len(gold)}: the input parses must be those of the gold sentences, in order")  # fmt: skip
    if max_sentences is not None:
        gold = gold[:max_sentences]
        parses = None if parses is None else parses[:max_sentences]
    check_model_files(
        model_dir, f"model {model_dir}"
    )  # each file read, a damaged one named (not a loader's traceback)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager")
    if device is not None:
        model.to(device)  # the model this function loaded, not a caller's
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    contexts, k = None, getattr(model.config, "context_sentences", 0) or 0
    if k and not no_context:
        if docids is None:
            raise UserError(
                f"{model_dir} is a document-level model (context_sentences={k}): its encoder reads the previous {k} "
                f"sentences of the document, so give the document id of each sentence of {gold_conllu} with --docids "
                "FILE (one id a line), or pass --no-context to score every sentence without context."
            )
        from ..data.documents import DocumentContext, read_doc_ids

        sentences = read_conllu(input_conllu) if input_conllu is not None else read_conllu(gold_conllu)
        ids = read_doc_ids(docids, len(sentences), gold_conllu)
        texts = [p.text if p.text is not None else " ".join(p.words) for p in sentences]
        context = DocumentContext(texts, ids, k)
        contexts = [context.context(i) for i in range(len(gold))]
    want = arcs_sentence + 1 if arcs is not None else 0
    if arcs is not None and arcs_layer_head is not None:  # the encoder's self-attention: layers x heads
        layers, heads = model.config.encoder_layers, model.config.encoder_attention_heads
        if not (0 <= arcs_layer_head[0] < layers and 0 <= arcs_layer_head[1] < heads):
            raise UserError(f"--arcs-layer-head {arcs_layer_head[0]} {arcs_layer_head[1]}: {model_dir} has encoder "
                            f"layers 0-{layers - 1} with heads 0-{heads - 1} each: give LAYER HEAD in that range "
                            "(or leave the flag out to draw the best head)")  # fmt: skip
    if arcs is not None and not 0 <= arcs_sentence < len(gold):
        raise UserError(f"arcs_sentence={arcs_sentence} but {gold_conllu} has {len(gold)} sentences")
    scores = model_attachment_scores(model, tokenizer, gold, parses, return_attentions=want, contexts=contexts)
    gold_sig = f"gold:{Path(gold_conllu).name}@{file_sha256(str(gold_conllu))[:12]}"
    if input_conllu is not None:
        gold_sig += f",input:{Path(input_conllu).name}@{file_sha256(str(input_conllu))[:12]}"
    if k:
        gold_sig += f",context:{'none' if contexts is None else f'{k}@{Path(docids).name}'}"
    sig = f"{model_sig}|attachment:argmax-word(sum-to,mean-from)|{gold_sig}|n:{scores['count']}"
    out = {
        "scores": np.round(scores["scores"], 6).tolist(), "count": scores["count"], "sentences": scores["sentences"],
        "layers": scores["layers"], "heads": scores["heads"], "signature": sig,
    }  # fmt: skip
    best = np.unravel_index(int(np.nanargmax(scores["scores"])), scores["scores"].shape)
    out["best"] = {"layer": int(best[0]), "head": int(best[1]), "score": float(scores["scores"][best])}
    if heatmap is not None:
        out["heatmap"] = str(plot_attachment_heatmap(scores["scores"], heatmap, footer=sig))
    if arcs is not None:
        layer, head = arcs_layer_head if arcs_layer_head is not None else best
        example = scores["examples"][arcs_sentence]
        title = (f"sentence {arcs_sentence}: gold arcs (above); most attended word under layer {layer} head {head} "
                 "(below; green = gold head)")  # fmt: skip
        out["arcs"] = str(plot_attention_arcs(example["words"], example["heads"], example["attention"][layer, head],
                                              arcs, title=title, footer=sig))  # fmt: skip
    return out
