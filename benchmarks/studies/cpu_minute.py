"""Quality per CPU-minute (issue 26, item 5): how good the vanilla model gets in an hour of training on this machine.

The anchor is Wu et al. (2021)'s text-only "Transformer-tiny" on Multi30k en->de: 41.02 BLEU on test2016 (fairseq:
4+4 layers, d_model 128, FFN 256, 4 heads, dropout 0.3, label smoothing 0.1, lr 5e-3 with 2,000 inverse-sqrt
warm-up steps, ~8k tokens per update, up to 8,000 updates, the average of the last 10 checkpoints, beam 5), scored
on lowercased, Moses-tokenized text. `TINY` keeps its model, regularisation and peak learning rate and fits its
schedule to a CPU hour: an hour on one core of this machine holds about 1,700 updates of 4,096 padded tokens (a
speed probe of 0.30 steps/s with the cores shared by two other runs), not 8,000 of 8k, so token batches of 4,096,
800 warm-up steps (the study's), the average of the last 10 checkpoints 50 steps apart, beam 5, Xavier attention
init (round two's), round one's joint BPE of 8,000 on the 29,000 training pairs.

The second lead, `STUDY`: the study's own model (round one's recipe; round two's full-data vanilla scored 37.36 +-
0.30 after 2,000 steps, and a bf16 run of 2,000 steps took 20 minutes on two threads here) trained for the whole hour, with Transformer-tiny's dropout of 0.3 for the
many more epochs, beam 5 and the same checkpoint averaging, so that the two leads differ in the model only.

A unit is ``tiny-seed<k>`` or ``study-seed<k>``:

1. a speed probe: the unit's own training run for `--probe-minutes` (no evaluation, nothing saved), whose steps per
   second fix ``max_steps`` so that training takes at most `--budget-minutes` at that speed (rounded down to the
   checkpoint grid), recorded in the unit file;
2. the training run (`scripts/train.py`'s `run`) with a checkpoint and a validation BLEU every ``max_steps / 8`` steps;
3. the time-to-BLEU curve: every checkpoint (the weights of that step) and the final average translate
   test_2016_flickr with the saved model's pipeline (beam 5), scored on both scales: cased sacreBLEU (13a, the
   project's scale) and the anchor's (`anchor_bleu`: both sides lowercased and Moses-tokenized, then BLEU on those
   tokens); the minutes are training minutes (`CurveCallback`: evaluation left out).

It writes ``RESULTS/runs/tiny-seed<k>.json`` and the final model's test translations beside it; ``--aggregate``
rebuilds ``RESULTS/results.md`` (and ``curve.png``) from the unit files.

    python benchmarks/studies/cpu_minute.py --units tiny-seed0 --threads 1 --no-aggregate
    python benchmarks/studies/cpu_minute.py --units study-seed0 --threads 2 --no-aggregate   # the hour on both cores
    python benchmarks/studies/cpu_minute.py --aggregate
    python benchmarks/studies/cpu_minute.py --quick --results /tmp/cpm --output-dir /tmp/cpmruns --units tiny-seed0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.arguments import BATCH, SECONDS  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.studies import multi30k_study as round_one  # noqa: E402
from benchmarks.studies import study_round2 as round_two  # noqa: E402

RESULTS = ALL_RESULTS / "cpu_minute"
TEST_SET = "test_2016_flickr"
ANCHOR = {"bleu": 41.02, "source": "Wu et al. 2021, text-only Transformer-tiny, test2016, lowercased Moses tokens"}
METHODS = {
    "tiny": "d_model 128, 4+4 layers, FFN 256, 4 heads, dropout 0.3 (Transformer-tiny), Xavier init",
    "study": "the study's model (d_model 256, 3+3 layers, FFN 1024, 4 heads), dropout 0.3, Xavier init",
}
PLAN = [("tiny", 0), ("tiny", 1), ("study", 0), ("study", 1)]
#: the model and regularisation of Transformer-tiny; the schedule fitted to a CPU hour (see the module docstring)
TINY = dict(d_model=128, layers=4, heads=4, ffn_dim=256, dropout=0.3, vocab_size=8000, max_tokens=4096,
            max_steps=None, learning_rate=5e-3, warmup_steps=800, adam_beta2=0.98, max_grad_norm=1.0,
            label_smoothing=0.1, average_checkpoints=10, average_every=50, num_beams=5, eval_steps=None,
            max_eval_samples=400, max_length=64, max_test=None, max_train=None, save_steps=None)  # fmt: skip
#: the second lead: the study's model (see the module docstring) trained for the whole hour, with Transformer-tiny's
#: dropout for the many more epochs, its own learning rate and warm-up, and the curve's checkpoints
STUDY = {**round_one.RECIPE, "dropout": 0.3, "max_steps": None, "eval_steps": None, "save_steps": None,
         "average_checkpoints": 10, "average_every": 50, "num_beams": 5}  # fmt: skip
RECIPES = {"tiny": TINY, "study": STUDY}
QUICK = dict(d_model=32, ffn_dim=64, layers=2, vocab_size=1000, max_tokens=600, warmup_steps=10, average_every=2,
             average_checkpoints=2, num_beams=2, max_eval_samples=20, max_test=40, max_train=600)  # fmt: skip
#: checkpoints (points of the time-to-BLEU curve) per run
CURVE_POINTS = 8


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_study_arguments(p, RESULTS, common.ROOT / "runs" / "cpu_minute", threads=1,
                        units_help="units to run, e.g. tiny-seed0 (default: tiny-seed0/1, study-seed0/1)")  # fmt: skip
    p.add_argument("--budget-minutes", type=SECONDS, default=60.0, help="training minutes a run may take")
    p.add_argument("--probe-minutes", type=SECONDS, default=3.0, help="length of the speed probe that fixes max_steps")
    p.add_argument("--eval-batch-size", type=BATCH, default=64)
    p.add_argument("--keep-models", action="store_true", help="keep each unit's checkpoints and model")
    args = p.parse_args(argv)
    common.refuse_quick_evidence(p, args)
    if args.budget_minutes <= 0 or args.probe_minutes <= 0:
        p.error("--budget-minutes and --probe-minutes must be positive")
    args.recipes = {method: {**recipe, **(QUICK if args.quick else {})} for method, recipe in RECIPES.items()}
    return args


def anchor_bleu(hypotheses: list[str], references: list[str]) -> float:
    """BLEU on the anchor's scale: hypotheses and references lowercased and Moses-tokenized (German rules, no XML
    escaping, no aggressive hyphen splitting), then corpus BLEU over those tokens (sacrebleu, ``tokenize="none"``,
    as ``multi-bleu.perl`` scores pre-tokenized text)."""
    from sacrebleu.metrics import BLEU

    try:
        from sacremoses import MosesTokenizer
    except ImportError as e:  # a dev extra: the anchor's scale needs Moses' own tokenizer
        raise SystemExit("the anchor's BLEU scale needs sacremoses: pip install sacremoses (or -e '.[dev]')") from e
    moses = MosesTokenizer(lang="de")

    def prepare(lines: list[str]) -> list[str]:
        return [moses.tokenize(line.lower(), escape=False, return_str=True) for line in lines]

    bleu = BLEU(tokenize="none", force=True)
    return float(bleu.corpus_score(prepare(hypotheses), [prepare(references)]).score)


def choose_max_steps(steps_per_second: float, budget_minutes: float, grid: int) -> int:
    """The most steps that fit in ``budget_minutes`` at ``steps_per_second``, rounded down to a multiple of ``grid``
    (the checkpoint grid: averaging and the curve's points fall on it), at least ``grid * CURVE_POINTS``."""
    steps = int(steps_per_second * budget_minutes * 60) // grid * grid
    return max(steps, grid * CURVE_POINTS)


def probe_speed(args, argv: list[str]) -> dict:
    """The unit's own training run for ``--probe-minutes``: no evaluation, nothing saved."""
    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    with tempfile.TemporaryDirectory() as tmp:
        probe = list(argv)
        probe[probe.index("--output_dir") + 1] = str(Path(tmp) / "probe")
        probe = [a for a in probe if a not in ("--do_eval", "--do_predict")]
        for option in ("--eval_strategy", "--save_strategy"):
            probe[probe.index(option) + 1] = "no"
        probe[probe.index("--max_steps") + 1] = "1000000"
        probe += ["--time_budget_seconds", str(args.probe_minutes * 60), "--average_checkpoints", "0"]
        run(*train_args(probe))
        info = json.loads((Path(tmp) / "probe" / "hf_syntax_mt_run.json").read_text())
    return {"steps": info["global_step"], "train_seconds": info["train_seconds"],
            "steps_per_second": round(info["global_step"] / info["train_seconds"], 4),
            "tokens_per_second": round(info["num_input_tokens_seen"] / info["train_seconds"], 1)}  # fmt: skip


def translate(model_dir: Path, tokenizer: Path, args, recipe: dict) -> list[str]:
    """The test set translated by the model's pipeline (beam of the unit's recipe)."""
    from transformers import pipeline

    sources = round_one.files(Path(args.data), TEST_SET)["src"].read_text(encoding="utf-8").split("\n")[:-1]
    pipe = pipeline("syntax-translation", model=str(model_dir), tokenizer=str(tokenizer))
    results = pipe(sources[: recipe["max_test"] or None], batch_size=args.eval_batch_size,
                   num_beams=recipe["num_beams"])  # fmt: skip
    return [r["translation_text"].strip() for r in results]


def run_unit(args, method: str, seed: int, device: str) -> Path:
    import torch

    from hf_syntax_mt.evaluation import corpus_scores
    from hf_syntax_mt.training.script import parse_args as train_args
    from hf_syntax_mt.training.script import run

    name = common.unit_name(method, seed)
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out = Path(args.output_dir) / "models" / name
    shutil.rmtree(out, ignore_errors=True)  # a unit's minutes count from its start: an interrupted unit starts again
    train = round_one.files(Path(args.data), "train")
    args = argparse.Namespace(**{**vars(args), "recipe": args.recipes[method]})  # this unit's recipe
    tokenizer = round_two.tokenizer_for(args, "full", train)
    precision = common.choose_precision("auto", device)
    recipe = {**args.recipe, "bf16": precision == "bf16", "max_steps": 1, "eval_steps": 1, "save_steps": 1}

    def unit_argv() -> list[str]:
        """The train script's arguments for the current ``recipe`` (the probe's, then the fitted one)."""
        argv = round_one.train_argv(argparse.Namespace(**{**vars(args), "recipe": recipe}), method, seed, out,
                                    tokenizer, device, spec=(round_two.XAVIER, False, METHODS[method]))  # fmt: skip
        title = f"Multi30k en->de {'Transformer-tiny' if method == 'tiny' else 'study model'} (seed {seed}, CPU-hour recipe)"
        argv[argv.index("--model_card_title") + 1] = title
        argv[argv.index("--save_total_limit") + 1] = str(CURVE_POINTS + 2)  # every point of the curve is kept
        return argv

    print(f"=== {name} on {device} ({precision}, {torch.get_num_threads()} thread(s)): speed probe "
          f"{args.probe_minutes:g} min", flush=True)  # fmt: skip
    probe = probe_speed(args, unit_argv())
    grid = recipe["average_every"]
    recipe["max_steps"] = choose_max_steps(probe["steps_per_second"], args.budget_minutes, grid)
    recipe["eval_steps"] = recipe["save_steps"] = max(recipe["max_steps"] // CURVE_POINTS // grid * grid, grid)
    argv = unit_argv()
    print(f"=== {name}: {probe['steps_per_second']:.3f} steps/s -> max_steps {recipe['max_steps']}", flush=True)
    start = time.perf_counter()
    run(*train_args(argv))
    wall_train = time.perf_counter() - start
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    refs = round_one.files(Path(args.data), TEST_SET)["tgt"].read_text(encoding="utf-8").split("\n")[:-1]
    minutes_at = {p["step"]: p["train_minutes"] for p in info["curve"]}
    validation_at = {p["step"]: p.get("eval_bleu") for p in info["curve"]}
    start, curve = time.perf_counter(), []
    checkpoints = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    for directory in [*checkpoints, out]:
        step = int(directory.name.split("-")[1]) if directory != out else None
        hyps = translate(directory, tokenizer, args, recipe)
        refs_n = refs[: len(hyps)]
        point = {"step": step, "train_minutes": minutes_at.get(step), "validation_bleu": validation_at.get(step),
                 "bleu": round(corpus_scores(hyps, refs_n)["bleu"], 2), "bleu_anchor": round(anchor_bleu(hyps, refs_n), 2)}  # fmt: skip
        if directory == out:
            final_hyps = hyps
            point.update(step=info["global_step"], averaged_steps=info["averaged_steps"],
                         train_minutes=round(info["train_seconds"] / 60, 3))  # fmt: skip
        curve.append(point)
        print(f"    {directory.name}: {point}", flush=True)
    text = "".join(h + "\n" for h in final_hyps)
    (runs / f"{name}.{TEST_SET}.txt").write_text(text, encoding="utf-8")
    scores = corpus_scores(final_hyps, refs[: len(final_hyps)])
    record = {
        "unit": name, "method": method, "seed": seed, "about": METHODS[method], "recipe": recipe,
        "budget_minutes": args.budget_minutes, "probe": probe, "precision": precision, "quick": args.quick,
        "steps": info["global_step"], "train_minutes": round(info["train_seconds"] / 60, 2),
        "wall_minutes_train": round(wall_train / 60, 2), "wall_minutes_curve": round((time.perf_counter() - start) / 60, 2),
        "tokens_seen": info["num_input_tokens_seen"], "averaged_steps": info["averaged_steps"],
        "test_set": TEST_SET, "test": {**scores, "bleu_anchor": curve[-1]["bleu_anchor"],
                                        "hypotheses_sha256": hashlib.sha256(text.encode()).hexdigest()},
        "trainer_test": info["scores"].get("test"), "curve": curve, "trainer_curve": info["curve"],
        "model_signature": info["model_signature"], "anchor": ANCHOR,
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})", "cpu": common.cpu_name(),
        "threads": torch.get_num_threads(), "load_average_at_end": os.getloadavg(), **common.software(),
        "commit": common.git_commit(), "train_argv": [common.relative_path(a) for a in argv],
    }  # fmt: skip
    path = common.save_unit(runs, record, None if args.keep_models else out)
    print(f"=== {name}: BLEU {scores['bleu']:.2f} (anchor scale {record['test']['bleu_anchor']:.2f}) after "
          f"{record['train_minutes']:.1f} training minutes -> {path}", flush=True)  # fmt: skip
    return path


