"""Evaluation: corpus scores (sacrebleu BLEU and chrF, RIBES), paired bootstrap significance, source-length
buckets with a bar chart, per-head attention-to-parent attachment scores with a heatmap, and signatures.

Every score is computed by sacrebleu's object API (RIBES by :func:`corpus_ribes`) and reported with its
signature; results of several systems print side by side with :func:`format_comparison`::

    scores = {name: corpus_scores(hyps[name], refs) for name in hyps}
    buckets = {name: bucket_scores(source_lengths, hyps[name], refs) for name in hyps}
    print(format_comparison(scores, buckets))

The same engine backs ``hf-syntax-mt evaluate`` (:func:`evaluate_files`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

__all__ = [
    "DEFAULT_EDGES",
    "attachment_scores",
    "attention_report",
    "bucket_labels",
    "bucket_scores",
    "corpus_ribes",
    "corpus_scores",
    "evaluate_files",
    "format_comparison",
    "format_evaluation",
    "kendall_tau",
    "length_buckets",
    "model_attachment_scores",
    "model_signature",
    "paired_bootstrap",
    "plot_attachment_heatmap",
    "plot_attention_arcs",
    "plot_bucket_scores",
    "read_lines",
    "sentence_ribes",
    "signature",
    "word_attention",
    "word_rank_alignment",
]

#: Upper bounds (inclusive) of the source-length buckets: 1-10, 11-20, 21-30, 31-40, 41+.
DEFAULT_EDGES = (10, 20, 30, 40)


def _check_inputs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"got {len(hypotheses)} hypotheses but {len(references)} references; they must be aligned one to one"
        )
    if not hypotheses:
        raise ValueError("cannot score an empty corpus: got 0 hypotheses and 0 references")
    for name, segments in (("hypotheses", hypotheses), ("references", references)):
        for i, segment in enumerate(segments):
            if not isinstance(segment, str):
                raise TypeError(f"{name}[{i}] must be a str, got {type(segment).__name__}: {segment!r}")


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each (sacrebleu defaults).

    Returns:
        ``{"bleu": float, "chrf": float, "count": int, "bleu_signature": str, "chrf_signature": str}``.

    Raises:
        ValueError: different numbers of hypotheses and references, or an empty corpus.
        TypeError: a segment that is not a string.
    """
    _check_inputs(hypotheses, references)
    bleu, chrf = BLEU(), CHRF()
    refs = [list(references)]
    return {
        "bleu": float(bleu.corpus_score(list(hypotheses), refs).score),
        "chrf": float(chrf.corpus_score(list(hypotheses), refs).score),
        "count": len(hypotheses),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def _check_edges(edges: Sequence[int]) -> None:
    if not edges or any(not isinstance(e, int) or e < 1 for e in edges) or list(edges) != sorted(set(edges)):
        raise ValueError(f"edges must be strictly increasing positive integers, e.g. (10, 20, 30, 40); got {edges!r}")


def bucket_labels(edges: Sequence[int] = DEFAULT_EDGES) -> list[str]:
    """All labels in order: ``(10, 20)`` -> ``["1-10", "11-20", "21+"]``."""
    _check_edges(edges)
    lower = [1, *(e + 1 for e in edges)]
    return [f"{lo}-{hi}" for lo, hi in zip(lower, edges, strict=False)] + [f"{edges[-1] + 1}+"]


def length_buckets(lengths: Sequence[int], edges: Sequence[int] = DEFAULT_EDGES) -> list[str]:
    """Bucket label of each length; ``edges`` are inclusive upper bounds (``10`` -> ``"1-10"``).

    A length of 0 (an empty source line) falls in the first bucket.
    """
    labels = bucket_labels(edges)
    out = []
    for length in lengths:
        if length < 0:
            raise ValueError(f"lengths must be >= 0, got {length}")
        index = next((i for i, edge in enumerate(edges) if length <= edge), len(edges))
        out.append(labels[index])
    return out


def bucket_scores(
    source_word_lengths: Sequence[int],
    hypotheses: Sequence[str],
    references: Sequence[str],
    edges: Sequence[int] = DEFAULT_EDGES,
) -> list[dict]:
    """BLEU and chrF per source-length bucket, in bucket order; empty buckets are left out.

    Returns:
        ``[{"bucket": "1-10", "count": int, "bleu": float, "chrf": float}, ...]``.
    """
    _check_inputs(hypotheses, references)
    if len(source_word_lengths) != len(hypotheses):
        raise ValueError(
            f"got {len(source_word_lengths)} source lengths but {len(hypotheses)} hypotheses; they must be aligned"
        )
    labels = length_buckets(source_word_lengths, edges)
    results = []
    for label in bucket_labels(edges):
        members = [i for i, lab in enumerate(labels) if lab == label]
        if not members:
            continue
        scores = corpus_scores([hypotheses[i] for i in members], [references[i] for i in members])
        results.append({"bucket": label, "count": len(members), "bleu": scores["bleu"], "chrf": scores["chrf"]})
    return results


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hf-syntax-mt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown"


def signature(**fields: object) -> str:
    """A model signature, ``hf-syntax-mt:<version>|key:value|...`` in the order the fields are given.

    Example: ``signature(variant="pascal(layer0:4 heads,sigma=1.0)", parser="gold", seed=0)`` ->
    ``"hf-syntax-mt:0.1.0|variant:pascal(layer0:4 heads,sigma=1.0)|parser:gold|seed:0"``.
    """
    parts = [f"hf-syntax-mt:{_package_version()}"]
    for key, value in fields.items():
        text = str(value)
        if "|" in text or "\n" in text:
            raise ValueError(f"signature field {key}={text!r} must not contain '|' or a newline")
        parts.append(f"{key}:{text}")
    return "|".join(parts)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_comparison(results: dict[str, dict], buckets: dict[str, list[dict]] | None = None) -> str:
    """A plain-text table: one BLEU/chrF column pair per system, rows ``all`` then each length bucket.

    Args:
        results: system name -> :func:`corpus_scores` output. An optional ``"model_signature"`` entry
            (see :func:`signature`) is printed under the table.
        buckets: system name -> :func:`bucket_scores` output (optional).

    Returns:
        The table followed by the sacrebleu signature lines (one per distinct signature).
    """
    if not results:
        raise ValueError("results is empty: pass {system_name: corpus_scores(...)} for at least one system")
    systems = list(results)
    buckets = buckets or {}
    unknown = set(buckets) - set(results)
    if unknown:
        raise ValueError(f"buckets has systems {sorted(unknown)} that are missing from results {systems}")

    # Rows: (label, count text, {system: (bleu, chrf)}).
    rows = [
        (
            "all",
            {s: results[s].get("count") for s in systems},
            {s: (results[s]["bleu"], results[s]["chrf"]) for s in systems},
        )
    ]
    bucket_order: list[str] = []
    for system in systems:
        for entry in buckets.get(system, []):
            if entry["bucket"] not in bucket_order:
                bucket_order.append(entry["bucket"])
    # Order buckets by their lower bound whatever system listed them first.
    bucket_order.sort(key=lambda label: int(label.split("-")[0].rstrip("+")))
    for label in bucket_order:
        counts, scores = {}, {}
        for system in systems:
            entry = next((e for e in buckets.get(system, []) if e["bucket"] == label), None)
            counts[system] = None if entry is None else entry["count"]
            scores[system] = (None, None) if entry is None else (entry["bleu"], entry["chrf"])
        rows.append((label, counts, scores))

    def count_text(counts: dict) -> str:
        distinct = {c for c in counts.values() if c is not None}
        return "-" if not distinct else "/".join(str(c) for c in sorted(distinct))

    label_width = max(len("segment"), *(len(r[0]) for r in rows))
    count_width = max(len("n"), *(len(count_text(r[1])) for r in rows))
    col = max(6, *(len(s) for s in systems))  # width of one score column
    pair = 2 * col + 1

    lines = [
        f"{'':<{label_width}}  {'':>{count_width}}  " + "  ".join(f"{s:^{pair}}" for s in systems),
        f"{'segment':<{label_width}}  {'n':>{count_width}}  "
        + "  ".join(f"{'BLEU':>{col}} {'chrF':>{col}}" for _ in systems),
    ]
    lines.append("-" * len(lines[1]))
    for label, counts, scores in rows:
        cells = "  ".join(f"{_fmt(scores[s][0]):>{col}} {_fmt(scores[s][1]):>{col}}" for s in systems)
        lines.append(f"{label:<{label_width}}  {count_text(counts):>{count_width}}  {cells}")

    lines.append("")
    for key, name in (("bleu_signature", "BLEU"), ("chrf_signature", "chrF")):
        distinct = list(dict.fromkeys(results[s][key] for s in systems if key in results[s]))
        if len(distinct) == 1:
            lines.append(f"{name} signature: {distinct[0]}")
        else:
            lines.extend(f"{name} signature ({s}): {results[s][key]}" for s in systems if key in results[s])
    for system in systems:
        if "model_signature" in results[system]:
            lines.append(f"model ({system}): {results[system]['model_signature']}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Model signature
# ----------------------------------------------------------------------------------------------------------------
def _syntax_options(config) -> dict:
    """The syntax options of a `SyntaxMTConfig` that differ from their defaults (every option a subclass field of
    `MarianConfig`, so options added later show up without editing this function)."""
    import dataclasses

    from transformers import MarianConfig

    from .configuration_syntax_mt import SyntaxMTConfig

    if not isinstance(config, SyntaxMTConfig):
        return {}
    marian = {f.name for f in dataclasses.fields(MarianConfig)} if dataclasses.is_dataclass(MarianConfig) else set()
    out = {}
    for f in dataclasses.fields(SyntaxMTConfig):
        if f.name in marian or f.name == "source_parser":
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        value = getattr(config, f.name, default)
        if value != default and value is not None:
            out[f.name] = value
    return out


def describe_variant(config) -> str:
    """``marian`` for a config with no syntax option, else ``syntax_mt(option=value,...)`` (non-default options)."""
    options = _syntax_options(config)
    if not options:
        return "marian"
    text = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(options.items()))
    return f"syntax_mt({text.replace('|', '/')})"


def model_signature(config, parser: str | None = None, seed: int | None = None, **fields: object) -> str:
    """:func:`signature` of a model: its variant (:func:`describe_variant`), size, parser and seed.

    ``parser`` defaults to the backend recorded in ``config.source_parser`` (``none`` without one).
    """
    if parser is None:
        recorded = getattr(config, "source_parser", None)
        parser = "none" if not recorded else ":".join(str(v) for v in recorded.values()).replace("|", "/")
    size = f"d{config.d_model}-{config.encoder_layers}+{config.decoder_layers}L-{config.encoder_attention_heads}H"
    extra = {"seed": seed} if seed is not None else {}
    return signature(variant=describe_variant(config), size=size, parser=parser, **extra, **fields)


# ----------------------------------------------------------------------------------------------------------------
# RIBES (Isozaki et al. 2010), following NLTK's `nltk.translate.ribes_score`
# ----------------------------------------------------------------------------------------------------------------
RIBES_ALPHA, RIBES_BETA = 0.25, 0.10


def _count_ngram(sequence: Sequence[str], ngram: tuple[str, ...]) -> int:
    m = len(ngram)
    return sum(1 for k in range(len(sequence) - m + 1) if tuple(sequence[k : k + m]) == ngram)


def _find_ngram(sequence: Sequence[str], ngram: tuple[str, ...]) -> int:
    m = len(ngram)
    return next(k for k in range(len(sequence) - m + 1) if tuple(sequence[k : k + m]) == ngram)


def word_rank_alignment(reference: Sequence[str], hypothesis: Sequence[str]) -> list[int]:
    """Isozaki et al. (2010) word order ("worder"): for each hypothesis word found in the reference, the reference
    position it aligns to. A word that occurs once on both sides aligns directly; otherwise the smallest right (then
    left) context n-gram that occurs exactly once on both sides disambiguates it; words with no such context are
    dropped. Same search as NLTK's ``word_rank_alignment`` (window bound included)."""
    worder = []
    hyp_len = len(hypothesis)
    ref_counts: dict[str, int] = {}
    for w in reference:
        ref_counts[w] = ref_counts.get(w, 0) + 1
    hyp_counts: dict[str, int] = {}
    for w in hypothesis:
        hyp_counts[w] = hyp_counts.get(w, 0) + 1
    for i, word in enumerate(hypothesis):
        if word not in ref_counts:
            continue
        if hyp_counts[word] == ref_counts[word] == 1:
            worder.append(reference.index(word))
            continue
        for window in range(1, min(max(i, hyp_len - i + 1), len(reference))):
            if i + window < hyp_len:  # right context hyp[i .. i+window]
                ngram = tuple(hypothesis[i : i + window + 1])
                if _count_ngram(reference, ngram) == _count_ngram(hypothesis, ngram) == 1:
                    worder.append(_find_ngram(reference, ngram))
                    break
            if window <= i:  # left context hyp[i-window .. i]
                ngram = tuple(hypothesis[i - window : i + 1])
                if _count_ngram(reference, ngram) == _count_ngram(hypothesis, ngram) == 1:
                    worder.append(_find_ngram(reference, ngram) + window)
                    break
    return worder


def kendall_tau(worder: Sequence[int]) -> float:
    """Normalised Kendall's tau of a word order, in [0, 1]: (tau + 1) / 2 with tau = 2 * increasing pairs / all
    pairs - 1; fewer than 2 aligned words give 0."""
    n = len(worder)
    if n < 2:
        return 0.0
    increasing = sum(1 for a in range(n) for b in range(a + 1, n) if worder[a] < worder[b])
    tau = 2 * increasing / (n * (n - 1) / 2) - 1
    return (tau + 1) / 2


def sentence_ribes(
    hypothesis: Sequence[str], reference: Sequence[str], alpha: float = RIBES_ALPHA, beta: float = RIBES_BETA
) -> float:
    """RIBES of one tokenized hypothesis: NKT * P^alpha * BP^beta, with P the fraction of hypothesis words aligned
    and BP = min(1, exp(1 - |ref| / |hyp|)). An empty hypothesis scores 0."""
    if not hypothesis or not reference:
        return 0.0
    worder = word_rank_alignment(reference, hypothesis)
    brevity = min(1.0, math.exp(1.0 - len(reference) / len(hypothesis)))
    precision = len(worder) / len(hypothesis)
    return kendall_tau(worder) * precision**alpha * brevity**beta


def corpus_ribes(
    hypotheses: Sequence[str],
    references: Sequence[str],
    alpha: float = RIBES_ALPHA,
    beta: float = RIBES_BETA,
    tokenize: str = "13a",
) -> dict:
    """Corpus RIBES: the mean of sentence RIBES (0-1 scale, as in WAT), after sacrebleu's ``tokenize`` tokenizer
    (the one BLEU uses) and a whitespace split.

    Returns:
        ``{"ribes": float, "count": int, "ribes_signature": str}``.
    """
    import sacrebleu
    from sacrebleu.tokenizers import tokenizer_13a, tokenizer_none

    _check_inputs(hypotheses, references)
    tokenizers = {"13a": tokenizer_13a.Tokenizer13a(), "none": tokenizer_none.NoneTokenizer()}
    if tokenize not in tokenizers:
        raise ValueError(f"tokenize={tokenize!r} must be one of {sorted(tokenizers)}")
    tok = tokenizers[tokenize]
    total = sum(
        sentence_ribes(tok(h).split(), tok(r).split(), alpha, beta)
        for h, r in zip(hypotheses, references, strict=True)
    )
    sig = (
        f"nrefs:1|case:mixed|tok:{tokenize}|alpha:{alpha}|beta:{beta}|impl:nltk-compatible"
        f"|sacrebleu:{sacrebleu.__version__}"
    )
    return {"ribes": total / len(hypotheses), "count": len(hypotheses), "ribes_signature": sig}


# ----------------------------------------------------------------------------------------------------------------
# Paired bootstrap resampling (sacrebleu's implementation)
# ----------------------------------------------------------------------------------------------------------------
def paired_bootstrap(
    baseline: Sequence[str],
    system: Sequence[str],
    references: Sequence[str],
    n_samples: int = 1000,
    seed: int = 12345,
    names: tuple[str, str] = ("baseline", "system"),
) -> dict:
    """Paired bootstrap resampling of BLEU and chrF (sacrebleu's ``PairedTest(test_type="bs")``, which replicates
    Moses' ``bootstrap-hypothesis-difference-significance.pl``).

    ``n_samples`` resamples of the test set (indices drawn with ``numpy.random.default_rng(seed)``) are scored for
    both systems; the p-value is ``(#{|d_i| - mean|d| > |d_obs|} + 1) / (n_samples + 1)`` where ``d_i`` is the
    system-minus-baseline difference on resample i and ``d_obs`` the difference on the full test set.

    Args:
        seed: a positive int (sacrebleu treats 0 as "unseeded").

    Returns:
        ``{"bleu": {...}, "chrf": {...}}``; each holds ``baseline``/``system`` scores, their bootstrap ``*_mean`` and
        95% half-interval ``*_ci``, ``p_value`` and the sacrebleu ``signature`` (which records the seed and the
        number of resamples). Identical outputs get ``p_value`` 1.0 (sacrebleu would give 1 / (n_samples + 1)).
    """
    from sacrebleu.significance import PairedTest

    _check_inputs(baseline, references)
    _check_inputs(system, references)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 1:
        raise ValueError(f"seed={seed!r} must be a positive int (sacrebleu treats 0 as unseeded)")
    if n_samples < 1:
        raise ValueError(f"n_samples={n_samples} must be >= 1")
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)  # PairedTest reads its seed from the environment
    try:
        test = PairedTest(
            [(names[0], list(baseline)), (names[1], list(system))],
            metrics={"bleu": BLEU(), "chrf": CHRF()},
            references=[list(references)],
            test_type="bs",
            n_samples=n_samples,
        )
        signatures, results = test()
    finally:
        if previous is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = previous
    out = {}
    for key, metric in (("bleu", "BLEU"), ("chrf", "chrF2")):
        base, sys_ = results[metric]
        out[key] = {
            "baseline": float(base.score), "baseline_mean": float(base.mean), "baseline_ci": float(base.ci),
            "system": float(sys_.score), "system_mean": float(sys_.mean), "system_ci": float(sys_.ci),
            "p_value": float(sys_.p_value), "signature": str(signatures[metric]),
        }  # fmt: skip
        if list(baseline) == list(system):
            # sacrebleu's test statistic is 0 > 0 on every resample, which gives the *smallest* p-value,
            # 1 / (n_samples + 1); identical outputs are no evidence of a difference.
            out[key]["p_value"] = 1.0
    return out


