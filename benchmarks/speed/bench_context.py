"""Document-level context (issue 5) vs the same model without context: training-step and generation throughput,
interleaved in one process, medians and ratios.

The context model is the paper's best setting: k = 2 previous source sentences, a one-layer context encoder
(N_c = 1), context attention in every encoder and decoder layer, context gating. The model without context is a
`MarianMTModel` with the same dims and the same sentence-level weights. Each batch sentence's
context is the two sentences before it in one long synthetic document, so the context is about twice as long as the
sentence itself.

Training is timed twice for the context model: with every parameter trainable, and in step 2 of the two-step
training (Section 2.4: sentence-level parameters frozen, the way the paper trains its document-level parameters).
Generation is greedy (and beam search with `--num-beams`).

    python benchmarks/speed/bench_context.py                  # writes benchmarks/results/context.json
    python benchmarks/speed/bench_context.py --quick

Targets (issue 5): training >= 0.85x and decoding >= 0.85x the throughput of the model without context. Issue 27
judges the ratios against what the method's arithmetic allows: the JSON has `flop_bound` (the throughput ratio if
time followed matmul FLOPs, `hf_syntax_mt.methods.context_cost`), `ratio_of_bound` and the load average; for
decoding also the bound of each phase (encoder pass, steps) and `generate_phase_bound`, which keeps each phase at
the sentence model's own speed in it (stricter: a step's small matmuls run far slower than the encoder's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from transformers import MarianMTModel

from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.data.documents import encode_context
from hf_syntax_mt.demo.synthetic_grammar import generate_corpus
from hf_syntax_mt.methods.context_cost import context_flops
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BEAMS, POSITIVE  # noqa: E402
from benchmarks.common import (  # noqa: E402
    add_common_arguments,
    generate,
    medians,
    parse_quick,
    result_header,
    time_generation,
    time_interleaved,
    time_training,
    timing_fields,
    write_json,
)

TARGETS = {"train_ratio": 0.85, "generate_ratio": 0.85}


def make_batch(args):
    """Synthetic sentences in one document order; context = the previous `k` sentences."""
    pairs = generate_corpus(max(400, args.batch_size + args.k), seed=args.seed, min_words=args.min_words,
                            max_words=args.max_words)  # fmt: skip
    tokenizer = train_tokenizer([p.source for p in pairs] + [p.target for p in pairs], vocab_size=args.vocab_size)
    rows = []
    for i in range(args.k, args.k + args.batch_size):
        context = encode_context(tokenizer, [p.source for p in pairs[i - args.k : i]], args.max_context_length)
        rows.append({"input_ids": tokenizer(pairs[i].source)["input_ids"],
                     "labels": tokenizer(text_target=pairs[i].target)["input_ids"],
                     "context_input_ids": context, "context_attention_mask": [1] * len(context)})  # fmt: skip
    batch = DataCollatorForSyntaxMT(tokenizer)(rows)
    batch["attention_mask"] = (batch["input_ids"] != tokenizer.pad_token_id).long()
    return tokenizer, batch


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(p, "benchmarks/results/context.json")
    p.add_argument("--k", type=POSITIVE, default=2, help="previous sentences of context (paper: 2)")
    p.add_argument("--context-encoder-layers", type=POSITIVE, default=1, help="N_c (paper: 1)")
    p.add_argument("--max-context-length", type=POSITIVE, default=256)
    p.add_argument("--num-beams", type=BEAMS, default=1)
    args = parse_quick(p)
    tokenizer, batch = make_batch(args)
    dims = dict(d_model=args.d_model, layers=args.layers, heads=args.heads, ffn_dim=4 * args.d_model, dropout=0.1)
    context_model = build_model(model_config(tokenizer, context_sentences=args.k,
                                             context_encoder_layers=args.context_encoder_layers, **dims), seed=args.seed)  # fmt: skip
    frozen = build_model(context_model.config, seed=args.seed)
    frozen.load_state_dict(context_model.state_dict())
    frozen.freeze_sentence_level_parameters()
    vanilla = MarianMTModel(model_config(tokenizer, marian=True, **dims))
    vanilla.load_state_dict(context_model.state_dict(), strict=False)  # every sentence-level weight
    models = {"vanilla": vanilla, "document_context": context_model, "document_context_step2": frozen}
    plain = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
    inputs = {"vanilla": plain, "document_context": batch, "document_context_step2": batch}

    train_times = time_training(models, inputs, args)
    gen_models = {name: models[name] for name in ("vanilla", "document_context")}
    gen_inputs = {name: {k: v for k, v in inputs[name].items() if k != "labels"} for name in gen_models}

    def decode(model, inputs, new_tokens):
        if args.num_beams == 1:
            return generate(model, inputs, new_tokens)
        return model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              num_beams=args.num_beams, do_sample=False)  # fmt: skip

    gen_times = time_generation(gen_models, gen_inputs, args, max(5, args.rounds // 2), decode=decode)
    with torch.inference_mode():
        # where decoding time goes: the encoder pass (with the context encoder and every context key/value), once
        enc_times = time_interleaved(
            {name: (lambda n=name: gen_models[n].get_encoder()(**gen_inputs[n])) for name in gen_models},
            max(5, args.rounds // 2), 1, "cpu",
        )  # fmt: skip
    med, gmed, emed = medians(train_times), medians(gen_times), medians(enc_times)
    n_src, n_tgt = int(batch["attention_mask"].sum()), int((batch["labels"] != -100).sum())
    n_ctx = int(batch["context_attention_mask"].sum())
    ratios = {
        "encoder_ratio": emed["vanilla"] / emed["document_context"],
        "train_ratio": med["vanilla"] / med["document_context"],
        "train_step2_ratio": med["vanilla"] / med["document_context_step2"],
        "generate_ratio": gmed["vanilla"] / gmed["document_context"],
        # the decoding steps alone: generation minus the encoder pass (approximate: two medians subtracted)
        "step_ratio": (gmed["vanilla"] - emed["vanilla"]) / (gmed["document_context"] - emed["document_context"]),
    }
    # the bound: the throughput ratio the added matmul FLOPs allow (padded lengths, as the tensors have them)
    lengths = dict(source_len=batch["input_ids"].shape[1], context_len=batch["context_input_ids"].shape[1],
                   batch=args.batch_size, context_tokens=n_ctx)  # fmt: skip
    flops = context_flops(context_model.config, target_len=batch["labels"].shape[1], **lengths)  # training
    decode_flops = context_flops(context_model.config, target_len=args.new_tokens, **lengths)  # greedy, new tokens
    bounds = {"train_ratio": flops.train_bound, "generate_ratio": decode_flops.decode_bound,
              "encoder_ratio": decode_flops.encoder_bound, "step_ratio": decode_flops.step_bound}  # fmt: skip
    # stricter for decoding: each phase (encoder pass, steps) at the sentence model's own speed in that phase
    phase_bound = decode_flops.phase_bound(emed["vanilla"], gmed["vanilla"] - emed["vanilla"])
    result = {
        **result_header(args, "context_vs_sentence_level", "document_context", n_src, n_tgt),
        "context_tokens": n_ctx,
        **timing_fields(args, med, gmed, n_src, n_tgt),
        "encoder_seconds_median": emed,
        "decoding_step_seconds": {k: (gmed[k] - emed[k]) / args.new_tokens for k in gmed},  # approximate
        "ratios": ratios,
        "flop_bound": bounds,  # what time proportional to matmul FLOPs would give (methods/context_cost.py)
        "ratio_of_bound": {k: ratios[k] / v for k, v in bounds.items()},
        "generate_phase_bound": phase_bound,
        "generate_ratio_of_phase_bound": ratios["generate_ratio"] / phase_bound,
        "flops": {
            "train": {k: v for k, v in flops.as_dict().items() if not k.startswith("decode")},
            "decode": {k: v for k, v in decode_flops.as_dict().items() if not k.startswith("train")},
        },
        "load_average": list(os.getloadavg()),  # the cores are shared: the 1, 5 and 15 minute load when it ended
        "targets": TARGETS,
        "meets_targets": {k: ratios[k] >= v for k, v in TARGETS.items()},
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result)
    print(json.dumps({"ratios": ratios, "flop_bound": bounds, "generate_phase_bound": phase_bound, "load_average": result["load_average"], "train": med, "generate": gmed, "encoder": emed,
                      "decoding_step": result["decoding_step_seconds"], "meets_targets": result["meets_targets"],
                      "tokens": {"source": n_src, "target": n_tgt, "context": n_ctx}}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
