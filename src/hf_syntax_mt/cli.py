"""`hf-syntax-mt` command line: `demo` (the main job), `train`, `evaluate`, `translate`, `export`, `uas` and
`contrastive`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from pathlib import Path

from .cli_args import BUG_REPORT, DEBUG_ENV, build_parser, check_args, one_line, split_debug
from .errors import UserError
from .model_files import _check_saved_model, _model_directory  # noqa: F401  (the readers' check, named by flag)

__all__ = ["DEBUG_ENV", "build_parser", "main"]


def _write(path: str, text: str, flag: str, make_folder: bool = True) -> None:
    from hf_syntax_mt.inference import write_output

    write_output(path, text, flag, make_folder)


def _demo(args: argparse.Namespace) -> int:
    from hf_syntax_mt.demo.run import DemoSettings, run_demo

    settings = {k: v for k, v in vars(args).items() if k not in ("command", "only")}
    run_demo(DemoSettings(**settings, systems=tuple(args.only)))
    return 0


def _random_contexts(args: argparse.Namespace, lines: list[str], documents, k: int) -> list[list[str]]:
    """`--random-context SEED`: each line of a document gets the context of a line of another document
    (`evaluation.pronouns.random_contexts`, Li et al. 2020's control), one list per input line."""
    from hf_syntax_mt.evaluation.pronouns import random_contexts

    if documents is None or args.no_context or not k:
        why = ("it needs documents (--docids FILE or --documents blank-lines)" if documents is None else
               "it contradicts --no-context" if args.no_context else
               f"{args.model} has no document context (context_sentences=0) to replace")  # fmt: skip
        raise UserError(f"--random-context: {why}")
    positions = [i for start, end in documents for i in range(start, end)]
    ids = [str(d) for d, (start, end) in enumerate(documents) for _ in range(start, end)]
    try:
        given = random_contexts(ids, [lines[i] for i in positions], k, seed=args.random_context)
    except ValueError as e:  # a single document has no other document to borrow from
        raise UserError(f"--random-context: {e}") from None
    contexts: list[list[str]] = [[] for _ in lines]
    for i, context in zip(positions, given, strict=True):
        contexts[i] = context
    print(f"note: --random-context {args.random_context}: each of the {len(documents)} documents is translated with "
          "the context of another document's sentences (a check that the model reads its context)", file=sys.stderr)  # fmt: skip
    return contexts


def _decoding_line(translator, num_beams: int | None) -> str:
    """The decoding `translate` runs, on stderr: the settings every engine reads (`resolve_generation`: the model's
    generation config, which a training run writes, its own length limit where it sets none), ``--num-beams``
    overriding its beams."""
    from hf_syntax_mt.generation_defaults import decoding_of

    given = num_beams is not None
    text = decoding_of(translator.decoding_settings(**({"num_beams": num_beams} if given else {})))
    return f"decoding: {text} ({'--num-beams; the rest from ' if given else ''}the model's generation config)"


def _translate(args: argparse.Namespace) -> int:
    """Translate a file line by line, or document by document with the model's own context (`--docids`,
    `--documents blank-lines`); one output line per input line."""
    from transformers import AutoConfig, pipeline

    import hf_syntax_mt  # noqa: F401  (registers the pipeline task)
    from hf_syntax_mt.data.readers import split_lines
    from hf_syntax_mt.inference import (
        bf16_autocast,
        check_bf16,
        device_line,
        read_translation_input,
        resolve_device,
        translate_lines,
    )

    if (done := _translate_exported(args)) is not None:  # a CTranslate2 directory (hf-syntax-mt export)
        return done
    from hf_syntax_mt.cli_engine_args import refuse_engine_flags

    refuse_engine_flags(args)  # --threads, --compute-type: a CTranslate2 directory's
    model = _model_directory(args.model)  # before reading standard input
    device = resolve_device(args.device)  # None: transformers' pipeline picks (the accelerator, if any)
    # the documents first: bad input fails before the model loads
    lines, name, documents = read_translation_input(args.input, args.docids, args.documents == "blank-lines")
    config = AutoConfig.from_pretrained(model)
    k = getattr(config, "context_sentences", 0) or 0
    if args.parser and not getattr(config, "needs_source_parse", False):
        raise UserError(f"--parser {args.parser} parses the source for a model that reads its parse, and "
                        f"{args.model} reads none (no PASCAL, tree or feature heads): leave out --parser and "
                        "--parser-model")  # fmt: skip
    contexts = None if args.random_context is None else _random_contexts(args, lines, documents, k)
    if k and documents is None and not args.no_context:
        raise UserError(
            f"{args.model} is a document-level model (context_sentences={k}: it reads the previous {k} source "
            f"sentences of the document), but {name} was given as plain sentences. Give the documents: --docids FILE "
            "(one document id per input line) or --documents blank-lines (documents separated by a blank line); or "
            "pass --no-context to translate every sentence without context (the model then works as the "
            "sentence-level model it was built from)."
        )
    if documents is not None and not k:
        print(f"note: {args.model} has no document context (context_sentences=0): translating the {len(documents)} "
              "documents sentence by sentence", file=sys.stderr)  # fmt: skip
    elif documents is not None and args.no_context:
        print(f"note: --no-context: translating the {len(documents)} documents sentence by sentence, without "
              "context", file=sys.stderr)  # fmt: skip
    parser = None
    if args.parser:
        key = {"stanza": "lang", "spacy": "model", "conllu": "path"}[args.parser]
        parser = {"backend": args.parser, **({key: args.parser_model} if args.parser_model else {})}
    translator = pipeline("syntax-translation", model=model, parser=parser, **{"device": device, **_engine(args)})
    if args.bf16:
        check_bf16(translator.device)
    print(device_line(translator.device, args.bf16), file=sys.stderr)
    generate = {} if args.num_beams is None else {"num_beams": args.num_beams}  # else the model's generation config
    print(_decoding_line(translator, args.num_beams), file=sys.stderr)
    try:
        with bf16_autocast(translator.device, args.bf16):
            outputs = translate_lines(translator, lines, documents, use_context=not args.no_context,
                                      contexts=contexts, batch_size=args.batch_size, **generate)  # fmt: skip
    except ValueError as e:
        from hf_syntax_mt.data.parsers import MissingParseError

        if not isinstance(e.__cause__, MissingParseError):
            raise
        given = (
            f"--parser conllu --parser-model {args.parser_model}"
            if args.parser == "conllu" and args.parser_model
            else "The model's parser"
        )
        raise UserError(
            f"{e}. {given} is a CoNLL-U file, which holds the parses of its own sentences only; to translate other "
            f"text give its parse, one tree per line of {name} (with '# text = ...' lines): --parser conllu "
            "--parser-model FILE.conllu, or parse the text as it comes: --parser spacy --parser-model MODEL "
            "(e.g. fr_core_news_sm) or --parser stanza --parser-model LANG"
        ) from e
    # a line break inside a translation would shift every later line of the output: write it as a space
    _write(args.output, "".join(" ".join(split_lines(o) or [""]) + "\n" for o in outputs), "--output")
    return 0


def _engine(args: argparse.Namespace) -> dict:
    """``--engine``: the pipeline's `engine` (`hf_syntax_mt.decoding`); ONNX Runtime decodes on the CPU in float32."""
    if args.engine == "generate":
        return {}
    if args.bf16 or (args.device or "cpu") != "cpu":
        given = "--bf16" if args.bf16 else f"--device {args.device}"
        raise UserError(f"--engine {args.engine} decodes on the CPU in float32: leave out {given}, or use "
                         "--engine generate")  # fmt: skip
    return {"engine": args.engine, "device": "cpu"}


def _translate_exported(args: argparse.Namespace) -> int | None:
    """`translate` with a directory `hf-syntax-mt export --to ctranslate2` wrote (None for any other model)."""
    from hf_syntax_mt.export.serve import exported_kind

    if exported_kind(args.model) != "ctranslate2":
        return None
    from hf_syntax_mt.export.commands import translate_ctranslate2

    return translate_ctranslate2(args)


def _export(args: argparse.Namespace) -> int:
    from hf_syntax_mt.export.commands import export_command

    return export_command(args)


def _uas(args) -> int:
    """Unlabelled attachment score of the trees the model's DBSA/LISA heads predict, against gold CoNLL-U."""
    from transformers import AutoTokenizer

    from hf_syntax_mt import SyntaxMTForConditionalGeneration, __version__
    from hf_syntax_mt.evaluation.probing import uas_against_conllu

    model_dir = _model_directory(args.model)
    model = SyntaxMTForConditionalGeneration.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    result = uas_against_conllu(model, tokenizer, args.conllu, kind=args.kind, batch_size=args.batch_size,
                                limit=args.limit)  # fmt: skip
    signature = f"heads:{args.kind}|gold:{Path(args.conllu).name}|sentences:{args.limit or 'all'}|read:argmax|version:{__version__}"
    print(f"UAS = {100 * result['uas']:.2f} ({result['correct']}/{result['scored']} words; {result['skipped']} "
          f"without subwords skipped)  {signature}")  # fmt: skip
    if args.json:
        _write(args.json, json.dumps({**result, "signature": signature}, indent=2), "--json")
    return 0


def _contrastive(args: argparse.Namespace) -> int:
    """Contrastive accuracy (correct vs contrastive translation given the previous sentences) of a saved model."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt import __version__
    from hf_syntax_mt.demo.synthetic_corpus import contrastive_examples, generate_documents
    from hf_syntax_mt.evaluation.contrastive import load_discevalmt, score_contrastive

    if args.discevalmt:
        examples, data = load_discevalmt(args.discevalmt, args.subset), f"discevalmt-{args.subset}"
    else:
        examples = list(contrastive_examples(generate_documents(args.synthetic, seed=args.seed)))
        data = f"synthetic-documents(docs={args.synthetic},seed={args.seed})"
    examples = examples[: args.limit] if args.limit else examples
    if not examples:
        given = f"--discevalmt {args.discevalmt} (subset {args.subset})" if args.discevalmt else (
            f"--synthetic {args.synthetic} (seed {args.seed})")  # fmt: skip
        raise UserError(f"{given} gives no contrastive example to score: give more documents (e.g. --synthetic 50)"
                        if not args.discevalmt else f"{given} holds no example: check the folder")  # fmt: skip
    model_dir = _model_directory(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    result = score_contrastive(model, tokenizer, examples, batch_size=args.batch_size)
    k = getattr(model.config, "context_sentences", 0) if result["uses_context"] else 0
    signature = (f"model:{Path(args.model).name}|context:{k or 'none'}|data:{data}|n:{result['n']}|"
                 f"score:sum-logprob|version:{__version__}")  # fmt: skip
    print(f"contrastive accuracy = {100 * result['accuracy']:.2f} ({result['correct']}/{result['n']}, "
          f"{result['ties']} ties)  {signature}")  # fmt: skip
    if args.json:
        _write(args.json, json.dumps({**result, "signature": signature}, indent=2), "--json", make_folder=True)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from hf_syntax_mt.evaluation import evaluate_files, format_evaluation

    # checked as translate checks it (a damaged config.json named, not transformers' trust_remote_code advice)
    args.model = args.model and _model_directory(args.model)
    args.baseline_model = args.baseline_model and _model_directory(args.baseline_model, "--baseline-model")
    if args.docids:
        from transformers import AutoConfig

        import hf_syntax_mt  # noqa: F401  (registers the config class)

        if not getattr(AutoConfig.from_pretrained(args.model), "context_sentences", 0):
            print(f"note: {args.model} has no document context (context_sentences=0): --docids is not used; every "
                  "sentence is scored on its own", file=sys.stderr)  # fmt: skip
    device = None
    if args.model is not None and args.gold_conllu is not None:  # the only step that runs a model
        from hf_syntax_mt.inference import bf16_autocast, check_bf16, default_device, device_line, resolve_device

        device = resolve_device(args.device) or default_device()
        if args.bf16:
            check_bf16(device)
        print(device_line(device, args.bf16), file=sys.stderr)
        precision = bf16_autocast(device, args.bf16)
    else:
        import contextlib

        precision = contextlib.nullcontext()
    with precision:
        result = evaluate_files(
            args.hyp, args.ref, sources=args.src, baseline=args.baseline, model=args.model,
            baseline_model=args.baseline_model, names=(args.name, args.baseline_name),
            bootstrap_samples=args.bootstrap_samples, seed=args.seed, edges=tuple(args.edges),
            bucket_chart=args.bucket_chart, gold_conllu=args.gold_conllu, input_conllu=args.input_conllu,
            heatmap=args.heatmap, arcs=args.arcs, arcs_sentence=args.arcs_sentence,
            arcs_layer_head=tuple(args.layer_head) if args.layer_head else None, max_sentences=args.max_sentences,
            docids=args.docids, no_context=args.no_context, device=device,
        )  # fmt: skip
    print(format_evaluation(result))
    if args.json:
        _write(args.json, json.dumps(result, indent=2), "--json", make_folder=True)
        print(f"wrote {args.json}")
    return 0


def _align(args: argparse.Namespace) -> int:
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_syntax_mt  # noqa: F401  (registers the Auto classes)
    from hf_syntax_mt.alignment.words import align_corpus, format_pharaoh, read_parallel_words

    path = _model_directory(args.model)
    sources, targets = read_parallel_words(args.src, args.tgt, args.input)
    config = AutoConfig.from_pretrained(path)
    symmetric = config.model_type == "syntax_mt_symmetric"
    if not symmetric and args.symmetrize not in (None, "forward"):
        raise UserError(f"--symmetrize {args.symmetrize} combines the two directions of a "
                         f"symmetric model, but {args.model} translates one direction (its links are forward links): "
                         "leave out --symmetrize, or align with a symmetric model.")  # fmt: skip
    auto = AutoModel if symmetric else AutoModelForSeq2SeqLM
    model = auto.from_pretrained(path, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(path)
    links = align_corpus(model, tokenizer, sources, targets, layer=args.layer, batch_size=args.batch_size,
                         method=args.symmetrize, shift=args.shift, heads=args.heads)  # fmt: skip
    _write(args.output, "".join(format_pharaoh(pair) + "\n" for pair in links), "--output")
    if args.output != "-":
        print(f"wrote {len(links)} alignments to {args.output}", file=sys.stderr)
    return 0


def _aer(args: argparse.Namespace) -> int:
    from hf_syntax_mt.alignment.aer import alignment_error_rate, index_base_hint
    from hf_syntax_mt.data.readers import read_pharaoh

    gold = read_pharaoh(args.gold, one_indexed=args.gold_one_indexed)
    hyp = read_pharaoh(args.hyp, one_indexed=args.hyp_one_indexed)
    if len(hyp) != len(gold):
        raise UserError(f"--hyp {args.hyp} has {len(hyp)} lines and --gold {args.gold} has {len(gold)}: the files "
                        "must be line aligned (the links of one sentence pair a line)")  # fmt: skip
    for k, h in enumerate(hyp, start=1):
        if h.possible != h.sure:
            link = min(h.possible - h.sure)
            raise UserError(f"{args.hyp}:{k}: possible link '{link[0] + args.hyp_one_indexed}p"
                             f"{link[1] + args.hyp_one_indexed}' in the hypothesis: a predicted alignment has links "
                             "only ('i-j'); possible links belong to --gold. Did you swap --hyp and --gold? If these "
                             "are predicted links, write them as 'i-j'.")  # fmt: skip
    result = alignment_error_rate(hyp, gold)
    if result["predicted_links"] + result["sure_links"] == 0:
        raise UserError(f"{args.hyp} has no link and {args.gold} no sure link in {result['pairs']} pairs: AER is "
                         "0/0, undefined. Check that both are the right (non-empty) Pharaoh files.")  # fmt: skip
    if hint := index_base_hint(hyp, gold):
        logging.getLogger("hf_syntax_mt.cli").warning(hint)
    sig = (f"aer|gold:{Path(args.gold).name}|gold-index:{1 if args.gold_one_indexed else 0}|"
           f"hyp-index:{1 if args.hyp_one_indexed else 0}|pairs:{result['pairs']}")  # fmt: skip
    print(f"AER {100 * result['aer']:.2f}  precision {100 * result['precision']:.2f}  recall "
          f"{100 * result['recall']:.2f}  ({result['predicted_links']} links, {result['sure_links']} sure gold)\n{sig}")  # fmt: skip
    if args.json:
        _write(args.json, json.dumps({**result, "signature": sig}, indent=2), "--json")
    return 0


def _parsing(command: str, args: argparse.Namespace) -> int:
    """`parse` and `train-parser`: `hf_syntax_mt.parser_commands`."""
    from hf_syntax_mt import parser_commands

    return getattr(parser_commands, command)(args)


def _is_user_error(error: BaseException) -> bool:
    """An error a user can fix, shown as one ``error:`` line: decided where it was raised, not guessed here. The
    package raises its `UserError` wherever bad input is found (a flag, an argument, a file's content; a file that
    cannot be read or written is a `UserFileError`, a parser that is not installed a `ParserNotAvailableError`, a
    model directory or Hub id that cannot be loaded is checked before transformers reads it), with a message that
    names it and the fix; a `DependencyVersionError` names the release to install; a `ModuleNotFoundError` of a
    module outside the package is an optional dependency to install. Everything else is a bug, whatever its type
    (an `OSError` or a `ValueError` from inside the package or a library): it keeps its traceback, with
    `BUG_REPORT` under it."""
    from .errors import DependencyVersionError

    if isinstance(error, (UserError, DependencyVersionError)):
        return True
    return (isinstance(error, ModuleNotFoundError) and error.name is not None
            and not error.name.startswith("hf_syntax_mt"))  # fmt: skip


def _run(argv: list[str]) -> int:
    if argv and argv[0] == "train":  # HfArgumentParser owns the flags of `train`
        from hf_syntax_mt.training.script import main as train_main

        return train_main(argv[1:], prog="hf-syntax-mt train")
    logging.basicConfig(level=logging.WARNING)
    args = build_parser().parse_args(argv)
    check_args(args)
    return COMMANDS[args.command](args)


def main(argv: list[str] | None = None) -> int:
    """The `hf-syntax-mt` command. Run as the console script (no ``argv``), an error a user can fix prints one
    ``error: ...`` line on stderr and exits with status 1; ``--debug`` (before or after the subcommand) or
    ``HF_SYNTAX_MT_DEBUG=1`` shows the traceback instead. Bugs keep their traceback. Called from Python with ``argv``
    (``main(["translate", ...])``), errors are raised as they are."""
    console = argv is None
    argv, debug = split_debug(sys.argv[1:] if argv is None else list(argv))
    if not console:
        return _run(argv)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug:
            raise
        if not _is_user_error(e):
            traceback.print_exc()
            print(f"\n{BUG_REPORT}", file=sys.stderr)
            return 1
        print(one_line(e), file=sys.stderr)
        return 1


COMMANDS = {
    "demo": _demo,
    "evaluate": _evaluate,
    "translate": _translate,
    "export": _export,
    "contrastive": _contrastive,
    "align": _align,
    "aer": _aer,
    "uas": _uas,
    "parse": lambda args: _parsing("parse_command", args),
    "train-parser": lambda args: _parsing("train_parser_command", args),
}


if __name__ == "__main__":
    sys.exit(main())
