"""The child process of `test_parse_resume.py`: parses a corpus through `prepare_dataset` with a cached, slow, logging
parser, so that the test can kill it half-way (``python resume_worker.py CACHE LOG TOKENIZER NUM_PROC N``)."""

from __future__ import annotations

import os
import sys
import time

from trees import chain_sentence

from hf_syntax_mt.data.parsers import Parser


def corpus(n: int) -> list[str]:
    return [f"word{i} eats {'fish' if i % 2 else 'bread'} today number {i}" for i in range(n)]


class SlowLoggingParser(Parser):
    """Chain trees (each word depends on the previous one); appends every text it parses to ``{log_dir}/{pid}.log``
    (one line per text, one write per call) after sleeping ``delay`` seconds, like a real parser's cost."""

    name, model = "slowlog", "chain"

    def __init__(self, log_dir: str, delay: float = 0.0):
        self.log_dir, self.delay = str(log_dir), delay

    def parse(self, texts):
        time.sleep(self.delay)
        with open(os.path.join(self.log_dir, f"{os.getpid()}.log"), "a", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in texts))
        return [chain_sentence(t) for t in texts]

    def signature(self):
        return "slowlog:chain-1"

    def to_config(self):
        return {"backend": "slowlog"}


def logged(log_dir) -> list[str]:
    """Every text the parsers logged in ``log_dir``."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        with open(os.path.join(log_dir, name), encoding="utf-8") as f:
            out += f.read().splitlines()
    return out


def run(cache_dir: str, log_dir: str, tokenizer_dir: str, num_proc: int, n: int, delay: float):
    from datasets import Dataset
    from transformers import AutoTokenizer

    from hf_syntax_mt.data.parsers import CachedParser
    from hf_syntax_mt.data.preprocess import prepare_dataset

    texts = corpus(n)
    ds = Dataset.from_dict({"source": texts, "target": texts})
    parser = CachedParser(SlowLoggingParser(log_dir, delay), cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return prepare_dataset(ds, tokenizer, parser, num_proc=num_proc if num_proc > 1 else None, batch_size=4)


if __name__ == "__main__":
    cache, log, tok, procs, count = sys.argv[1:6]
    run(cache, log, tok, int(procs), int(count), delay=0.4)
