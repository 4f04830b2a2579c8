"""The demo's at-a-glance outputs: a plain-text table (one row per model) and a PNG of the loss and diagnostic
curves."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError

COLUMNS = ("model", "BLEU", "chrF", "attachment acc.", "steps", "train s")


def format_table(results: dict[str, dict]) -> str:
    """One row per model: BLEU, chrF, attachment accuracy (with the pairs it gets right both ways), steps and
    training seconds; the chance level under the table.

    ``results``: model name -> a record with ``bleu``, ``chrf``, ``steps``, ``train_seconds`` and ``diagnostic``
    (`hf_syntax_mt.demo.diagnostic.score_diagnostic`)."""
    if not results:
        raise UserError("no results to show")
    rows = []
    for name, r in results.items():
        d = r["diagnostic"]
        acc = f"{100 * d['accuracy']:.1f}% ({d['both_right']}/{d['pairs']} pairs both)"
        rows.append((name, f"{r['bleu']:.1f}", f"{r['chrf']:.1f}", acc, str(r["steps"]), f"{r['train_seconds']:.0f}"))
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(COLUMNS)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    d = next(iter(results.values()))["diagnostic"]
    return "\n".join(
        [line(COLUMNS), line("-" * w for w in widths), *(line(row) for row in rows),
         f"attachment acc.: {d['n']} diagnostic items ({d['pairs']} sources x 2 trees); chance and majority baseline "
         f"{100 * d['chance']:.0f}%, and a model that cannot see the tree gets at most 50% (0 pairs both ways)."]
    )  # fmt: skip


def plot_curves(results: dict[str, dict], path: str | Path) -> Path:
    """Training loss (left) and diagnostic accuracy (right) against the step, one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, r in results.items():
        steps, losses = zip(*r["loss_curve"], strict=True) if r["loss_curve"] else ((), ())
        left.plot(steps, losses, label=name)
        points = sorted(dict(r["diagnostic_curve"]).items())
        right.plot([s for s, _ in points], [100 * a for _, a in points], marker="o", label=name)
    left.set(xlabel="step", ylabel="training loss", title="Training loss", yscale="log")
    right.axhline(50, color="grey", linestyle="--", label="chance / tree-blind maximum")
    right.set(xlabel="step", ylabel="accuracy (%)", title="PP-attachment diagnostic", ylim=(0, 102))
    left.legend(loc="upper right")
    right.legend(loc="lower right")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["format_table", "plot_curves"]
