"""The document study's shared definitions: its unit kinds, plan and recipe, where its results live, and the record
of the pronoun item file a unit scores. Both the units (`docnmt_real.py`) and the analysis (`docnmt_stats.py`) import
them from here, so that neither imports the other's module for its constants (issue 49: no import circle)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks import common  # noqa: E402
from benchmarks.common import RESULTS as ALL_RESULTS  # noqa: E402

RESULTS = ALL_RESULTS / "docnmt_real"
ITEMS = RESULTS / "pronoun_items.jsonl"
KINDS = {
    "step1": "sentence-level model (step 1), from scratch, no context",
    "document": "step 1 + step 2: k=2 context sentences, 1-layer context encoder, gates; sentence-level parameters "
    "frozen",
    "control": "step 1 + as many steps again without context (every parameter trained)",
    "unfrozen": "step 1 + step 2 as the document model, every parameter trained (the control's training, with "
    "context)",
}
#: the kinds that read context: each is compared with the control and with itself given random context
CONTEXT_KINDS = ("document", "unfrozen")
PLAN = [("step1", 0), ("document", 0), ("control", 0), ("document", 1), ("control", 1), ("document", 2),
        ("control", 2), ("unfrozen", 0), ("unfrozen", 1), ("unfrozen", 2)]  # fmt: skip
#: the steps of step 1 and of step 2 (document and control alike). Step 1: 4,000 steps (about 9 epochs of the
#: 55,399 pairs), where its validation loss had flattened (newstest2015, first 400 sentences: 6.12, 5.28, 5.04, 4.95,
#: 4.93, 4.91 at steps 1,000-6,000, this recipe at 6,000 steps, commits 9800efd, 8ea4394, 3e1ffc6). 6,000 steps fitted
#: a 3-hour session with its evaluation only on an Intel Xeon (about 1.0 s a step on one thread at native bf16, no
#: less on two); on an AMD EPYC with AVX512-BF16 step 1 took 102 training minutes for 4,000 steps (about 1.5 s a step,
#: runs/step1-seed0.json). Step 2: 2,000 steps, half of step 1's, started from step 1's model on disk, which a new
#: machine trains again (`ensure_step1`); a step-2 unit resumes from its last checkpoint when a session ends
STEP1_STEPS = 4000
STEP2_STEPS = 2000
RECIPE = dict(d_model=256, layers=3, heads=4, ffn_dim=1024, dropout=0.1, vocab_size=8000, max_tokens=2500,
              step1_steps=STEP1_STEPS, step2_steps=STEP2_STEPS, learning_rate=7e-4, warmup_steps=800,
              step2_warmup_steps=200, adam_beta2=0.98, max_grad_norm=1.0, label_smoothing=0.1,
              average_checkpoints=5, average_every=200, num_beams=4, eval_steps=1000, max_eval_samples=400,
              max_length=128, context_sentences=2, context_encoder_layers=1, save_steps=500, max_train=None,
              max_test_documents=None, max_document_lines=None, max_items=None, translate_batch_size=32,
              precision="auto")  # fmt: skip
QUICK = dict(d_model=32, layers=2, ffn_dim=64, vocab_size=600, max_tokens=800, step1_steps=12, step2_steps=6,
             warmup_steps=4, step2_warmup_steps=2, average_checkpoints=2, average_every=2, eval_steps=6,
             max_eval_samples=6, max_length=20, num_beams=1, save_steps=4, max_train=120, max_test_documents=2,
             max_document_lines=5, max_items=12)  # fmt: skip


def item_file(path: str | Path) -> dict:
    """The pronoun item file a unit scores: its path, sha256 and item count (non-empty lines), recorded in the unit
    file so that the aggregate can say which item set every pronoun figure comes from."""
    count = sum(1 for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip())
    return {"file": common.relative_path(str(path)), "sha256": common.sha256_file(path), "items": count}
