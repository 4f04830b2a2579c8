"""The `hf-syntax-mt` parser and its flag types, standard library only.

`hf_syntax_mt_cli` (the console script) loads this module and ``errors.py`` without the package's ``__init__``
(which imports torch and transformers): argparse errors, ``--help`` and the checks between flags (`check_args`) answer
in a fraction of a second. ``hf_syntax_mt.cli`` runs the subcommands with the same parser.
"""

from __future__ import annotations

import argparse
import math
import os

from .errors import UserError

#: set to 1 to see the traceback of an error a user can fix (as ``--debug`` does)
DEBUG_ENV = "HF_SYNTAX_MT_DEBUG"
#: the line the CLI prints under the traceback of a bug (any error that is not a `UserError`)
BUG_REPORT = ("this is a bug in hf-syntax-mt, not a mistake in your input: please report it on the project's issue "
              "tracker with the command you ran, this traceback and `pip list` (the versions of torch and "
              "transformers)")  # fmt: skip


def int_range(minimum: int | None = None, maximum: int | None = None):
    """An argparse type: an int in ``[minimum, maximum]`` (either bound may be open). argparse names the flag in its
    error: ``argument --batch-size: must be at least 1, got 0``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        _check_range(value, minimum, maximum)
        return value

    parse.__name__ = "int"  # argparse's "invalid int value" wording for anything the function does not raise
    return parse


def float_range(minimum: float | None = None, maximum: float | None = None, *, above: float | None = None):
    """An argparse type: a finite float in ``[minimum, maximum]``, or ``> above`` (a learning rate, a sigma)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be greater than {above:g}, got {text}")
        _check_range(value, minimum, maximum)
        return value

    parse.__name__ = "float"
    return parse


def _check_range(value, minimum, maximum) -> None:
    if minimum is not None and value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")