# ----------------------------------------------------------------------------------------------------------------
# Attention to the syntactic parent
# ----------------------------------------------------------------------------------------------------------------
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
        raise ValueError(f"attention has shape {attention.shape} but word_ids has {T} entries: expected ({T}, {T})")
    member = np.zeros((T, num_words))  # (T, n) one-hot subword -> word
    for t, w in enumerate(word_ids):
        if w is not None:
            if not 0 <= w < num_words:
                raise ValueError(f"word_ids[{t}] = {w} is outside 0..{num_words - 1}")
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
        raise ValueError(
            f"got {len(attentions)} attention arrays, {len(word_ids)} word_ids lists and {len(heads)} trees; "
            "give one of each per sentence"
        )
    if not attentions:
        raise ValueError("no sentence to score")
    correct, count = None, 0
    for k, (att, wids, tree) in enumerate(zip(attentions, word_ids, heads, strict=True)):
        att = np.asarray(att)
        if att.ndim != 4:
            raise ValueError(f"sentence {k}: attention must be (layers, heads, T, T), got shape {att.shape}")
        L, H = att.shape[:2]
        if correct is None:
            correct = np.zeros((L, H), dtype=np.int64)
        elif correct.shape != (L, H):
            raise ValueError(f"sentence {k} has {L}x{H} layers x heads but sentence 0 has {correct.shape}")
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

    Returns:
        :func:`attachment_scores` output plus ``"layers"``, ``"heads"``, ``"sentences"`` and optionally
        ``"examples"`` (``[{"words", "heads", "attention"}]``).
    """
    import numpy as np
    import torch
    from tqdm.auto import tqdm

    from .configuration_syntax_mt import SyntaxMTConfig
    from .data.collator import DataCollatorForSyntaxMT
    from .data.subwords import align_parse

    input_parses = gold if input_parses is None else input_parses
    if len(input_parses) != len(gold):
        raise ValueError(f"{len(input_parses)} input parses but {len(gold)} gold trees: they must be aligned")
    for k, (a, b) in enumerate(zip(input_parses, gold, strict=True)):
        if a.words != b.words:
            raise ValueError(f"sentence {k}: input parse words {a.words} differ from the gold words {b.words}")
    max_length = max_length or model.config.max_position_embeddings
    syntax = isinstance(model.config, SyntaxMTConfig)
    tree, features = syntax and model.config.uses_tree, syntax and bool(model.config.input_features)
    rows = [align_parse(tokenizer, p, max_length=max_length, compute_tree=tree, compute_features=features)
            for p in input_parses]  # fmt: skip
    extra = [k for k in ("word_index", "word_heads", "pos_ids", "deprel_ids", "subword_tag_ids") if k in rows[0]]
    collate = DataCollatorForSyntaxMT(tokenizer)
    encoder = model.get_encoder()
    model.eval()
    attentions, examples = [], []
    for start in tqdm(range(0, len(rows), batch_size), desc="Encoder attentions", unit="batch"):
        chunk = rows[start : start + batch_size]
        batch = collate([{k: r[k] for k in ("input_ids", "attention_mask", "parent_positions", *extra)} for r in chunk])
        inputs = {k: v for k, v in batch.items() if syntax or k != "parent_positions"}
        with torch.no_grad():
            out = encoder(**inputs, output_attentions=True, return_dict=True)
        if not out.attentions or out.attentions[0] is None:
            raise ValueError(
                "the encoder returned no attentions: load the model with attn_implementation='eager' "
                "(AutoModelForSeq2SeqLM.from_pretrained(dir, attn_implementation='eager'))"
            )
        stacked = torch.stack(out.attentions, dim=1).float().numpy()  # (B, L, H, S, S)
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


# ----------------------------------------------------------------------------------------------------------------
# Figures (matplotlib, Agg backend)
# ----------------------------------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save_figure(fig, path: str | os.PathLike, footer: str = "") -> Path:
    """Print `footer` (signatures) under the axes, write the PNG (creating its folder) and close the figure."""
    if footer:
        fig.text(0.01, -0.04, footer, fontsize=5, va="top", wrap=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def plot_bucket_scores(
    buckets: dict[str, list[dict]], path: str | os.PathLike, metric: str = "bleu", footer: str = ""
) -> Path:
    """Grouped bar chart of ``metric`` by source-length bucket, one bar per system (:func:`bucket_scores` output).
    ``footer`` (e.g. the signatures) is printed under the axes."""
    plt = _pyplot()
    if not buckets:
        raise ValueError("buckets is empty: pass {system: bucket_scores(...)}")
    labels = []
    for entries in buckets.values():
        for e in entries:
            if e["bucket"] not in labels:
                labels.append(e["bucket"])
    labels.sort(key=lambda label: int(label.split("-")[0].rstrip("+")))
    systems = list(buckets)
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels) * max(1, len(systems) / 2)), 4.2))
    for k, system in enumerate(systems):
        by_label = {e["bucket"]: e for e in buckets[system]}
        xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(labels))]
        values = [by_label[label][metric] if label in by_label else 0.0 for label in labels]
        bars = ax.bar(xs, values, width=width, label=system)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    counts = {}
    for entries in buckets.values():
        for e in entries:
            counts.setdefault(e["bucket"], e["count"])
    ax.set_xticks(range(len(labels)), [f"{label}\n(n={counts[label]})" for label in labels])
    ax.set_xlabel("source length (words)")
    ax.set_ylabel({"bleu": "BLEU", "chrf": "chrF"}.get(metric, metric))
    ax.legend()
    if footer:
        fig.text(0.01, 0.01, footer, fontsize=6, va="bottom", wrap=True)
        fig.subplots_adjust(bottom=0.28)
    return _save_figure(fig, path)


def plot_attachment_heatmap(scores, path: str | os.PathLike, title: str = "", footer: str = "") -> Path:
    """Heatmap of an ``(L, H)`` attachment score matrix (layers x heads), each cell annotated."""
    import numpy as np

    plt = _pyplot()
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError(f"scores must be (layers, heads), got shape {scores.shape}")
    L, H = scores.shape
    fig, ax = plt.subplots(figsize=(1.0 + 0.8 * H, 1.0 + 0.6 * L))
    image = ax.imshow(scores, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    for layer in range(L):
        for head in range(H):
            value = scores[layer, head]
            ax.text(head, layer, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if value < 0.6 else "black")  # fmt: skip
    ax.set_xticks(range(H))
    ax.set_yticks(range(L))
    ax.set_xlabel("head")
    ax.set_ylabel("encoder layer")
    ax.set_title(title or "attention-to-parent attachment", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save_figure(fig, path, footer)


def plot_attention_arcs(
    words: Sequence[str],
    heads: Sequence[int],
    attention,
    path: str | os.PathLike,
    title: str = "",
    footer: str = "",
) -> Path:
    """Gold dependency arcs (above the words, head -> dependent) over a sentence and, below, an arc from each word to
    the word it attends to most (green when that is its gold head, red otherwise; width and opacity = the weight; a
    grey dot when a word attends most to itself).

    Args:
        attention: ``(n, n)`` word-level attention of one head (:func:`word_attention`).
    """
    import numpy as np
    from matplotlib.patches import Arc

    plt = _pyplot()
    n = len(words)
    attention = np.asarray(attention, dtype=float)
    if attention.shape != (n, n) or len(heads) != n:
        raise ValueError(f"{n} words need {n} heads and an ({n}, {n}) attention; got {len(heads)}, {attention.shape}")
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * n), 4))
    for i, h in enumerate(heads):
        if h == 0:
            ax.annotate("root", (i, 0.15), xytext=(i, 1.5), ha="center", fontsize=7,
                        arrowprops=dict(arrowstyle="->", color="tab:blue"))  # fmt: skip
            continue
        centre, span = (i + h - 1) / 2, abs(i - (h - 1))
        ax.add_patch(Arc((centre, 0.15), span, span * 0.6, theta1=0, theta2=180, color="tab:blue", lw=1.2))
        ax.plot([i], [0.15], marker="v", color="tab:blue", ms=4)
    for i in range(n):
        row = attention[i]
        if np.isnan(row).all():
            continue
        j = int(np.nanargmax(row))  # the most attended word: what the attachment score checks
        if j == i:
            ax.plot([i], [-0.25], marker="o", ms=3 + 6 * row[j], color="tab:gray", alpha=float(min(1.0, row[j])))
            continue
        correct = heads[i] == j + 1
        centre, span = (i + j) / 2, abs(i - j)
        ax.add_patch(Arc((centre, -0.15), span, span * 0.6, theta1=180, theta2=360, lw=1.0 + 2 * row[j],
                         color="tab:green" if correct else "tab:red", alpha=float(max(0.3, min(1.0, row[j])))))  # fmt: skip
    for i, w in enumerate(words):
        ax.text(i, 0, w, ha="center", va="center", fontsize=8, bbox=dict(fc="white", ec="none", pad=0.5))
    reach = max(1, n) * 0.35
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-reach, reach)
    ax.axis("off")
    ax.set_title(title or "gold arcs (above, blue) and attention (below)", fontsize=9)
    return _save_figure(fig, path, footer)


# ----------------------------------------------------------------------------------------------------------------
# Files -> every score (`hf-syntax-mt evaluate`)
# ----------------------------------------------------------------------------------------------------------------
def read_lines(path: str | os.PathLike, what: str = "file") -> list[str]:
    """Lines of a UTF-8 text file (final newline dropped); ``ValueError`` naming the file when it is empty."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise ValueError(f"{what} {path} is empty: expected one segment per line")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _check_line_counts(named: dict[str, tuple[str | os.PathLike, list[str]]]) -> None:
    counts = {name: len(lines) for name, (_, lines) in named.items()}
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"{name} {path} has {len(lines)} lines" for name, (path, lines) in named.items())
        raise ValueError(f"line counts differ: {detail}; files must be aligned line by line")


