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
- syntax-aware-nmt
{tags}license: apache-2.0
---

# {title}

A syntax-aware Marian translation model trained with [hf-syntax-mt](https://pypi.org/project/hf-syntax-mt/).

## Method and options
{method}

Configuration (syntax options): `{options}`
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
translate(["..."])
```
The pipeline parses raw input itself with the parser recorded in the config (`source_parser`), or with the one you
pass as `parser=`.{loading}

## Scores
{scores}

Model signature: `{model_signature}`

## Limitations
{limitations}
"""


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
    options = {
        k: getattr(config, k)
        for k in ("encoder_pascal_heads", "pascal_sigma", "pascal_weighting", "parent_ignoring", "label_smoothing")
        if hasattr(config, k)
    }
    described = describe_config(config)
    # options that change the computation; `attention_init` only chose the starting weights, which the checkpoint holds
    dropped = sorted(k for k in described.options if k != "attention_init")
    loading = (
        "\nLoad the model with `AutoModelForSeq2SeqLM.from_pretrained(..., trust_remote_code=True)`. "
        "`MarianMTModel.from_pretrained` also loads the weights, but drops the syntax options "
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
        tags="".join(f"- {t}\n" for t in tags),
        title=title,
        method=describe_method(config),
        options=json.dumps(options),
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