POSITIVE = int_range(1)  # a count, a size, a batch: 0 would divide by zero, never start, or do nothing
NATURAL = int_range(0)  # an index, a layer, a number of warm-up steps
SEED = int_range(0, 2**32 - 1)  # numpy's and torch's seeds
#: CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`): `export --quantization`
CT2_QUANTIZATIONS = (
    "float32",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
)


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
    """The parser of every subcommand but `train` (whose flags are `HfArgumentParser`'s: `train_help`)."""
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
    d.add_argument("--seed", type=SEED, default=0)
    d.add_argument("--train-size", type=POSITIVE, default=20000)
    d.add_argument("--test-size", type=POSITIVE, default=500)
    d.add_argument(
        "--diagnostic-size", type=POSITIVE, default=100, help="ambiguous sources, each scored with both trees"
    )
    d.add_argument("--vocab-size", type=POSITIVE, default=160)
    d.add_argument("--d-model", type=POSITIVE, default=128)
    d.add_argument("--layers", type=POSITIVE, default=2)
    d.add_argument("--heads", type=POSITIVE, default=4)
    d.add_argument("--pascal-heads", type=POSITIVE, default=2, help="PASCAL heads in encoder layer --pascal-layer")
    d.add_argument("--pascal-layer", type=NATURAL, default=0)
    d.add_argument("--pascal-sigma", type=float_range(0.001), default=1.0)
    d.add_argument("--max-tokens", type=POSITIVE, default=1024, help="padded tokens per training batch")
    d.add_argument("--learning-rate", type=float_range(above=0), default=1e-3)
    d.add_argument("--warmup-steps", type=NATURAL, default=200)
    d.add_argument("--max-steps", type=POSITIVE, default=1200, help="training steps per model (the stopping rule)")
    d.add_argument(
        "--budget",
        type=float_range(above=0),
        default=None,
        help="optional: also stop after this many seconds per model",
    )
    d.add_argument("--curve-every", type=NATURAL, default=250, help="steps between diagnostic-curve points (0: none)")
    d.add_argument("--threads", type=POSITIVE, default=1, help="torch threads (2 may help on an idle machine)")
    d.add_argument("--only", nargs="+", choices=["vanilla", "PASCAL"], default=["vanilla", "PASCAL"])

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
    e.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    e.add_argument("--seed", type=int_range(1, 2**32 - 1), default=12345, help="bootstrap seed (positive)")
    e.add_argument("--edges", type=POSITIVE, nargs="+", default=[10, 20, 30, 40], help="length bucket upper bounds")
    e.add_argument("--bucket-chart", help="PNG bar chart of BLEU by source length (needs --src)")
    e.add_argument("--gold-conllu", help="gold trees of the source sentences for the attention scores")
    e.add_argument("--input-conllu", help="parses fed to the syntax heads (default: the gold trees)")
    e.add_argument("--max-sentences", type=POSITIVE, help="score only the first N gold sentences")
    e.add_argument("--docids", metavar="FILE", help="a document-level model's attention scores: one document id per "
                   "--gold-conllu sentence, so the encoder reads each sentence with its document's previous sentences")  # fmt: skip
    e.add_argument("--no-context", action="store_true", help="score a document-level model's attention without "
                   "context (otherwise refused without --docids)")  # fmt: skip
    e.add_argument("--heatmap", help="PNG heatmap of attachment scores (layers x heads)")
    e.add_argument("--arcs", help="PNG of the gold arcs and one head's attention over a sentence")
    e.add_argument("--arcs-sentence", type=NATURAL, default=0)
    e.add_argument("--arcs-layer-head", dest="layer_head", type=NATURAL, nargs=2, metavar=("LAYER", "HEAD"),
                   help="the encoder layer and head drawn by --arcs, from 0 (default: the best head)")  # fmt: skip
    e.add_argument("--json", help="write every number (with signatures) to this JSON file")
    _device_arguments(e, "run --model for the attention scores")

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
    t.add_argument("--random-context", type=SEED, metavar="SEED", help="translate each document with another "
                   "document's sentences as context (a seeded pairing of the documents; Li et al. 2020's check: a "
                   "model that reads its context should score lower with it)")  # fmt: skip
    t.add_argument("--parser", choices=["stanza", "spacy", "conllu"], help="override the parser recorded in the model")
    t.add_argument("--parser-model", help="spaCy package, stanza language or CoNLL-U path for --parser")
    t.add_argument("--batch-size", type=POSITIVE, default=16, help="sentences per generate() call")
    t.add_argument("--num-beams", type=POSITIVE, default=4, help="beam size (1: greedy decoding)")
    _device_arguments(t, "translate")
    t.add_argument("--engine", choices=["generate", "onnxruntime"], default="generate", help="how to decode: "
                   "generate (transformers, default) or onnxruntime (the model's encoder in torch, Marian's decoder "
                   "in ONNX Runtime: the same translations, faster on a CPU; for models whose decoder is Marian's, "
                   "e.g. PASCAL; needs pip install 'hf-syntax-mt[deploy]'; the decoder is exported once and cached "
                   "under ~/.cache/hf_syntax_mt)")  # fmt: skip

    x = sub.add_parser(
        "export", help="export a model whose inference graph is Marian's to a plain MarianMTModel or to CTranslate2",
        description="Export a trained model for serving: --to marian writes a transformers MarianMTModel directory "
        "(loads with plain transformers, no trust_remote_code); --to ctranslate2 a CTranslate2 directory (needs the "
        "ctranslate2 package: pip install 'hf-syntax-mt[deploy]'). Both translate with `hf-syntax-mt translate "
        "--model OUT`. Models whose methods need a parse or extra modules at inference (PASCAL, tree heads, input "
        "features, alignment biases, document context) are refused with the options named.",
    )  # fmt: skip
    x.add_argument("--model", required=True, help="the model directory (a training run's output, or a Marian model)")
    x.add_argument("--to", required=True, choices=["marian", "ctranslate2"], help="what to export to")
    x.add_argument("--output", required=True, help="a new (or empty) directory for the exported model")
    x.add_argument("--quantization", choices=CT2_QUANTIZATIONS, help="--to ctranslate2: the weight type, in "
                   "CTranslate2's names (default float32, which keeps generate's outputs; int8 is the fastest on a "
                   "CPU)")  # fmt: skip

    c = sub.add_parser(
        "contrastive", help="does the model prefer the correct translation over a contrastive one, given the context"
    )
    c.add_argument("--model", required=True)
    data = c.add_mutually_exclusive_group(required=True)
    data.add_argument("--discevalmt", help="folder of the DiscEvalMT En-Fr test sets (Bawden et al. 2018)")
    data.add_argument("--synthetic", type=POSITIVE, metavar="N_DOCS", help="N synthetic documents (pronoun agreement)")
    c.add_argument("--subset", choices=["anaphora", "lexical_choice"], default="anaphora", help="DiscEvalMT subset")
    c.add_argument("--seed", type=SEED, default=12345, help="seed of --synthetic")
    c.add_argument("--batch-size", type=POSITIVE, default=32, help="examples per forward pass")
    c.add_argument("--limit", type=POSITIVE, help="score the first N examples only")
    c.add_argument("--json", help="also write the accuracy, per-example scores and signature to this JSON file")

    a = sub.add_parser("align", help="word alignments (Pharaoh 'i-j', 0-based) from a model's cross-attention")
    a.add_argument("--model", required=True)
    a.add_argument("--src", help="source sentences, one a line, words separated by spaces")
    a.add_argument("--tgt", help="target sentences, line aligned with --src")
    a.add_argument("--input", help="instead of --src/--tgt (not with them): one file of 'source ||| target' lines")
    a.add_argument("--output", default="-", help="Pharaoh file (default: standard output)")
    a.add_argument("--layer", type=NATURAL, help="decoder layer whose cross-attention is read (default: the guided-"
                   "alignment layer, else the model's alignment layer: the last biased layer, else the last layer; "
                   "with a symmetric model, the layer of both directions)")  # fmt: skip
    a.add_argument("--heads", type=POSITIVE, help="average the layer's first N heads (default: all, or the heads that "
                   "guided alignment supervised when reading its layer)")  # fmt: skip
    a.add_argument("--symmetrize", default=None,
                   choices=["forward", "backward", "intersection", "union", "grow-diag-final-and"],
                   help="with a symmetric model (both directions): how the two directions' links are combined "
                   "(default grow-diag-final-and); a one-direction model gives forward links only")  # fmt: skip
    a.add_argument("--shift", action="store_true", help="Shift-Att (Chen et al. 2020): read each target word at the "
                   "step where it is the decoder input, not the step that predicts it")  # fmt: skip
    a.add_argument("--batch-size", type=POSITIVE, default=32)

    r = sub.add_parser("aer", help="alignment error rate of a Pharaoh file against gold sure/possible links")
    r.add_argument("--hyp", required=True, help="predicted links, 'i-j' per link, one line per pair")
    r.add_argument("--gold", required=True, help="gold links: 'i-j' sure, 'ipj' possible")
    r.add_argument("--gold-one-indexed", action="store_true", help="gold indices start at 1 (e.g. the Hansards set)")
    r.add_argument("--hyp-one-indexed", action="store_true", help="predicted indices start at 1")
    r.add_argument("--json", help="also write the figures to this JSON file")

    u = sub.add_parser("uas", help="attachment score of the trees read from a model's DBSA/LISA heads vs gold CoNLL-U")
    u.add_argument("--model", required=True)
    u.add_argument("--conllu", required=True, help="gold trees, e.g. a UD treebank's test file")
    u.add_argument("--kind", choices=["dbsa", "lisa"], default="dbsa")
    u.add_argument("--batch-size", type=POSITIVE, default=32, help="sentences per forward pass")
    u.add_argument("--limit", type=POSITIVE, help="score the first N sentences only")
    u.add_argument("--json", help="also write the result to this JSON file")
    for parser in sub.choices.values():
        parser.formatter_class = _HelpFormatter
    return p