def _run_signature(model_dir: str | os.PathLike | None, hyp_path: str | os.PathLike) -> str:
    """The model signature of a system: the `hf_syntax_mt_run.json` a training run wrote, else the model config's,
    else a signature of the hypothesis file itself (name and content hash)."""
    import hashlib

    if model_dir is not None:
        info = Path(model_dir) / RUN_INFO
        if info.is_file():
            return json.loads(info.read_text())["model_signature"]
        from transformers import AutoConfig

        import hf_syntax_mt  # noqa: F401  (registers syntax_mt)

        return model_signature(AutoConfig.from_pretrained(model_dir))
    digest = hashlib.sha256(Path(hyp_path).read_bytes()).hexdigest()[:12]
    return signature(system=Path(hyp_path).name, sha=digest)


#: File a training run writes beside the model: the model signature, the parser, the data and the scores.
RUN_INFO = "hf_syntax_mt_run.json"


def evaluate_files(
    hypotheses: str | os.PathLike,
    references: str | os.PathLike,
    sources: str | os.PathLike | None = None,
    baseline: str | os.PathLike | None = None,
    model: str | os.PathLike | None = None,
    baseline_model: str | os.PathLike | None = None,
    names: tuple[str, str] = ("system", "baseline"),
    bootstrap_samples: int = 1000,
    seed: int = 12345,
    edges: Sequence[int] = DEFAULT_EDGES,
    bucket_chart: str | os.PathLike | None = None,
    gold_conllu: str | os.PathLike | None = None,
    input_conllu: str | os.PathLike | None = None,
    heatmap: str | os.PathLike | None = None,
    arcs: str | os.PathLike | None = None,
    arcs_sentence: int = 0,
    arcs_layer_head: tuple[int, int] | None = None,
    max_sentences: int | None = None,
) -> dict:
    """Every evaluation of ``hf-syntax-mt evaluate`` on files; returns a JSON-ready dict.

    - ``hypotheses``/``references`` (and ``baseline``): BLEU, chrF, RIBES with signatures.
    - ``sources``: BLEU/chrF by source-length bucket (whitespace words), and a bar chart at ``bucket_chart``.
    - ``baseline``: the same for a second system and paired bootstrap significance of system vs baseline.
    - ``model`` + ``gold_conllu``: per-head attention-to-parent attachment scores (heatmap at ``heatmap``, the arcs
      of sentence ``arcs_sentence`` under the best head, or ``arcs_layer_head``, at ``arcs``). ``input_conllu``
      gives the parses fed to the syntax heads (default: the gold trees).
    """
    hyp_lines = read_lines(hypotheses, "hypothesis file")
    ref_lines = read_lines(references, "reference file")
    files = {"hypotheses": (hypotheses, hyp_lines), "references": (references, ref_lines)}
    if baseline is not None:
        files["baseline"] = (baseline, read_lines(baseline, "baseline hypothesis file"))
    if sources is not None:
        files["sources"] = (sources, read_lines(sources, "source file"))
    _check_line_counts(files)
    system_name, baseline_name = names
    systems = {system_name: (hypotheses, hyp_lines, model)}
    if baseline is not None:
        systems = {baseline_name: (baseline, files["baseline"][1], baseline_model), **systems}
    result: dict = {"systems": {}, "count": len(ref_lines)}
    for name, (path, lines, model_dir) in systems.items():
        scores = corpus_scores(lines, ref_lines)
        scores.update(corpus_ribes(lines, ref_lines))
        scores["model_signature"] = _run_signature(model_dir, path)
        scores["file"] = str(path)
        result["systems"][name] = scores
    if sources is not None:
        lengths = [len(s.split()) for s in files["sources"][1]]
        result["buckets"] = {
            name: bucket_scores(lengths, lines, ref_lines, edges) for name, (_, lines, _) in systems.items()
        }
        if bucket_chart is not None:
            first = next(iter(result["systems"].values()))
            footer = f"BLEU: {first['bleu_signature']}\n" + "\n".join(
                f"{name}: {s['model_signature']}" for name, s in result["systems"].items()
            )
            result["bucket_chart"] = str(plot_bucket_scores(result["buckets"], bucket_chart, footer=footer))
    if baseline is not None:
        result["significance"] = {
            "baseline": baseline_name, "system": system_name,
            **paired_bootstrap(files["baseline"][1], hyp_lines, ref_lines, bootstrap_samples, seed,
                               names=(baseline_name, system_name)),
        }  # fmt: skip
    if gold_conllu is not None:
        if model is None:
            raise ValueError("attention attachment scores need --model (the model directory) with --gold-conllu")
        result["attention"] = attention_report(
            model, gold_conllu, input_conllu, heatmap, arcs, arcs_sentence, arcs_layer_head, max_sentences,
            result["systems"][system_name]["model_signature"],
        )  # fmt: skip
    return result


