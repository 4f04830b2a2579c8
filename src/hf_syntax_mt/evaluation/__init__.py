"""Evaluation: corpus scores (sacrebleu BLEU and chrF, RIBES), paired bootstrap significance, source-length
buckets with a bar chart, per-head attention-to-parent attachment scores with a heatmap, and signatures.

Every score is computed by sacrebleu's object API (RIBES by :func:`corpus_ribes`) and reported with its
signature; results of several systems print side by side with :func:`format_comparison`::

    scores = {name: corpus_scores(hyps[name], refs) for name in hyps}
    buckets = {name: bucket_scores(source_lengths, hyps[name], refs) for name in hyps}
    print(format_comparison(scores, buckets))

The same engine backs ``hf-syntax-mt evaluate`` (:func:`evaluate_files`).

Modules, by concern: `metrics` (corpus scores, RIBES, bootstrap, buckets, the comparison table), `signature`
(signatures and the run file's name), `describe` (the one description of a config's methods), `attention`
(attachment scores and the attention report that runs a model), `plots` (every figure; matplotlib is imported when
one is drawn), `files` (files -> every score, `hf-syntax-mt evaluate`), `model_card`, `contrastive`, `pronouns`
(the contrastive pronoun test from real documents) and `probing` (import those four from their modules).
"""

# ruff: noqa: F401  (the old module's public and private names, re-exported: tests and users import them from here)

from __future__ import annotations

from .attention import attachment_scores, attention_report, model_attachment_scores, word_attention
from .describe import ConfigDescription, _syntax_options, describe_config, describe_variant
from .files import _check_line_counts, _run_signature, evaluate_files, format_evaluation, read_lines
from .metrics import (
    DEFAULT_EDGES,
    RIBES_ALPHA,
    RIBES_BETA,
    _check_edges,
    _check_inputs,
    _count_ngram,
    _find_ngram,
    _fmt,
    bucket_labels,
    bucket_scores,
    corpus_ribes,
    corpus_scores,
    format_comparison,
    kendall_tau,
    length_buckets,
    length_gain_gap,
    paired_bootstrap,
    sentence_ribes,
    word_rank_alignment,
)
from .plots import _pyplot, _save_figure, plot_attachment_heatmap, plot_attention_arcs, plot_bucket_scores
from .signature import RUN_INFO, _package_version, model_signature, signature

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
    "length_gain_gap",
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