# ------------------------------------------------------------------------------------------------------------------
# Checks between flags: after parsing, before any heavy import
# ------------------------------------------------------------------------------------------------------------------
#: per subcommand: the flags that name files it reads, and those that name files it writes
_INPUTS = {
    "translate": ("input", "docids", "parser_model"),
    "align": ("src", "tgt", "input"),
    "evaluate": ("hyp", "ref", "src", "baseline", "gold_conllu", "input_conllu", "docids"),
    "uas": ("conllu",),
    "aer": ("hyp", "gold"),
    "contrastive": (),
}
_OUTPUTS = {
    "translate": ("output",),
    "align": ("output",),
    "evaluate": ("json", "bucket_chart", "heatmap", "arcs"),
    "uas": ("json",),
    "aer": ("json",),
    "contrastive": ("json",),
}


def _flag(dest: str) -> str:
    return {"layer_head": "--arcs-layer-head"}.get(dest, "--" + dest.replace("_", "-"))


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same inode when both exist (a symbolic or hard link), else the same
    resolved path (an output that does not exist yet through a linked folder)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwriting(args: argparse.Namespace) -> None:
    """A file the subcommand writes may be none of the files it reads (nor another file it writes): writing
    ``--output`` over ``--input`` would destroy the input before (or while) it is read."""
    given = lambda names: [(n, getattr(args, n)) for n in names if getattr(args, n, None) not in (None, "-")]  # noqa: E731
    outputs = given(_OUTPUTS.get(args.command, ()))
    for k, (out, out_path) in enumerate(outputs):
        for name, path in given(_INPUTS.get(args.command, ())) + outputs[:k]:
            if _same_file(out_path, path):
                kind = "writes" if (name, path) in outputs else "reads"
                raise UserError(f"{_flag(out)} {out_path} is the file that {_flag(name)} {path} names, which this "
                                f"command {kind} too: give {_flag(out)} another file name.")  # fmt: skip


