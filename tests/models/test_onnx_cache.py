"""Issue 65, item 5: the ONNX decoder cache (`decoding.onnx_engine`) checks an entry before use
(`check_onnx_cache_entry`: its record's key, size and sha256, then `onnx.checker`, then ONNX Runtime's load and the
step's inputs and outputs); an entry that fails is dropped and rebuilt with one warning naming the file, and the
engine still decodes as `generate`. Failed before: a truncated graph failed every later run as a bug, and nothing
said to delete it.

One real export (the module's fixture); a rebuild here reuses its bytes (`_export` is counted, not rerun), so each
case costs a session load, not an export."""

import hashlib
import json
import logging
import random
import re

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration  # noqa: E402
from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder, check_onnx_cache_entry  # noqa: E402

SETTINGS = dict(num_beams=2, max_new_tokens=6)


def tiny_model(seed: int) -> SyntaxMTForConditionalGeneration:
    torch.manual_seed(seed)
    config = SyntaxMTConfig(vocab_size=30, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                            max_position_embeddings=32, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                            forced_eos_token_id=1, bos_token_id=None, dropout=0.0)  # fmt: skip
    return SyntaxMTForConditionalGeneration(config).eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(model, the graph's bytes, the cache folder holding its entry, inputs): one real export."""
    model = tiny_model(0)
    cache = tmp_path_factory.mktemp("onnx-cache")
    OnnxDecoder(model, cache_dir=cache)
    (graph,) = cache.glob("decoder-*.onnx")
    ids = torch.tensor([[5, 9, 12, 1], [7, 3, 1, 0]])
    return model, graph.read_bytes(), cache, (ids, (ids != 0).long())


@pytest.fixture
def cache(exported, tmp_path, monkeypatch):
    """A copy of the cache folder, and the number of exports a decoder made (`_export` gives the stored bytes)."""
    model, proto, source, _ = exported
    for file in source.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    exports = []
    monkeypatch.setattr(OnnxDecoder, "_export", lambda self: exports.append(1) or proto)
    return tmp_path, exports


def entry(folder):
    (graph,) = folder.glob("decoder-*.onnx")
    return graph, graph.with_suffix(".json")


def decodes_as_generate(model, folder, inputs):
    decoder = OnnxDecoder(model, cache_dir=folder)
    ids, mask = inputs
    assert torch.equal(decoder.generate(ids, mask, **SETTINGS), model.generate(input_ids=ids, attention_mask=mask,
                                                                               **SETTINGS))  # fmt: skip


def test_an_intact_entry_is_used_as_it_is(exported, cache):
    model, _, _, inputs = exported
    folder, exports = cache
    graph, record = entry(folder)
    assert check_onnx_cache_entry(graph, graph.stem.removeprefix("decoder-")) is None
    stored = json.loads(record.read_text())
    assert (
        stored["bytes"] == graph.stat().st_size and stored["sha256"] == hashlib.sha256(graph.read_bytes()).hexdigest()
    )
    decodes_as_generate(model, folder, inputs)
    assert exports == []


def foreign_record(graph, record):
    """Another decoder's entry copied under this name: its record names another key."""
    record.write_text(json.dumps({**json.loads(record.read_text()), "key": "0" * 32}))


def rewrite_record(graph, record):
    """A truncated graph whose record was rewritten to match it: only the ONNX checker can tell."""
    data = graph.read_bytes()[: graph.stat().st_size // 2]
    graph.write_bytes(data)
    key = json.loads(record.read_text())["key"]
    record.write_text(json.dumps({"key": key, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}))


DAMAGES = {
    "truncated graph": (lambda g, r: g.write_bytes(g.read_bytes()[:1000]), r"holds 1000 bytes where its record says"),
    "random graph": (lambda g, r: g.write_bytes(random.Random(0).randbytes(g.stat().st_size)),
                     r"does not have the sha256 its record gives"),
    "no record": (lambda g, r: r.unlink(), r"has no record decoder-\w+\.json"),
    "record not JSON": (lambda g, r: r.write_text('{"key": '), r"has a record decoder-\w+\.json that cannot be read"),
    "record of another entry": (foreign_record, r"has a record decoder-\w+\.json of another decoder"),
    "truncated graph, record to match": (rewrite_record, r"is not a valid ONNX graph"),
    "record without graph": (lambda g, r: g.unlink(), r"has a record but no graph"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(DAMAGES))
def test_a_damaged_entry_is_dropped_and_rebuilt_with_a_warning(exported, cache, caplog, case):
    model, proto, _, inputs = exported
    folder, exports = cache
    graph, record = entry(folder)
    damage, reason = DAMAGES[case]
    damage(graph, record)
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.decoding"):
        decodes_as_generate(model, folder, inputs)
    assert exports == [1]  # rebuilt once
    (warning,) = [r.getMessage() for r in caplog.records if "ONNX decoder cache" in r.getMessage()]
    assert (
        warning.startswith(f"ONNX decoder cache: dropped {graph}, which ") and "exporting the decoder again" in warning
    )
    assert re.search(reason, warning), warning
    assert graph.read_bytes() == proto and check_onnx_cache_entry(graph, graph.stem.removeprefix("decoder-")) is None
    caplog.clear()
    decodes_as_generate(model, folder, inputs)  # the rebuilt entry is used as it is
    assert exports == [1] and not caplog.records


def test_an_entry_onnx_runtime_cannot_run_is_rebuilt(exported, cache, caplog, monkeypatch):
    """What the record and the checker cannot see (a graph whose inputs are not the step's) is found at load."""
    import onnxruntime

    model, _, _, inputs = exported
    folder, exports = cache
    real = onnxruntime.InferenceSession
    calls = []

    def first_load_fails(graph, *args, **kwargs):
        calls.append(graph)
        if len(calls) == 1:
            raise onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph("planted")
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", first_load_fails)
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.decoding"):
        decodes_as_generate(model, folder, inputs)
    assert exports == [1] and any("ONNX Runtime cannot load (InvalidGraph: planted)" in r.getMessage()
                                  for r in caplog.records)  # fmt: skip


def test_a_cache_that_cannot_be_written_decodes_from_memory(exported, tmp_path, caplog, monkeypatch):
    model, proto, _, inputs = exported
    monkeypatch.setattr(OnnxDecoder, "_export", lambda self: proto)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.decoding"):
        decodes_as_generate(model, blocked / "cache", inputs)
    assert any("ONNX decoder cache: cannot write" in r.getMessage() and "HF_SYNTAX_MT_CACHE" in r.getMessage()
               for r in caplog.records)  # fmt: skip
