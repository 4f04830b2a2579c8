"""Does a DBSA head learn to parse? Train a small model with one encoder DBSA head on UD sentences and read its trees.

The model is trained to copy the sentence (a task that needs no alignment) plus the DBSA parse loss L_dep (Eq. 5)
on the gold UD trees, for a wall-clock budget. The trees read from the head (`hf_syntax_mt.evaluation.probing`) are then
scored (UAS) against the gold trees of the treebank's test file, next to the untrained model and two trivial
baselines (every word attached to its left / right neighbour).

    git clone --depth 1 https://github.com/UniversalDependencies/UD_English-EWT
    python scripts/probe_dbsa_ud.py --treebank UD_English-EWT --budget 300

Writes the figures as JSON (default runs/probe_dbsa_ud.json).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import Seq2SeqTrainingArguments

from hf_syntax_mt.data import DataCollatorForSyntaxMT, SyntaxMTPreprocessor
from hf_syntax_mt.data.parsers import read_conllu
from hf_syntax_mt.evaluation.probing import _representative_heads, attachment_score, uas_against_conllu
from hf_syntax_mt.training import SyntaxMTTrainer, TimeBudgetCallback, build_model, model_config, train_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, SECONDS, SEED, THREADS, refuse_overwriting  # noqa: E402


def neighbour_baseline(sentences, side: int) -> dict:
    """UAS when every word is attached to its left (`side=-1`) or right (`+1`) neighbour (the edge word: root)."""
    gold = [_representative_heads(s) for s in sentences]
    predicted = []
    for g in gold:
        n = len(g)
        predicted.append([w + 1 + side if 1 <= w + 1 + side <= n else 0 for w in range(n)])
    return attachment_score(predicted, gold)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--treebank", required=True, help="a UD treebank's folder (its *-ud-train.conllu and "
                   "*-ud-test.conllu), e.g. a git clone of github.com/UniversalDependencies/UD_English-EWT")  # fmt: skip
    p.add_argument("--train-sentences", type=POSITIVE, default=6000)
    p.add_argument("--test-sentences", type=POSITIVE, default=500)
    p.add_argument("--budget", type=SECONDS, default=300.0, help="training seconds")
    p.add_argument("--max-length", type=POSITIVE, default=64)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--threads", type=THREADS, default=2)
    p.add_argument("--output", default="runs/probe_dbsa_ud.json")
    args = p.parse_args()
    refuse_overwriting(p, args, ["output"], folders=["treebank"])
    torch.set_num_threads(args.threads)

    train_file = glob.glob(os.path.join(args.treebank, "*-ud-train.conllu"))[0]
    test_file = glob.glob(os.path.join(args.treebank, "*-ud-test.conllu"))[0]
    train = [s for s in read_conllu(train_file) if s.words][: args.train_sentences]
    test = [s for s in read_conllu(test_file) if s.words][: args.test_sentences]
    tokenizer = train_tokenizer([s.text for s in train], vocab_size=4000)
    config = model_config(tokenizer, d_model=128, layers=3, heads=4, ffn_dim=512, max_position_embeddings=128,
                          dropout=0.1, encoder_dbsa_heads=[1, 0, 0], dbsa_loss_weight=1.0)  # fmt: skip
    model = build_model(config, seed=args.seed)

    data = Dataset.from_dict({"source": [s.text for s in train], "target": [s.text for s in train],
                              "source_parse": [s.to_dict() for s in train]})  # fmt: skip
    prep = SyntaxMTPreprocessor.for_config(config, tokenizer, source_parse_column="source_parse",
                                           max_source_length=args.max_length, max_target_length=args.max_length)  # fmt: skip
    data = data.map(prep, batched=True, with_indices=True, remove_columns=data.column_names, desc="Aligning")

    test_path = Path(args.output).with_suffix(".test.conllu")
    test_path.parent.mkdir(parents=True, exist_ok=True)
    with open(test_file, encoding="utf-8") as f:  # the first N test sentences, as CoNLL-U
        blocks = f.read().strip().split("\n\n")[: args.test_sentences]
    test_path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")

    untrained = uas_against_conllu(model, tokenizer, test_path, max_length=args.max_length)
    budget = TimeBudgetCallback(args.budget)
    trainer = SyntaxMTTrainer(
        model=model,
        args=Seq2SeqTrainingArguments(
            output_dir="runs/probe_dbsa_ud_trainer",
            per_device_train_batch_size=32,
            learning_rate=1e-3,
            warmup_steps=100,
            max_steps=100000,
            logging_steps=50,
            save_strategy="no",
            report_to=[],
            seed=args.seed,
            use_cpu=True,
            train_sampling_strategy="group_by_length",
        ),  # fmt: skip
        train_dataset=data,
        data_collator=DataCollatorForSyntaxMT(tokenizer),
        callbacks=[budget],
    )
    start = time.perf_counter()
    trainer.train()
    trained = uas_against_conllu(model, tokenizer, test_path, max_length=args.max_length)
    result = {
        "treebank": os.path.basename(os.path.normpath(args.treebank)),
        "train_sentences": len(train),
        "test_sentences": len(test),
        "training_seconds": round(time.perf_counter() - start, 1),
        "steps": trainer.state.global_step,
        "last_logs": [h for h in trainer.state.log_history if "dbsa_loss" in h][-1:],
        "uas_trained_dbsa_head": trained,
        "uas_untrained": untrained,
        "uas_left_neighbour": neighbour_baseline(test, -1),
        "uas_right_neighbour": neighbour_baseline(test, +1),
    }
    Path(args.output).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
