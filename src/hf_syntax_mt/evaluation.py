"""Corpus-level scores (sacrebleu BLEU and chrF), source-length buckets, and reproducibility signatures.

Every score is computed by sacrebleu's object API and reported with its signature; results of several
systems print side by side with :func:`format_comparison`::

    scores = {name: corpus_scores(hyps[name], refs) for name in hyps}
    buckets = {name: bucket_scores(source_lengths, hyps[name], refs) for name in hyps}
    print(format_comparison(scores, buckets))
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF

__all__ = [
    "DEFAULT_EDGES",
    "bucket_labels",
    "bucket_scores",
    "corpus_scores",
    "format_comparison",
    "length_buckets",
    "signature",
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
