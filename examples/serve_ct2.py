#!/usr/bin/env python
"""A small translation service over a CTranslate2 folder (`hf-syntax-mt export --to ctranslate2`), standard library
only: requests that arrive together are translated in one batch.

    python examples/serve_ct2.py --model runs/dbsa_sync-ct2 --port 8080 --threads 4
    curl -s localhost:8080/translate -d '{"texts": ["Ein Hund rennt.", "Zwei Katzen."]}'
    # {"translations": ["A dog is running.", "Two cats."]}

- ``POST /translate`` with ``{"text": "..."}`` or ``{"texts": ["...", ...]}`` answers ``{"translation": "..."}`` or
  ``{"translations": [...]}``, in order; bad input is a 400 with ``{"error": "..."}`` saying what to send.
- ``GET /health`` answers ``{"status": "ok", "model": DIR, "decoding": ...}``: the settings every request decodes
  with, the model's own (its ``generation_config.json``, as `generate` and ``hf-syntax-mt translate`` decode).
- Batching: a worker takes the waiting requests, up to ``--max-batch`` sentences, waiting at most ``--max-wait-ms``
  for more after the first, and translates them in one ``translate_batch`` call (CTranslate2 sorts a batch by
  length itself).

Translations are the folder's `CTranslate2Pipeline`'s, which equal the exported model's `generate` in float32
(`tests/models/test_export_ctranslate2.py`).
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: the largest request body read (bytes): a larger one is refused, not read
MAX_BODY = 1 << 20


class Batcher:
    """One worker thread that translates waiting requests together (`submit` blocks until its request is done)."""

    def __init__(self, pipe, max_batch: int = 32, max_wait_ms: float = 10.0):
        self.pipe, self.max_batch, self.max_wait = pipe, max_batch, max_wait_ms / 1000
        self.requests: queue.Queue = queue.Queue()
        self.batches: list[int] = []  # sentences of each batch translated (for /health and the tests)
        threading.Thread(target=self._work, daemon=True, name="translate").start()

    def submit(self, texts: list[str]) -> list[str]:
        job = {"texts": texts, "done": threading.Event(), "out": None, "error": None}
        self.requests.put(job)
        job["done"].wait()
        if job["error"] is not None:
            raise job["error"]
        return job["out"]

    def _work(self) -> None:
        while True:
            jobs = [self.requests.get()]
            size, deadline = len(jobs[0]["texts"]), time.monotonic() + self.max_wait
            while size < self.max_batch and (left := deadline - time.monotonic()) > 0:
                try:
                    job = self.requests.get(timeout=left)
                except queue.Empty:
                    break
                jobs.append(job)
                size += len(job["texts"])
            texts = [t for job in jobs for t in job["texts"]]
            try:
                out = [r["translation_text"] for r in self.pipe(texts, batch_size=self.max_batch)]
                self.batches.append(len(texts))
            except Exception as e:  # noqa: BLE001 - handed to every waiting request, which answers 500
                for job in jobs:
                    job["error"] = e
                    job["done"].set()
                continue
            start = 0
            for job in jobs:
                job["out"], start = out[start : start + len(job["texts"])], start + len(job["texts"])
                job["done"].set()


def read_request(body: bytes) -> tuple[list[str], bool]:
    """The sentences of a request body and whether it gave one ``text``; raises ValueError saying what to send."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f'the body is not JSON ({e}): send {{"text": "..."}} or {{"texts": ["...", ...]}}') from None
    if not isinstance(data, dict) or len({"text", "texts"} & set(data)) != 1:
        raise ValueError('send one of {"text": "..."} or {"texts": ["...", ...]}')
    if unknown := sorted(set(data) - {"text", "texts"}):
        raise ValueError(f'unknown field(s) {unknown}: send only "text" or "texts"')
    if "text" in data:
        if not isinstance(data["text"], str):
            raise ValueError(f'"text" must be a string, got {type(data["text"]).__name__}')
        return [data["text"]], True
    texts = data["texts"]
    if isinstance(texts, str) or not isinstance(texts, list):
        raise ValueError(f'"texts" must be a list of strings, got {type(texts).__name__} (one sentence: "text")')
    if bad := [i for i, t in enumerate(texts) if not isinstance(t, str)]:
        raise ValueError(f'"texts" must hold strings only: item {bad[0]} is {type(texts[bad[0]]).__name__}')
    return texts, False


