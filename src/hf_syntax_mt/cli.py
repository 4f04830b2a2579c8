"""`hf-syntax-mt` command line: `demo` (the main job), `train`, `evaluate`, `translate`, `uas` and `contrastive`."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path

DEMO_SENTENCES = 4


def _demo(args: argparse.Namespace) -> int:
    import torch
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, pipeline
    from transformers.utils import logging as hf_logging

    from hf_syntax_mt.data import DataCollatorForSyntaxMT, SyntaxMTPreprocessor
    from hf_syntax_mt.data.synthetic import gold_source_parses, load_synthetic_dataset, write_corpus
    from hf_syntax_mt.evaluation import bucket_scores, corpus_scores, format_comparison, signature
    from hf_syntax_mt.model_card import write_model_card
    from hf_syntax_mt.training import TimeBudgetCallback, build_model, model_config, train_tokenizer

    hf_logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    # 1. the built-in language pair, with gold trees on both sides (CoNLL-U written for inspection and the pipeline)
    print(f"[1/5] Generating the synthetic language pair (seed {args.seed}) ...", flush=True)
    splits = {"train": args.train_size, "validation": args.valid_size, "test": args.test_size}
    files = write_corpus(out / "data", splits=splits, seed=args.seed)
    data = load_synthetic_dataset(args.train_size, args.valid_size, args.test_size, seed=args.seed)
    tokenizer = train_tokenizer(list(data["train"]["source"]) + list(data["train"]["target"]), args.vocab_size)

    # 2. gold source trees -> subword parent positions, in one datasets.map pass
    print("[2/5] Mapping gold trees onto subwords ...", flush=True)
    test_sources = data["test"]  # raw text of the test split, kept for scoring and the pipeline
    data = data.map(gold_source_parses, batched=True, desc="Collecting gold parses")
    preprocess = SyntaxMTPreprocessor(
        tokenizer, source_parse_column="source_parse", max_source_length=args.max_length,
        max_target_length=args.max_length,
    )  # fmt: skip
    columns = data["train"].column_names
    data = data.map(preprocess, batched=True, remove_columns=columns, desc="Aligning parses to subwords")

    # 3. the same budget for a vanilla Marian and a PASCAL model of the same size
    results, buckets, steps = {}, {}, {}
    lengths = [len(s.split()) for s in test_sources["source"]]
    references = list(test_sources["target"])
    dims = dict(d_model=args.d_model, layers=args.layers, heads=args.heads, ffn_dim=4 * args.d_model)
    systems = {
        "vanilla Marian": model_config(tokenizer, marian=True, **dims),
        "PASCAL": model_config(
            tokenizer, encoder_pascal_heads=[args.pascal_heads] + [0] * (args.layers - 1),
            source_parser={"backend": "conllu", "path": files["test"]["src_conllu"].name}, **dims,  # in the model dir
        ),
    }  # fmt: skip
    for i, (name, config) in enumerate(systems.items()):
        print(f"[3/5] Training {name} ({i + 1}/2): at most {args.max_steps} steps or {args.budget:.0f} s ...", flush=True)
        model = build_model(config, seed=args.seed)
        budget = TimeBudgetCallback(args.budget)
        trainer = Seq2SeqTrainer(
            model=model,
            args=Seq2SeqTrainingArguments(
                output_dir=str(out / "checkpoints" / name.split()[0].lower()), max_steps=args.max_steps,
                per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
                learning_rate=args.learning_rate, warmup_steps=min(300, args.max_steps // 5),
                lr_scheduler_type="inverse_sqrt", weight_decay=0.0, logging_steps=50, save_strategy="no",
                report_to=[], seed=args.seed, predict_with_generate=True, train_sampling_strategy="group_by_length", generation_num_beams=1,
                generation_max_length=args.max_length, dataloader_num_workers=0, disable_tqdm=False,
                use_cpu=True,
            ),  # fmt: skip
            train_dataset=data["train"],
            data_collator=DataCollatorForSyntaxMT(tokenizer, model=model),
            processing_class=tokenizer,
            callbacks=[budget],
        )
        train_result = trainer.train()
        steps[name] = (trainer.state.global_step, train_result.metrics.get("train_runtime", 0.0))
        print(f"[4/5] Translating the {len(references)} test sentences with {name} ...", flush=True)
        prediction = trainer.predict(data["test"], max_length=args.max_length, num_beams=1)
        ids = prediction.predictions
        ids[ids < 0] = tokenizer.pad_token_id
        hypotheses = tokenizer.batch_decode(ids, skip_special_tokens=True)
        results[name] = corpus_scores(hypotheses, references)
        buckets[name] = bucket_scores(lengths, hypotheses, references)
        if name == "PASCAL":
            pascal_model = model
            model.generation_config.max_length = args.max_length
            model.save_pretrained(out / "pascal")
            tokenizer.save_pretrained(out / "pascal")
            shutil.copy(files["test"]["src_conllu"], out / "pascal")  # the pipeline's parser, beside the weights

    write_model_card(
        out / "pascal", model=pascal_model, title="PASCAL on the hf-syntax-mt synthetic language pair",
        data=f"Built-in synthetic SVO -> head-final pair (`hf_syntax_mt.data.synthetic`, seed {args.seed}): "
        f"{args.train_size} training pairs, {args.test_size} test pairs, gold dependency trees.",
        parser="Gold trees. At inference the pipeline looks sentences up in the generated test CoNLL-U file "
        "(backend `conllu`); no off-the-shelf parser knows the synthetic language.",
        scores={"synthetic test (greedy)": results["PASCAL"]},
        limitations=f"A demonstration model trained for {steps['PASCAL'][0]} steps on 2 CPU cores; it only knows the "
        "synthetic language, and translates only sentences present in its CoNLL-U file through the pipeline.",
    )  # fmt: skip
    print("\n" + format_comparison(results, buckets))
    for name, (n, seconds) in steps.items():
        print(f"{name}: {n} training steps in {seconds:.0f} s")
    model_sig = signature(
        data=f"synthetic(seed={args.seed},train={args.train_size})",
        variant=f"pascal(layer0:{args.pascal_heads}/{args.heads} heads,sigma=1.0)", parser="gold", seed=args.seed,
    )  # fmt: skip
    print(f"model signature: {model_sig}")

    # 5. raw sentences through the saved model's own pipeline (it parses the input itself)
    print(f"\n[5/5] pipeline('translation', model='{out / 'pascal'}', trust_remote_code=True) on raw text:")
    translator = pipeline("translation", model=str(out / "pascal"), trust_remote_code=True)
    raw = list(test_sources["source"][:DEMO_SENTENCES])
    for src, hyp, ref in zip(raw, translator(raw, batch_size=DEMO_SENTENCES), references, strict=False):
        print(f"  source:    {src}\n  output:    {hyp['translation_text']}\n  reference: {ref}\n")
    summary = {
        "scores": results, "buckets": buckets, "steps": {k: v[0] for k, v in steps.items()},
        "seconds": round(time.perf_counter() - t0, 1), "model_signature": model_sig,
    }  # fmt: skip
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"Saved the PASCAL model to {out / 'pascal'} and the scores to {out / 'results.json'} "
          f"({summary['seconds']:.0f} s in all).")  # fmt: skip
    return 0


def _translate(args: argparse.Namespace) -> int:
    from transformers import pipeline

    import hf_syntax_mt  # noqa: F401  (registers the pipeline task)
    from hf_syntax_mt.data.textio import decode_utf8, read_text, split_lines

    if args.input == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        text = decode_utf8(stdin.read(), "<stdin>") if stdin is not None else sys.stdin.read()
    else:
        text = read_text(args.input)
    lines = split_lines(text)  # one output line per "\n"-terminated input line, whatever other breaks a line holds
    parser = None
    if args.parser:
        key = {"stanza": "lang", "spacy": "model", "conllu": "path"}[args.parser]
        parser = {"backend": args.parser, **({key: args.parser_model} if args.parser_model else {})}
    translator = pipeline("syntax-translation", model=args.model, parser=parser)
    outputs = translator(lines, batch_size=args.batch_size, num_beams=args.num_beams)
    # a line break inside a translation would shift every later line of the output: write it as a space
    text = "".join(" ".join(split_lines(o["translation_text"]) or [""]) + "\n" for o in outputs)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def _uas(args) -> int:
    """Unlabelled attachment score of the trees the model's DBSA/LISA heads predict, against gold CoNLL-U."""
    from transformers import AutoTokenizer

    from hf_syntax_mt import SyntaxMTForConditionalGeneration, __version__
    from hf_syntax_mt.probing import uas_against_conllu

    model = SyntaxMTForConditionalGeneration.from_pretrained(args.model)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
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
    from hf_syntax_mt.contrastive import load_discevalmt, score_contrastive
    from hf_syntax_mt.data.synthetic import contrastive_examples, generate_documents

    if args.discevalmt:
        examples, data = load_discevalmt(args.discevalmt, args.subset), f"discevalmt-{args.subset}"
    else:
        examples = list(contrastive_examples(generate_documents(args.synthetic, seed=args.seed)))
        data = f"synthetic-documents(docs={args.synthetic},seed={args.seed})"
    examples = examples[: args.limit] if args.limit else examples
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
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
        raise SystemExit("--arcs-layer-head takes two numbers: LAYER HEAD")
    result = evaluate_files(
        args.hyp, args.ref, sources=args.src, baseline=args.baseline, model=args.model,
        baseline_model=args.baseline_model, names=(args.name, args.baseline_name),
        bootstrap_samples=args.bootstrap_samples, seed=args.seed, edges=tuple(args.edges),
        bucket_chart=args.bucket_chart, gold_conllu=args.gold_conllu, input_conllu=args.input_conllu,
        heatmap=args.heatmap, arcs=args.arcs, arcs_sentence=args.arcs_sentence,
        arcs_layer_head=tuple(args.layer_head) if args.layer_head else None, max_sentences=args.max_sentences,
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
    from hf_syntax_mt.word_alignment import align_corpus, format_pharaoh, read_parallel_words

    sources, targets = read_parallel_words(args.src, args.tgt, args.input)
    config = AutoConfig.from_pretrained(args.model)
    auto = AutoModel if config.model_type == "syntax_mt_symmetric" else AutoModelForSeq2SeqLM
    model = auto.from_pretrained(args.model, attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    links = align_corpus(model, tokenizer, sources, targets, layer=args.layer, batch_size=args.batch_size,
                         method=args.symmetrize)  # fmt: skip
    text = "".join(format_pharaoh(pair) + "\n" for pair in links)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {len(links)} alignments to {args.output}", file=sys.stderr)
    return 0


def _aer(args: argparse.Namespace) -> int:
    from hf_syntax_mt.word_alignment import alignment_error_rate, read_pharaoh

    gold = read_pharaoh(args.gold, one_indexed=args.gold_one_indexed)
    hyp = read_pharaoh(args.hyp, one_indexed=args.hyp_one_indexed)
    result = alignment_error_rate(hyp, gold)
    sig = (f"aer|gold:{Path(args.gold).name}|gold-index:{1 if args.gold_one_indexed else 0}|"
           f"hyp-index:{1 if args.hyp_one_indexed else 0}|pairs:{result['pairs']}")  # fmt: skip
    print(f"AER {100 * result['aer']:.2f}  precision {100 * result['precision']:.2f}  recall "
          f"{100 * result['recall']:.2f}  ({result['predicted_links']} links, {result['sure_links']} sure gold)\n{sig}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "signature": sig}, indent=2), encoding="utf-8")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hf-syntax-mt", description="Syntax-aware NMT for Hugging Face transformers.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="train vanilla Marian vs PASCAL on the built-in synthetic pair and compare")
    d.add_argument("--output-dir", default="runs/demo")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--train-size", type=int, default=20000)
    d.add_argument("--valid-size", type=int, default=200)
    d.add_argument("--test-size", type=int, default=500)
    d.add_argument("--vocab-size", type=int, default=400)
    d.add_argument("--d-model", type=int, default=128)
    d.add_argument("--layers", type=int, default=3)
    d.add_argument("--heads", type=int, default=4)
    d.add_argument("--pascal-heads", type=int, default=2, help="PASCAL heads in the first encoder layer")
    d.add_argument("--batch-size", type=int, default=32)
    d.add_argument("--learning-rate", type=float, default=1e-3)
    d.add_argument("--max-steps", type=int, default=3000)
    d.add_argument("--budget", type=float, default=240.0, help="training seconds per model (wall clock)")
    d.add_argument("--max-length", type=int, default=128)
    d.add_argument("--threads", type=int, default=2)
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
    e.add_argument("--heatmap", help="PNG heatmap of attachment scores (layers x heads)")
    e.add_argument("--arcs", help="PNG of the gold arcs and one head's attention over a sentence")
    e.add_argument("--arcs-sentence", type=int, default=0)
    e.add_argument("--arcs-layer-head", dest="layer_head", type=int, nargs="+", help="LAYER HEAD (default: best)")
    e.add_argument("--json", help="write every number (with signatures) to this JSON file")
    e.set_defaults(func=_evaluate)

    t = sub.add_parser("translate", help="translate raw text (one sentence per line) with a saved model")
    t.add_argument("--model", required=True)
    t.add_argument("--input", default="-")
    t.add_argument("--output", default="-")
    t.add_argument("--parser", choices=["stanza", "spacy", "conllu"], help="override the parser recorded in the model")
    t.add_argument("--parser-model", help="spaCy package, stanza language or CoNLL-U path for --parser")
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--num-beams", type=int, default=4)
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
    c.add_argument("--batch-size", type=int, default=32)
    c.add_argument("--limit", type=int, help="score the first N examples only")
    c.add_argument("--json", help="also write the accuracy, per-example scores and signature to this JSON file")
    c.set_defaults(func=_contrastive)

    a = sub.add_parser("align", help="word alignments (Pharaoh 'i-j', 0-based) from a model's cross-attention")
    a.add_argument("--model", required=True)
    a.add_argument("--src", help="source sentences, one a line, words separated by spaces")
    a.add_argument("--tgt", help="target sentences, line aligned with --src")
    a.add_argument("--input", help="instead of --src/--tgt: one file of 'source ||| target' lines")
    a.add_argument("--output", default="-", help="Pharaoh file (default: standard output)")
    a.add_argument("--layer", type=int, help="decoder layer whose cross-attention is read (default: the model's "
                   "alignment layer: the last biased layer, else the last layer)")  # fmt: skip
    a.add_argument("--symmetrize", default="grow-diag-final-and",
                   choices=["forward", "backward", "intersection", "union", "grow-diag-final-and"],
                   help="with a symmetric model (both directions): how the two directions' links are combined")  # fmt: skip
    a.add_argument("--batch-size", type=int, default=32)
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
    u.add_argument("--batch-size", type=int, default=32)
    u.add_argument("--limit", type=int, help="score the first N sentences only")
    u.add_argument("--json", help="also write the result to this JSON file")
    u.set_defaults(func=_uas)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "train":  # HfArgumentParser owns the flags of `train`
        from hf_syntax_mt.train_script import main as train_main

        return train_main(argv[1:])
    logging.basicConfig(level=logging.WARNING)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