def attention_report(model_dir, gold_conllu, input_conllu, heatmap, arcs, arcs_sentence, arcs_layer_head,
                     max_sentences, model_sig) -> dict:  # fmt: skip
    """Attachment scores of the model in ``model_dir`` on the trees of ``gold_conllu`` (first ``max_sentences``),
    with the heatmap and arc figures written when their paths are given; every number comes with a signature (model
    signature + scoring method + gold file hash + number of words). JSON-ready."""
    import numpy as np
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_syntax_mt  # noqa: F401

    from .data.parsers import _file_sha, read_conllu

    gold = read_conllu(gold_conllu)
    if not gold:
        raise ValueError(f"gold CoNLL-U file {gold_conllu} has no sentence")
    parses = read_conllu(input_conllu) if input_conllu is not None else None
    if max_sentences is not None:
        gold = gold[:max_sentences]
        parses = None if parses is None else parses[:max_sentences]
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    want = arcs_sentence + 1 if arcs is not None else 0
    if arcs is not None and not 0 <= arcs_sentence < len(gold):
        raise ValueError(f"arcs_sentence={arcs_sentence} but {gold_conllu} has {len(gold)} sentences")
    scores = model_attachment_scores(model, tokenizer, gold, parses, return_attentions=want)
    gold_sig = f"gold:{Path(gold_conllu).name}@{_file_sha(str(gold_conllu))[:12]}"
    if input_conllu is not None:
        gold_sig += f",input:{Path(input_conllu).name}@{_file_sha(str(input_conllu))[:12]}"
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


