"""Export to a plain transformers `MarianMTModel` where a model's inference graph is Marian's.

A method says whether it changes the inference graph (`Method.inference_needs`): PASCAL, the tree heads and input
features read a parse at inference, the alignment biases and document context run extra modules; those are refused
(`check_exportable`). The others are Marian at inference: the bi-affine heads of DBSA and LISA fold their U into
`q_proj` and the training-only losses (synchronous, guided alignment, global fertility) leave their parameters
behind (`Method.export_state`); the multi-task translate token becomes the generation config's
`forced_bos_token_id`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from ..errors import UserError, UserTypeError
from ..methods.registry import active_methods, owned_fields

#: where a user who cannot export reads what to do instead
DEPLOYING_PAGE = "the Deploying page, docs/deploying.md"


def _changed_options(config, method) -> list[str]:
    """`name=value` for each option `method` owns that `config` sets to something other than its default."""
    defaults = {f.name: f.default for f in dataclasses.fields(type(config)) if f.default is not dataclasses.MISSING}
    out = [f"{name}={getattr(config, name)!r}" for name in owned_fields(method)
           if hasattr(config, name) and getattr(config, name) != defaults.get(name)]  # fmt: skip
    options = (getattr(config, "method_options", None) or {}).get(method.name)
    if options:
        out.append(f"method_options[{method.name!r}]={options!r}")
    return out or [f"method {method.name!r}"]


def blocking_methods(config) -> list[tuple[str, list[str], str]]:
    """`(method name, the options that switch it on, what it needs at inference)` for every active method whose
    inference graph is not Marian's (none for a plain `MarianConfig`)."""
    return [(m.name, _changed_options(config, m), m.inference_needs) for m in active_methods(config)
            if m.inference_needs is not None]  # fmt: skip


def check_exportable(config) -> None:
    """Raise `UserError` unless a model with `config` runs Marian's inference graph: the message names every option
    that needs this package's code at inference, says why (a parse, extra modules) and where to go instead."""
    blocking = blocking_methods(config)
    if not blocking:
        return
    reasons = "; ".join(f"{', '.join(options)} ({name}): {needs}" for name, options, needs in blocking)
    raise UserError(
        f"This model cannot be exported to a plain Marian model or CTranslate2: its inference graph is not Marian's. "
        f"{reasons}. Translate it with hf-syntax-mt itself (`hf-syntax-mt translate`, with its fast-decoding option); "
        f"see {DEPLOYING_PAGE}."
    )


def marian_config(config) -> MarianConfig:
    """The `MarianConfig` of `config`: every Marian option kept, the syntax options left out."""
    keys = set(MarianConfig().to_dict()) - {"architectures", "_name_or_path", "transformers_version", "model_type"}
    values = {k: v for k, v in config.to_dict().items() if k in keys}
    return MarianConfig(**values, architectures=["MarianMTModel"])


def _generation_config(model) -> GenerationConfig:
    """The settings the model decodes with (`generation_defaults.resolve_generation`: its own length limit and beams
    where its generation config sets none, the multi-task translate token forced first), written out in full: a
    `MarianMTModel`'s `generate` reads them from its generation config, and falls back on transformers' 20 tokens
    where it has no length limit."""
    from ..generation_defaults import resolve_generation

    return GenerationConfig.from_dict(resolve_generation(model, warn=False)[0].to_dict())


