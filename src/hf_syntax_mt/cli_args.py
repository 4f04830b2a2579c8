"""The `hf-syntax-mt` parser and its flag types, standard library only.

`hf_syntax_mt_cli` (the console script) loads this module and ``errors.py`` without the package's ``__init__``
(which imports torch and transformers): argparse errors, ``--help`` and the checks between flags (`check_args`) answer
in a fraction of a second. ``hf_syntax_mt.cli`` runs the subcommands with the same parser.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

from .cli_engine_args import CT2_QUANTIZATIONS, ctranslate2_arguments
from .errors import UserError
from .overwriting import refuse_writing_over
from .suggest import SuggestingParser

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
    parse.minimum, parse.maximum = minimum, maximum  # read by the coverage test (every numeric flag has a range)
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
    parse.minimum, parse.maximum = minimum if above is None else above, maximum
    return parse


def _check_range(value, minimum, maximum) -> None:
    if minimum is not None and value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")


POSITIVE = int_range(1)  # a count, a size, a batch: 0 would divide by zero, never start, or do nothing
NATURAL = int_range(0)  # an index, a layer, a number of warm-up steps
SEED = int_range(0, 2**32 - 1)  # numpy's and torch's seeds
# past these a value can only exhaust memory (or never end): beams, batches, model sizes, generated data
MAX_BEAMS = 128
MAX_BATCH = 4096  # sentences (or examples) per forward pass
BEAMS = int_range(1, MAX_BEAMS)
BATCH = int_range(1, MAX_BATCH)
#: numeric flags without an upper bound, and why a large value is harmless (the coverage test reads this)
UNBOUNDED = {
    "evaluate --max-sentences": "a cap: past the number of sentences it changes nothing",
    "contrastive --limit": "a cap: past the number of examples it changes nothing",
    "uas --limit": "a cap: past the number of sentences it changes nothing",
    "evaluate --arcs-sentence": "an index, checked against the sentences read",
    "evaluate --arcs-layer-head": "indices, checked against the model's layers and heads",
    "evaluate --edges": "bucket bounds in words: any increasing list",
    "align --layer": "an index, checked against the model's layers",
    "align --heads": "a count, checked against the layer's heads",
    "demo --pascal-layer": "an index, checked against --layers",
    "demo --warmup-steps": "a schedule length: any value works",
    "demo --curve-every": "an interval: past --max-steps it draws one point",
    "demo --budget": "a time limit: --max-steps stops the run first",
}


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


class TrainHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """The train script's help: each flag's default, as `HfArgumentParser`'s formatter shows it, except where there is
    none to show (None, a flag's False) or the help text already says it ("(default 1024)" was followed by
    "(default: None)")."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False) or "default" in text.lower():
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand but `train` (whose flags are `HfArgumentParser`'s: `train_help`), one function
    per subcommand, in the order the help lists them."""
    p = SuggestingParser(  # did-you-mean for a mistyped flag
        prog="hf-syntax-mt", description="Syntax-aware NMT for Hugging Face transformers.",
        epilog=f"An error you can fix prints one 'error:' line; --debug (or {DEBUG_ENV}=1) shows its traceback.",
    )  # fmt: skip
    # read (and removed) by main() before parsing; SUPPRESS keeps it out of the subcommands' namespace
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error (also after the subcommand)")  # fmt: skip
    sub = p.add_subparsers(
        dest="command", required=True, help="the subcommand (hf-syntax-mt COMMAND --help: its flags)"
    )
    for add in (_add_demo, _add_train, _add_evaluate, _add_translate, _add_export, _add_contrastive, _add_align,
                _add_aer, _add_uas, _add_parse, _add_train_parser):  # fmt: skip
        add(sub)
    for parser in sub.choices.values():
        parser.formatter_class = _HelpFormatter
    return p


def _add_demo(sub) -> None:
    d = sub.add_parser(
        "demo", help="train vanilla Marian vs PASCAL on the built-in demo language; BLEU, chrF, attachment diagnostic"
    )
    d.add_argument(
        "--output-dir", default="runs/demo", help="folder for the data, the scores, the plot and the PASCAL model"
    )
    d.add_argument("--seed", type=SEED, default=0, help="seed of the demo language's sentences and of training")
    d.add_argument("--train-size", type=int_range(1, 10_000_000), default=20000, help="training sentence pairs")
    d.add_argument("--test-size", type=int_range(1, 1_000_000), default=500, help="test sentence pairs (BLEU, chrF)")
    d.add_argument("--diagnostic-size", type=int_range(1, 1_000_000), default=100,
                   help="ambiguous sources, each scored with both trees")  # fmt: skip
    d.add_argument("--vocab-size", type=int_range(1, 1_000_000), default=160, help="the joint BPE vocabulary's size")
    d.add_argument("--d-model", type=int_range(1, 16384), default=128, help="the model's hidden size")
    d.add_argument("--layers", type=int_range(1, 128), default=2, help="encoder and decoder layers (each)")
    d.add_argument("--heads", type=int_range(1, 1024), default=4, help="attention heads per layer")
    d.add_argument("--pascal-heads", type=int_range(1, 1024), default=2,
                   help="PASCAL heads in encoder layer --pascal-layer")  # fmt: skip
    d.add_argument("--pascal-layer", type=NATURAL, default=0, help="the encoder layer (from 0) of the PASCAL heads")
    d.add_argument("--pascal-sigma", type=float_range(0.001, 1e6), default=1.0,
                   help="standard deviation of PASCAL's Gaussian around the parent, in subwords")  # fmt: skip
    d.add_argument("--max-tokens", type=int_range(1, 10_000_000), default=1024,
                   help="padded tokens per training batch")  # fmt: skip
    d.add_argument("--learning-rate", type=float_range(maximum=10.0, above=0), default=1e-3,
                   help="peak learning rate (inverse square-root schedule)")  # fmt: skip
    d.add_argument("--warmup-steps", type=NATURAL, default=200, help="steps of linear warm-up to the peak rate")
    d.add_argument("--max-steps", type=int_range(1, 100_000_000), default=1200,
                   help="training steps per model (the stopping rule)")  # fmt: skip
    d.add_argument("--budget", type=float_range(above=0), default=None,
                   help="optional: also stop after this many seconds per model")  # fmt: skip
    d.add_argument("--curve-every", type=NATURAL, default=250, help="steps between diagnostic-curve points (0: none)")
    d.add_argument("--threads", type=int_range(1, 1024), default=1,
                   help="torch threads (2 may help on an idle machine)")  # fmt: skip
    d.add_argument("--only", nargs="+", choices=["vanilla", "PASCAL"], default=["vanilla", "PASCAL"],
                   help="the systems to train")  # fmt: skip


def _add_train(sub) -> None:
    sub.add_parser(
        "train",
        help="train a model (scripts/train.py: HfArgumentParser flags; `hf-syntax-mt train --help` lists them)",
        add_help=False,
    )


def _add_evaluate(sub) -> None:
    e = sub.add_parser(
        "evaluate",
        help="BLEU/chrF/RIBES with signatures, paired bootstrap, length buckets, attention-to-parent per head",
    )
    e.add_argument("--hyp", required=True, help="hypotheses, one a line")
    e.add_argument("--ref", required=True, help="references, line aligned")
    e.add_argument("--src", help="sources, line aligned: BLEU/chrF by source length (whitespace words)")
    e.add_argument("--baseline", help="a second system's hypotheses: paired bootstrap significance vs --hyp")
    e.add_argument("--name", default="system", help="name of --hyp in the report")
    e.add_argument("--baseline-name", default="baseline", help="name of --baseline in the report")
    e.add_argument("--model", help="model directory of --hyp (its signature; attention scores with --gold-conllu)")
    e.add_argument("--baseline-model", help="model directory of --baseline (its signature)")
    e.add_argument("--bootstrap-samples", type=int_range(1, 1_000_000), default=1000,
                   help="resamples of the paired bootstrap (with --baseline)")  # fmt: skip
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
    e.add_argument("--arcs-sentence", type=NATURAL, default=0, help="the --gold-conllu sentence (from 0) --arcs draws")
    e.add_argument("--arcs-layer-head", dest="layer_head", type=NATURAL, nargs=2, metavar=("LAYER", "HEAD"),
                   help="the encoder layer and head drawn by --arcs, from 0 (default: the best head)")  # fmt: skip
    e.add_argument("--json", help="write every number (with signatures) to this JSON file")
    _device_arguments(e, "run --model for the attention scores")


def _add_translate(sub) -> None:
    t = sub.add_parser(
        "translate", help="translate raw text (one sentence per line, or documents) with a saved model",
        description="Translate raw text with a saved model: one translation per input line, in order. A document-level "
        "model (config context_sentences=k > 0) translates each sentence with the previous k source sentences of its "
        "document as context: give the documents with --docids or --documents blank-lines (plain sentences are "
        "refused unless --no-context). A sentence-level model given documents translates them sentence by sentence. "
        "A progress bar shows on stderr from 100 sentences on.",
    )  # fmt: skip
    t.add_argument("--model", required=True, help="a saved model's directory (the one holding config.json: a training "
                   "run's --output_dir, or what save_pretrained wrote)")  # fmt: skip
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
    t.add_argument("--batch-size", type=BATCH, default=16, help="sentences per generate() call")
    t.add_argument("--num-beams", type=BEAMS, help="beam size (1: greedy decoding; default: the model's generation "
                   "config, which a training run writes: the decoding its test scores name)")  # fmt: skip
    _device_arguments(t, "translate")
    ctranslate2_arguments(t, int_range)  # --threads, --compute-type
    t.add_argument("--engine", choices=["generate", "onnxruntime"], default="generate", help="how to decode: "
                   "generate (transformers, default) or onnxruntime (the model's encoder in torch, Marian's decoder "
                   "in ONNX Runtime: the same translations, faster on a CPU; for models whose decoder is Marian's, "
                   "e.g. PASCAL; needs pip install 'hf-syntax-mt[deploy]'; the decoder is exported once and cached "
                   "under ~/.cache/hf_syntax_mt)")  # fmt: skip


def _add_export(sub) -> None:
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


def _add_contrastive(sub) -> None:
    c = sub.add_parser(
        "contrastive", help="does the model prefer the correct translation over a contrastive one, given the context"
    )
    c.add_argument("--model", required=True, help="a saved model's directory (a document-level model reads the "
                   "context)")  # fmt: skip
    data = c.add_mutually_exclusive_group(required=True)
    data.add_argument("--discevalmt", help="folder of the DiscEvalMT En-Fr test sets (Bawden et al. 2018)")
    data.add_argument(
        "--synthetic", type=int_range(1, 1_000_000), metavar="N_DOCS", help="N synthetic documents (pronoun agreement)"
    )
    c.add_argument("--subset", choices=["anaphora", "lexical_choice"], default="anaphora", help="DiscEvalMT subset")
    c.add_argument("--seed", type=SEED, default=12345, help="seed of --synthetic")
    c.add_argument("--batch-size", type=BATCH, default=32, help="examples per forward pass")
    c.add_argument("--limit", type=POSITIVE, help="score the first N examples only")
    c.add_argument("--json", help="also write the accuracy, per-example scores and signature to this JSON file")


def _add_align(sub) -> None:
    a = sub.add_parser("align", help="word alignments (Pharaoh 'i-j', 0-based) from a model's cross-attention")
    a.add_argument("--model", required=True, help="a saved model's directory (one direction, or a symmetric model)")
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
    a.add_argument("--batch-size", type=BATCH, default=32, help="sentence pairs per forward pass")


def _add_aer(sub) -> None:
    r = sub.add_parser("aer", help="alignment error rate of a Pharaoh file against gold sure/possible links")
    r.add_argument("--hyp", required=True, help="predicted links, 'i-j' per link, one line per pair")
    r.add_argument("--gold", required=True, help="gold links: 'i-j' sure, 'ipj' possible")
    r.add_argument("--gold-one-indexed", action="store_true", help="gold indices start at 1 (e.g. the Hansards set)")
    r.add_argument("--hyp-one-indexed", action="store_true", help="predicted indices start at 1")
    r.add_argument("--json", help="also write the figures to this JSON file")


def _add_uas(sub) -> None:
    u = sub.add_parser("uas", help="attachment score of the trees read from a model's DBSA/LISA heads vs gold CoNLL-U")
    u.add_argument("--model", required=True, help="a saved model's directory, with DBSA or LISA heads")
    u.add_argument("--conllu", required=True, help="gold trees, e.g. a UD treebank's test file")
    u.add_argument("--kind", choices=["dbsa", "lisa"], default="dbsa", help="which heads' trees are scored")
    u.add_argument("--batch-size", type=BATCH, default=32, help="sentences per forward pass")
    u.add_argument("--limit", type=POSITIVE, help="score the first N sentences only")
    u.add_argument("--json", help="also write the result to this JSON file")


def _lang_code(text: str) -> str:
    if re.fullmatch(r"[a-z]{2,3}", text):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a language code (spaCy's: de, fr, en, ...; xx for any)")


def _add_parse(sub) -> None:
    """`parse` (run by `hf_syntax_mt.parser_commands`)."""
    q = sub.add_parser("parse", help="parse a text file into CoNLL-U for --{split}_{source,target}_conllu",
                       description="One CoNLL-U block per input line, in order; the parser flags are train's.")  # fmt: skip
    q.add_argument("--parser", required=True, choices=["spacy", "stanza"], help="as train's --parser")
    q.add_argument("--parser_model", "--parser-model", required=True, help="spaCy package or folder, stanza language")
    q.add_argument("--parser_cache_dir", "--parser-cache-dir", help="cache parses on disk (as train's flag)")
    q.add_argument("--input", required=True, help="text file, one sentence a line (UTF-8, .gz ok)")
    q.add_argument("--output", required=True, help="the CoNLL-U file to write (gzip-compressed if it ends in .gz)")
    q.add_argument("--batch-size", type=BATCH, default=256, help="lines per parser call")


def _add_train_parser(sub) -> None:
    """`train-parser` (run by `hf_syntax_mt.parser_commands`)."""
    tp = sub.add_parser("train-parser", help="train a spaCy parser for a language on UD treebanks (CoNLL-U)",
                        description="spaCy's commands on CoNLL-U treebanks: OUTPUT/model-best, with dev scores and "
                        "times in OUTPUT/train_parser.json (needs pip install 'hf-syntax-mt[spacy]').")  # fmt: skip
    tp.add_argument("--lang", required=True, type=_lang_code, help="spaCy's language code (de, fr, ...; xx: any)")
    tp.add_argument("--train", required=True, nargs="+", metavar="CONLLU", help="training treebank(s)")
    tp.add_argument("--dev", required=True, metavar="CONLLU", help="the treebank that chooses the checkpoint")
    tp.add_argument("--output", required=True, help="a new (or empty) folder for the parser")
    tp.add_argument("--max-seconds", type=float_range(maximum=1e7, above=0), default=1200.0, help="training's limit")
    tp.add_argument("--max-steps", type=int_range(1, 10**8), help="spaCy's training.max_steps (default 20,000)")
    tp.add_argument("--eval-frequency", type=int_range(1, 10**8), help="steps between dev scores (default 200)")
    tp.add_argument("--threads", type=int_range(1, 1024), default=1, help="CPU threads of the spaCy processes")


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
    "parse": ("input",),
    "train-parser": ("dev",),  # and --train, a list: checked by data.parser_training
}
#: per subcommand: the flags that name folders it reads (a model directory, a test-set folder): no output may be one
#: of their files
_FOLDERS = {
    "translate": ("model",),
    "align": ("model",),
    "evaluate": ("model", "baseline_model"),
    "uas": ("model",),
    "contrastive": ("model", "discevalmt"),
    "export": ("model",),
}
_OUTPUTS = {
    "demo": ("output_dir",),
    "translate": ("output",),
    "align": ("output",),
    "evaluate": ("json", "bucket_chart", "heatmap", "arcs"),
    "uas": ("json",),
    "aer": ("json",),
    "contrastive": ("json",),
    "export": ("output",),
    "parse": ("output", "parser_cache_dir"),
    "train-parser": ("output",),
}
#: outputs that are folders (written into: new, or empty for `export`), not files
_OUTPUT_FOLDERS = {("demo", "output_dir"), ("export", "output"), ("parse", "parser_cache_dir"),
                   ("train-parser", "output")}  # fmt: skip


def _flag(dest: str) -> str:
    return {"layer_head": "--arcs-layer-head"}.get(dest, "--" + dest.replace("_", "-"))


def refuse_overwriting(args: argparse.Namespace) -> None:
    """A file the subcommand writes may be none of the files it reads (nor another file it writes): writing
    ``--output`` over ``--input`` would destroy the input before (or while) it is read (`overwriting`, the rule the
    benchmark scripts share)."""
    flags = lambda table: [(_flag(n), getattr(args, n, None)) for n in table.get(args.command, ())]  # noqa: E731
    refuse_writing_over(flags(_OUTPUTS), flags(_INPUTS), flags(_FOLDERS))


def _needs(args, flags: tuple[str, ...], what: str, fix: str) -> None:
    """Refuse the first of ``flags`` that was given when what it acts on was not (it would be silently ignored)."""
    for dest in flags:
        value = getattr(args, dest, None)
        if value not in (None, False):
            raise UserError(f"{_flag(dest)} {what}, and this call {fix} or leave out {_flag(dest)}.")


def check_paths(args: argparse.Namespace) -> None:
    """Every path flag the subcommand declares (`_INPUTS`, `_FOLDERS`, `_OUTPUTS`), checked before any work: an
    input that does not exist or is a folder, a folder flag that names a file, an output that is a folder or lies
    under a file. Raises `UserFileError` naming the flag and the path (a file that exists but cannot be decoded is
    named where it is read)."""
    import errno

    from .errors import MissingFileError, UserFileError

    command = args.command
    for dest in _INPUTS.get(command, ()):
        path = getattr(args, dest, None)
        if path in (None, "-") or (dest == "parser_model" and getattr(args, "parser", None) != "conllu"):
            continue
        if not os.path.exists(path):
            raise MissingFileError(f"{_flag(dest)} {path}: no such file; check the path", errno.ENOENT, path)
        if os.path.isdir(path):
            raise UserFileError(f"{_flag(dest)} {path}: is a folder, not a file; give the file's path", errno.EISDIR,
                                path)  # fmt: skip
    for dest in _FOLDERS.get(command, ()):
        path = getattr(args, dest, None)
        if path is not None and dest not in ("model", "baseline_model") and not os.path.isdir(path):  # not a Hub id
            what = "is a file" if os.path.exists(path) else "no such folder"
            raise UserFileError(f"{_flag(dest)} {path}: {what}; give the folder's path", errno.ENOTDIR, path)
    for dest in _OUTPUTS.get(command, ()):
        path = getattr(args, dest, None)
        if path in (None, "-"):
            continue
        if os.path.isdir(path) and (command, dest) not in _OUTPUT_FOLDERS:
            raise UserFileError(f"{_flag(dest)} {path}: is a folder; give the name of the file to write",
                                errno.EISDIR, path)  # fmt: skip
        parent = os.path.dirname(os.path.abspath(path))
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and not os.path.isdir(parent):
            raise UserFileError(f"{_flag(dest)} {path}: {parent} is a file, so nothing can be written under it; "
                                "give another path", errno.ENOTDIR, path)  # fmt: skip


def check_args(args: argparse.Namespace) -> None:
    """Checks between flags that argparse cannot make: a path that cannot be read or written, a flag that would be
    silently ignored, an output file that is an input. Raises `UserError` naming the flag and the fix; runs before
    any heavy import."""
    refuse_overwriting(args)
    check_paths(args)
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
    check_device(getattr(args, "device", None))


def _torch_build() -> dict[str, str | None] | None:
    """What the installed torch was built with (``torch/version.py``: ``cuda``, ``hip``), read as text without
    importing torch (seconds); None where the file cannot be read."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, ImportError, ValueError):
        return None
    found = {}
    for name in ("cuda", "hip"):
        match = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(None|'[^']*'|\"[^\"]*\")\s*$", source, re.M)
        if match is None:
            return None  # another layout: leave the check to torch
        found[name] = None if match.group(1) == "None" else match.group(1)[1:-1]
    return found


def check_device(name: str | None) -> None:
    """``--device NAME`` checked before torch is imported, where the answer is certain without it: a name that is no
    device, ``cuda`` with a torch built without CUDA (nor ROCm), ``mps`` off macOS. Whether a CUDA build sees a GPU
    is left to `inference.resolve_device` (it needs torch)."""
    if name is None:
        return
    choices = "cpu, cuda, cuda:N or mps"  # inference.DEVICE_CHOICES
    if not re.fullmatch(r"(cpu|mps)(:0)?|cuda(:\d+)?", name):
        raise UserError(f"--device {name}: not a device; give {choices}")
    if name.startswith("cuda"):
        build = _torch_build()
        if build is not None and build["cuda"] is None and build["hip"] is None:
            raise UserError(f"--device {name}: the installed torch is built without CUDA (a CPU build), so it sees no "
                            "CUDA device; use --device cpu, leave --device out, or install a CUDA build of torch")  # fmt: skip
    if name.startswith("mps") and sys.platform != "darwin":
        raise UserError(f"--device {name}: MPS (Apple GPU) is only on macOS; use --device cpu")


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
