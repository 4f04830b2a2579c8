"""Corpus scores: sacrebleu BLEU and chrF, RIBES (:func:`corpus_ribes`), source-length buckets, paired bootstrap
significance, whether a gain grows with source length (:func:`length_gain_gap`), and the side-by-side table of
several systems (:func:`format_comparison`)::

    scores = {name: corpus_scores(hyps[name], refs) for name in hyps}
    buckets = {name: bucket_scores(source_lengths, hyps[name], refs) for name in hyps}
    print(format_comparison(scores, buckets))
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Sequence

from sacrebleu.metrics import BLEU, CHRF

from ..errors import UserError, UserTypeError

#: Upper bounds (inclusive) of the source-length buckets: 1-10, 11-20, 21-30, 31-40, 41+.
DEFAULT_EDGES = (10, 20, 30, 40)


def _check_inputs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    from ..validation import check_sequence

    for name, value in (("hypotheses", hypotheses), ("references", references)):
        check_sequence(value, name, "strings (one segment each)")  # a str: one segment per character
    if len(hypotheses) != len(references):
        raise UserError(
            f"got {len(hypotheses)} hypotheses but {len(references)} references; they must be aligned one to one"
        )
    if not hypotheses:
        raise UserError("cannot score an empty corpus: got 0 hypotheses and 0 references")
    for name, segments in (("hypotheses", hypotheses), ("references", references)):
        for i, segment in enumerate(segments):
            if not isinstance(segment, str):
                raise UserTypeError(f"{name}[{i}] must be a str, got {type(segment).__name__}: {segment!r}")


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
        raise UserError(f"edges must be strictly increasing positive integers, e.g. (10, 20, 30, 40); got {edges!r}")


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
            raise UserError(f"lengths must be >= 0, got {length}")
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
        raise UserError(
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
        raise UserError("results is empty: pass {system_name: corpus_scores(...)} for at least one system")
    systems = list(results)
    buckets = buckets or {}
    unknown = set(buckets) - set(results)
    if unknown:
        raise UserError(f"buckets has systems {sorted(unknown)} that are missing from results {systems}")

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
        raise UserError(f"tokenize={tokenize!r} must be one of {sorted(tokenizers)}")
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
def _check_bootstrap(n_samples: int, seed: int) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 1:
        raise UserError(f"seed={seed!r} must be a positive int (sacrebleu treats 0 as unseeded)")
    from ..validation import check_count

    check_count(n_samples, "n_samples (bootstrap resamples)", maximum=10_000_000)


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
    _check_bootstrap(n_samples, seed)
    from ..validation import check_strings

    if len(names := check_strings(names, "names", "two names (baseline, system)")) != 2:
        raise UserError(f"names must be two names, the baseline's and the system's, got {names}")
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


def length_gain_gap(
    baseline: Sequence[str],
    system: Sequence[str],
    references: Sequence[str],
    source_word_lengths: Sequence[int],
    short_max: int = 10,
    long_min: int = 31,
    clusters: Sequence[Hashable] | None = None,
    n_samples: int = 1000,
    seed: int = 12345,
) -> dict:
    """Does the system's BLEU gain over the baseline grow with source length? ΔBLEU on long sources (``long_min``
    words or more) minus ΔBLEU on short ones (``short_max`` or fewer; an empty source counts as short), with a
    bootstrap interval: the long-sentence claim as one number (the PASCAL paper's released outputs give about +2.3
    BLEU on 30+ words and -0.8 under 10, a gap of about 3).

    Stratified paired bootstrap: each resample draws as many short clusters as there are, with replacement, from
    the short ones, and likewise the long ones, the same draw for both systems; each side is scored by summing
    sacrebleu's per-sentence BLEU statistics over the draw (how sacrebleu's own ``PairedTest`` scores a resample).
    A cluster is one sentence unless ``clusters`` (one key per sentence) groups them: the sentences of one key are
    drawn together, so that a source sentence translated by several seeds' models counts once, not once a seed.

    Returns:
        ``{"short": {"count", "clusters", "delta"}, "long": {...}, "gap", "ci": [low, high]`` (the 2.5th and 97.5th
        percentiles of the resampled gaps) ``, "p_value"}``; the p-value is two-sided and centred,
        ``(#{|g_i - mean g| >= |g_obs|} + 1) / (n_samples + 1)``; identical outputs get 1.0.

    Raises:
        ValueError: misaligned inputs, ``short_max >= long_min``, an empty short or long group, a cluster with
            sentences on both sides of a group's bound, or unusable ``n_samples`` / ``seed``.
    """
    import numpy as np

    _check_inputs(baseline, references)
    _check_inputs(system, references)
    for name, values in (("source lengths", source_word_lengths), ("cluster keys", clusters)):
        if values is not None and len(values) != len(references):
            raise UserError(f"got {len(values)} {name} but {len(references)} references; they must be aligned")
    if not 0 <= short_max < long_min:
        raise UserError(f"need 0 <= short_max < long_min, got short_max={short_max}, long_min={long_min}")
    _check_bootstrap(n_samples, seed)
    lengths = np.asarray(source_word_lengths)
    group = np.where(lengths <= short_max, 0, np.where(lengths >= long_min, 1, -1))  # (N,) short 0, long 1, else -1
    keys = list(range(len(lengths))) if clusters is None else list(clusters)
    index = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    cluster = np.array([index[key] for key in keys])  # (N,) cluster number of each sentence
    cluster_group = np.full(len(index), -2)
    for c, g, key in zip(cluster, group, keys, strict=True):
        if cluster_group[c] not in (-2, g):
            raise UserError(
                f"cluster {key!r} has sentences on both sides of a length bound ({short_max} / {long_min})"
            )
        cluster_group[c] = g
    bleu = BLEU()
    refs = [list(references)]
    stats = {}  # system -> (C, 2 + 2 * max_ngram_order): sacrebleu's sentence statistics summed per cluster
    for name, hyps in (("baseline", baseline), ("system", system)):
        sentence_stats = np.asarray(bleu._extract_corpus_statistics(list(hyps), refs))  # (N, K)
        stats[name] = np.zeros((len(index), sentence_stats.shape[1]), dtype=sentence_stats.dtype)
        np.add.at(stats[name], cluster, sentence_stats)

    def delta(rows: np.ndarray) -> np.ndarray:  # (R, n) cluster numbers -> (R,) system BLEU - baseline BLEU
        return np.array([
            bleu._compute_score_from_stats(stats["system"][r].sum(0)).score
            - bleu._compute_score_from_stats(stats["baseline"][r].sum(0)).score
            for r in rows
        ])  # fmt: skip

    rng = np.random.default_rng(seed)
    out, resampled = {}, {}
    for g, name in enumerate(("short", "long")):
        members = np.flatnonzero(cluster_group == g)  # cluster numbers of this group
        if members.size == 0:
            bound = f"<= {short_max}" if name == "short" else f">= {long_min}"
            raise UserError(f"no {name} sources ({bound} words) among the {len(lengths)} sentences")
        out[name] = {"count": int(np.sum(group == g)), "clusters": int(members.size),
                     "delta": float(delta(members[None])[0])}  # fmt: skip
        resampled[name] = delta(members[rng.integers(0, members.size, (n_samples, members.size))])  # (n_samples,)
    gap = out["long"]["delta"] - out["short"]["delta"]
    gaps = resampled["long"] - resampled["short"]  # (n_samples,)
    p = (np.sum(np.abs(gaps - gaps.mean()) >= abs(gap)) + 1) / (n_samples + 1)
    if list(baseline) == list(system):
        p = 1.0  # identical outputs are no evidence of a difference
    return {**out, "gap": gap, "ci": [float(np.percentile(gaps, 2.5)), float(np.percentile(gaps, 97.5))],
            "p_value": float(p)}  # fmt: skip
