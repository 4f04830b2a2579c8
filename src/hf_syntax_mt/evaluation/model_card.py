"""Model cards for saved syntax-aware models: a `README.md` built with huggingface_hub's `ModelCard`, its metadata
(`ModelCardData`: languages, license, tags, datasets, metrics, and BLEU and chrF as `EvalResult`s in the
`model-index`, each with its dataset and sacrebleu signature) above the human-readable body of `TEMPLATE`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import UserError, UserTypeError
from .describe import describe_config, describe_method
from .signature import model_signature as default_signature

#: the card's body (below the metadata block that `card_metadata` builds); model_cards/TEMPLATE.md is this text
TEMPLATE = """# {title}

{summary} trained with hf-syntax-mt.

## Method and options
{method}

Configuration (options that differ from the defaults): {options}{initialisation}
Model size: d_model={d_model}, {encoder_layers}+{decoder_layers} layers, {heads} heads, {parameters:,} parameters.

## Data
{data}

## Training
{training}

## Parser
{parser}

## Use
```python
from transformers import pipeline
translate = pipeline("translation", model="{path}", trust_remote_code=True)  # this model's folder or Hub id
{use}
```
{use_notes}{loading}

## Scores
{scores}

Model signature: `{model_signature}`

## Limitations
{limitations}
"""


def _changing_options(model, options) -> list[str]:
    """The options among `options` that plain `MarianMTModel` loading drops *and* that change what the model computes:
    those of a method with code of its own at inference (`Method.inference_needs`) or whose export folds parameters
    into Marian's weights (bi-affine heads' U), and options no method owns. A training-only method's (a loss with its
    own training parameters, which its export only deletes) leave Marian's computation as it is."""
    import torch

    from ..methods.registry import active_methods, owned_fields

    same: set[str] = set()
    original = model.state_dict()
    for method in active_methods(model.config):
        if method.inference_needs is not None:
            continue
        state = {k: v.detach().clone() for k, v in original.items()}
        method.export_state(model, state)
        if set(state) <= set(original) and all(torch.equal(v, original[k]) for k, v in state.items()):
            same |= set(owned_fields(method))
    return [k for k in options if k not in same]


def _use(config) -> tuple[str, str, str, list[str]]:
    """What the card says the model is, the call that uses its methods, the notes under it, and the extra tags: a
    document-level model is shown translating a document (a flat list of sentences is refused: it would lose its
    context without a word); the parser note only for a model whose methods read a parse."""
    from ..methods.registry import active_methods

    names = {m.name for m in active_methods(config)}
    k = getattr(config, "context_sentences", 0) or 0
    # every other registered method (and the multi-task spine) reads or predicts syntax or alignments
    syntax = bool(names - {"document_context"}) or bool(getattr(config, "task_token_ids", None))
    kinds = [w for w, on in (("syntax-aware", syntax), ("document-level", bool(k))) if on]
    summary = f"A {', '.join(kinds) + ' ' if kinds else ''}Marian translation model"
    tags = [t for t, on in (("syntax-aware-nmt", syntax), ("document-level-nmt", bool(k))) if on]
    notes = []
    if k:
        use = (
            'document = ["First sentence of the document.", "Second sentence.", "Third sentence."]\n'
            "translate(document, document=True)  # each sentence with the previous "
            f"{k} source sentence{'s' if k > 1 else ''} of its document as context\n"
            'translate([document, ["Another document.", "Its second sentence."]])  # a list of documents'
        )
        notes.append(
            f"The model reads the previous {k} source sentence{'s' if k > 1 else ''} of the document "
            f"(`context_sentences={k}`): a string or a flat list of sentences is refused unless the call gives the "
            "documents (`document=True`, a list of lists), each sentence's context (`contexts=`), or says "
            "`no_context=True`. On the command line: `hf-syntax-mt translate --model DIR --input FILE --docids IDS` "
            "(or `--documents blank-lines`)."
        )
    else:
        use = 'translate(["A first sentence.", "Another sentence."])'
    if getattr(config, "needs_source_parse", False):
        notes.append("The pipeline parses raw input itself with the parser recorded in the config (`source_parser`), "
                     "or with the one you pass as `parser=`.")  # fmt: skip
    return summary, use, "\n".join(notes), tags


