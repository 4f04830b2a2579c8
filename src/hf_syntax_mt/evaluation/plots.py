"""Every figure of the evaluation (matplotlib with the Agg backend, imported only when a figure is drawn): BLEU by
source-length bucket, the attachment heatmap, and the gold arcs against a head's attention."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import UserError, file_error


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as e:  # a full disk, a folder in the way, no permission: the file the user named
        raise file_error(e, path, "the figure", writing=True) from None
    finally:
        _pyplot().close(fig)
    return path


def plot_bucket_scores(
    buckets: dict[str, list[dict]], path: str | os.PathLike, metric: str = "bleu", footer: str = ""
) -> Path:
    """Grouped bar chart of ``metric`` by source-length bucket, one bar per system (:func:`bucket_scores` output).
    ``footer`` (e.g. the signatures) is printed under the axes."""
    plt = _pyplot()
    if not buckets:
        raise UserError("buckets is empty: pass {system: bucket_scores(...)}")
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
        raise UserError(f"scores must be (layers, heads), got shape {scores.shape}")
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
        raise UserError(f"{n} words need {n} heads and an ({n}, {n}) attention; got {len(heads)}, {attention.shape}")
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