# ------------------------------------------------------------------------------------------------------------------
# Aggregate: reads only the unit files
# ------------------------------------------------------------------------------------------------------------------
def aggregate(args) -> str | None:
    results = Path(args.results)
    required = ("unit", "method", "seed", "test", "curve", "train_minutes", "threads")
    if not (
        units := common.aggregated_units(
            results, lambda r: [common.load_unit(p, required) for p in sorted((r / "runs").glob("*.json"))]
        )
    ):
        return None

    lines = [f"Quality per CPU-hour on Multi30k en->de, {TEST_SET}, beam 5, the average of the last 10 checkpoints "
             f"(anchor: {ANCHOR['bleu']} on its scale, {ANCHOR['source']}). Models: "
             + "; ".join(f"`{m}`: {about}" for m, about in METHODS.items() if any(u["method"] == m for u in units))
             + ".", "",
             "| unit | threads | steps | training min | BLEU (cased sacreBLEU) | BLEU (anchor's scale) | chrF |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for u in units:
        lines.append(f"| {u['unit']} | {u['threads']} | {u['steps']} | {u['train_minutes']:.1f} | {u['test']['bleu']:.2f} "
                     f"| {u['test']['bleu_anchor']:.2f} | {u['test']['chrf']:.2f} |")  # fmt: skip
    for method in METHODS:  # the mean over the seeds of each model
        mu = [u for u in units if u["method"] == method]
        if len(mu) > 1:
            lines.append(f"| {method}, mean | | | | {common.mean_std([u['test']['bleu'] for u in mu])} "
                         f"| {common.mean_std([u['test']['bleu_anchor'] for u in mu])} "
                         f"| {common.mean_std([u['test']['chrf'] for u in mu])} |")  # fmt: skip
    lines += ["", "Time to BLEU (each checkpoint's own weights; the last row of a unit is the average):", "",
              "| unit | step | training min | validation BLEU (400 pairs) | test BLEU (cased) | test BLEU (anchor's) |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for u in units:
        for p in u["curve"]:
            label = f"{p['step']} (avg)" if p.get("averaged_steps") else str(p["step"])
            val = f"{p['validation_bleu']:.2f}" if p.get("validation_bleu") is not None else "-"
            minutes = f"{p['train_minutes']:.1f}" if p.get("train_minutes") is not None else "-"
            lines.append(f"| {u['unit']} | {label} | {minutes} | {val} | {p['bleu']:.2f} | {p['bleu_anchor']:.2f} |")
    lines += ["", "Units:", ""] + [f"- {u['unit']}: {u['device']} ({u.get('cpu', '?')}), {u['precision']}, "
                                   f"{u['threads']} thread(s), probe {u['probe']['steps_per_second']} steps/s, "
                                   f"commit {(u.get('commit') or '?')[:10]}" for u in units]  # fmt: skip
    return common.write_results(results, lines, lambda: plot(units, results / "curve.png"))


def plot(units: list[dict], path: Path) -> None:
    from hf_syntax_mt.evaluation import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, u in enumerate(units):
        points = [p for p in u["curve"] if p.get("train_minutes") is not None]
        minutes = [p["train_minutes"] for p in points]
        ax.plot(minutes, [p["bleu"] for p in points], marker=".", color=f"C{i}", label=f"{u['unit']} cased")
        ax.plot(minutes, [p["bleu_anchor"] for p in points], marker=".", ls="--", color=f"C{i}",
                label=f"{u['unit']} anchor's scale")  # fmt: skip
    ax.axhline(ANCHOR["bleu"], color="k", lw=0.8, ls=":", label="anchor (its scale)")
    ax.set_xlabel("training minutes")
    ax.set_ylabel(f"{TEST_SET} BLEU (beam 5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, lambda name: common.parse_unit(name, METHODS), run_unit, aggregate)


if __name__ == "__main__":
    sys.exit(main())
