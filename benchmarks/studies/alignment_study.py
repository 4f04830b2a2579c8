"""The alignment study (issue 14): models trained on Multi30k en->fr under one budget, their alignments scored with AER
on the English-French Hansards gold (447 pairs, `alignment-gold-en-fr`), beside eflomal's on the same data
(`eflomal_reference.py`), and each model's BLEU on test_2016_flickr en->fr.

Like `multi30k_study.py`, each (method, seed) is a unit that writes `RESULTS/runs/<method>-seed<k>.json` (and its
Hansards alignments beside it); an invocation skips finished units, an interrupted unit resumes from its last
checkpoint (every `save_steps`, under `--output-dir`, not committed), and `--aggregate` rebuilds `RESULTS/results.md`.

    python benchmarks/studies/alignment_study.py                 # every missing unit
    python benchmarks/studies/alignment_study.py --units vanilla-seed0
    python benchmarks/studies/alignment_study.py --aggregate
    python benchmarks/studies/alignment_study.py --quick --results /tmp/aq   # plumbing check

The data are lower-cased and punctuation-split like the gold set (the tokenisation of `eflomal_reference.py`), so the
Hansards words look like the training words; BLEU is computed on that tokenisation too (sacrebleu with tok:none on
lower-cased, pre-tokenised text: not comparable with true-case BLEU). Alignments are read from decoder layer 2 of 3
(the penultimate layer, as Garg et al. 2019 find best), heads averaged, each French word linked to its most attended
English word (`hf_syntax_mt.alignment.align_corpus`); the biased methods bias that layer. Each is read twice:
at the step that predicts the French word (Naive-Att) and at the next step, where the word is the decoder input
(Shift-Att, Chen et al. 2020); the forward direction is also read at every decoder layer (`aer_by_layer`).
`--keep-models` keeps each unit's averaged model, to read its alignments again later.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS
from benchmarks.common import (
    ROOT,
    git_commit,
    load_unit,
    parse_unit,
    software,
    unit_name,
    write_json,
)

RESULTS = ALL_RESULTS / "alignment"

#: method -> (SyntaxMTConfig overrides of the s->t model, symmetric?, what it is)
METHODS: dict[str, tuple[dict, bool, str]] = {
    "vanilla": ({"alignment_layer": 1}, False, "no bias (SyntaxMT with no option = Marian)"),
    "position": (
        {"alignment_bias_layers": [1], "alignment_biases": ["position"]},
        False,
        "Cohn position bias (Eq. 6)",
    ),
    "markov": ({"alignment_bias_layers": [1], "alignment_biases": ["markov"]}, False, "Cohn Markov condition (Eq. 7)"),
    "fertility": ({"alignment_bias_layers": [1], "alignment_biases": ["fertility"]}, False, "Cohn local fertility"),
    "all_biases": ({"alignment_bias_layers": [1]}, False, "position + Markov + local fertility"),
    "symmetric": ({"alignment_layer": 1}, True, "both directions jointly, trace bonus gamma 0.5 (Cohn Sec. 3.3)"),
    "guided": (
        {"alignment_layer": 1, "guided_alignment_weight": 0.05},
        False,
        "guided alignment (Garg et al. 2019): head 0 of layer 1 supervised by eflomal's grow-diag-final-and "
        "links on the training pairs, weight 0.05",
    ),
}
PLAN = [(m, 0) for m in METHODS] + [("vanilla", 1)]  # vanilla-seed0 ran before Shift-Att and aer_by_layer existed
RECIPE = dict(d_model=256, layers=3, heads=4, ffn_dim=1024, dropout=0.1, vocab_size=8000, max_tokens=2500,
              max_steps=2000, learning_rate=7e-4, warmup_steps=800, adam_beta2=0.98, max_grad_norm=1.0,
              label_smoothing=0.1, average_checkpoints=5, average_every=100, num_beams=4, max_length=64, save_steps=200,
              symmetry_weight=0.5, max_train=None, max_test=None)  # fmt: skip
QUICK = dict(d_model=64, ffn_dim=128, vocab_size=1000, max_tokens=600, max_steps=20, warmup_steps=5, max_train=600,
             max_test=30, average_every=5, average_checkpoints=2, num_beams=2,
             save_steps=10)  # fmt: skip


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, RESULTS, ROOT / "runs" / "alignment_study", threads=2,
                               units_help="units to run, e.g. symmetric-seed0 (default: the PLAN)")  # fmt: skip
    p.add_argument("--keep-models", action="store_true", help="keep each unit's averaged model under --output-dir")
    args = p.parse_args(argv)
    common.refuse_quick_evidence(p, args)
    if args.device == "cuda":
        p.error("the alignment study trains on the CPU (use_cpu): leave out --device cuda")
    args.recipe = {**RECIPE, **(QUICK if args.quick else {})}
    return args


def prepared_data(args) -> dict[str, tuple[list[str], list[str]]]:
    """Lower-cased, punctuation-split en/fr pairs per split (the gold set's tokenisation), plus the Hansards."""
    from benchmarks.data.eflomal_reference import tokenize

    data, r = Path(args.data), args.recipe
    out = {}
    for split, limit in (("train", r["max_train"]), ("test_2016_flickr", r["max_test"])):
        en = (data / "multi30k" / f"{split}.en").read_text(encoding="utf-8").split("\n")[:-1][:limit]
        fr = (data / "multi30k" / f"{split}.fr").read_text(encoding="utf-8").split("\n")[:-1][:limit]
        out[split] = ([tokenize(s, "en") for s in en], [tokenize(s, "fr") for s in fr])
    gold = data / "alignment-gold-en-fr"
    out["hansards"] = tuple(
        (gold / f"hansards.{lang}").read_text(encoding="utf-8").split("\n")[:-1] for lang in ("en", "fr")
    )
    return out


def build(args, method: str, seed: int, tokenizer):
    import torch

    from hf_syntax_mt import SymmetricTranslationConfig, SymmetricTranslationModel
    from hf_syntax_mt.training import model_config

    r, (overrides, symmetric, _) = args.recipe, METHODS[method]
    dims = dict(d_model=r["d_model"], layers=r["layers"], heads=r["heads"], ffn_dim=r["ffn_dim"], dropout=r["dropout"])
    forward = model_config(tokenizer, label_smoothing=r["label_smoothing"], **dims, **overrides)
    torch.manual_seed(seed)
    if symmetric:
        backward = model_config(tokenizer, label_smoothing=r["label_smoothing"], **dims, **overrides)
        config = SymmetricTranslationConfig(forward=forward.to_dict(), backward=backward.to_dict(),
                                            symmetry_weight=r["symmetry_weight"])  # fmt: skip
        return SymmetricTranslationModel(config)
    from hf_syntax_mt import SyntaxMTForConditionalGeneration

    return SyntaxMTForConditionalGeneration(forward)


def translate(model, tokenizer, sources: list[str], args, batch_size: int = 64) -> list[str]:
    import torch

    out = []
    model.eval()
    for start in range(0, len(sources), batch_size):
        enc = tokenizer(sources[start : start + batch_size], return_tensors="pt", padding=True, truncation=True,
                        max_length=args.recipe["max_length"]).to(model.device)  # fmt: skip
        with torch.no_grad():
            ids = model.generate(**enc, num_beams=args.recipe["num_beams"], max_length=args.recipe["max_length"])
        out += [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
    return out


def eflomal_training_links(args, data) -> list[str]:
    """eflomal's grow-diag-final-and links (Pharaoh) for every training pair, computed once per output directory
    (with the Hansards pairs appended, as `eflomal_reference.py` does) and cached there."""
    cache = Path(args.output_dir) / f"eflomal-train-{len(data['train'][0])}.gdfa"
    if not cache.is_file():
        import tempfile

        import eflomal

        from hf_syntax_mt.alignment import format_pharaoh, read_pharaoh, symmetrize

        src = data["train"][0] + list(data["hansards"][0])
        tgt = data["train"][1] + list(data["hansards"][1])
        with tempfile.TemporaryDirectory() as tmp:
            fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
            eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
            n = len(data["train"][0])
            f, b = [a.sure for a in read_pharaoh(fwd)[:n]], [a.sure for a in read_pharaoh(rev)[:n]]
        lines = [format_pharaoh(symmetrize(set(x), set(y), "grow-diag-final-and")) for x, y in zip(f, b, strict=True)]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return cache.read_text(encoding="utf-8").split("\n")[:-1]


def run_unit(args, method: str, seed: int) -> Path:
    import sacrebleu
    import torch
    from datasets import Dataset

    from hf_syntax_mt.alignment import (
        DataCollatorForSymmetricTranslation,
        align_corpus,
        alignment_error_rate,
        alignment_read,
        format_pharaoh,
        read_pharaoh,
    )
    from hf_syntax_mt.data import DataCollatorForSyntaxMT
    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
    from hf_syntax_mt.training import CheckpointAverageCallback, CurveCallback, SyntaxMTTrainer, train_tokenizer
    from hf_syntax_mt.training.script_args import SyntaxMTTrainingArguments

    r, name = args.recipe, unit_name(method, seed)
    data = prepared_data(args)
    tok_dir = Path(args.output_dir) / f"tokenizer-{r['vocab_size']}"
    if not (tok_dir / "tokenizer.json").is_file():
        train_tokenizer(data["train"][0] + data["train"][1], vocab_size=r["vocab_size"]).save_pretrained(tok_dir)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    train = Dataset.from_dict({"source": data["train"][0], "target": data["train"][1]})
    guided = METHODS[method][0].get("guided_alignment_weight", 0) > 0
    train = train.map(SyntaxMTPreprocessor(tokenizer, columns=(), max_source_length=r["max_length"], max_target_length=r["max_length"]), batched=True,
                      remove_columns=[] if guided else ["source", "target"], desc="tokenize")  # fmt: skip
    if guided:  # eflomal's links on the training pairs (the reference aligner, same data) -> decoder_alignment
        from hf_syntax_mt.alignment import AlignmentTargets

        train = train.add_column("alignment", eflomal_training_links(args, data))
        train = train.map(AlignmentTargets(tokenizer, max_source_length=r["max_length"],
                                           max_target_length=r["max_length"]),
                          batched=True, with_indices=True, remove_columns=["source", "target", "alignment"],
                          desc="guided-alignment targets")  # fmt: skip
    model = build(args, method, seed, tokenizer)
    symmetric = METHODS[method][1]
    collator = (DataCollatorForSymmetricTranslation(pad_token_id=tokenizer.pad_token_id) if symmetric
                else DataCollatorForSyntaxMT(tokenizer, model=model))  # fmt: skip
    out = Path(args.output_dir) / name
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint = get_last_checkpoint(str(out)) if out.is_dir() else None
    training_args = SyntaxMTTrainingArguments(
        output_dir=str(out), max_steps=r["max_steps"], max_tokens=r["max_tokens"], learning_rate=r["learning_rate"],
        warmup_steps=r["warmup_steps"], lr_scheduler_type="inverse_sqrt", weight_decay=0.0, adam_beta2=r["adam_beta2"],
        max_grad_norm=r["max_grad_norm"], seed=seed, logging_steps=50, save_strategy="steps", save_steps=r["save_steps"],
        save_total_limit=1, report_to="none",
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, include_num_input_tokens_seen="non_padding",
    )  # fmt: skip
    averager = CheckpointAverageCallback(r["average_checkpoints"], r["average_every"])
    clock = CurveCallback()  # training seconds, added up across resumed runs
    trainer = SyntaxMTTrainer(model=model, args=training_args, train_dataset=train, data_collator=collator,
                              callbacks=[averager, clock])  # fmt: skip
    print(f"=== {name}: {METHODS[method][2]}", flush=True)
    if checkpoint is not None:  # an interrupted unit goes on from its last checkpoint
        print(f"    resuming from {checkpoint}", flush=True)
        averager.load_from(checkpoint)
        clock.load_from(checkpoint)
    trainer.train(resume_from_checkpoint=checkpoint)
    minutes = clock.train_seconds() / 60
    gold = read_pharaoh(Path(args.data) / "alignment-gold-en-fr" / "hansards.gold", one_indexed=True)
    src_words = [s.split() for s in data["hansards"][0]]
    tgt_words = [t.split() for t in data["hansards"][1]]
    aer, links = {}, {}
    methods = ["forward", "backward", "intersection", "grow-diag-final-and"] if symmetric else ["forward"]
    for shift in (False, True):  # Naive-Att, and Shift-Att (Chen et al. 2020: read y_j where it is the decoder input)
        for m in methods:
            key = f"{m} shift" if shift else m
            links[key] = align_corpus(model, tokenizer, src_words, tgt_words, method=m, progress=False, shift=shift)
            aer[key] = alignment_error_rate(links[key], gold)
    forward_model = model.forward_model if symmetric else model
    aer_by_layer = {  # the forward direction read at every decoder layer, both ways
        layer: {way: round(alignment_error_rate(align_corpus(forward_model, tokenizer, src_words, tgt_words,
                                                             layer=layer, progress=False, shift=way == "shift"),
                                                gold)["aer"], 4) for way in ("naive", "shift")}
        for layer in range(forward_model.config.decoder_layers)
    }  # fmt: skip
    translator = model.forward_model if symmetric else model
    hyps = translate(translator, tokenizer, data["test_2016_flickr"][0], args)
    refs = data["test_2016_flickr"][1]
    bleu_metric = sacrebleu.BLEU(tokenize="none")
    bleu = bleu_metric.corpus_score(hyps, [refs])
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    best = min(aer, key=lambda m: aer[m]["aer"])
    (runs / f"{name}.align.txt").write_text("".join(format_pharaoh(x) + "\n" for x in links[best]), encoding="utf-8")
    record = {
        "unit": name, "method": method, "seed": seed, "about": METHODS[method][2], "overrides": METHODS[method][0],
        "recipe": args.recipe, "quick": args.quick, "steps": trainer.state.global_step,
        "train_minutes": round(minutes, 2), "tokens_seen": trainer.state.num_input_tokens_seen,
        "averaged_steps": averager.steps, "resumed_from": checkpoint and Path(checkpoint).name,
        "aer": aer, "aer_by_layer": aer_by_layer,
        "read": dict(zip(("layer", "heads"), alignment_read(forward_model.config), strict=True)),  # heads averaged
        "alignments_written": best,
        "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
        "bleu_signature": str(bleu_metric.get_signature()),
        "device": "cpu", "threads": torch.get_num_threads(), **software(), "commit": git_commit(),
    }  # fmt: skip
    path = write_json(runs / f"{name}.json", record, indent=1, newline=True)
    if args.keep_models:  # the averaged model (safetensors) and its tokenizer, to read alignments again later
        model.save_pretrained(out / "model")
        tokenizer.save_pretrained(out / "model")
        for checkpoint_dir in out.glob("checkpoint-*"):
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
    print(f"=== {name}: AER {100 * aer[best]['aer']:.1f} ({best}), BLEU {bleu.score:.2f} -> {path}", flush=True)
    return path


def known_word_aer(links: list, gold: list, hansards: tuple[list[str], list[str]], vocab: tuple[set, set]) -> dict:
    """AER on two parts of the gold set's cells (i, j): 'known', where the English word i and the French word j both
    occur in the training data, and 'unseen', where one of them does not (22% of the English and 21% of the French
    Hansards word tokens are not in Multi30k train). Every link set (predicted, sure, possible) is cut by the same
    cells, so each part is an AER of its own."""
    from hf_syntax_mt.alignment import GoldAlignment, alignment_error_rate

    parts = {"known": ([], []), "unseen": ([], [])}
    for pred, g, en, fr in zip(links, gold, *hansards, strict=True):
        en, fr = en.split(), fr.split()
        cells = set(pred) | g.possible  # every link of the pair (sure links are possible too)
        known = {(i, j) for i, j in cells if en[i] in vocab[0] and fr[j] in vocab[1]}
        for part, (p_out, g_out) in zip((known, cells - known), parts.values(), strict=True):
            p_out.append(set(pred) & part)
            g_out.append(GoldAlignment(g.sure & part, g.possible & part))
    return {name: alignment_error_rate(p, g) for name, (p, g) in parts.items()}


def aggregate(args) -> str | None:
    results = Path(args.results)
    units = [load_unit(p, ("unit", "method", "seed", "aer", "bleu", "chrf", "train_minutes", "quick"))
             for p in sorted((results / "runs").glob("*.json"))]  # fmt: skip
    columns = ("forward", "forward shift", "backward", "backward shift", "intersection", "intersection shift",
               "grow-diag-final-and", "grow-diag-final-and shift")  # fmt: skip
    lines = ["AER (%) on the Hansards gold; 'shift': Shift-Att (Chen et al. 2020), the others Naive-Att.", "",
             "| system | " + " | ".join(f"AER {c}" for c in columns) + " | BLEU (tok:none, lc) | chrF | train min |",
             "|---|" + "---|" * (len(columns) + 3)]  # fmt: skip
    eflomal = results / "eflomal.json"
    if eflomal.is_file():
        e = json.loads(eflomal.read_text())
        for run in e["runs"]:
            s = run["scores"]
            lines.append(f"| eflomal (run {run['run']}, reference) | {100 * s['forward']['aer']:.1f} | - | "
                         f"{100 * s['reverse']['aer']:.1f} | - | {100 * s['intersection']['aer']:.1f} | - | "
                         f"{100 * s['grow-diag-final-and']['aer']:.1f} | - | - | - | - |")  # fmt: skip
    order = list(METHODS)
    units = sorted(units, key=lambda u: (order.index(u["method"]) if u["method"] in order else 99, u["seed"]))
    for u in units:
        cells = [f"{100 * u['aer'][m]['aer']:.1f}" if m in u["aer"] else "-" for m in columns]
        lines.append(f"| {u['unit']}{' (quick)' if u['quick'] else ''} | {' | '.join(cells)} | {u['bleu']:.2f} | "
                     f"{u['chrf']:.2f} | {u['train_minutes']:.1f} |")  # fmt: skip
    layered = [u for u in units if u.get("aer_by_layer")]
    if layered:
        n = max(len(u["aer_by_layer"]) for u in layered)
        lines += ["", "AER (%) of the forward direction read at each decoder layer (heads averaged; a guided model's "
                  "supervised layer: its supervised heads only, marked *), Naive-Att / Shift-Att:", "",
                  "| unit | " + " | ".join(f"layer {k}" for k in range(n)) + " |", "|---|" + "---|" * n]  # fmt: skip
        for u in layered:
            read = u.get("read")  # fewer heads than the layer has: the guided ones, marked
            star = read["layer"] if read and read["heads"] < u["recipe"]["heads"] else None
            cells = [f"{100 * v['naive']:.1f} / {100 * v['shift']:.1f}{'*' if int(k) == star else ''}"
                     for k, v in u["aer_by_layer"].items()]  # fmt: skip
            lines.append(f"| {u['unit']}{' (quick)' if u['quick'] else ''} | {' | '.join(cells)} |")
    lines += known_word_lines(args, units)
    text = "\n".join(lines) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    (results / "results.md").write_text(text, encoding="utf-8")
    print(text)
    return text


def known_word_lines(args, units: list[dict]) -> list[str]:
    """The table of `known_word_aer` for eflomal's saved links and each unit's written alignments."""
    from hf_syntax_mt.alignment import read_pharaoh

    results, gold_dir = Path(args.results), Path(args.data) / "alignment-gold-en-fr"
    files = [(f"eflomal (run 0, {m})", results / f"eflomal.{m}.align.txt") for m in ("forward", "grow-diag-final-and")]
    files += [(f"{u['unit']} ({u['alignments_written']})", results / "runs" / f"{u['unit']}.align.txt") for u in units]
    files = [(name, f) for name, f in files if f.is_file()]
    if not files or not gold_dir.is_dir():
        return []
    data = prepared_data(args)
    vocab = tuple({w for s in side for w in s.split()} for side in data["train"])
    gold = read_pharaoh(gold_dir / "hansards.gold", one_indexed=True)
    lines = [
        "",
        "AER (%) split by the gold cells whose English and French words both occur in the training data "
        "(known) and the others (unseen), with each part's sure links:",
        "",
        "| alignments | AER known | sure links known | AER unseen | sure links unseen |",
        "|---|---|---|---|---|",
    ]
    for name, f in files:
        split = known_word_aer([a.sure for a in read_pharaoh(f)], gold, data["hansards"], vocab)
        lines.append(f"| {name} | {100 * split['known']['aer']:.1f} | {split['known']['sure_links']} | "
                     f"{100 * split['unseen']['aer']:.1f} | {split['unseen']['sure_links']} |")  # fmt: skip
    return lines


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, lambda name: parse_unit(name, METHODS),
                            lambda args, method, seed, device: run_unit(args, method, seed), aggregate)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
