"""Model cards for saved syntax-aware models: a `README.md` with Hub metadata, filled from a training run."""

from __future__ import annotations

import json
from pathlib import Path

from .describe import describe_config, describe_method
from .signature import model_signature as default_signature

TEMPLATE = """---
library_name: transformers
pipeline_tag: translation
tags:
- hf-syntax-mt
{tags}license: apache-2.0
---

# {title}

{summary} trained with [hf-syntax-mt](https://pypi.org/project/hf-syntax-mt/).

## Method and options
{method}

Configuration (options that differ from the defaults): {options}
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
translate = pipeline("translation", model="{path}", trust_remote_code=True)  # the code is in this repository
{use}
```
{use_notes}{loading}

## Scores
{scores}

Model signature: `{model_signature}`

## Limitations
{limitations}
"""


def _use(config) -> tuple[str, str, str, list[str]]:
    """What the card says the model is, the call that uses its methods, the notes under it, and the extra tags: a
    document-level model is shown translating a document (a flat list of sentences is refused, issue 44); the parser
    note only for a model whose methods read a parse."""
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


def render_model_card(
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
) -> str:
    """Fill the card. `scores` maps a split name to the dict of `evaluation.corpus_scores` (signatures kept; a
    `ribes`/`ribes_signature` pair from `evaluation.corpus_ribes` is printed too). `model_signature` defaults to
    `evaluation.model_signature(model.config)`."""
    config = model.config
    described = describe_config(config)
    # only what the config switches on (a document model has no PASCAL option); `attention_init` only chose the
    # starting weights, which the checkpoint holds
    options = {k: v for k, v in described.options.items() if k != "attention_init"}
    summary, use, use_notes, method_tags = _use(config)
    # options that change the computation; `attention_init` only chose the starting weights, which the checkpoint holds
    dropped = sorted(k for k in described.options if k != "attention_init")
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
        score_lines.append(line)
    return TEMPLATE.format(
        tags="".join(f"- {t}\n" for t in dict.fromkeys([*method_tags, *tags])),
        title=title,
        summary=summary,
        use=use,
        use_notes=use_notes,
        method=describe_method(config),
        options=f"`{json.dumps(options)}`" if options else "none",
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


def write_model_card(directory: str | Path, **kwargs) -> Path:
    """Write `README.md` (the Hub's model card) into a saved model directory. The card names the directory, never
    its local path: the card travels with the model."""
    path = Path(directory) / "README.md"
    path.write_text(render_model_card(path=Path(directory).resolve().name, **kwargs), encoding="utf-8")
    return path


__all__ = ["TEMPLATE", "describe_method", "render_model_card", "write_model_card"]
