"""Real-data benchmarks, by the names the Makefile and earlier notes use.

    python benchmarks/studies/bench_multi30k.py [FLAGS]               # = multi30k_study.py: the Multi30k en->de study
    python benchmarks/studies/bench_multi30k.py --task docnmt [FLAGS] # = bench_docnmt.py: two-step document-level training

(The earlier fr->en benchmark of 200 steps x 64 pairs, which gave BLEU ~3, is replaced by the study's recipe.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--task" in argv and argv[argv.index("--task") + 1 :][:1] == ["docnmt"] or "--task=docnmt" in argv:
        from benchmarks.studies import bench_docnmt

        return bench_docnmt.main(argv)
    from benchmarks.studies import multi30k_study

    return multi30k_study.main([a for a in argv if a not in ("--task", "multi30k", "--task=multi30k")])


if __name__ == "__main__":
    raise SystemExit(main())
