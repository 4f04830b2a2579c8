"""Files -> every score: `hf-syntax-mt evaluate` (:func:`evaluate_files`), reading hypothesis and reference files,
and the plain-text report (:func:`format_evaluation`)."""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from ..errors import MissingFileError, UserError, UserFileError
from .attention import attention_report
from .metrics import DEFAULT_EDGES, bucket_scores, corpus_ribes, corpus_scores, format_comparison, paired_bootstrap
from .plots import plot_bucket_scores
from .signature import RUN_INFO, model_signature, signature

logger = logging.getLogger(__name__)


def read_lines(path: str | os.PathLike, what: str = "file", blank_ok: bool = False) -> list[str]:
    """Lines of a UTF-8 text file (final newline dropped); ``ValueError`` naming the file when it has no line, or
    only empty lines unless ``blank_ok`` (a system that output nothing: a warning, and it scores 0)."""
    path = Path(path)
    if path.is_dir():
        raise UserFileError(f"{what} {path} is a folder: give the file's path", errno.EISDIR, str(path))
    if not path.is_file():
        raise MissingFileError(f"{what} not found: {path}", errno.ENOENT, str(path))
    from ..data.readers import read_text, split_lines

    text = read_text(path)  # invalid UTF-8: an error naming the file, line and byte offset
    if not text or (not text.strip() and not blank_ok):
        raise UserError(f"{what} {path} is empty: expected one segment per line")
    lines = split_lines(text)  # at "\n" only, as the other files of a parallel set
    if not text.strip():
        logger.warning(f"{what} {path}: all {len(lines)} lines are empty (the system output nothing); it scores 0")
    return lines


def _check_line_counts(named: dict[str, tuple[str | os.PathLike, list[str]]]) -> None:
    counts = {name: len(lines) for name, (_, lines) in named.items()}
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"{name} {path} has {len(lines)} lines" for name, (path, lines) in named.items())
        raise UserError(f"line counts differ: {detail}; files must be aligned line by line")


def _run_signature(model_dir: str | os.PathLike | None, hyp_path: str | os.PathLike) -> str:
    """The model signature of a system: the `hf_syntax_mt_run.json` a training run wrote, else the model config's,
    else a signature of the hypothesis file itself (name and content hash)."""
    import hashlib

    if model_dir is not None:
        info = Path(model_dir) / RUN_INFO
        if info.is_file():
            return json.loads(info.read_text())["model_signature"]
        from transformers import AutoConfig

        return model_signature(AutoConfig.from_pretrained(model_dir))
    digest = hashlib.sha256(Path(hyp_path).read_bytes()).hexdigest()[:12]
    return signature(system=Path(hyp_path).name, sha=digest)


def model_decoding_of(model_dir: str | os.PathLike | None) -> str | None:
    """The decoding a saved model's `generate` runs when the call sets nothing (`generation_defaults.decoding_of` of
    `resolve_generation`, the one source every engine reads: the generation config as loading the model gives it,
    the model's own beam size and length limit where it sets none), with the weights its training run saved: what
    `translate` and the pipeline decode with unless ``--num-beams`` says otherwise. None without a model directory
    (the decoding of a file of hypotheses is not known)."""
    if model_dir is None:
        return None
    from transformers import AutoConfig, GenerationConfig

    from ..generation_defaults import decoding_of, fill_generation_defaults, resolve_generation

    directory = Path(model_dir)
    config = AutoConfig.from_pretrained(directory)
    if (directory / "generation_config.json").is_file():
        generation_config = GenerationConfig.from_pretrained(directory)
    else:  # as `from_pretrained` makes it for a model saved without one
        generation_config = GenerationConfig.from_model_config(config)
    # what `generate` reads of a model, without its weights: the beam size the model's __init__ fills in
    model = SimpleNamespace(config=config, generation_config=generation_config, name_or_path=str(directory))
    fill_generation_defaults(model)
    weights = None
    if (directory / RUN_INFO).is_file():
        weights = json.loads((directory / RUN_INFO).read_text(encoding="utf-8")).get("weights")
    return decoding_of(resolve_generation(model, warn=False)[0], weights)


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
    docids: str | os.PathLike | None = None,
    no_context: bool = False,
    device=None,
) -> dict:
    """Every evaluation of ``hf-syntax-mt evaluate`` on files; returns a JSON-ready dict.

    - ``hypotheses``/``references`` (and ``baseline``): BLEU, chrF, RIBES with signatures.
    - ``sources``: BLEU/chrF by source-length bucket (whitespace words), and a bar chart at ``bucket_chart``.
    - ``baseline``: the same for a second system and paired bootstrap significance of system vs baseline.
    - ``model`` + ``gold_conllu``: per-head attention-to-parent attachment scores (heatmap at ``heatmap``, the arcs
      of sentence ``arcs_sentence`` under the best head, or ``arcs_layer_head``, at ``arcs``). ``input_conllu``
      gives the parses fed to the syntax heads (default: the gold trees). A document-level model needs ``docids``
      (one document id per gold sentence: each sentence is read with its context) or ``no_context``.
      ``device``: where the model runs (default: the CPU).
    """
    hyp_lines = read_lines(hypotheses, "hypothesis file", blank_ok=True)
    ref_lines = read_lines(references, "reference file")
    files = {"hypotheses": (hypotheses, hyp_lines), "references": (references, ref_lines)}
    if baseline is not None:
        files["baseline"] = (baseline, read_lines(baseline, "baseline hypothesis file", blank_ok=True))
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
        scores["decoding"] = model_decoding_of(model_dir)
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
            raise UserError("attention attachment scores need --model (the model directory) with --gold-conllu")
        result["attention"] = attention_report(
            model, gold_conllu, input_conllu, heatmap, arcs, arcs_sentence, arcs_layer_head, max_sentences,
            result["systems"][system_name]["model_signature"], docids=docids, no_context=no_context, device=device,
        )  # fmt: skip
    return result


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
    lines += [f"decoding ({name}): " + (f"{s['decoding']} (the model's generation config: translate's decoding "
              "unless --num-beams)" if s.get("decoding") else "not known (give --model DIR: its generation config "
              "is translate's decoding)") for name, s in systems.items()]  # fmt: skip
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
