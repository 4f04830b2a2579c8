"""The command-line glue of the export: `hf-syntax-mt export` (`export_command`) and `hf-syntax-mt translate` on a
CTranslate2 directory (`translate_ctranslate2`), kept apart from `cli.py` so that `translate`'s own dispatch stays
one line."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError
from .serve import CTranslate2Pipeline, exported_kind


def export_command(args) -> int:
    """`hf-syntax-mt export --model DIR --to marian|ctranslate2 --output OUT [--quantization Q]`."""
    from ..model_files import check_model_folder
    from .ct2 import export_to_ctranslate2
    from .marian import check_exportable, check_output_directory, layout_note, save_marian

    source = Path(args.model).expanduser()
    if exported_kind(source) == "ctranslate2":
        raise UserError(f"--model {args.model} is a CTranslate2 folder (an export's output): give the model "
                        "directory it was exported from.")  # fmt: skip
    check_model_folder(source, f"--model {args.model}")  # as translate checks it: a damaged file is named
    if args.to == "marian" and args.quantization is not None:
        raise UserError("--quantization is a CTranslate2 weight type: it goes with --to ctranslate2 (a Marian export "
                        "keeps the model's own dtype); leave it out or add --to ctranslate2.")  # fmt: skip
    check_output_directory(args.output, "--output", source=source)
    if args.to == "ctranslate2":
        out = export_to_ctranslate2(source, args.output, args.quantization or "float32")
    else:
        from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

        config = AutoConfig.from_pretrained(source)
        check_exportable(config)  # before loading the weights
        model = AutoModelForSeq2SeqLM.from_pretrained(source)
        out = save_marian(model, args.output, AutoTokenizer.from_pretrained(source))
    print(f"exported {args.model} to {out} ({args.to}{f', {args.quantization}' if args.quantization else ''}); "
          f"translate with: hf-syntax-mt translate --model {out}", file=sys.stderr)  # fmt: skip
    print(f"note: {layout_note(out, args.to)}", file=sys.stderr)  # which tools take the folder
    return 0


def translate_ctranslate2(args) -> int:
    """`hf-syntax-mt translate` with a CTranslate2 directory: the same input options (plain lines, or documents
    translated sentence by sentence: an exported model has no document context) and the same output."""
    from ..data.readers import split_lines
    from ..generation_defaults import decoding_of
    from ..inference import read_translation_input, translate_lines, write_output
    from ..model_files import check_ctranslate2_folder

    check_ctranslate2_folder(args.model, f"--model {args.model}")  # before reading the input: a damaged file named

    refused = {"parser": "reads no parse", "random_context": "has no document context", "bf16": "computes in the "
               "type it was exported with (export --quantization bfloat16 for bfloat16 weights)"}  # fmt: skip
    if getattr(args, "engine", "generate") not in (None, "generate"):
        raise UserError(f"--engine {args.engine}: {args.model} is a CTranslate2 model, which CTranslate2 decodes; "
                        "leave out --engine (or translate the model it was exported from with it).")  # fmt: skip
    for flag, why in refused.items():
        if getattr(args, flag, None) not in (None, False):
            raise UserError(f"--{flag.replace('_', '-')}: {args.model} is a CTranslate2 model, which {why}; leave "
                            f"out --{flag.replace('_', '-')}.")  # fmt: skip
    device, index = "cpu", 0
    if getattr(args, "device", None):
        kind, _, number = args.device.partition(":")
        if kind not in ("cpu", "cuda") or (number and not number.isdigit()):
            raise UserError(f"--device {args.device}: a CTranslate2 model runs on cpu or cuda[:N].")
        device, index = kind, int(number or 0)
    lines, _, documents = read_translation_input(args.input, args.docids, args.documents == "blank-lines")
    if documents is not None:
        print(f"note: {args.model} has no document context (a CTranslate2 model): translating the "
              f"{len(documents)} documents sentence by sentence", file=sys.stderr)  # fmt: skip
    threads, compute_type = getattr(args, "threads", None), getattr(args, "compute_type", None)
    pipe = CTranslate2Pipeline(args.model, device=device, device_index=index, threads=threads or 0,
                               compute_type=compute_type or "default")  # fmt: skip
    print(engine_line(pipe, device, index, threads, compute_type), file=sys.stderr)
    generate = {} if args.num_beams is None else {"num_beams": args.num_beams}
    given = "--num-beams; the rest from " if generate else ""
    print(f"decoding: {decoding_of(pipe.decoding_settings(**generate))} ({given}the model's generation config)",
          file=sys.stderr)  # fmt: skip
    outputs = translate_lines(pipe, lines, documents, batch_size=args.batch_size, **generate)
    write_output(args.output, "".join(" ".join(split_lines(o) or [""]) + "\n" for o in outputs), "--output")
    return 0


def engine_line(pipe, device: str, index: int, threads: int | None, compute_type: str | None) -> str:
    """The line `translate` prints on stderr for a CTranslate2 directory: the device, the engine, the type it
    computes in (what CTranslate2 resolved ``--compute-type`` to) and its threads."""
    shown = f"{compute_type} -> {pipe.translator.compute_type}" if compute_type not in (None, "default") else (
        pipe.translator.compute_type)  # fmt: skip
    given = f"{threads} (--threads)" if threads else "CTranslate2's default (--threads 0)"
    return (f"device: {device}{f':{index}' if device == 'cuda' else ''}, engine: CTranslate2, compute type: {shown}, "
            f"threads: {given}")  # fmt: skip
