"""Inference helpers the model classes and the CLI delegate to, so that the model file imports nothing from the
pipeline: `pipeline_for_model` (a pipeline on the model's own device), `translate_document` (one document),
`translate_lines` (a whole input file, plain sentences or documents, in order, with a progress bar), and the
`--device` / `--bf16` handling of `translate` and `evaluate` (`resolve_device`, `check_bf16`, `bf16_autocast`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .errors import UserError
from .validation import check_count, check_spans, check_string_lists, check_strings

#: inputs with at least this many sentences get a progress bar (on stderr)
PROGRESS_MIN_SENTENCES = 100


#: the devices `--device` of `translate` / `evaluate` takes
DEVICE_CHOICES = "cpu, cuda, cuda:N or mps"


def resolve_device(name: str | None):
    """``--device NAME`` as a `torch.device` that torch can use here, or `None` for no choice (transformers'
    pipeline then picks the accelerator if there is one, else the CPU).

    Raises:
        ValueError: naming the device and what to do: not one of `DEVICE_CHOICES`, or not available here (no CUDA
            device, a CUDA index past the last device, no MPS).
    """
    import torch

    if name is None:
        return None
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps") or (device.type != "cuda" and device.index):
        raise UserError(f"--device {name}: not a device; give {DEVICE_CHOICES}")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            build = "built without CUDA" if torch.version.cuda is None else f"built with CUDA {torch.version.cuda}"
            raise UserError(f"--device {name}: torch sees no CUDA device (torch {torch.__version__}, {build}); use "
                             "--device cpu, or leave --device out to use what this machine has")  # fmt: skip
        if device.index is not None and device.index >= count:
            raise UserError(f"--device {name}: torch sees {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"--device {name}: MPS (Apple GPU) is not available here; use --device cpu")
    return device


def default_device():
    """The device transformers' pipeline picks when given none (the first CUDA device, else MPS, else the CPU)."""
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda:0")
    if torch.backends.mps.is_available():
        return torch.device("mps:0")
    return torch.device("cpu")


def check_bf16(device) -> None:
    """`ValueError` unless ``device`` computes in bfloat16 (``--bf16``): a CUDA device needs native bf16 (compute
    capability 8.0, Ampere, or newer); an MPS device a macOS that has it; a CPU always has it (without AVX512-BF16 or
    AMX it is emulated, and slower than float32)."""
    import torch

    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported(including_emulation=False)
        what = f"{torch.cuda.get_device_name(device)} (compute capability {'.'.join(map(str, torch.cuda.get_device_capability(device)))})"
    elif device.type == "mps":
        try:
            supported = bool(torch.ones(1, dtype=torch.bfloat16, device=device).sum().item() == 1)
        except (RuntimeError, TypeError):
            supported = False
        what = "this MPS device"
    else:
        supported, what = True, str(device)
    if not supported:
        raise UserError(f"--bf16: {device} ({what}) has no bfloat16 support; leave out --bf16 to compute in float32")


def bf16_autocast(device, enabled: bool):
    """bfloat16 autocast on ``device`` (the weights stay float32; matmuls and attention run in bf16), or a no-op."""
    import contextlib

    import torch

    return torch.autocast(device_type=device.type, dtype=torch.bfloat16) if enabled else contextlib.nullcontext()


def device_line(device, bf16: bool) -> str:
    """The one line `translate` / `evaluate` print on stderr: ``device: cuda:0 (NVIDIA H100 ...), dtype: ...``."""
    import torch

    name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    dtype = "bfloat16 (autocast, float32 weights)" if bf16 else "float32"
    return f"device: {device}{name}, dtype: {dtype}"


def pipeline_for_model(model, tokenizer, parser=None):
    """A `SyntaxTranslationPipeline` around a model object, on the model's own device.

    Given no device, transformers' `Pipeline.__init__` picks the accelerator (`cuda:0` wherever torch sees CUDA) and
    moves the model there *in place*: a helper that translates with the caller's model must leave it where the caller
    put it (moved behind the caller's back, its next call fails on tensors of the old device), so the model's device
    is passed explicitly (a model dispatched by accelerate, with an `hf_device_map`, takes no device: the pipeline
    then keeps the map's placement)."""
    from .pipeline_syntax_mt import SyntaxTranslationPipeline

    device = None if getattr(model, "hf_device_map", None) else model.device
    return SyntaxTranslationPipeline(model=model, tokenizer=tokenizer, parser=parser, device=device)


