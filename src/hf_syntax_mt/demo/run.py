"""`hf-syntax-mt demo`: train a vanilla model (Marian's architecture, no syntax) and a PASCAL model of the same size
and init for the same number of steps on
the demo language (`hf_syntax_mt.demo.language`), then print BLEU/chrF on the test set and the accuracy on the
attachment diagnostic (`hf_syntax_mt.demo.diagnostic`), one row per model; save the PASCAL model, translate raw
sentences through its pipeline, and draw the loss and diagnostic curves."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..errors import UserError, file_error

SYSTEMS = ("vanilla", "PASCAL")
PIPELINE_SENTENCES = 4


@dataclass
class DemoSettings:
    """Every setting of a demo run (the CLI's flags)."""

    output_dir: str = "runs/demo"
    seed: int = 0
    train_size: int = 20000
    test_size: int = 500
    diagnostic_size: int = 100  # source sentences; each is scored with both of its trees
    vocab_size: int = 160
    d_model: int = 128
    layers: int = 2
    heads: int = 4
    pascal_heads: int = 2
    pascal_layer: int = 0
    pascal_sigma: float = 1.0
    max_tokens: int = 1024
    learning_rate: float = 1e-3
    warmup_steps: int = 200
    max_steps: int = 1200
    budget: float | None = None  # optional wall-clock seconds per model
    curve_every: int = 250  # steps between diagnostic points of the curve (0: none)
    threads: int = 1  # 2 threads collapse when the cores are shared (README, "The demo")
    systems: tuple[str, ...] = field(default_factory=lambda: SYSTEMS)

    def __post_init__(self):
        if not 0 <= self.pascal_layer < self.layers:
            raise UserError(f"pascal_layer={self.pascal_layer} must be in [0, layers={self.layers})")
        if not 0 < self.pascal_heads <= self.heads:
            raise UserError(f"pascal_heads={self.pascal_heads} must be in 1..heads={self.heads}")
        unknown = set(self.systems) - set(SYSTEMS)
        if unknown or not self.systems:
            raise UserError(f"systems must be a non-empty subset of {SYSTEMS}, got {self.systems}")


class DiagnosticCurve(TrainerCallback):
    """Every `every` steps, greedy-decode the diagnostic batch and record `(step, accuracy)`; the time it takes is
    kept apart (`seconds`) so the training time can leave it out."""

    def __init__(self, every: int, batch: dict, items, tokenizer, max_length: int):
        self.every, self.batch, self.items, self.tokenizer = every, batch, items, tokenizer
        self.max_length, self.points, self.seconds = max_length, [], 0.0

    def evaluate(self, model) -> dict:
        from .diagnostic import score_diagnostic

        was_training = model.training
        model.eval()
        with torch.no_grad():
            ids = model.generate(**self.batch, max_length=self.max_length, num_beams=1, do_sample=False)
        model.train(was_training)
        return score_diagnostic(self.tokenizer.batch_decode(ids, skip_special_tokens=True), self.items)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and model is not None and state.global_step % self.every == 0:
            start = time.perf_counter()
            self.points.append((state.global_step, self.evaluate(model)["accuracy"]))
            self.seconds += time.perf_counter() - start
        return control


def _prepare(settings: DemoSettings, out: Path):
    """Data, tokenizer and the tokenized splits (train, test, diagnostic)."""
    from ..data import SyntaxMTPreprocessor
    from ..training import train_tokenizer
    from .diagnostic import build_diagnostic
    from .language import generate_corpus, to_dataset, write_conllu
    from .synthetic_corpus import gold_source_parses

    pairs = generate_corpus(settings.train_size + settings.test_size, seed=settings.seed)
    train, test = pairs[: settings.train_size], pairs[settings.train_size :]
    items = build_diagnostic(settings.diagnostic_size, seed=settings.seed + 1, exclude={p.source for p in train})
    conllu = write_conllu(out / "data" / "test.src.conllu", test, "test")
    for name, rows in (("train", train), ("test", test)):
        (out / "data" / f"{name}.src").write_text("".join(p.source + "\n" for p in rows), encoding="utf-8")
        (out / "data" / f"{name}.tgt").write_text("".join(p.target + "\n" for p in rows), encoding="utf-8")
    tokenizer = train_tokenizer([p.source for p in train] + [p.target for p in train], settings.vocab_size)
    raw = to_dataset({"train": train, "test": test, "diagnostic": [item.pair for item in items]})
    data = raw.map(gold_source_parses, batched=True, desc="Collecting gold parses")
    preprocess = SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse", columns=["parent_positions"])
    data = data.map(preprocess, batched=True, remove_columns=data["train"].column_names, desc="Mapping trees")
    return raw, data, items, tokenizer, conllu


def _configs(settings: DemoSettings, tokenizer, conllu: Path) -> dict:
    from ..training import model_config

    dims = dict(d_model=settings.d_model, layers=settings.layers, heads=settings.heads, ffn_dim=4 * settings.d_model)
    pascal = [0] * settings.layers
    pascal[settings.pascal_layer] = settings.pascal_heads
    configs = {
        # no syntax option: Marian's architecture and computation, with the same (Xavier) init as the PASCAL model,
        # so that the comparison isolates PASCAL
        "vanilla": model_config(tokenizer, **dims),
        "PASCAL": model_config(tokenizer, encoder_pascal_heads=pascal, pascal_sigma=settings.pascal_sigma,
                               source_parser={"backend": "conllu", "path": conllu.name}, **dims),  # in the model dir
    }  # fmt: skip
    return {name: configs[name] for name in settings.systems}


def _train_one(name, config, settings, data, items, tokenizer, out):
    """Train one model; returns (model, trainer, record)."""
    from ..data import DataCollatorForSyntaxMT
    from ..training import build_model, build_trainer
    from ..training.script_args import SyntaxMTTrainingArguments

    model = build_model(config, seed=settings.seed)
    keep = ["input_ids", "attention_mask"] + (["parent_positions"] if name == "PASCAL" else [])
    diag = data["diagnostic"].remove_columns([c for c in data["diagnostic"].column_names if c not in keep])
    diag_batch = DataCollatorForSyntaxMT(tokenizer, model=model)(list(diag))
    curve = DiagnosticCurve(settings.curve_every, diag_batch, items, tokenizer, max_length=64)
    args = SyntaxMTTrainingArguments(
        output_dir=str(out / "checkpoints" / name.lower()), max_steps=settings.max_steps,
        max_tokens=settings.max_tokens, per_device_eval_batch_size=128, learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps, lr_scheduler_type="inverse_sqrt", weight_decay=0.0,
        logging_steps=max(1, settings.max_steps // 40), save_strategy="no", report_to=[], seed=settings.seed,
        predict_with_generate=True, generation_num_beams=1, generation_max_length=64, dataloader_num_workers=0,
        disable_tqdm=False, use_cpu=True, time_budget_seconds=settings.budget or None,
    )  # fmt: skip
    # the Trainer, collator and callbacks of `scripts/train.py` (its learning curve records nothing here: no eval set)
    trainer, _, _ = build_trainer(model, tokenizer, args, train_dataset=data["train"], callbacks=[curve])
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start - curve.seconds
    record = {"steps": trainer.state.global_step, "train_seconds": round(seconds, 1),
              "loss_curve": [(log["step"], log["loss"]) for log in trainer.state.log_history if "loss" in log]}  # fmt: skip
    return model, trainer, curve, record


def _decode(trainer, dataset, tokenizer) -> list[str]:
    ids = trainer.predict(dataset, max_length=64, num_beams=1).predictions  # dataset order (SyntaxMTTrainer)
    ids[ids < 0] = tokenizer.pad_token_id
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


def run_demo(settings: DemoSettings) -> dict:
    """Run the demo; prints as it goes and returns (and writes to ``results.json``) every number."""
    from transformers.utils import logging as hf_logging

    from ..evaluation import corpus_scores, signature
    from .diagnostic import score_diagnostic
    from .report import format_table, plot_curves

    hf_logging.set_verbosity_error()
    torch.set_num_threads(settings.threads)
    out = Path(settings.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a file in the way, no permission: before any training
        raise file_error(e, out, "--output-dir", writing=True) from None
    t0 = time.perf_counter()
    steps = 3 + len(settings.systems)  # the language, each system's training, the scores, the pipeline
    print(f"[1/{steps}] The demo language (seed {settings.seed}): {settings.train_size} training pairs, "
          f"{settings.test_size} test pairs, {2 * settings.diagnostic_size} attachment-diagnostic items", flush=True)  # fmt: skip
    raw, data, items, tokenizer, conllu = _prepare(settings, out)
    for pair in raw["train"].select(range(3)):
        print(f"      {pair['source']}  ->  {pair['target']}")
    references = list(raw["test"]["target"])
    results, models = {}, {}
    for i, (name, config) in enumerate(_configs(settings, tokenizer, conllu).items()):
        stop = f"{settings.max_steps} steps" + (f" or {settings.budget:.0f} s" if settings.budget else "")
        print(f"[{i + 2}/{steps}] Training {name}: {stop}, batches of <= {settings.max_tokens} "
              "tokens", flush=True)  # fmt: skip
        model, trainer, curve, record = _train_one(name, config, settings, data, items, tokenizer, out)
        hypotheses = _decode(trainer, data["test"], tokenizer)
        diag_hyps = _decode(trainer, data["diagnostic"], tokenizer)
        record.update(corpus_scores(hypotheses, references))
        record["diagnostic"] = score_diagnostic(diag_hyps, items)
        record["diagnostic_curve"] = curve.points + [(record["steps"], record["diagnostic"]["accuracy"])]
        record["examples"] = [{"source": it.pair.source, "attachment": it.attachment, "output": h,
                               "reference": it.pair.target} for it, h in list(zip(items, diag_hyps, strict=True))[:4]]  # fmt: skip
        results[name], models[name] = record, model
    seconds_before_pipeline = time.perf_counter() - t0

    print(f"\n[{steps - 1}/{steps}] Test scores (greedy decoding, 64 tokens) and the attachment diagnostic:")
    print(format_table(results))
    first = next(iter(results.values()))
    print(f"BLEU signature: {first['bleu_signature']}\nchrF signature: {first['chrf_signature']}")
    variant = (f"pascal(layer{settings.pascal_layer}:{settings.pascal_heads}/{settings.heads} heads,"
               f"sigma={settings.pascal_sigma})")  # fmt: skip
    model_sig = signature(data=f"demo-language(seed={settings.seed},train={settings.train_size})", variant=variant,
                          parser="gold", steps=settings.max_steps, seed=settings.seed)  # fmt: skip
    print(f"model signature: {model_sig}")
    for name, record in results.items():
        print(f"\n{name} on the first diagnostic pair (same source, two trees):")
        for ex in record["examples"][:2]:
            print(
                f"  [{ex['attachment']:>4}] {ex['source']}\n         output:    {ex['output']}\n"
                f"         reference: {ex['reference']}"
            )
    figure = plot_curves(results, out / "demo.png")
    print(f"\nLoss and diagnostic curves: {figure}")

    if "PASCAL" in models:
        _save_and_translate(models["PASCAL"], tokenizer, out, settings, results["PASCAL"], raw["test"], conllu)
    summary = {"settings": settings.__dict__ | {"systems": list(settings.systems)}, "results": results,
               "model_signature": model_sig, "seconds_before_pipeline": round(seconds_before_pipeline, 1),
               "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    (out / "results.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(f"Scores in {out / 'results.json'} ({summary['seconds']:.0f} s in all).")
    return summary


def _save_and_translate(model, tokenizer, out: Path, settings: DemoSettings, record: dict, test, conllu: Path) -> None:
    from transformers import pipeline

    from ..evaluation.model_card import write_model_card
    from ..generation_defaults import decoding, weights_text

    model.generation_config.max_length, model.generation_config.num_beams = 64, 1  # the decoding its scores used
    model.save_pretrained(out / "pascal")
    tokenizer.save_pretrained(out / "pascal")
    shutil.copy(conllu, out / "pascal")  # the pipeline's parser, beside the weights (config paths are model-relative)
    write_model_card(
        out / "pascal", model=model, title="PASCAL on the hf-syntax-mt demo language",
        data=f"The demo language (`hf_syntax_mt.demo.language`, seed {settings.seed}): {settings.train_size} training "
        f"pairs, {settings.test_size} test pairs, gold dependency trees.",
        parser="Gold trees. At inference the pipeline looks sentences up in the generated test CoNLL-U file "
        "(backend `conllu`); no off-the-shelf parser knows the demo language.",
        scores={"demo test (greedy)": {**{k: record[k] for k in ("bleu", "chrf", "bleu_signature", "chrf_signature")},
                                       "decoding": decoding(1, 64, weights_text([record["steps"]], False))}},
        eval_datasets={"demo test (greedy)": {"type": "hf-syntax-mt-demo-language", "split": "test",
                                              "name": f"the demo language, seed {settings.seed} (test, greedy)"}},
        limitations=f"A demonstration model trained for {record['steps']} steps on CPU; it only knows the demo "
        "language, and translates only sentences present in its CoNLL-U file through the pipeline.",
    )  # fmt: skip
    steps = 3 + len(settings.systems)
    print(
        f"\n[{steps}/{steps}] pipeline('translation', model='{out / 'pascal'}', trust_remote_code=True) on raw text:"
    )
    translator = pipeline("translation", model=str(out / "pascal"), trust_remote_code=True)
    raw = list(test["source"][:PIPELINE_SENTENCES])
    for src, hyp, ref in zip(raw, translator(raw, batch_size=PIPELINE_SENTENCES), test["target"], strict=False):
        print(f"  source:    {src}\n  output:    {hyp['translation_text']}\n  reference: {ref}")
    print(f"Saved the PASCAL model to {out / 'pascal'}.")


__all__ = ["DemoSettings", "DiagnosticCurve", "run_demo"]
