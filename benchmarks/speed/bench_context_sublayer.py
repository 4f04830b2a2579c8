"""Where a decoding step's context sublayer spends its time: one decoder context attention (Zhang et al. 2018,
Eqs. 16, 21-22) for one new token per sentence, timed whole and kernel by kernel, beside the sentence model's own
cross-attention over the source, at `bench_context.py`'s shapes (32 sentences, d_model 256, 8 heads, M = 128 padded
context keys, S = 66 source keys).

    python benchmarks/speed/bench_context_sublayer.py --threads 1    # writes benchmarks/results/context/sublayer.json

Each figure is the median of 7 timings of `--calls` calls (inference mode), in microseconds per call. Use an idle
core: the kernels are memory-bound, and a neighbour's traffic slows them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F  # noqa: N812

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.methods.document_context import ContextAttention, ContextMasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import POSITIVE, THREADS  # noqa: E402
from benchmarks.common import cpu_name, software, write_json  # noqa: E402


def timed(fn, calls: int) -> float:
    """Median microseconds per call of `fn` over 7 timings of `calls` calls, after 50 warm-up calls."""
    for _ in range(50):
        fn()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", default="benchmarks/results/context/sublayer.json", help="the JSON written")
    sizes = (("--threads", 1, "torch threads"), ("--batch-size", 32, "B, sentences decoded together"),
             ("--context-length", 128, "M, padded context keys"), ("--source-length", 66, "S, the cross-attention's keys"),
             ("--d-model", 256, "D, the model's width"), ("--heads", 8, "H, attention heads"),
             ("--calls", 400, "calls per timing (the median of 7 timings is kept)"))  # fmt: skip
    for flag, default, about in sizes:
        p.add_argument(flag, type=THREADS if flag == "--threads" else POSITIVE, default=default, help=about)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, M, S, D, H = args.batch_size, args.context_length, args.source_length, args.d_model, args.heads
    d = D // H
    config = SyntaxMTConfig(d_model=D, encoder_attention_heads=H, decoder_attention_heads=H, context_sentences=2)
    sublayer = ContextAttention(config, H).eval()
    hidden = torch.randn(B, 1, D)  # (B, T=1, D): one new token per sentence
    key, value = torch.randn(B, H, M, d), torch.randn(B, H, M, d)  # (B, H, M, d), the layout decoding reads
    lengths = torch.randint(M // 6, M + 1, (B,), generator=torch.Generator().manual_seed(0))
    lengths[0] = M
    attend = (torch.arange(M)[None] < lengths[:, None])[:, None, None]  # (B, 1, 1, M) bool
    query = torch.randn(B, H, 1, d)
    source_key, source_value = torch.randn(B, H, S, d), torch.randn(B, H, S, d)
    x = hidden.view(B, D)
    with torch.inference_mode():
        us = {
            "sublayer": timed(lambda: sublayer(hidden, (key, value), ContextMasks(attend, None)), args.calls),
            "sublayer_without_mask": timed(
                lambda: sublayer(hidden, (key, value), ContextMasks(None, None)), args.calls
            ),  # fmt: skip
            "context_attention": timed(
                lambda: F.scaled_dot_product_attention(query, key, value, attn_mask=attend), args.calls
            ),
            "cross_attention_over_source": timed(
                lambda: F.scaled_dot_product_attention(query, source_key, source_value), args.calls
            ),
            "one_d_by_d_product": timed(lambda: sublayer.q_proj(x), args.calls),
            "layer_norm": timed(lambda: sublayer.layer_norm(hidden), args.calls),
            "sigmoid_and_lerp": timed(lambda: torch.lerp(hidden, hidden, hidden.sigmoid()), args.calls),
        }
    key_value_megabytes = 2 * key.numel() * key.element_size() / 1e6
    result = {
        "benchmark": "context_sublayer_decoding_step",
        "software": software(),
        "cpu": cpu_name(),
        "config": vars(args),
        "microseconds_per_call": us,
        "context_key_value_megabytes": key_value_megabytes,
        # MB per microsecond = 1e3 GB/s
        "context_attention_gigabytes_per_second": key_value_megabytes / us["context_attention"] * 1e3,
        "attention_share_of_sublayer": us["context_attention"] / us["sublayer"],
        "microseconds_per_key": {
            "context_attention": us["context_attention"] / M,
            "cross_attention_over_source": us["cross_attention_over_source"] / S,
        },  # fmt: skip
        "load_average": list(os.getloadavg()),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
