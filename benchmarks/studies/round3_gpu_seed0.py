"""Round three's seed 0 on one GPU (issue 59): round two's low-resource recipe (`study_round2`, 5,000 pairs, 2,000
steps, fp32) trained for vanilla, DBSA + sync (round two's `dbsa_sync_full`), PASCAL + DBSA + sync and all three
priors (`study_round3`), all four on the same NVIDIA H200 in fp32, so that they compare with each other (never with
round two's CPU units: another device, other hypotheses). PASCAL alone and the alignment biases alone were not run on
the GPU (the lease's time ran out), so "stacks" here means "beats DBSA + sync, round two's most repeatable single
method", on one seed.

Rebuilds ``RESULTS/round3/gpu-seed0/results.md`` from the unit files in its ``runs/`` (every hypothesis file checked
against the sha256 its unit records): BLEU and chrF per test set, the paired bootstrap of each combination against
vanilla and against DBSA + sync per test set and pooled over the four test sets (hypotheses concatenated), and the
cost (training minutes, tokens/s).

    python benchmarks/studies/round3_gpu_seed0.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.arguments import POSITIVE  # noqa: E402

HERE = common.RESULTS / "round3" / "gpu-seed0"
TESTS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr")
METHODS = ("vanilla", "dbsa_sync_full", "pascal_dbsa_sync", "all3")
COMBINATIONS = ("pascal_dbsa_sync", "all3")


def load(results: Path, data: Path) -> tuple[dict, dict, dict]:
    """units: method -> unit record; hyps: (method, test) -> lines (hash-checked); refs: test -> lines."""
    units, hyps = {}, {}
    for method in METHODS:
        path = results / "runs" / f"low-{method}-seed0.json"
        unit = common.load_unit(path, required=("unit", "tests", "device", "precision"))
        units[method] = unit
        for test in TESTS:
            record = unit["tests"][test]
            hyps[method, test] = common.read_hypotheses(path, path.with_name(f"low-{method}-seed0.{test}.txt"),
                                                        record["hypotheses_sha256"], record["count"])  # fmt: skip
    devices = {(u["device"], u["precision"]) for u in units.values()}
    if len(devices) != 1:
        raise SystemExit(f"the units ran on several devices or precisions ({devices}): they do not compare")
    refs = {test: common.read_lines(data / "multi30k" / f"{test}.de") for test in TESTS}
    return units, hyps, refs


def compare(base: str, system: str, hyps: dict, refs: dict, samples: int) -> list[str]:
    """ΔBLEU (p) per test set and pooled over the four."""
    from hf_syntax_mt.evaluation.metrics import paired_bootstrap

    cells = []
    for tests in [(t,) for t in TESTS] + [TESTS]:
        b = [h for t in tests for h in hyps[base, t]]
        s = [h for t in tests for h in hyps[system, t]]
        r = [line for t in tests for line in refs[t]]
        bleu = paired_bootstrap(b, s, r, n_samples=samples)["bleu"]
        cells.append(f"{bleu['system'] - bleu['baseline']:+.2f} ({bleu['p_value']:.3f})")
    return cells


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", required=True, help="the folder holding multi30k/ (the references)")
    p.add_argument("--results", default=str(HERE), help="the folder holding runs/ (default: the committed one)")
    p.add_argument("--bootstrap-samples", type=POSITIVE, default=1000)
    args = p.parse_args(argv)
    results = Path(args.results)
    units, hyps, refs = load(results, Path(args.data))
    device, precision = units["vanilla"]["device"], units["vanilla"]["precision"]
    lines = [
        "# Round three, seed 0, on one GPU",
        "",
        f"Built by `python benchmarks/studies/round3_gpu_seed0.py` from `runs/*.json` (4 units; {device}, "
        f"{precision}; round two's low-resource recipe, 2,000 steps). Hypothesis files checked against their sha256.",
        "",
        "| method | " + " | ".join(TESTS) + " | train minutes | tokens/s |",
        "|---|" + "---|" * (len(TESTS) + 2),
    ]
    for method in METHODS:
        unit = units[method]
        scores = [f"{unit['tests'][t]['bleu']:.2f} / {unit['tests'][t]['chrf']:.2f}" for t in TESTS]
        lines.append(f"| {method} | " + " | ".join(scores) + f" | {unit['train_minutes']} | "
                     f"{unit['tokens_per_second']:,.0f} |")  # fmt: skip
    lines += ["", "BLEU / chrF. ΔBLEU (paired bootstrap p, "
              f"{args.bootstrap_samples} samples), per test set and pooled over the four (hypotheses concatenated):",
              "", "| system vs baseline | " + " | ".join(TESTS) + " | pooled |", "|---|" + "---|" * (len(TESTS) + 1)]  # fmt: skip
    for system in ("dbsa_sync_full", *COMBINATIONS):
        lines.append(f"| {system} vs vanilla | " + " | ".join(compare("vanilla", system, hyps, refs,
                                                                        args.bootstrap_samples)) + " |")  # fmt: skip
    for system in COMBINATIONS:
        lines.append(f"| {system} vs dbsa_sync_full | " + " | ".join(compare("dbsa_sync_full", system, hyps, refs,
                                                                               args.bootstrap_samples)) + " |")  # fmt: skip
    lines.append("| all3 vs pascal_dbsa_sync | " + " | ".join(compare("pascal_dbsa_sync", "all3", hyps, refs,
                                                                         args.bootstrap_samples)) + " |")  # fmt: skip
    lines += ["", "One seed: a paired bootstrap measures the test sets' sampling noise, not the seed-to-seed spread "
              "(round two's seeds moved a method's BLEU by up to 0.8). PASCAL alone and the alignment biases alone "
              "have no GPU unit here. Cost: vanilla, pascal_dbsa_sync and all3 trained at the same time on the one GPU (three "
              "processes), dbsa_sync_full alone in an earlier call, so their training minutes and tokens/s compare "
              "among the three only."]  # fmt: skip
    (results / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
