"""DBSA (encoder + decoder) with the synchronous loss vs vanilla `MarianMTModel` of the same dims: training-step
and greedy-generation throughput, interleaved in one process, medians and ratios.

Training includes everything the method adds: bi-affine heads on the eager path, the source and target parse
losses (L_dep) and the synchronous loss (Eqs. 7-9) with the eager cross-attention of layer l_sync. Generation
needs no parse: the bi-affine heads run in the SDPA kernel with Q U.

    python benchmarks/speed/bench_dbsa.py                      # writes benchmarks/results/dbsa.json
    python benchmarks/speed/bench_dbsa.py --quick

Targets (issue 3): training >= 0.90x, generation >= 0.95x vanilla.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from transformers import MarianMTModel

from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.demo.synthetic_grammar import generate_corpus
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.common import (  # noqa: E402
    add_common_arguments,
    medians,
    parse_quick,
    result_header,
    time_generation,
    time_training,
    timing_fields,
    write_json,
)

TARGETS = {"train_ratio": 0.90, "generate_ratio": 0.95}


def make_batch(args):
    """Real synthetic sentences with gold source and target DBSA heads."""
    pairs = generate_corpus(
        max(400, args.batch_size), seed=args.seed, min_words=args.min_words, max_words=args.max_words
    )
    tokenizer = train_tokenizer([p.source for p in pairs] + [p.target for p in pairs], vocab_size=args.vocab_size)
    rows = []
    for p in pairs[: args.batch_size]:
        src = align_parse(tokenizer, p.source_tree.to_parsed(p.source), text=p.source)
        tgt = align_parse(tokenizer, p.target_tree.to_parsed(p.target), text=p.target, target=True)
        rows.append({"input_ids": src["input_ids"], "attention_mask": src["attention_mask"],
                     "dbsa_heads": src["dbsa_heads"], "labels": tgt["input_ids"],
                     "decoder_dbsa_heads": tgt["decoder_dbsa_heads"]})  # fmt: skip
    return tokenizer, DataCollatorForSyntaxMT(tokenizer)(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(p, "benchmarks/results/dbsa.json")
    args = parse_quick(p)
    tokenizer, batch = make_batch(args)
    dims = dict(d_model=args.d_model, layers=args.layers, heads=args.heads, ffn_dim=4 * args.d_model, dropout=0.1)
    first = [1] + [0] * (args.layers - 1)  # the paper: one DBSA head in layer 1 of each side
    dbsa = build_model(model_config(tokenizer, encoder_dbsa_heads=first, decoder_dbsa_heads=first,
                                    sync_loss_weight=0.5, **dims), seed=args.seed)  # fmt: skip
    vanilla = MarianMTModel(model_config(tokenizer, marian=True, **dims))
    vanilla.load_state_dict(dbsa.state_dict(), strict=False)  # every weight but U
    models = {"vanilla": vanilla, "dbsa_sync": dbsa}
    inputs = {"vanilla": {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}, "dbsa_sync": batch}
    out = dbsa(**batch)
    assert out.dbsa_loss is not None and out.sync_loss is not None, "the auxiliary losses must be computed"

    train_times = time_training(models, inputs, args)
    gen_inputs = {
        name: {k: v for k, v in inputs[name].items() if k in ("input_ids", "attention_mask")} for name in models
    }
    gen_times = time_generation(models, gen_inputs, args, max(5, args.rounds // 2))
    med, gmed = medians(train_times), medians(gen_times)
    n_src, n_tgt = int(batch["attention_mask"].sum()), int((batch["labels"] != -100).sum())
    ratios = {"train_ratio": med["vanilla"] / med["dbsa_sync"], "generate_ratio": gmed["vanilla"] / gmed["dbsa_sync"]}
    result = {
        **result_header(args, "dbsa_sync_vs_vanilla_marian", "dbsa_sync", n_src, n_tgt),
        **timing_fields(args, med, gmed, n_src, n_tgt),
        "ratios": ratios,
        "targets": TARGETS,
        "meets_targets": {k: ratios[k] >= v for k, v in TARGETS.items()},
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result)
    print(
        json.dumps(
            {"ratios": ratios, "train": med, "generate": gmed, "meets_targets": result["meets_targets"]}, indent=2
        )
    )


if __name__ == "__main__":
    main()
