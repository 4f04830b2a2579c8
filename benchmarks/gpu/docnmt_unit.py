"""Device driver: docnmt_real units on the GPU machine, where spaCy and ../shared/data are absent. The data set is the
one built on the CPU machine (runs/ende_sentence_data, checked against its manifest's sha256); the commit is the one
the working tree was sent at (no .git there)."""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # the package, and `import benchmarks.*`
from benchmarks.data import ende_sentence_data as e  # noqa: E402
from benchmarks.studies import docnmt_real as d  # noqa: E402

cache = ROOT / "runs" / "ende_sentence_data"
manifest = json.loads((cache / "manifest.json").read_text())
outputs = {k: v for k, v in manifest["outputs"].items() if not k.endswith(".conllu.gz")}
if not e._output_intact(cache, outputs):
    raise SystemExit("the data set differs from its manifest")
d.shared_data = lambda args: e.file_paths(cache)
if os.environ.get("TRANSLATE_BATCH_SIZE"):  # a GPU translates larger batches in fewer steps; the unit records it
    d.RECIPE["translate_batch_size"] = int(os.environ["TRANSLATE_BATCH_SIZE"])
d.common.git_commit = lambda: (ROOT / ".dev" / "COMMIT").read_text().strip()
sys.exit(d.main(sys.argv[1:]))