def _needs(args, flags: tuple[str, ...], what: str, fix: str) -> None:
    """Refuse the first of ``flags`` that was given when what it acts on was not (it would be silently ignored)."""
    for dest in flags:
        value = getattr(args, dest, None)
        if value not in (None, False):
            raise UserError(f"{_flag(dest)} {what}, and this call {fix} or leave out {_flag(dest)}.")


def check_args(args: argparse.Namespace) -> None:
    """Checks between flags that argparse cannot make: a flag that would be silently ignored, an output file that
    is an input. Raises `UserError` naming the flag and the fix; runs before any heavy import."""
    refuse_overwriting(args)
    if args.command == "evaluate":
        scores_attention = args.model is not None and args.gold_conllu is not None
        if (args.docids or args.no_context) and not scores_attention:
            flag = "--docids" if args.docids else "--no-context"
            raise UserError(f"{flag} is about the attention scores of a document-level --model on the sentences of "
                            "--gold-conllu, and this call scores none: add --model DIR and --gold-conllu FILE, or "
                            f"leave out {flag} (BLEU, chrF and RIBES read no documents)")  # fmt: skip
        if not scores_attention:
            _needs(args, ("device", "bf16", "input_conllu", "max_sentences", "heatmap", "arcs"),
                   "is about the attention scores of --model on the sentences of --gold-conllu",
                   "scores none: add --model DIR and --gold-conllu FILE,")  # fmt: skip
        if args.arcs is None:
            _needs(args, ("layer_head",), "chooses the head that --arcs draws", "draws none: add --arcs FILE.png,")
        if args.src is None:
            _needs(args, ("bucket_chart",), "draws BLEU by source length, which needs the sources",
                   "gives none: add --src FILE (the source sentences, line aligned),")  # fmt: skip
        if args.baseline is None:
            _needs(args, ("baseline_model",), "signs the --baseline system", "has none: add --baseline FILE,")
    elif args.command == "translate" and args.parser is None:
        _needs(
            args, ("parser_model",), "is the model of --parser", "gives no --parser: add --parser spacy|stanza|conllu,"
        )
    elif args.command == "align" and args.input and (args.src or args.tgt):
        raise UserError("align: give --input (one 'source ||| target' file) or --src and --tgt, not both")


def split_debug(argv: list[str], environ=None) -> tuple[list[str], bool]:
    """``argv`` without the CLI's ``--debug`` (before the subcommand, or after any subcommand but `train`, where it
    is a TrainingArguments flag), and whether the traceback of a user error is wanted (``--debug`` or
    ``HF_SYNTAX_MT_DEBUG=1``)."""
    environ = os.environ if environ is None else environ  # read at the call (not bound when the module loaded)
    debug = environ.get(DEBUG_ENV, "") not in ("", "0")
    if argv and argv[0] == "--debug":
        return argv[1:], True
    if argv and argv[0] != "train" and "--debug" in argv:
        return [a for a in argv if a != "--debug"], True
    return list(argv), debug


def one_line(error: BaseException) -> str:
    """``error: ...`` on one line: the message's lines joined, a missing file named as the file."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        text = f"{error.filename}: {error.strerror.lower()}"
    elif isinstance(error, ModuleNotFoundError) and error.name:
        text = f"{error}: install the package that provides {error.name!r} (pip install ...)"
    else:
        text = str(error)
    return "error: " + " ".join(line.strip() for line in text.splitlines() if line.strip())