def make_server(pipe, host: str = "127.0.0.1", port: int = 8080, max_batch: int = 32, max_wait_ms: float = 10.0):
    """The HTTP server over ``pipe`` (a `CTranslate2Pipeline`); ``port=0`` picks a free port
    (``server.server_address``). Call ``serve_forever()`` on it."""
    batcher = Batcher(pipe, max_batch, max_wait_ms)
    decoding = pipe.options()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: HTTPStatus, payload: dict) -> None:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path != "/health":
                return self._answer(HTTPStatus.NOT_FOUND, {"error": "GET /health or POST /translate"})
            self._answer(HTTPStatus.OK, {"status": "ok", "model": pipe.model.name_or_path, "decoding": decoding,
                                         "batches": len(batcher.batches)})  # fmt: skip

        def do_POST(self):  # noqa: N802
            if self.path != "/translate":
                return self._answer(HTTPStatus.NOT_FOUND, {"error": "POST /translate"})
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                return self._answer(HTTPStatus.BAD_REQUEST, {"error": f"send a JSON body of 1 to {MAX_BODY} bytes"})
            try:
                texts, single = read_request(self.rfile.read(length))
            except ValueError as e:
                return self._answer(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            try:
                out = batcher.submit(texts) if texts else []
            except Exception as e:  # noqa: BLE001 - a bug of the engine: the client is told, the server goes on
                return self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"})
            self._answer(HTTPStatus.OK, {"translation": out[0]} if single else {"translations": out})

        def log_message(self, format, *args):  # noqa: A002 - one line a request on stderr, as http.server does
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    server = ThreadingHTTPServer((host, port), Handler)
    server.batcher = batcher
    return server


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a CTranslate2 folder written by `hf-syntax-mt export`")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, choices=range(0, 65536), metavar="0-65535")
    p.add_argument("--max-batch", type=int, default=32, choices=range(1, 4097), metavar="1-4096",
                   help="sentences translated together at most (default 32)")  # fmt: skip
    p.add_argument("--max-wait-ms", type=float, default=10.0, help="how long the first request of a batch waits "
                   "for others (default 10 ms)")  # fmt: skip
    p.add_argument("--threads", type=int, default=0, choices=range(0, 1025), metavar="0-1024",
                   help="CTranslate2's CPU threads (0: its default)")  # fmt: skip
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--compute-type", default="default", help="CTranslate2's compute_type (default: the type the "
                   "folder was exported in; auto: the fastest this machine has; int8, float32, ...)")  # fmt: skip
    args = p.parse_args(argv)
    if not 0 <= args.max_wait_ms <= 10_000:
        p.error(f"--max-wait-ms {args.max_wait_ms}: give 0 to 10000")
    from hf_syntax_mt.errors import UserError
    from hf_syntax_mt.export.serve import CTranslate2Pipeline, exported_kind

    if exported_kind(args.model) != "ctranslate2":
        p.error(f"--model {args.model}: not a CTranslate2 folder (write one with `hf-syntax-mt export --model DIR "
                "--to ctranslate2 --output OUT`)")  # fmt: skip
    try:
        pipe = CTranslate2Pipeline(
            args.model, device=args.device, threads=args.threads, compute_type=args.compute_type
        )
    except (UserError, ValueError) as e:  # CTranslate2 names a compute type this machine lacks in a ValueError
        p.error(str(e))
    server = make_server(pipe, args.host, args.port, args.max_batch, args.max_wait_ms)
    host, port = server.server_address[:2]
    print(f"serving {args.model} on http://{host}:{port} (POST /translate, GET /health)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