def translate_document(model, sentences: list[str], tokenizer, parser=None, **generate_kwargs) -> list[dict]:
    """Translate one document with `SyntaxTranslationPipeline.translate_document` (see there), on the model's device
    (the model is never moved): one ``{"translation_text": str}`` per sentence, as ``pipe(sentences, document=True)``
    returns."""
    return pipeline_for_model(model, tokenizer, parser=parser).translate_document(sentences, **generate_kwargs)


def read_translation_input(path: str, docids: str | None = None, blank_line_documents: bool = False):
    """What `translate` reads, whatever the engine: the lines of ``path`` (``-``: standard input; one output line per
    ``"\\n"``-terminated input line, whatever other breaks a line holds), the name errors give it, and its documents
    (``docids``: a file of one document id per line; ``blank_line_documents``: blank lines separate documents; else
    None), checked before any model loads."""
    from .data.documents import blank_line_spans, doc_id_spans
    from .data.readers import decode_utf8, read_text, split_lines

    if path == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        text = decode_utf8(stdin.read(), "<stdin>") if stdin is not None else sys.stdin.read().removeprefix("\ufeff")
    else:
        text = read_text(path)
    lines = split_lines(text)
    name = "<stdin>" if path == "-" else path
    documents = None
    if docids:
        documents = doc_id_spans(lines, docids, name)
    elif blank_line_documents:
        documents = blank_line_spans(lines, name)
    return lines, name, documents


def write_output(path: str, text: str, flag: str, make_folder: bool = True) -> None:
    """Write an output the user named (``-``: standard output); a full disk, a folder in the way or a file that
    cannot be written is one ``error:`` line naming ``flag`` and the file (`errors.file_error`)."""
    from pathlib import Path

    from .errors import file_error

    if path == "-":
        sys.stdout.write(text)
        return
    try:
        if make_folder:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()  # a full disk shows here, not after the error handling
    except OSError as e:
        raise file_error(e, path, flag, writing=True) from None


