"""Does seeing the Hansards text close the alignment study's gap to eflomal? (issue 14, a diagnostic)

eflomal aligns the 447 Hansards gold pairs together with its training data: it sees them, unlabelled, while it
learns. The study's models never do; they learn alignment from Multi30k captions only. This gives each kept model
(`alignment_study.py --keep-models`) the same advantage: it continues training on the 447 Hansards pairs with the
translation loss only (no alignment labels, no gold), then its alignments are read again on those pairs exactly as
the study reads them (forward, Naive-Att, `align_corpus` defaults) and scored on the gold, with the known / unseen
word split. The adapted models are not kept and their BLEU is not measured: they are probes of where the gap comes
from, not systems (a model trained on 447 parliamentary pairs forgets some of its captions).

    python benchmarks/studies/alignment_transductive.py --epochs 10   # -> benchmarks/results/alignment/transductive.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import RATE, THREADS, float_range  # noqa: E402
from benchmarks.common import DATA, write_json  # noqa: E402
from benchmarks.studies import alignment_study as study  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=float_range(above=0), default=10, help="passes over the 447 Hansards pairs")
    p.add_argument("--learning-rate", type=RATE, default=1e-4, help="constant, after the study's 7e-4 peak")
    p.add_argument("--units", nargs="+", help="kept models to adapt (default: every *-seed*/model under --output-dir)")
    p.add_argument("--threads", type=THREADS, default=1)
    p.add_argument("--output-dir", default=str(study.ROOT / "runs" / "alignment_study"))
    p.add_argument("--results", default=str(study.RESULTS))
    p.add_argument("--data", default=str(DATA))
    a = p.parse_args(argv)
    import torch
    from datasets import Dataset
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt import SymmetricTranslationConfig
    from hf_syntax_mt.alignment import align_corpus, alignment_error_rate, read_pharaoh
    from hf_syntax_mt.data import DataCollatorForSyntaxMT
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
    from hf_syntax_mt.training import SyntaxMTTrainer
    from hf_syntax_mt.training.script_args import SyntaxMTTrainingArguments

    torch.set_num_threads(a.threads)
    args = study.parse_args(["--results", a.results, "--data", a.data, "--output-dir", a.output_dir])
    r, data = args.recipe, study.prepared_data(args)
    gold = read_pharaoh(Path(a.data) / "alignment-gold-en-fr" / "hansards.gold", one_indexed=True)
    en, fr = data["hansards"]
    src, tgt = [s.split() for s in en], [t.split() for t in fr]
    vocab = tuple({w for s in side for w in s.split()} for side in data["train"])
    dirs = [Path(a.output_dir) / u / "model" for u in a.units] if a.units else sorted(
        Path(a.output_dir).glob("*-seed*/model"))  # fmt: skip

    def scores(model, tokenizer) -> dict:
        links = align_corpus(model, tokenizer, src, tgt, method="forward", progress=False)
        split = study.known_word_aer(links, gold, data["hansards"], vocab)
        return {"aer": round(alignment_error_rate(links, gold)["aer"], 4),
                **{f"aer_{part}": round(split[part]["aer"], 4) for part in ("known", "unseen")}}  # fmt: skip

    units = {}
    for model_dir in dirs:
        name = model_dir.parent.name
        if isinstance(AutoConfig.from_pretrained(model_dir), SymmetricTranslationConfig):
            print(f"{name}: skipped (the symmetric model needs its own collator; not adapted here)")
            continue
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager")
        before = scores(model, tokenizer)
        hansards = Dataset.from_dict({"source": list(en), "target": list(fr)})
        hansards = hansards.map(SyntaxMTPreprocessor(tokenizer, columns=(), max_source_length=r["max_length"], max_target_length=r["max_length"]), batched=True,
                                remove_columns=["source", "target"], desc="tokenize")  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            training_args = SyntaxMTTrainingArguments(
                output_dir=tmp, num_train_epochs=a.epochs, max_tokens=r["max_tokens"], learning_rate=a.learning_rate,
                lr_scheduler_type="constant", weight_decay=0.0, adam_beta2=r["adam_beta2"],
                max_grad_norm=r["max_grad_norm"], seed=0, logging_steps=10, save_strategy="no", report_to="none",
                use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
            )  # fmt: skip
            trainer = SyntaxMTTrainer(model=model, args=training_args, train_dataset=hansards,
                                      data_collator=DataCollatorForSyntaxMT(tokenizer, model=model))  # fmt: skip
            start = time.perf_counter()
            result = trainer.train()
            minutes = (time.perf_counter() - start) / 60
        model.eval()
        after = scores(model, tokenizer)
        units[name] = {"before": before, "after": after, "steps": trainer.state.global_step,
                       "train_loss": round(result.training_loss, 4), "train_minutes": round(minutes, 2)}  # fmt: skip
        print(f"{name}: AER {100 * before['aer']:.1f} -> {100 * after['aer']:.1f} after {trainer.state.global_step} "
              f"steps on the Hansards pairs (known {100 * after['aer_known']:.1f}, unseen "
              f"{100 * after['aer_unseen']:.1f})", flush=True)  # fmt: skip
    record = {"pairs": len(en), "epochs": a.epochs, "learning_rate": a.learning_rate, "schedule": "constant",
              "loss": "translation only (label smoothing of each model's config); no alignment labels",
              "read": "forward, Naive-Att, align_corpus defaults (as the study)", "units": units,
              **study.software(), "commit": study.git_commit()}  # fmt: skip
    print(write_json(Path(a.results) / "transductive.json", record, indent=1, newline=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
