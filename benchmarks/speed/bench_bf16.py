"""bf16 autocast against fp32, per registered method, at the Multi30k study's model size (issue 26, item 1).

For every method (and vanilla: no method), one model of the study's dims (d_model 256, 3+3 layers, 4 heads, FFN 1024)
on one real batch of the study's size (the first Multi30k training pairs up to about 2,500 padded tokens, with their
spaCy source and target trees from `multi30k-parsed`; documents of 4 consecutive lines for the document context;
label t aligned to source t for guided alignment), timed in one process with the two precisions interleaved:

- a training step (forward, backward, AdamW) in fp32 and under `torch.autocast("cpu", dtype=torch.bfloat16)` (what
  Trainer's `--bf16` does on the CPU), medians over rounds, as source+target tokens per second;
- greedy generation of 32 new tokens for the batch's sources, in fp32 and under bf16 autocast;
- the loss of the same batch in both precisions (same weights) and whether the greedy outputs agree.

    python benchmarks/speed/bench_bf16.py                  # -> benchmarks/results/bf16/bf16-{native,emulated}.{json,md}
    python benchmarks/speed/bench_bf16.py --quick          # d_model 128, fewer rounds (plumbing)
    python benchmarks/speed/bench_bf16.py --only vanilla pascal

Run on cores nobody else uses for clean tokens/s; under load the *ratio* stays meaningful (the two precisions are
interleaved round by round), and the load average is recorded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, THREADS, apply_quick, refuse_overwriting  # noqa: E402
from benchmarks.common import DATA, RESULTS, cpu_has_native_bf16, cpu_name, git_commit, software, write_json  # noqa: E402

#: the registered methods at the study's size (3 layers): the study's settings where it has one
METHODS = {
    "vanilla": {},
    "pascal": dict(encoder_pascal_heads=[2, 0, 0]),
    "tree": dict(encoder_tree_heads=[1, 0, 0]),
    "biaffine": dict(encoder_lisa_heads=[1, 0, 0], encoder_dbsa_heads=[1, 0, 0], decoder_dbsa_heads=[1, 0, 0]),
    "synchronous": dict(encoder_dbsa_heads=[1, 0, 0], decoder_dbsa_heads=[1, 0, 0], dbsa_loss_weight=0.5,
                        sync_loss_weight=0.5, decoder_dbsa_full_context=True),
    "input_features": dict(input_features=["pos", "deprel", "subword_tag"]),
    "alignment_bias": dict(alignment_bias_layers=[0, 1, 2]),
    "fertility": dict(global_fertility_weight=0.3),
    "document_context": dict(context_sentences=1),
    "guided_alignment": dict(guided_alignment_weight=0.5),
}  # fmt: skip


def real_batch(tokenizer, max_tokens: int, data: Path, max_length: int = 64) -> dict:
    """The first Multi30k training pairs whose padded source+target size stays within ``max_tokens``, with every
    column a method reads (parses on both sides, features, context of 4-line documents, diagonal alignment)."""
    import torch
    from datasets import Dataset

    from hf_syntax_mt.data import DataCollatorForSyntaxMT
    from hf_syntax_mt.data.documents import DocumentContext
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
    from hf_syntax_mt.data.readers import iter_conllu, read_lines

    n = 256
    src, tgt = [], []
    for trees, out in ((data / "multi30k-parsed" / "train.en.conllu.gz", src),
                       (data / "multi30k-parsed" / "train.de.conllu.gz", tgt)):  # fmt: skip
        for sentence in iter_conllu(trees):
            out.append(sentence.to_dict())
            if len(out) == n:
                break
    sources = read_lines(data / "multi30k" / "train.en")[:n]
    targets = read_lines(data / "multi30k" / "train.de")[:n]
    docs = [i // 4 for i in range(n)]
    context = DocumentContext(sources, docs, k=1)
    ds = Dataset.from_dict({"source": sources, "target": targets, "source_parse": src, "target_parse": tgt,
                            "context": [context.context(i) for i in range(n)]})  # fmt: skip
    fn = SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse", target_parse_column="target_parse",
                              max_source_length=max_length, max_target_length=max_length, context_column="context")  # fmt: skip
    ds = ds.map(fn, batched=True, with_indices=True, remove_columns=ds.column_names)
    rows, width = [], 0
    for row in ds:
        width = max(width, len(row["input_ids"]), len(row["labels"]))
        if (len(rows) + 1) * width * 2 > max_tokens:
            break
        rows.append(row)
    batch = DataCollatorForSyntaxMT(tokenizer)(rows)
    labels = batch["labels"]
    aligned = torch.arange(labels.shape[1]).expand_as(labels).clone()  # label t -> source t
    aligned[(labels == -100) | (aligned >= batch["input_ids"].shape[1])] = -100
    batch["decoder_alignment"] = aligned
    return dict(batch)


SUPERVISION = ("labels", "lisa_parents", "dbsa_heads", "decoder_dbsa_heads", "decoder_alignment")


def inputs_for(model, batch: dict, train: bool) -> dict:
    """Training: the whole batch (a model ignores the columns of methods it does not have, as in the tiny-config
    tester); generation: the batch without the supervision columns."""
    return dict(batch) if train else {k: v for k, v in batch.items() if k not in SUPERVISION}


def measure(name: str, options: dict, tokenizer, batch: dict, args) -> dict:
    import torch

    from hf_syntax_mt.training import build_model, model_config

    dims = dict(d_model=args.d_model, layers=3, heads=4, ffn_dim=4 * args.d_model, dropout=0.1)
    model = build_model(model_config(tokenizer, **dims, **options), seed=0)
    train_inputs, gen_inputs = inputs_for(model, batch, True), inputs_for(model, batch, False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)  # tiny steps: the weights hardly move across rounds

    def step(bf16: bool):
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**train_inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def generate(bf16: bool):
        model.eval()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return model.generate(**gen_inputs, max_new_tokens=args.new_tokens, num_beams=1, do_sample=False)

    times = {"train": {False: [], True: []}, "generate": {False: [], True: []}}
    for kind, fn, rounds in (("train", step, args.rounds), ("generate", generate, max(2, args.rounds // 2))):
        fn(False), fn(True)  # warm-up
        for r in range(rounds):
            for bf16 in (False, True) if r % 2 == 0 else (True, False):
                start = time.perf_counter()
                fn(bf16)
                times[kind][bf16].append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        fp32_loss = model(**train_inputs).loss.item()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16_loss = model(**train_inputs).loss.item()
    greedy = {bf16: generate(bf16) for bf16 in (False, True)}
    # the share of rows whose greedy tokens are the same in both precisions (lengths differ: 0)
    same_shape = greedy[False].shape == greedy[True].shape
    agree = float((greedy[False] == greedy[True]).all(dim=1).float().mean()) if same_shape else 0.0
    n_tokens = int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum())
    n_rows = batch["input_ids"].shape[0]
    med = {k: {p: statistics.median(v) for p, v in d.items()} for k, d in times.items()}
    return {
        "method": name, "options": options,
        "train_step_seconds": {"fp32": med["train"][False], "bf16": med["train"][True]},
        "train_tokens_per_second": {"fp32": n_tokens / med["train"][False], "bf16": n_tokens / med["train"][True]},
        "train_speedup": med["train"][False] / med["train"][True],
        "generate_seconds": {"fp32": med["generate"][False], "bf16": med["generate"][True]},
        "generate_tokens_per_second": {p: n_rows * args.new_tokens / med["generate"][b]
                                       for p, b in (("fp32", False), ("bf16", True))},
        "generate_speedup": med["generate"][False] / med["generate"][True],
        "loss": {"fp32": fp32_loss, "bf16": bf16_loss, "relative_difference": abs(bf16_loss - fp32_loss) / fp32_loss},
        "greedy_rows_identical": agree,
    }  # fmt: skip


def markdown(result: dict) -> str:
    lines = ["| method | train tokens/s fp32 / bf16 | train speed-up | greedy tokens/s fp32 / bf16 | greedy speed-up | "
             "loss fp32 / bf16 (rel. diff) | greedy rows identical |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in result["methods"]:
        t, g, loss = r["train_tokens_per_second"], r["generate_tokens_per_second"], r["loss"]
        lines.append(f"| {r['method']} | {t['fp32']:,.0f} / {t['bf16']:,.0f} | {r['train_speedup']:.2f}x | "
                     f"{g['fp32']:,.0f} / {g['bf16']:,.0f} | {r['generate_speedup']:.2f}x | {loss['fp32']:.4f} / "
                     f"{loss['bf16']:.4f} ({loss['relative_difference']:.2%}) | {r['greedy_rows_identical']:.0%} |")  # fmt: skip
    b = result["batch"]
    native = {True: "native bf16: AVX512-BF16/AMX", False: "no native bf16: emulated"}.get(
        result.get("cpu_native_bf16"), "native bf16 not recorded"
    )
    lines += ["", f"One batch of {b['rows']} Multi30k pairs ({b['tokens']} source+target tokens, padded "
              f"{b['padded']}), d_model {result['d_model']}, 3+3 layers, {result['threads']} thread(s) on "
              f"{result['cpu']} ({native}), torch {result['torch']}; medians over {result['rounds']} interleaved rounds "
              f"(generation: {max(2, result['rounds'] // 2)}, {result['new_tokens']} new tokens, greedy). Load "
              f"average before / after: {result['load_average_before'][0]:.2f} / {result['load_average_after'][0]:.2f}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=THREADS, default=1)
    p.add_argument("--d-model", type=POSITIVE, default=256)
    p.add_argument("--max-tokens", type=POSITIVE, default=2500, help="padded source+target tokens of the batch (the study's "
                   "token batches)")  # fmt: skip
    p.add_argument("--rounds", type=POSITIVE, default=3)
    p.add_argument("--new-tokens", type=POSITIVE, default=32)
    p.add_argument("--only", nargs="+", choices=list(METHODS))
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--output", default=None, help="default: results/bf16/bf16-native.json on hardware that computes "
                   "bf16 natively (AVX512-BF16/AMX), else bf16-emulated.json: the two never overwrite each other")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="d_model 128, 2 rounds, 600-token batch")
    args = p.parse_args(argv)
    args.output = args.output or str(
        RESULTS / "bf16" / f"bf16-{'native' if cpu_has_native_bf16() else 'emulated'}.json"
    )
    refuse_overwriting(p, args, ["output"], folders=["data"])
    apply_quick(p, args, argv, dict(d_model=128, rounds=2, max_tokens=600, new_tokens=8))
    import torch

    from hf_syntax_mt.training import train_tokenizer

    torch.set_num_threads(args.threads)
    data = Path(args.data)
    if not (data / "multi30k-parsed" / "train.en.conllu.gz").is_file():
        raise SystemExit(f"missing {data / 'multi30k-parsed'}: the benchmark reads ../shared/data")
    from hf_syntax_mt.data.readers import read_lines

    texts = read_lines(data / "multi30k" / "train.en")[:5000] + read_lines(data / "multi30k" / "train.de")[:5000]
    tokenizer = train_tokenizer(texts, vocab_size=8000)
    batch = real_batch(tokenizer, args.max_tokens, data)
    load_before = os.getloadavg()
    results = []
    for name in args.only or list(METHODS):
        print(f"=== {name}", flush=True)
        results.append(measure(name, METHODS[name], tokenizer, batch, args))
        r = results[-1]
        print(f"    train {r['train_speedup']:.2f}x, greedy {r['generate_speedup']:.2f}x, loss rel. diff "
              f"{r['loss']['relative_difference']:.2%}", flush=True)  # fmt: skip
        write_results(args, batch, load_before, results)  # after every method: a stopped run keeps what it measured
    return 0


def write_results(args, batch, load_before, results) -> None:
    result = {
        "benchmark": "bf16_vs_fp32", "quick": args.quick, "d_model": args.d_model, "threads": args.threads,
        "rounds": args.rounds, "new_tokens": args.new_tokens, "cpu": cpu_name(),
        "cpu_native_bf16": cpu_has_native_bf16(), **software(), "commit": git_commit(),
        "batch": {"rows": int(batch["input_ids"].shape[0]),
                  "tokens": int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum()),
                  "padded": int(batch["input_ids"].numel() + batch["labels"].numel())},
        "load_average_before": load_before, "load_average_after": os.getloadavg(), "methods": results,
    }  # fmt: skip
    out = write_json(args.output, result, indent=1, newline=True)
    Path(out).with_suffix(".md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