#: the sacrebleu metrics that go into the card's `model-index` (Hub metric ids), with their display names
HUB_METRICS = {"bleu": "BLEU", "chrf": "chrF"}
_LANGUAGE = re.compile(r"[a-z]{2,3}")  # an ISO 639-1/2/3 code, as the Hub's `language` field takes


def card_metadata(
    model_name: str,
    scores: Mapping[str, Mapping] | None = None,
    eval_datasets: Mapping[str, Mapping[str, str | None]] | None = None,
    languages: Sequence[str] = (),
    datasets: Sequence[str] = (),
    tags: Sequence[str] = (),
    license: str = "apache-2.0",
):
    """The card's metadata as a `huggingface_hub.ModelCardData`: what the Hub reads to show a model's languages,
    license, task and scores.

    Args:
        model_name: the `model-index` name (the card's title).
        scores: split name -> the dict of `evaluation.corpus_scores` (``bleu``, ``chrf`` and their signatures),
            and ``decoding`` (`generation_defaults.decoding`: beams, length limit, weights), kept beside the
            signature in each `EvalResult`'s ``metric_args``.
        eval_datasets: split name -> the dataset it was scored on: ``type`` (a Hub dataset id, or a name without
            ``/`` for local files), ``name`` (shown on the Hub) and optionally ``config`` and ``split``. Only these
            splits become `EvalResult`s (a split without an entry, such as the last step's weights before checkpoint
            averaging, scored another model); ``None`` takes every split of ``scores``, named after the split.
        languages: the source and target language codes (ISO 639, e.g. ``("fr", "en")``); a code with a region
            (``en_US``, ``pt-BR``) is written as its language.
        datasets: Hub dataset ids the model was trained on (none for local files).
        tags: extra Hub tags.
        license: the Hub license id of the model.
    """
    from huggingface_hub import EvalResult, ModelCardData

    from ..validation import check_strings

    languages = check_strings(languages, "languages", "language codes")  # a str: one "language" per character
    datasets = check_strings(datasets, "datasets", "Hub dataset ids")
    tags = check_strings(tags, "tags", "Hub tags")
    if not isinstance(license, str) or not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", license):
        raise UserError(f"license {license!r} is not a Hub licence id: give one such as apache-2.0, mit, "
                        "cc-by-sa-4.0 or other (lower case)")  # fmt: skip
    scores = dict(scores or {})
    if eval_datasets is None:
        eval_datasets = {split: {"type": split, "name": split} for split in scores}
    results = []
    for split, dataset in eval_datasets.items():
        if split not in scores:
            raise UserError(f"eval_datasets names the split {split!r}, which has no scores (scored: {sorted(scores)})")
        missing = [k for k in ("type", "name") if not dataset.get(k)]
        if missing:
            raise UserError(f"eval_datasets[{split!r}] has no {' or '.join(missing)}: give the dataset's Hub id or "
                            "file name as `type` and the name to show as `name`")  # fmt: skip
        for metric, metric_name in HUB_METRICS.items():
            if metric not in scores[split]:
                continue
            value = scores[split][metric]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UserError(f"scores[{split!r}][{metric!r}] = {value!r} is not a finite number: the model index "
                                "would show it as the model's score; score the split again")  # fmt: skip
            results.append(EvalResult(
                task_type="translation", task_name="Translation", dataset_type=dataset["type"],
                dataset_name=dataset["name"], dataset_config=dataset.get("config"), dataset_split=dataset.get("split"),
                metric_type=metric, metric_name=metric_name, metric_value=round(float(scores[split][metric]), 2),
                metric_args={"signature": scores[split][f"{metric}_signature"],
                             **({"decoding": scores[split]["decoding"]} if "decoding" in scores[split] else {})},
            ))  # fmt: skip
    codes = []
    for code in languages:
        if not isinstance(code, str):
            raise UserTypeError(f"languages must be language codes (str), got {code!r} ({type(code).__name__})")
        primary = re.split(r"[-_]", code.strip())[0].lower()
        if not _LANGUAGE.fullmatch(primary):
            raise UserError(f"language {code!r} is not an ISO 639 code such as 'en' or 'deu': give the code")
        codes.append(primary)
    metrics = [m for m in HUB_METRICS if any(m in s for s in scores.values())]
    return ModelCardData(
        model_name=model_name, language=list(dict.fromkeys(codes)) or None, license=license,
        library_name="transformers", pipeline_tag="translation", tags=list(dict.fromkeys(["hf-syntax-mt", *tags])),
        datasets=list(datasets) or None, metrics=metrics or None, eval_results=results or None,
    )  # fmt: skip


