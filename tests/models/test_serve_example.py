"""Issue 67, item 6: `examples/serve_ct2.py`, an HTTP service over a CTranslate2 folder, started on 127.0.0.1: its
translations equal the folder's `CTranslate2Pipeline` and the exported model's `generate` (greedy, float32), requests
sent together are translated in fewer batches than requests, and bad bodies get a 400 that says what to send."""

import importlib.util
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_syntax_mt.export import export_to_ctranslate2
from hf_syntax_mt.export.serve import CTranslate2Pipeline
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

pytest.importorskip("ctranslate2", reason="the deploy extra (pip install 'hf-syntax-mt[deploy]')")

ROOT = Path(__file__).resolve().parents[2]
WORDS = "le la un une chat chien maison jardin mange dort voit grand petit rouge bleu vite".split()
SENTENCES = [" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3 + i % 5)) for i in range(24)]


def _example():
    spec = importlib.util.spec_from_file_location("serve_ct2", ROOT / "examples" / "serve_ct2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(server, base URL, model, tokenizer, pipeline): an untrained tiny model (random weights give varied outputs),
    greedy, exported to CTranslate2 and served on a free port of 127.0.0.1."""
    tokenizer = train_tokenizer(SENTENCES * 4, vocab_size=60, min_frequency=1)
    config = model_config(tokenizer, d_model=32, layers=2, heads=4, ffn_dim=64, dropout=0.0)
    model = build_model(config, seed=3).eval()
    model.generation_config.max_length = 12
    model.generation_config.num_beams = 1
    directory = tmp_path_factory.mktemp("serve") / "model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    pipe = CTranslate2Pipeline(export_to_ctranslate2(directory, directory.parent / "ct2"))
    server = _example().make_server(pipe, "127.0.0.1", 0, max_batch=64, max_wait_ms=200)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    yield server, f"http://{host}:{port}", model, tokenizer, pipe
    server.shutdown()


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url + "/translate", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_service_translates_as_generate_and_batches_concurrent_requests(served):
    server, url, model, tokenizer, pipe = served
    with torch.no_grad():
        ids = model.generate(**tokenizer(SENTENCES, return_tensors="pt", padding=True))
    expected = tokenizer.batch_decode(ids, skip_special_tokens=True)
    assert [r["translation_text"] for r in pipe(SENTENCES)] == expected
    assert len(set(expected)) > 3  # the outputs differ from sentence to sentence: the order is checked
    before = len(server.batcher.batches)
    with ThreadPoolExecutor(8) as pool:  # 12 requests at once: one sentence, or a list of three
        answers = list(pool.map(lambda i: _post(url, json.dumps({"text": SENTENCES[i]} if i % 2 else
                                                                {"texts": SENTENCES[i:i + 3]}).encode()),
                                range(12)))  # fmt: skip
    for i, (status, payload) in enumerate(answers):
        assert status == 200
        assert payload == ({"translation": expected[i]} if i % 2 else {"translations": expected[i : i + 3]})
    batches = server.batcher.batches[before:]
    assert sum(batches) == 6 * 1 + 6 * 3 and len(batches) < 12  # requests that arrived together shared a batch
    with urllib.request.urlopen(url + "/health", timeout=10) as r:
        health = json.loads(r.read())
    assert health["status"] == "ok" and health["decoding"]["beam_size"] == 1
    # generate's max_length 12 counts the start token; a forced end token takes the last place
    forced_eos = model.generation_config.forced_eos_token_id is not None
    assert health["decoding"]["max_decoding_length"] == 11 - forced_eos


@pytest.mark.parametrize(
    ("body", "says"),
    [(b"not json", "not JSON"), (b'"a sentence"', 'one of {"text"'), (b'{"texts": "a sentence"}', "list of strings"),
     (b'{"texts": ["a", 3]}', "item 1 is int"), (b'{"text": ["a"]}', '"text" must be a string'),
     (b'{"text": "a", "texts": ["b"]}', "one of"), (b"\xff\xfe", "not JSON")],
)  # fmt: skip
def test_bad_bodies_get_a_400_that_says_what_to_send(served, body, says):
    status, payload = _post(served[1], body)
    assert status == 400 and says in payload["error"]


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.sampled_from(["text", "texts", "x"]), st.integers() | st.text(max_size=3),
                                 max_size=2)))  # fmt: skip
def test_read_request_accepts_only_one_text_or_a_list_of_texts(value):
    read_request = _example().read_request
    body = json.dumps(value).encode()
    ok = isinstance(value, dict) and (
        (set(value) == {"text"} and isinstance(value["text"], str))
        or (
            set(value) == {"texts"}
            and isinstance(value["texts"], list)
            and all(isinstance(t, str) for t in value["texts"])
        )
    )
    if ok:
        texts, single = read_request(body)
        assert texts == ([value["text"]] if single else value["texts"]) and single == ("text" in value)
    else:
        with pytest.raises(ValueError):
            read_request(body)