def format_evaluation(result: dict) -> str:
    """Plain-text report of :func:`evaluate_files` output; every number is printed with its signatures."""
    lines = []
    systems = result["systems"]
    width = max(len("system"), *(len(n) for n in systems))
    lines.append(f"{'system':<{width}}  {'BLEU':>6}  {'chrF':>6}  {'RIBES':>6}  n")
    for name, s in systems.items():
        lines.append(f"{name:<{width}}  {s['bleu']:6.2f}  {s['chrf']:6.2f}  {s['ribes']:6.4f}  {s['count']}")
    first = next(iter(systems.values()))
    lines += ["", f"BLEU signature: {first['bleu_signature']}", f"chrF signature: {first['chrf_signature']}",
              f"RIBES signature: {first['ribes_signature']}"]  # fmt: skip
    lines += [f"model ({name}): {s['model_signature']}" for name, s in systems.items()]
    if "buckets" in result:
        scores = {name: {k: s[k] for k in ("bleu", "chrf", "count", "bleu_signature", "chrf_signature",
                                           "model_signature")} for name, s in systems.items()}  # fmt: skip
        lines += ["", "By source length (words):", format_comparison(scores, result["buckets"])]
        if "bucket_chart" in result:
            lines.append(f"chart: {result['bucket_chart']}")
    if "significance" in result:
        sig = result["significance"]
        lines += ["", f"Paired bootstrap: {sig['system']} vs {sig['baseline']}"]
        for key, name in (("bleu", "BLEU"), ("chrf", "chrF")):
            r = sig[key]
            lines.append(
                f"  {name}: {sig['baseline']} {r['baseline']:.2f} ({r['baseline_mean']:.2f} +- {r['baseline_ci']:.2f}), "
                f"{sig['system']} {r['system']:.2f} ({r['system_mean']:.2f} +- {r['system_ci']:.2f}), "
                f"p = {r['p_value']:.4f}  [{r['signature']}]"
            )
    if "attention" in result:
        att = result["attention"]
        lines += ["", f"Attention-to-parent attachment ({att['count']} words, {att['sentences']} sentences), "
                  "rows = encoder layers, columns = heads:"]  # fmt: skip
        for layer, row in enumerate(att["scores"]):
            lines.append(f"  layer {layer}: " + " ".join(f"{v:.3f}" for v in row))
        best = att["best"]
        lines.append(f"  best: layer {best['layer']} head {best['head']} = {best['score']:.3f}")
        lines.append(f"  signature: {att['signature']}")
        for key in ("heatmap", "arcs"):
            if key in att:
                lines.append(f"  {key}: {att[key]}")
    return "\n".join(lines)