def build_model_card(
    model,
    path: str,
    title: str,
    data: str,
    parser: str,
    scores: dict | None = None,
    limitations: str = "",
    tags: tuple[str, ...] = (),
    training: str = "",
    model_signature: str = "",
    languages: Sequence[str] = (),
    datasets: Sequence[str] = (),
    eval_datasets: Mapping[str, Mapping[str, str | None]] | None = None,
    license: str = "apache-2.0",
):
    """The card as a `huggingface_hub.ModelCard`: `card_metadata` (languages, license, tags, datasets, metrics,
    the `model-index` with BLEU and chrF per scored dataset) above `TEMPLATE` filled from the model's config.

    `scores` maps a split name to the dict of `evaluation.corpus_scores` (signatures kept; a `ribes`/
    `ribes_signature` pair from `evaluation.corpus_ribes` is printed in the body too). `model_signature` defaults to
    `evaluation.model_signature(model.config)`. `languages`, `datasets`, `eval_datasets` and `license`: see
    `card_metadata`."""
    from huggingface_hub import ModelCard

    config = model.config
    described = describe_config(config)
    # only what the config switches on (a document model has no PASCAL option); `attention_init` only chose the
    # starting weights, which the checkpoint holds
    options = {k: v for k, v in described.options.items() if k != "attention_init"}
    init_choice = described.options.get("attention_init")
    summary, use, use_notes, method_tags = _use(config)
    dropped = sorted(_changing_options(model, options))
    loading = (
        "\nLoad the model with `AutoModelForSeq2SeqLM.from_pretrained(..., trust_remote_code=True)`. "
        "`MarianMTModel.from_pretrained` also loads the weights, but drops the method options "
        f"({', '.join(f'`{k}`' for k in dropped)}) with only a generic warning, and then computes a different model."
        if dropped
        else ""
    )
    score_lines = []
    for split, s in (scores or {}).items():
        line = f"- {split}: BLEU {s['bleu']:.2f} (`{s['bleu_signature']}`), chrF {s['chrf']:.2f} (`{s['chrf_signature']}`)"
        if "ribes" in s:
            line += f", RIBES {s['ribes']:.4f} (`{s['ribes_signature']}`)"
        if "decoding" in s:  # beams, length limit, and which weights (the saved ones, or the ones not saved)
            line += f"; decoded with `{s['decoding']}`"
        score_lines.append(line)
    body = TEMPLATE.format(
        title=title,
        summary=summary,
        use=use,
        use_notes=use_notes,
        method=describe_method(config),
        options=f"`{json.dumps(options)}`" if options else "none",
        # the signature names it: it chose the starting weights only, which the checkpoint holds, so it is no option
        initialisation=f"; trained from the `attention_init={init_choice}` initialisation" if init_choice else "",
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        heads=config.encoder_attention_heads,
        parameters=model.num_parameters(),
        data=data,
        training=training or "not recorded",
        parser=parser,
        path=path,
        loading=loading,
        scores="\n".join(score_lines) or "not evaluated",
        limitations=limitations or "Not evaluated outside its training domain.",
        model_signature=model_signature or default_signature(config),
    )
    metadata = card_metadata(title, scores, eval_datasets, languages, datasets, [*method_tags, *tags], license)
    return ModelCard(f"---\n{metadata.to_yaml()}\n---\n\n{body}")


def render_model_card(model, path: str, title: str, data: str, parser: str, **kwargs) -> str:
    """The card's text (`build_model_card`, as the `README.md` holds it)."""
    return str(build_model_card(model, path, title, data, parser, **kwargs))


def write_model_card(directory: str | Path, **kwargs) -> Path:
    """Write `README.md` (the Hub's model card, `build_model_card`) into a saved model directory. The card names the
    directory, never its local path: the card travels with the model."""
    path = Path(directory) / "README.md"
    build_model_card(path=f"path/to/{Path(directory).resolve().name}", **kwargs).save(path)
    return path


__all__ = ["HUB_METRICS", "TEMPLATE", "build_model_card", "card_metadata", "describe_method", "render_model_card",
           "write_model_card"]  # fmt: skip