def export_to_marian(model) -> MarianMTModel:
    """A new `MarianMTModel` whose outputs equal `model`'s, on `model`'s device and in its dtype.

    Args:
        model: a `SyntaxMTForConditionalGeneration` (or a `MarianMTModel`) whose config `check_exportable` passes.
            It is neither moved nor modified.

    Returns:
        A `MarianMTModel` (plain transformers: no hf_syntax_mt code) in the same train/eval mode as `model`, with the
        bi-affine heads folded into `q_proj`, the training-only parameters dropped, and a generation config that
        forces the multi-task translate token where the model has one.

    Raises:
        UserTypeError: `model` is not a Marian-based translation model (e.g. a `SymmetricTranslationModel`: export
            each direction, `model.forward_model`).
        UserError: `check_exportable`'s refusal.
    """
    if not isinstance(model, MarianMTModel):
        hint = (" (a SymmetricTranslationModel: export one direction, model.forward_model or model.backward_model)"
                if hasattr(model, "forward_model") else "")  # fmt: skip
        raise UserTypeError(f"export_to_marian needs a SyntaxMTForConditionalGeneration or a MarianMTModel, got "
                            f"{type(model).__name__}{hint}.")  # fmt: skip
    config = model.config
    check_exportable(config)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}  # the caller's tensors stay as they are
    for method in active_methods(config):
        method.export_state(model, state)
    parameter = next(model.parameters())
    with torch.device(parameter.device):
        exported = MarianMTModel(marian_config(config)).to(parameter.dtype)
    missing, unexpected = exported.load_state_dict(state, strict=False)
    tied = {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if unexpected or set(missing) - tied:  # a method left parameters of its own, or lost Marian's: a bug
        raise RuntimeError(
            f"export_to_marian: the state of {type(model).__name__} does not fit MarianMTModel (unexpected "
            f"{sorted(unexpected)}, missing {sorted(set(missing) - tied)}): a method with `inference_needs = None` "
            "must fold or delete its parameters in `Method.export_state`."
        )
    exported.tie_weights()
    exported.generation_config = _generation_config(model)
    return exported.train(model.training)


def check_output_directory(output_dir, flag: str = "output_dir", source=None) -> Path:
    """`output_dir` as a `Path` the export may write: not an existing file, not a non-empty directory (a model
    written over another one would mix their files), and not `source` (the model being exported) nor inside it."""
    out = Path(output_dir).expanduser()
    if source is not None:
        src = Path(source).expanduser().resolve()
        resolved = out.resolve()
        if resolved == src or src in resolved.parents:
            raise UserError(f"{flag} {output_dir} is the model directory being exported (or inside it): give a new "
                            "directory for the exported model.")  # fmt: skip
    if out.exists() and not out.is_dir():
        raise UserError(f"{flag} {output_dir} is a file: give a new (or empty) directory for the exported model.")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(f"{flag} {output_dir} is a directory that is not empty: give a new (or empty) directory, so "
                        "that the exported model's files are not mixed with others.")  # fmt: skip
    return out


def save_marian(model, output_dir, tokenizer=None) -> Path:
    """Write a transformers `MarianMTModel` directory (config.json, model.safetensors, generation_config.json and,
    given `tokenizer`, its files) that plain transformers loads (`AutoModelForSeq2SeqLM.from_pretrained`) without
    hf_syntax_mt and without `trust_remote_code`.

    Args:
        model: a `SyntaxMTForConditionalGeneration` (exported here with `export_to_marian`) or a `MarianMTModel`.
        output_dir: a new or empty directory.
        tokenizer: the model's tokenizer (saved beside it; translating needs it).

    Returns:
        The directory, as a `Path`.
    """
    out = check_output_directory(output_dir)
    exported = model if type(model) is MarianMTModel else export_to_marian(model)
    own, exported.generation_config = exported.generation_config, _generation_config(exported)
    out.mkdir(parents=True, exist_ok=True)
    try:
        exported.save_pretrained(out)
    finally:
        exported.generation_config = own  # the caller's MarianMTModel keeps its own
    if tokenizer is not None:
        from ..training.opus_mt import save_opus_mt_files

        tokenizer.save_pretrained(out)
        save_opus_mt_files(tokenizer, out)  # the opus-mt layout's SentencePiece files, where the tokenizer has them
    return out


def layout_note(directory, to: str) -> str:
    """One line for `export`'s output: which tools take the exported `directory` (``to``: ``marian`` or
    ``ctranslate2``), from its layout: opus-mt's (``--tokenizer_layout opus-mt``: SentencePiece files, ``<pad>``
    last) or the package's (a ``tokenizer.json`` only, ``<pad>`` = 0 the decoder start)."""
    import json

    from ..training.opus_mt import OPUS_MT_FILES, has_opus_mt_layout

    directory = Path(directory)
    spm = all((directory / name).is_file() for name in OPUS_MT_FILES)
    if to == "ctranslate2":
        if spm:
            return ("tokenizer: SentencePiece source.spm / target.spm (CTranslate2's C++ servers and any SentencePiece "
                    "user tokenize with them) and tokenizer.json")  # fmt: skip
        return ("tokenizer: tokenizer.json only (Hugging Face tokenizers: `hf-syntax-mt translate`, transformers' "
                "AutoTokenizer); a SentencePiece-based server (CTranslate2's C++ ones) cannot tokenize for it: train "
                f"with --tokenizer_layout opus-mt for one ({DEPLOYING_PAGE})")  # fmt: skip
    config = MarianConfig.from_dict(json.loads((directory / "config.json").read_text(encoding="utf-8")))
    if spm and has_opus_mt_layout(config):
        return ("layout: opus-mt's (SentencePiece files, <pad> last): transformers, MarianTokenizer and CTranslate2's "
                "own ct2-transformers-converter take it")  # fmt: skip
    return (f"layout: not opus-mt's (<pad> = {config.pad_token_id} is the decoder start"
            f"{'' if spm else ', a tokenizer.json only'}): transformers (MarianMTModel, AutoTokenizer) and `hf-syntax-mt "
            "export --to ctranslate2` take it; CTranslate2's own ct2-transformers-converter, MarianTokenizer and "
            f"SentencePiece-based tools do not: train with --tokenizer_layout opus-mt for them ({DEPLOYING_PAGE})")  # fmt: skip
