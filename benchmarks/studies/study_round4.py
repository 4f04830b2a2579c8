"""Study round four (issue 66): is the stack real and general? The analysis, hypotheses and decision rule are fixed in
``docs/studies/round4.md`` (committed before any unit ran); this script runs its units and rebuilds its tables.

Units, in blocks: a **block** is the three units of one seed (``vanilla``, ``dbsa_sync_full``, ``all3``: round two's
and round three's recipes from `hf_syntax_mt.recipes`), trained on one machine kind, in one session, on one fixed
commit (each unit file records its machine, `benchmarks.machine`, and its commit).

- ``low-METHOD-seedK`` (K = 3, 4, 5): en->de, round two's low-resource setting unchanged (`study_round2.run_unit`:
  the fixed 5,000-pair subset of seed 2026, its joint BPE of 4,000, the sources' and targets' trees from
  multi30k-parsed, 2,000 steps, the four Multi30k test sets, beam 4).

Unit files go to ``RESULTS/runs/`` as in rounds two and three; a unit already written is skipped, an interrupted unit
resumes from its last checkpoint.

    python benchmarks/studies/study_round4.py --list
    python benchmarks/studies/study_round4.py --units low-vanilla-seed3 --threads 1 --no-aggregate
    python benchmarks/studies/study_round4.py --quick --results /tmp/r4 --output-dir /tmp/r4runs --units low-all3-seed3
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402
from benchmarks.studies import study_round2 as round_two  # noqa: E402
from benchmarks.studies import study_round3 as round_three  # noqa: E402

RESULTS = ALL_RESULTS / "round4"
#: method -> (config overrides, needs target trees, what it is), the rounds' own entries
METHODS = {
    "vanilla": round_two.METHODS["vanilla"],
    "dbsa_sync_full": round_two.METHODS["dbsa_sync_full"],
    "all3": round_three.METHODS["all3"],
}
ENDE_SEEDS = (3, 4, 5)
#: the blocks, seed by seed: each seed's three units one after the other
PLAN = [("low", method, seed) for seed in ENDE_SEEDS for method in METHODS]


def parse_unit(name: str) -> tuple[str, str, int]:
    setting, _, rest = name.partition("-")
    method, sep, seed = rest.rpartition("-seed")
    if setting != "low" or method not in METHODS or not sep or common.seed_number(seed) is None:
        raise SystemExit(f"unknown unit {name!r}: use low-METHOD-seedK with METHOD in {list(METHODS)} and K a "
                         "number (0-9 digits)")  # fmt: skip
    return setting, method, int(seed)


def parse_args(argv=None):
    return round_two.parse_args(argv, RESULTS, common.ROOT / "runs" / "round4", __doc__, METHODS, "round four")


def run_unit(args, setting: str, method: str, seed: int, device: str) -> Path:
    return round_two.run_unit(args, setting, method, seed, device)


def aggregate(args) -> None:
    """The tables are built once a block is complete (`docs/studies/round4.md`'s analysis)."""
    done = sorted(p.stem for p in (Path(args.results) / "runs").glob("*.json"))
    print(f"round four: {len(done)} unit files: {', '.join(done) or 'none'}", flush=True)


def main(argv=None) -> int:
    return common.run_study(parse_args(argv), PLAN, parse_unit, run_unit, aggregate, name=round_two.unit_name)


if __name__ == "__main__":
    sys.exit(main())
