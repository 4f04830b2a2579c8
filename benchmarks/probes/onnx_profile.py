"""Where PASCAL's ONNX Runtime path spends its time against `generate` (issue 67 item 5): bench_deploy's PASCAL model
(transformer-base size, random weights, seed 0, PASCAL on 4 of 8 heads of encoder layer 1), the first ``--sentences``
Multi30k test sentences parsed by spaCy, batches longest first, fixed-length outputs (``min_new_tokens =
max_new_tokens``), one thread.

Per round, interleaved: `generate` (parse + `model.generate`) and the onnxruntime engine (parse + encoder in torch +
the cross-attention caches + ONNX Runtime's decoder steps + the beam reorders + the search's own bookkeeping, each
phase timed apart), in wall and CPU seconds (CPU time is the steadier figure on a shared machine: one thread, so it
is close to the wall time of a quiet one). Then one pass with ONNX Runtime's own profiler: its time by operator.
Both paths must give the same token ids (checked first).

    python benchmarks/probes/onnx_profile.py --data MULTI30K_DIR --batch 32 --beams 4
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BATCH, BEAMS, POSITIVE, refuse_overwriting  # noqa: E402
from benchmarks.common import RESULTS, cpu_name, git_commit, relative_path, software, write_json  # noqa: E402

OUT = RESULTS / "deploy" / "onnx_profile.json"
PHASES = ("parse", "encoder", "cross_caches", "onnx_steps", "reorders", "search")


class Clock:
    """Wall and CPU seconds, summed by phase."""

    def __init__(self):
        self.wall, self.cpu = collections.Counter(), collections.Counter()

    def timed(self, phase: str, function):
        def run(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.wall[phase] += time.perf_counter() - wall
                self.cpu[phase] += time.process_time() - cpu

        return run


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a folder with Multi30k's train.{en,de} and test_2016_flickr.en")
    p.add_argument("--sentences", type=POSITIVE, default=200)
    p.add_argument("--batch", type=BATCH, default=32)
    p.add_argument("--beams", type=BEAMS, default=4)
    p.add_argument("--new-tokens", type=POSITIVE, default=20)
    p.add_argument("--rounds", type=POSITIVE, default=3)
    p.add_argument("--output", default=str(OUT))
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["output"], folders=["data"])
    return args


def main(argv=None) -> int:
    args = arguments(argv)
    import onnxruntime as ort
    import torch

    from benchmarks.speed import bench_deploy as deploy
    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    torch.set_num_threads(1)
    data = Path(args.data)
    read = lambda name: (data / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    tokenizer = train_tokenizer(read("train.en") + read("train.de"), vocab_size=deploy.VOCAB)
    built = {"tokenizer": tokenizer, "sentences": read("test_2016_flickr.en")[: args.sentences]}
    config = model_config(
        tokenizer, **deploy.BASE, dropout=0.0, max_position_embeddings=256, **deploy.METHODS["pascal"]
    )
    model = build_model(config, seed=0).eval()
    model.generation_config.forced_eos_token_id = None  # fixed-length outputs: nothing forced
    parser = get_parser(**deploy.PARSER)
    batches = deploy.batches_of(built["sentences"], args.batch)
    settings = dict(
        num_beams=args.beams, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False
    )
    work = Path(tempfile.mkdtemp(prefix="onnx_profile-"))
    onnx = OnnxDecoder(model, threads=1, cache_dir=work)
    clock = Clock()
    encoder = model.get_encoder()
    encoder.forward = clock.timed("encoder", encoder.forward)  # both paths' encoder; read for the onnx path only
    rows_of = onnx.rows

    def rows(*a, **k):
        made = clock.timed("cross_caches", rows_of)(*a, **k)
        made.step, made.keep = clock.timed("onnx_steps", made.step), clock.timed("reorders", made.keep)
        return made

    onnx.rows = rows

    def parsed():
        return [deploy.padded(deploy.parse_inputs(built, parser, b), tokenizer.pad_token_id) for b in batches]

    def run_generate():
        with torch.inference_mode():
            return [
                model.generate(input_ids=i, attention_mask=m, parent_positions=p, **settings) for i, m, p in parsed()
            ]

    def run_onnx():
        inputs = clock.timed("parse", parsed)()
        with torch.inference_mode():
            return [clock.timed("total", onnx.generate)(i, m, parent_positions=p, **settings) for i, m, p in inputs]

    same = all(torch.equal(a, b) for a, b in zip(run_generate(), run_onnx(), strict=True))
    rounds = []
    for _ in range(args.rounds):
        row = {}
        for name, run in (("generate", run_generate), ("onnxruntime", run_onnx)):
            clock.wall.clear(), clock.cpu.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            row[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
        inner = sum(clock.cpu[p] for p in PHASES if p not in ("parse", "search"))
        clock.cpu["search"] = clock.cpu["total"] - inner  # the search's own bookkeeping: the rest of onnx.generate
        row["onnxruntime_phases_cpu_s"] = {p: round(clock.cpu[p], 3) for p in PHASES}
        rounds.append(row)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.enable_profiling, options.profile_file_prefix = True, str(work / "ort")
    graph = next(work.glob("decoder-*.onnx"))
    onnx.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    run_onnx()
    by_op, calls = collections.Counter(), collections.Counter()
    for event in json.loads(Path(onnx.session.end_profiling()).read_text()):
        if event.get("cat") == "Node":
            by_op[event["args"].get("op_name", "?")] += event["dur"] / 1e6
            calls[event["args"].get("op_name", "?")] += 1
    total = sum(by_op.values())
    median = lambda path, key: statistics.median(r[path][key] for r in rounds)  # noqa: E731
    report = {
        "what": __doc__.split("\n\n")[0].replace("\n", " "),
        "argv": [relative_path(a) for a in sys.argv[1:]],
        "commit": git_commit(),
        "cpu": cpu_name(),
        "software": software(),
        "data": relative_path(str(data)),
        "same_token_ids": same,
        "rounds": rounds,
        "median_cpu_s": {"generate": median("generate", "cpu_s"), "onnxruntime": median("onnxruntime", "cpu_s")},
        "ratio_cpu": median("generate", "cpu_s") / median("onnxruntime", "cpu_s"),
        "ratio_wall": median("generate", "wall_s") / median("onnxruntime", "wall_s"),
        "onnx_operators": [
            {"op": op, "seconds": round(s, 3), "share": round(s / total, 3), "calls": calls[op]}
            for op, s in by_op.most_common(12)
        ],  # fmt: skip
    }
    print(json.dumps({k: report[k] for k in ("same_token_ids", "median_cpu_s", "ratio_cpu", "ratio_wall")}))
    print(json.dumps(rounds[-1]["onnxruntime_phases_cpu_s"]))
    write_json(args.output, report)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
