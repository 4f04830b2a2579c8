"""bf16 against fp32 at equal steps on the real recipe (issue 26, item 1).

`bench_bf16.py` times the two precisions on one batch; this compares what they *train*. Each unit of the Multi30k
study run again under bf16 autocast (`multi30k_study.py --units vanilla_xavier-seed0 --bf16`, which writes to
`results/multi30k_bf16/`) is set against the fp32 unit of the same method and seed in `results/multi30k/`: same
recipe, data, tokenizer, steps and seed, so the precision is the one difference (and the machine: the minutes of two
machines are not compared). Per unit: test_2016_flickr BLEU and chrF of both, the paired bootstrap of the bf16
hypotheses against the fp32 ones, the share of identical output lines; then one bootstrap over every pair's
hypotheses concatenated. The seed-to-seed spread of the fp32 units is the yardstick: a precision effect that is
smaller than it changes nothing a study could measure.

    python benchmarks/probes/precision_quality.py        # -> benchmarks/results/bf16/quality.{json,md}
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, refuse_overwriting  # noqa: E402
from benchmarks.common import DATA, RESULTS, write_json  # noqa: E402
from benchmarks.studies import multi30k_study as round_one  # noqa: E402

#: recipe keys that may differ between the two units of a pair (the precision itself)
PRECISION_KEYS = {"bf16"}


def pairs(base_units: list[dict], base: Path, system: Path) -> list[tuple[dict, dict]]:
    """(fp32 unit, bf16 unit) for every bf16 unit with an fp32 unit of the same name; refuses a pair whose recipe,
    steps or training data differ in anything but the precision."""
    fp32 = {u["unit"]: u for u in base_units}
    found = []
    for u in round_one.load_units(system):
        b = fp32.get(u["unit"])
        if b is None:
            print(f"{u['unit']}: no fp32 unit of that name under {base}: left out")
            continue
        differ = sorted(k for k in set(b["recipe"]) | set(u["recipe"])
                        if k not in PRECISION_KEYS and b["recipe"].get(k) != u["recipe"].get(k))  # fmt: skip
        if differ or b["steps"] != u["steps"] or b["tokens_seen"] != u["tokens_seen"]:
            raise SystemExit(
                f"{u['unit']}: the fp32 and bf16 units differ in more than the precision (recipe {differ}, steps "
                f"{b['steps']}/{u['steps']}, tokens seen {b['tokens_seen']}/{u['tokens_seen']}): not a precision pair"
            )
        if not u["recipe"].get("bf16") or b["recipe"].get("bf16"):
            raise SystemExit(f"{u['unit']}: expected an fp32 unit under {base} and a bf16 unit under {system}")
        found.append((b, u))
    return found


def compare(args) -> dict:
    from hf_syntax_mt.evaluation import paired_bootstrap

    refs = round_one.files(Path(args.data), "test_2016_flickr")["tgt"].read_text(encoding="utf-8").split("\n")[:-1]
    rows, pooled_b, pooled_s, pooled_r = [], [], [], []
    base_units = round_one.load_units(Path(args.base))  # read once: the pairs and the yardstick
    for b, u in pairs(base_units, Path(args.base), Path(args.system)):
        n = len(u["hypotheses"])
        test = paired_bootstrap(b["hypotheses"], u["hypotheses"], refs[:n], args.bootstrap_samples)
        same = sum(x == y for x, y in zip(b["hypotheses"], u["hypotheses"], strict=True))
        rows.append({"unit": u["unit"], "steps": u["steps"], "tokens_seen": u["tokens_seen"],
                     "bleu_fp32": test["bleu"]["baseline"], "bleu_bf16": test["bleu"]["system"],
                     "chrf_fp32": test["chrf"]["baseline"], "chrf_bf16": test["chrf"]["system"],
                     "p_bleu": test["bleu"]["p_value"], "p_chrf": test["chrf"]["p_value"],
                     "identical_lines": same / n, "commit_fp32": b.get("commit"), "commit_bf16": u.get("commit"),
                     "train_minutes_fp32": b["train_minutes"], "train_minutes_bf16": u["train_minutes"],
                     "signature": test["bleu"]["signature"]})  # fmt: skip
        pooled_b += b["hypotheses"]
        pooled_s += u["hypotheses"]
        pooled_r += refs[:n]
    if not rows:
        raise SystemExit(f"no bf16 unit under {args.system} has an fp32 unit under {args.base}: run e.g. "
                         "`python benchmarks/studies/multi30k_study.py --units vanilla_xavier-seed0 --bf16` first")  # fmt: skip
    result = {"pairs": rows, "pooled": None}
    if len(rows) > 1:
        test = paired_bootstrap(pooled_b, pooled_s, pooled_r, args.bootstrap_samples)
        result["pooled"] = {k: test[k]["system"] - test[k]["baseline"] for k in ("bleu", "chrf")} | {
            "p_bleu": test["bleu"]["p_value"],
            "p_chrf": test["chrf"]["p_value"],
            "sentences": len(pooled_r),
        }
    # the yardstick: how far the fp32 units of one method lie apart across seeds
    fp32 = [u for u in base_units if u["method"] in {r["unit"].rsplit("-seed", 1)[0]
                                                                                 for r in rows}]  # fmt: skip
    result["fp32_seed_std"] = statistics.stdev([u["test"]["bleu"] for u in fp32]) if len(fp32) > 1 else None
    result["fp32_seeds"] = [u["unit"] for u in fp32]
    return result


def markdown(result: dict) -> str:
    lines = ["| unit | BLEU fp32 / bf16 | ΔBLEU (p) | chrF fp32 / bf16 | ΔchrF (p) | identical lines |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in result["pairs"]:
        lines.append(f"| {r['unit']} | {r['bleu_fp32']:.2f} / {r['bleu_bf16']:.2f} | "
                     f"{r['bleu_bf16'] - r['bleu_fp32']:+.2f} ({r['p_bleu']:.3f}) | {r['chrf_fp32']:.2f} / "
                     f"{r['chrf_bf16']:.2f} | {r['chrf_bf16'] - r['chrf_fp32']:+.2f} ({r['p_chrf']:.3f}) | "
                     f"{100 * r['identical_lines']:.1f}% |")  # fmt: skip
    lines.append("")
    if p := result["pooled"]:
        lines.append(f"Pooled over the {len(result['pairs'])} pairs ({p['sentences']} sentences): ΔBLEU "
                     f"{p['bleu']:+.2f} (p {p['p_bleu']:.3f}), ΔchrF {p['chrf']:+.2f} (p {p['p_chrf']:.3f}).")  # fmt: skip
    if result["fp32_seed_std"] is not None:
        lines.append(f"The fp32 units' BLEU spread across seeds ({', '.join(result['fp32_seeds'])}): std "
                     f"{result['fp32_seed_std']:.2f}.")  # fmt: skip
    lines += ["", "test_2016_flickr, beam 4, the average of the last 5 checkpoints; bf16 minus fp32; paired bootstrap "
              f"of the bf16 hypotheses against the fp32 ones ({result['pairs'][0]['signature']}). Built by "
              "`python benchmarks/probes/precision_quality.py` from the unit files."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default=str(RESULTS / "multi30k"), help="the fp32 units' results directory")
    p.add_argument("--system", default=str(RESULTS / "multi30k_bf16"), help="the bf16 units' results directory")
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--output", default=str(RESULTS / "bf16" / "quality.json"))
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["output"], folders=["base", "system", "data"])
    result = compare(args)
    text = markdown(result)
    write_json(args.output, result, indent=1)
    Path(args.output).with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