def translate_lines(
    pipe,
    lines: Sequence[str],
    documents: Sequence[tuple[int, int]] | None = None,
    use_context: bool = True,
    contexts: Sequence[Sequence[str]] | None = None,
    batch_size: int = 16,
    chunk_sentences: int | None = None,
    progress: bool | None = None,
    **generate_kwargs,
) -> list[str]:
    """Translate an input file's lines in order; one translation per line, so the output lines up with the input.

    Args:
        pipe: a `SyntaxTranslationPipeline`.
        lines: the input lines.
        documents: `(start, end)` 0-based half-open line spans of the documents
            (`hf_syntax_mt.data.documents.doc_id_spans` / `blank_line_spans`); lines outside every span (blank-line
            separators) get an empty translation. `None`: every line is an independent sentence (a document-level
            model then needs ``use_context=False`` or ``contexts``: it refuses to drop its context silently).
        use_context: translate each document with the model's own context (`pipe(documents)`, the previous k source
            sentences of the same document, `methods.registry.document_window`); `False`, or a model without context,
            translates the documents' sentences one by one.
        contexts: for a document-level model, one list of source sentences per line, used as that line's context in
            place of its document's own (e.g. `hf_syntax_mt.evaluation.pronouns.random_contexts`: another
            document's sentences, Li et al. 2020's check that a model reads its context); lines are then translated
            one by one, and lines outside ``documents`` stay empty.
        batch_size: sentences per `generate()` call; sentences translated one by one are batched longest first
            (the output keeps the input's order).
        chunk_sentences: sentences per pipeline call (whole documents are never split; default `8 * batch_size`).
        progress: show a tqdm bar on stderr (default: when there are `PROGRESS_MIN_SENTENCES` sentences or more).
        generate_kwargs: passed to the pipeline (`num_beams`, `max_new_tokens`, ...).

    Returns:
        `len(lines)` strings; a line break inside a translation is written as a space. A blank line comes back
        empty: every pipeline gives "" for a blank sentence without decoding it (`SyntaxTranslationPipeline`,
        `CTranslate2Pipeline`).
    """
    from tqdm.auto import tqdm

    from .data.readers import split_lines
    from .methods.registry import document_settings, document_window

    # the boundary: a str is not a list of lines (it would be translated character by character), no None entries,
    # spans inside the lines, one list of strings per line as contexts
    lines = check_strings(lines, "lines", "strings (the input lines)")
    spans = [(i, i + 1) for i in range(len(lines))] if documents is None else check_spans(documents, len(lines))
    batch_size = check_count(batch_size, "batch_size", maximum=4096)  # more sentences per call: memory runs out
    chunk_sentences = check_count(chunk_sentences, "chunk_sentences", allow_none=True, maximum=1_000_000)
    if contexts is not None and not use_context:
        raise UserError("contexts= was given with use_context=False: the contexts would be used all the same; leave "
                        "out contexts= to translate without context, or use_context=False")  # fmt: skip
    if contexts is not None:
        contexts = check_string_lists(contexts, "contexts", "lists of strings (one context per line)")
        if len(contexts) != len(lines):
            raise UserError(f"contexts= needs one list of context sentences per line: {len(lines)} lines but "
                            f"{len(contexts)} contexts")  # fmt: skip
    config = pipe.model.config
    k = document_window(config)  # what the model's methods read of a sentence's document
    if contexts is not None and not k:
        raise UserError(f"contexts were given, but the model has no document context ({document_settings(config)})")
    if k and use_context and contexts is None and documents is None:
        raise UserError(
            f"The model translates with the previous {k} source sentences of the same document "
            f"({document_settings(config)}), but the lines were given without documents: pass documents= (line spans), "
            "contexts=, or use_context=False to translate every line without context."
        )
    # whole documents with their own context, or sentence by sentence (given contexts, or none)
    with_context = bool(contexts is None and use_context and documents is not None and k)
    document_model = bool(k)
    if not with_context:
        spans = [(i, i + 1) for start, end in spans for i in range(start, end)]
        # longest first, so that a batch pads to (and beam search runs for) sentences of about its own length
        spans.sort(key=lambda span: -len(lines[span[0]]))
    chunk_sentences = chunk_sentences or 8 * batch_size
    total = sum(end - start for start, end in spans)
    show = total >= PROGRESS_MIN_SENTENCES if progress is None else progress
    out = [""] * len(lines)
    bar = tqdm(total=total, unit="sent", desc="Translating", file=sys.stderr, disable=not show)
    next_span = 0
    while next_span < len(spans):
        chunk, n = [], 0  # whole spans, at least one, up to chunk_sentences sentences
        while next_span < len(spans) and (
            not chunk or n + spans[next_span][1] - spans[next_span][0] <= chunk_sentences
        ):
            chunk.append(spans[next_span])
            n += spans[next_span][1] - spans[next_span][0]
            next_span += 1
        if with_context:
            results = pipe([list(lines[s:e]) for s, e in chunk], batch_size=batch_size, **generate_kwargs)
            texts = [r["translation_text"] for doc in results for r in doc]
        else:
            # without context said explicitly: a document-level model refuses a flat list otherwise
            given = {"contexts": [list(contexts[s]) for s, _ in chunk]} if contexts is not None else {}
            if contexts is None and document_model:  # said by the caller: use_context=False
                given = {"no_context": True}
            results = pipe([lines[s] for s, _ in chunk], batch_size=batch_size, **given, **generate_kwargs)
            texts = [r["translation_text"] for r in results]
        positions = [i for s, e in chunk for i in range(s, e)]
        for i, text in zip(positions, texts, strict=True):
            out[i] = " ".join(split_lines(text))  # a line break would shift every later line of the output
        bar.update(n)
    bar.close()
    return out
