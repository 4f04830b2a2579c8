"""`benchmarks/speed/bench_deploy.py`'s arithmetic: rows with the parse added, PASCAL's fastest path, the targets' ratios
and `met`, the batches every engine shares (timings themselves are never tested)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository: `import benchmarks.*`
spec = importlib.util.spec_from_file_location("bench_deploy", ROOT / "benchmarks" / "speed" / "bench_deploy.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def row(seconds: float, tokens: int = 200, sentences: int = 10) -> dict:
    return bench.summarise("row", [seconds * 2, seconds, seconds / 2], tokens, sentences)  # median: seconds


def test_parse_is_added_and_the_faster_pascal_path_is_taken():
    result = {"pascal_generate": row(4.0), "pascal_onnxruntime": row(2.0), "parse": row(0.5, tokens=0)}
    bench.combined(result, 10)
    assert result["pascal_generate+parse"]["median_s"] == 4.5
    assert result["pascal_onnxruntime+parse"]["sentences_per_s"] == 10 / 2.5
    assert result["pascal_best+parse"]["path"] == "pascal_onnxruntime"
    assert result["pascal_onnxruntime+parse"]["tokens_per_s"] == 200 / 2.5


def test_targets_are_ratios_of_sentences_per_second_with_met():
    names = ["ct2_export_float32", "ct2_marian_float32", "dbsa_sync_generate", "ct2_export_int8"]
    settings = []
    for batch, seconds in ((1, [1.0, 1.0, 2.0, 0.5]), (32, [1.0, 0.98, 1.3, 0.6])):
        rows = {name: row(s) for name, s in zip(names, seconds, strict=True)}
        rows.update({"pascal_generate": row(3.0), "pascal_onnxruntime": row(2.0), "parse": row(0.1, tokens=0)})
        bench.combined(rows, 10)
        settings.append({"threads": 1, "beams": 4, "batch_size": batch, "rows": rows})
    targets = {(t["numerator"], t["denominator"], t["batch_size"]): t for t in bench.targets(settings)}
    # the generate targets are checked at batch 32 only; the others at every batch size
    assert ("ct2_export_float32", "dbsa_sync_generate", 1) not in targets
    export = targets[("ct2_export_float32", "ct2_marian_float32", 32)]
    assert export["ratio"] == round(0.98 / 1.0, 3) and export["met"] is True
    assert targets[("ct2_export_float32", "dbsa_sync_generate", 32)]["ratio"] == 1.3
    assert targets[("ct2_export_float32", "dbsa_sync_generate", 32)]["met"] is False  # 1.3 < 1.4
    assert targets[("ct2_export_int8", "dbsa_sync_generate", 32)]["met"] is False  # 1.3 / 0.6 < 2.2
    pascal = targets[("pascal_best+parse", "pascal_generate+parse", 1)]
    assert pascal["ratio"] == round(3.1 / 2.1, 3) and pascal["met"] is True


def test_every_engine_gets_the_same_batches_longest_first():
    sentences = ["a b", "a b c d", "a", "a b c"]
    batches = bench.batches_of(sentences, 3)
    assert batches == [[1, 3, 0], [2]]
    assert sorted(i for b in bench.batches_of(sentences, 1) for i in b) == [0, 1, 2, 3]
