"""What a CTranslate2 folder needs to say about itself, so that serving tools use it without this package: CTranslate2
reads none of `generation_config.json` (beams, length limit, patience, banned tokens) and cannot know that a multi-task
model must start with its translate token, so `export_to_ctranslate2` writes a ``README.md`` into the folder with the
exact ``ctranslate2.Translator(...).translate_batch(...)`` call `hf-syntax-mt translate` makes (tokenization included),
and records the same options in ``hf_syntax_mt_export.json`` (``translate_batch``). CTranslate2's own ``config.json``
holds what it has fields for (``decoder_start_token``, the special tokens), written by its converter.
"""

from __future__ import annotations

import json
from pathlib import Path

from .layout import EXPORT_INFO

#: the README's name in the folder
README = "README.md"
#: sentences per `translate_batch` batch in the README's call (`translate --batch-size`'s default)
BATCH_SIZE = 16


def usage_settings(directory) -> dict:
    """The decoding `translate` makes with the folder's own settings (`CTranslate2Pipeline`): the `translate_batch`
    options, the target prefix (the translate token of a multi-task model, else None), the source truncation and
    the decoding as signature fields."""
    from ..generation_defaults import decoding_of
    from .serve import CTranslate2Pipeline

    pipe = CTranslate2Pipeline(directory)
    resolved = pipe.decoding_settings()
    forced = resolved.forced_bos_token_id
    return {
        "translate_batch": pipe.options(), "decoding": decoding_of(resolved),
        "target_prefix": None if forced is None else [pipe.tokenizer.convert_ids_to_tokens(forced)],
        "max_source_length": pipe.max_source_length,
    }  # fmt: skip


def usage_code(settings: dict) -> str:
    """The Python program of the README: sentences on standard input, one translation a line on standard output,
    as `hf-syntax-mt translate --model THIS_FOLDER` writes them."""
    n = settings["max_source_length"]
    options = [f"    max_batch_size={BATCH_SIZE},"]
    if settings["target_prefix"] is not None:
        options.insert(0, f"    target_prefix=[{settings['target_prefix']!r}] * len(source),  # the translate token")
    options += [f"    {key}={value!r}," for key, value in settings["translate_batch"].items()]
    return "\n".join([
        "import sys",
        "",
        "import ctranslate2",
        "from transformers import AutoTokenizer",
        "",
        'directory = "."  # this folder (run from inside it), or its path',
        "tokenizer = AutoTokenizer.from_pretrained(directory)",
        'translator = ctranslate2.Translator(directory, device="cpu", compute_type="default", intra_threads=0)',
        'sentences = [line.rstrip("\\n") for line in sys.stdin]  # one sentence a line',
        f"# the source tokens as the model's tokenizer makes them: at most {n}, </s> last",
        "source = [",
        f'    tokenizer.convert_ids_to_tokens(tokenizer(s, truncation=True, max_length={n})["input_ids"])',
        "    for s in sentences",
        "]",
        "results = translator.translate_batch(",
        "    source,",
        *options,
        ")",
        "for result in results:",
        "    ids = tokenizer.convert_tokens_to_ids(result.hypotheses[0])",
        "    print(tokenizer.decode(ids, skip_special_tokens=True))",
    ])  # fmt: skip


def usage_readme(directory, settings: dict) -> str:
    """The README's text: what the folder is, the call, the decoding settings and CTranslate2's own fields."""
    directory = Path(directory)
    info_file = directory / EXPORT_INFO
    info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    options = settings["translate_batch"]
    prefix = settings["target_prefix"]
    fields = ", ".join(f"`{k}`: `{config[k]}`" for k in ("decoder_start_token", "bos_token", "eos_token",
                                                          "unk_token", "add_source_bos", "add_source_eos")
                       if k in config)  # fmt: skip
    prefix_text = (
        f"- target prefix: `{prefix}`: this is a multi-task model, and its translate token must start every "
        "translation (`target_prefix`); without it the model does not translate.\n" if prefix else
        "- target prefix: none (a single-task model)\n")  # fmt: skip
    return f"""# {directory.resolve().name}: a CTranslate2 model

Exported by hf-syntax-mt {info.get("hf_syntax_mt_version", "")} from a `{info.get("exported_from", "")}` model
(`hf-syntax-mt export --to ctranslate2`), weights `{info.get("quantization", "")}`. It translates with CTranslate2
{info.get("ctranslate2_version", "")} and the tokenizer in this folder (`tokenizer.json`, read by transformers'
`AutoTokenizer`); hf-syntax-mt is not needed.

## Translate

Sentences on standard input, one translation a line on standard output: the same lines as
`hf-syntax-mt translate --model THIS_FOLDER` writes.

```python
{usage_code(settings)}
```

`device="cuda"` runs it on a GPU; `compute_type="int8"` (or `"auto"`) computes in a faster type than the one the
weights were exported in; `intra_threads` sets the CPU threads (0: CTranslate2's choice). `hf-syntax-mt translate`
takes them as `--device`, `--compute-type` and `--threads`.

## Decoding settings

CTranslate2 reads none of `generation_config.json`, so the model's decoding (`{settings["decoding"]}`, the one its
scores name) is in the call above:

{prefix_text}- beams: `beam_size={options["beam_size"]}`
- length limit: `max_decoding_length={options["max_decoding_length"]}` tokens (transformers' `max_length` counts
  the decoder start token too, and a forced end token `</s>`, which CTranslate2 leaves out of its hypothesis)
- patience: `patience={options["patience"]}` (beam search stops once `beam_size * patience` hypotheses are
  finished; patience 1 is transformers' `early_stopping=True`)
- length penalty: `length_penalty={options["length_penalty"]}`
- source: at most {settings["max_source_length"]} tokens (the model's positions), `</s>` last

## CTranslate2's own fields

`config.json` (written by CTranslate2's converter): {fields}.
"""


def write_usage(directory) -> Path:
    """Write the folder's ``README.md`` and add its `translate_batch` options and target prefix to
    ``hf_syntax_mt_export.json``."""
    directory = Path(directory)
    settings = usage_settings(directory)
    info_file = directory / EXPORT_INFO
    info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
    info.update(decoding=settings["decoding"], translate_batch=settings["translate_batch"],
                target_prefix=settings["target_prefix"], max_source_length=settings["max_source_length"])  # fmt: skip
    info_file.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    path = directory / README
    path.write_text(usage_readme(directory, settings), encoding="utf-8")
    return path


def readme_code(readme: str) -> str:
    """The Python block of a README `write_usage` wrote."""
    return readme.split("```python\n", 1)[1].split("\n```", 1)[0]
