"""An interrupted corpus parse resumes from its cache: a `prepare_dataset` run with two worker processes is killed
(SIGKILL, the whole process group) half-way; the next run parses exactly the texts that no complete cache shard
holds, reads no half-written entry, and gives the rows an uninterrupted run gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from resume_worker import SlowLoggingParser, corpus, logged, run

from hf_syntax_mt.data.parsers import CachedParser

N = 32  # 8 batches of 4


def _shard_texts(cache: Path) -> list[str]:
    """The texts of every complete shard; each line must be a whole record (no torn entry)."""
    out = []
    for shard in CachedParser(SlowLoggingParser("."), cache).shards():
        for line in shard.read_text(encoding="utf-8").splitlines():
            out.append(json.loads(line)["parse"]["text"])
    return out


def test_killed_parse_resumes_without_reparsing(tmp_path, data_marian_tokenizer):
    tok = tmp_path / "tok"
    data_marian_tokenizer.save_pretrained(tok)
    cache, log1, log2, log3 = (tmp_path / d for d in ("cache", "log1", "log2", "log3"))
    for d in (log1, log2, log3):
        d.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("resume_worker.py")), str(cache), str(log1),
                              str(tok), "2", str(N)], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 120
    while len(_shard_texts(cache)) < 8 if cache.exists() else True:
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "the child wrote no cache shard in 120 s"
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the main process and both map workers, mid-run
    child.wait()
    done = _shard_texts(cache)
    assert 8 <= len(done) < N and len(set(done)) == len(done)
    assert set(done) <= set(logged(log1))  # every cached text was parsed by the killed run

    resumed = run(str(cache), str(log2), str(tok), 1, N, delay=0.0)
    assert sorted(logged(log2)) == sorted(set(corpus(N)) - set(done))  # only the rest, each once
    fresh = run(str(tmp_path / "fresh_cache"), str(log3), str(tok), 1, N, delay=0.0)
    assert resumed.to_dict() == fresh.to_dict()
    assert sorted(_shard_texts(cache)) == sorted(corpus(N))  # the cache is now complete


def test_torn_writes_are_never_read(tmp_path):
    """What a kill can leave: a hidden .tmp shard cut mid-line (CachedParser's own writes) is never read, and the
    text it held is parsed again."""
    log = tmp_path / "log"
    log.mkdir()
    cached = CachedParser(SlowLoggingParser(str(log)), tmp_path / "cache")
    first = cached.parse(["a b", "c d"])
    shard_dir = cached.shard_dir
    record = json.dumps({"key": cached._key("e f"), "parse": first[0].to_dict()})
    (shard_dir / ".0-1-x.jsonl.tmp").write_text(record[: len(record) // 2], encoding="utf-8")
    again = CachedParser(SlowLoggingParser(str(log)), tmp_path / "cache")
    assert again.parse(["a b", "c d", "e f"])[:2] == first
    assert logged(log) == ["a b", "c d", "e f"]  # the torn entry was parsed again, not read
    assert again.parse(["e f"])[0].words == ["e", "f"]
