"""Contrastive evaluation of document-level translation: does the model prefer the correct translation of a sentence
over a contrastive (wrong) one, given the previous source sentences?

Each candidate is scored by its log-probability under teacher forcing, ``log P(y | X^(<k), x) = sum_j log P(y_j |
X^(<k), x, y_<j)`` (Zhang et al. 2018, Eqs. 2-3); an example is right when the correct candidate scores strictly
higher. Two data sources:

- :func:`hf_syntax_mt.demo.synthetic_corpus.contrastive_examples`: synthetic documents whose pronoun form depends on the
  previous sentence;
- :func:`load_discevalmt`: the DiscEvalMT En->Fr test sets (Bawden et al. 2018), 200 anaphora and 200 lexical-choice
  examples.

Note on DiscEvalMT *anaphora*: its examples come in blocks that share the English previous and current sentences and
differ only in the French translation of the previous sentence (``bâtiments`` vs ``maisons``), which decides the
pronoun (``Ils``/``Elles``). 199 of the 200 examples have a twin with the same English and the two candidates swapped,
so any model that reads only source-side context (Zhang et al. omit the target-side context ``Y^(<k)``, Section 2.1)
scores 50% there by construction; lexical choice has 22 such twins.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch

from ..data.documents import encode_context
from ..data.readers import read_lines, read_text
from ..errors import MissingFileError, UserError, UserTypeError
from ..methods.registry import method_of

__all__ = ["DISCEVALMT_SUBSETS", "load_discevalmt", "score_contrastive"]

#: Subset name -> the name of its JSON file (the text files are ``{subset}.{prev,current}.{en,fr}``).
DISCEVALMT_SUBSETS = {"anaphora": "anaphora.json", "lexical_choice": "lexical-choice.json"}


def _check_examples(examples: Iterable[Mapping]) -> list[Mapping]:
    examples = list(examples)
    for i, ex in enumerate(examples):
        if not isinstance(ex, Mapping):
            raise UserTypeError(f"example {i} must be a dict, got {type(ex).__name__}")
        for key in ("source", "correct", "contrastive"):
            if not isinstance(ex.get(key), str):
                raise UserError(f"example {i} needs a string {key!r}, got {ex.get(key)!r}")
        context = ex.get("context", [])
        if isinstance(context, str) or not all(isinstance(s, str) for s in context):
            raise UserError(f"example {i}: 'context' must be a list of previous source sentences, got {context!r}")
    return examples


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max((len(r) for r in rows), default=0)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long).reshape(len(rows), width)


@torch.no_grad()
def score_contrastive(
    model,
    tokenizer,
    examples: Iterable[Mapping],
    batch_size: int = 32,
    max_context_length: int | None = None,
    tie_tolerance: float = 1e-6,
) -> dict:
    """Score the correct and the contrastive translation of every example; the accuracy is the fraction of examples
    whose correct candidate has the strictly higher log-probability.

    Args:
        model: a seq2seq model taking ``input_ids``, ``attention_mask`` and ``labels``
            (``SyntaxMTForConditionalGeneration``, ``MarianMTModel``). With document context
            (``method_of(config, "document_context")``) the last ``config.context_sentences`` sentences of each
            example's context go to ``context_input_ids``; otherwise the context is ignored. Sources and candidates
            are cut at ``max_position_embeddings`` tokens.
        tokenizer: the model's tokenizer.
        examples: dicts with ``source``, ``correct``, ``contrastive`` (strings) and ``context`` (previous source
            sentences of the document, oldest first; may be empty or missing).
        batch_size: candidates per forward pass (both candidates of an example are scored separately).
        max_context_length: most context tokens kept (the most recent ones); default
            ``config.max_context_length`` or ``max_position_embeddings``.
        tie_tolerance: score differences at most this large count as ties (and as wrong).

    Returns:
        ``{"accuracy", "n", "correct", "ties", "uses_context", "results"}``; ``results[i]`` holds ``correct_score``,
        ``contrastive_score`` (summed target-token log-probabilities, ``</s>`` included), ``correct`` (bool) and
        ``tie`` (bool) for example ``i``, in input order.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UserError(f"batch_size must be a positive int, got {batch_size!r}")
    config = model.config
    if getattr(config, "needs_source_parse", False):
        raise UserError(
            "this model's inputs need source parses (PASCAL, syntax-directed heads or input features); contrastive "
            "scoring feeds plain token ids: score a model without source-parse inputs"
        )
    examples = _check_examples(examples)
    uses_context = method_of(config, "document_context") is not None
    k = getattr(config, "context_sentences", 0)
    if max_context_length is None:
        max_context_length = getattr(config, "resolved_max_context_length", config.max_position_embeddings)
    max_source = config.max_position_embeddings
    pad = config.pad_token_id

    sources = tokenizer([ex["source"] for ex in examples], truncation=True, max_length=max_source)["input_ids"]
    # row 2i: the correct candidate of example i, row 2i + 1: its contrastive candidate
    candidates = [ex[key] for ex in examples for key in ("correct", "contrastive")]
    targets = tokenizer(text_target=candidates, truncation=True, max_length=max_source)["input_ids"]
    contexts = [encode_context(tokenizer, ex.get("context", [])[-k:], max_context_length) if uses_context and k else []
                for ex in examples]  # fmt: skip

    # long rows together: less padding (padding itself does not change a score)
    order = sorted(range(len(candidates)), key=lambda r: (len(sources[r // 2]) + len(targets[r]), r))
    scores = torch.empty(len(candidates), dtype=torch.float64)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            input_ids = _pad([list(sources[r // 2]) for r in rows], pad)  # (B, S)
            labels = _pad([list(targets[r]) for r in rows], -100)  # (B, T)
            inputs = {"input_ids": input_ids, "attention_mask": _pad([[1] * len(sources[r // 2]) for r in rows], 0),
                      "labels": labels}  # fmt: skip
            if uses_context:
                inputs["context_input_ids"] = _pad([contexts[r // 2] for r in rows], pad)  # (B, M), M may be 0
                inputs["context_attention_mask"] = _pad([[1] * len(contexts[r // 2]) for r in rows], 0)
            inputs = {name: tensor.to(model.device) for name, tensor in inputs.items()}
            logits = model(**inputs).logits  # (B, T, V)
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            mask = inputs["labels"] != -100  # (B, T)
            token = log_probs.gather(-1, inputs["labels"].clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T)
            # Eq. 3: log P(y | X^(<k), x) = sum_j log P(y_j | X^(<k), x, y_<j)
            scores[rows] = (token.double() * mask).sum(-1).cpu()
    finally:
        model.train(was_training)

    accuracy = contrastive_accuracy(scores[0::2].tolist(), scores[1::2].tolist(), tie_tolerance)
    return {**accuracy, "uses_context": uses_context}


def contrastive_accuracy(correct_scores: Sequence[float], contrastive_scores: Sequence[float],
                         tie_tolerance: float = 1e-6) -> dict:  # fmt: skip
    """The contrastive accuracy of scored pairs: the fraction whose correct candidate scores strictly higher than
    its contrastive one, by more than ``tie_tolerance`` (a tie counts as wrong). What `score_contrastive` and the
    ``hf_syntax_mt_contrastive`` evaluate module report.

    Returns:
        ``{"accuracy", "n", "correct", "ties", "results"}``, ``results[i]`` with ``correct_score``,
        ``contrastive_score``, ``correct`` and ``tie`` of pair ``i``.
    """
    if len(correct_scores) != len(contrastive_scores):
        raise UserError(f"got {len(correct_scores)} correct scores but {len(contrastive_scores)} contrastive ones: "
                        "give one of each per example")  # fmt: skip
    results = []
    for k, (good, bad) in enumerate(zip(correct_scores, contrastive_scores, strict=True)):
        good, bad = float(good), float(bad)
        if good != good or bad != bad:  # NaN: every comparison is False, so it would count as a silent loss
            which = "correct" if good != good else "contrastive"
            raise UserError(f"example {k}: its {which} score is NaN (the scoring failed): drop the example or fix "
                            "its score; a NaN cannot be compared")  # fmt: skip
        tie = abs(good - bad) <= tie_tolerance
        results.append(
            {"correct_score": good, "contrastive_score": bad, "correct": good > bad and not tie, "tie": tie}
        )
    n_correct = sum(r["correct"] for r in results)
    return {
        "accuracy": n_correct / len(results) if results else float("nan"),
        "n": len(results),
        "correct": n_correct,
        "ties": sum(r["tie"] for r in results),
        "results": results,
    }


def _json_pairs(subset: str, data: dict) -> list[tuple[list[str], list[str], list[str], dict]]:
    """(source [prev, current], good target [prev, current], bad target, extra fields) from the DiscEvalMT json."""
    pairs = []
    for block in sorted(data, key=int):
        entry = data[block]
        if subset == "anaphora":  # one English pair, several French versions of it
            for trg in entry["trg"]:
                good = trg.get("correct") or trg.get("semi-correct")
                extra = {"block": block, "type": trg.get("type"), "semi_correct": "correct" not in trg}
                pairs.append((entry["src"], good, trg["incorrect"], extra))
        else:
            for ex in entry["examples"]:
                pairs.append(
                    (ex["src"], ex["trg"]["correct"], ex["trg"]["incorrect"], {"block": block, "type": entry["type"]})
                )
    return pairs


def load_discevalmt(directory: str | Path, subset: str = "anaphora") -> list[dict]:
    """The DiscEvalMT En->Fr contrastive test set ``subset`` (``"anaphora"`` or ``"lexical_choice"``), 200 examples.

    The line-aligned files ``{subset}.{prev,current}.{en,fr}`` hold each example on two consecutive lines: the correct
    (or semi-correct) translation first, then the contrastive one, with the same English and the same French previous
    sentence. The pairing is checked against the subset's json (the official pairing) when it is present.

    Returns:
        dicts with ``id``, ``context`` (``[previous English sentence]``), ``source`` (current English), ``correct``,
        ``contrastive`` (current French), ``context_target`` (``[previous French sentence]``, the translation the
        correct candidate agrees with), and from the json ``block``, ``type`` (anaphora: ``semi_correct`` too).
    """
    if subset not in DISCEVALMT_SUBSETS:
        raise UserError(f"subset must be one of {sorted(DISCEVALMT_SUBSETS)}, got {subset!r}")
    directory = Path(directory)
    files = {
        f"{part}.{lang}": directory / f"{subset}.{part}.{lang}"
        for part in ("prev", "current")
        for lang in ("en", "fr")
    }
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise MissingFileError(f"DiscEvalMT files missing: {missing} (expected the test-sets folder of "
                               "https://github.com/rbawden/discourse-mt-test-sets)", errno.ENOENT, missing[0])  # fmt: skip
    lines = {name: read_lines(path) for name, path in files.items()}
    lengths = {name: len(v) for name, v in lines.items()}
    if len(set(lengths.values())) != 1 or lengths["current.fr"] % 2:
        raise UserError(f"DiscEvalMT {subset}: the four files need the same, even number of lines, got {lengths}")
    examples = []
    for i in range(lengths["current.fr"] // 2):
        good, bad = 2 * i, 2 * i + 1
        for name in ("prev.en", "current.en", "prev.fr"):
            if lines[name][good] != lines[name][bad]:
                raise UserError(
                    f"DiscEvalMT {subset}: lines {good + 1} and {bad + 1} of {files[name].name} differ; each example "
                    "must be two lines sharing everything but the current French"
                )
        examples.append({
            "id": f"{subset}-{i}", "context": [lines["prev.en"][good]], "source": lines["current.en"][good],
            "correct": lines["current.fr"][good], "contrastive": lines["current.fr"][bad],
            "context_target": [lines["prev.fr"][good]],
        })  # fmt: skip
    json_path = directory / DISCEVALMT_SUBSETS[subset]
    if json_path.is_file():
        pairs = _json_pairs(subset, json.loads(read_text(json_path)))
        if len(pairs) != len(examples):
            raise UserError(f"{json_path.name} has {len(pairs)} examples but the text files {len(examples)}")
        for ex, (src, good, bad, extra) in zip(examples, pairs, strict=True):
            text = (ex["context"][0], ex["source"], ex["context_target"][0], ex["correct"], ex["contrastive"])
            if text != (src[0], src[1], good[0], good[1], bad[1]) or good[0] != bad[0]:
                raise UserError(
                    f"DiscEvalMT {subset}: {ex['id']} does not match {json_path.name} block {extra['block']}"
                )
            ex.update(extra)
    return examples
