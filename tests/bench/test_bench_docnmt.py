"""`benchmarks/studies/bench_docnmt.py --quick` end to end on tiny slices of the real docnmt-en-de documents:
step 1, the control and the document model are trained, scored and written, and step 2 leaves every step-1 tensor
unchanged (the two-step training of Zhang et al. 2018, Section 2.4)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import needs
import pytest
import torch
from safetensors.torch import load_file

from hf_syntax_mt.methods.document_context import is_document_parameter

ROOT = Path(__file__).resolve().parents[2]
DATA = needs.SHARED_DATA

pytestmark = [
    pytest.mark.slow,
    needs.skip_without_data("docnmt-en-de"),
]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_docnmt", ROOT / "benchmarks" / "studies" / "bench_docnmt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docnmt_quick_two_step(tmp_path):
    bench = load_bench()
    out, results = tmp_path / "runs", tmp_path / "results"
    argv = ["--task", "docnmt", "--quick", "--data", str(DATA), "--output-dir", str(out), "--results", str(results),
            "--max-train", "200", "--max-validation", "8", "--max-test", "12", "--sentence-steps", "4",
            "--document-steps", "3", "--warmup-steps", "2", "--vocab-size", "500", "--max-length", "24",
            "--bootstrap-samples", "20"]  # fmt: skip
    assert bench.main(argv) == 0

    summary = json.loads((results / "results.json").read_text())
    assert (results / "results.md").read_text().count("\n| ") == 4  # header + 3 models
    runs = {r["name"]: r for r in summary["runs"]}
    assert list(runs) == ["sentence", "control", "document"]
    assert summary["train_sentences"] == 200 and summary["test_size"] == 12
    assert summary["train_documents"] >= 2  # both training corpora contribute documents
    assert [runs[n]["steps"] for n in runs] == [4, 3, 3]
    for name, run in runs.items():
        assert (out / name / "model.safetensors").is_file()
        assert len((out / name / "test_generations.txt").read_text(encoding="utf-8").splitlines()) == 12
        assert set(run["scores"]) == {"validation", "test"}
        assert run["scores"]["test"]["bleu_signature"].startswith("nrefs:1")
    assert 0 < runs["document"]["significance"]["bleu"]["p_value"] <= 1
    assert json.loads((out / "document" / "config.json").read_text())["context_sentences"] == 2
    assert json.loads((out / "control" / "config.json").read_text()).get("context_sentences", 0) == 0

    # Section 2.4: step 2 trains theta_d only, so every step-1 tensor is bit-identical in the document model ...
    step1 = load_file(str(out / "sentence" / "model.safetensors"))
    document = load_file(str(out / "document" / "model.safetensors"))
    extra = set(document) - set(step1)
    assert extra and all(is_document_parameter(k) for k in extra)
    assert not any(is_document_parameter(k) for k in step1)
    for key, tensor in step1.items():
        assert torch.equal(document[key], tensor), key
    assert runs["document"]["sentence_level_drift"] == 0.0
    # ... while the control, trained as many steps without freezing, moved them.
    control = load_file(str(out / "control" / "model.safetensors"))
    assert set(control) == set(step1)
    assert any(not torch.equal(control[k], step1[k]) for k in step1)
    assert runs["control"]["sentence_level_drift"] > 0
