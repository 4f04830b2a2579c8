"""What makes `generate` faster for a model that cannot be exported (issue 55 item 3), on the CPU: a PASCAL model of
transformer-base size (random weights, seed 0; PASCAL on 4 of 8 heads of encoder layer 1), decoding fixed-length
outputs (``min_new_tokens = max_new_tokens``) of Multi30k test sentences whose inputs are built without a parser
(chain parents: the parse's cost is timed by ``bench_deploy.py``; here only decoding is compared).

Paths, each checked to give `generate`'s token ids, timed interleaved (medians of ``--rounds``):

- ``generate``: transformers' `generate` as it is (dynamic key/value cache);
- ``generate_static``: `generate(cache_implementation="static")` (a preallocated cache of ``max_length``);
- ``generate_static_compiled``: the same with the decoder's forward compiled by ``torch.compile(dynamic=True)`` (its compile time,
  the first call, is reported apart);
- ``torch_step``: the package's own search (`hf_syntax_mt.decoding.search`) over `MarianDecoderStep` in torch;
- ``onnxruntime``: the same search over the ONNX Runtime decoder (`engine="onnxruntime"`; its one-off export time is
  reported apart).

    python benchmarks/probes/decode_paths.py --data MULTI30K_DIR
    python benchmarks/probes/decode_paths.py --data MULTI30K_DIR --no-compile     # without the compiled path
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BATCH, BEAMS, POSITIVE, THREADS, refuse_overwriting  # noqa: E402
from benchmarks.common import RESULTS, cpu_name, git_commit, relative_path, software, write_json  # noqa: E402

OUT = RESULTS / "deploy" / "decode_paths.json"


def setting(text: str) -> str:
    """An argparse type: ``BATCHxBEAMS``, a batch size and a beam count each in its range (``8x0`` was a crash)."""
    batch, sep, beams = text.partition("x")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not BATCHxBEAMS (e.g. 8x4)")
    BATCH(batch), BEAMS(beams)  # each raises argparse's error with its range
    return text


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a folder with Multi30k's train.{en,de} and test_2016_flickr.en")
    p.add_argument("--sentences", type=POSITIVE, default=16)
    p.add_argument(
        "--settings", type=setting, nargs="+", default=["1x1", "8x4"], help="BATCHxBEAMS (default: 1x1 8x4)"
    )
    p.add_argument("--new-tokens", type=POSITIVE, default=20)
    p.add_argument("--threads", type=THREADS, default=1)
    p.add_argument("--rounds", type=POSITIVE, default=3)
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile path (minutes to compile)")
    p.add_argument("--output", default=str(OUT))
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["output"], folders=["data"])
    return args


def main(argv=None) -> int:
    args = arguments(argv)
    import torch

    from hf_syntax_mt.decoding.marian_step import TorchDecoder
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    torch.set_num_threads(args.threads)
    commit = git_commit()  # the commit the run starts from
    data = Path(args.data)
    read = lambda name: (data / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    tokenizer = train_tokenizer(read("train.en") + read("train.de"), vocab_size=8000)
    config = model_config(tokenizer, d_model=512, layers=6, heads=8, ffn_dim=2048, dropout=0.0,
                          encoder_pascal_heads=[4, 0, 0, 0, 0, 0])  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.forced_eos_token_id = None
    sentences = sorted(read("test_2016_flickr.en")[: args.sentences], key=len, reverse=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        onnx = OnnxDecoder(model, threads=args.threads, cache_dir=tmp)
    export_s = time.perf_counter() - start
    torch_step = TorchDecoder(model)
    n = args.new_tokens
    results, compile_s = {}, None
    for setting in args.settings:
        batch, beams = (int(x) for x in setting.split("x"))
        batches = []
        for i in range(0, len(sentences), batch):
            enc = tokenizer(sentences[i : i + batch], padding=True, return_tensors="pt")
            width = enc["input_ids"].shape[1]
            parents = torch.arange(width, dtype=torch.float).clamp(min=1).sub(1).expand(len(enc["input_ids"]), -1)
            batches.append((enc["input_ids"], enc["attention_mask"], parents.contiguous()))
        options = dict(num_beams=beams, max_new_tokens=n, min_new_tokens=n, do_sample=False)

        def run(decode, batches=batches):
            def go():
                with torch.inference_mode():
                    return [decode(i, m, p) for i, m, p in batches]

            return go

        paths = {
            "generate": run(
                lambda i, m, p, o=options: model.generate(input_ids=i, attention_mask=m, parent_positions=p, **o)
            ),  # fmt: skip
            "generate_static": run(
                lambda i, m, p, o=options: model.generate(
                    input_ids=i, attention_mask=m, parent_positions=p, cache_implementation="static", **o
                )
            ),  # fmt: skip
            "torch_step": run(lambda i, m, p, o=options: torch_step.generate(i, m, parent_positions=p, **o)),
            "onnxruntime": run(lambda i, m, p, o=options: onnx.generate(i, m, parent_positions=p, **o)),
        }
        reference = paths["generate"]()
        equal, failed = {}, {}
        for name, fn in list(paths.items()):
            try:
                equal[name] = all(torch.equal(a, b) for a, b in zip(fn(), reference, strict=True))
            except Exception as e:  # noqa: BLE001  (a path transformers does not support here is recorded)
                failed[name] = f"{type(e).__name__}: {str(e)[:300]}"
                del paths[name]
        times = {name: [] for name in paths}
        for r in range(args.rounds):
            for name in list(paths) if r % 2 == 0 else list(reversed(paths)):
                t = time.perf_counter()
                paths[name]()
                times[name].append(time.perf_counter() - t)
        if not args.no_compile and "generate_static" in paths:
            compiled = torch.compile(model.model.decoder.forward, dynamic=True)  # one graph for every length
            original, model.model.decoder.forward = model.model.decoder.forward, compiled
            try:
                t = time.perf_counter()
                out = paths["generate_static"]()  # the first call compiles (and any new shape recompiles)
                first = time.perf_counter() - t
                compile_s = first if compile_s is None else compile_s + first
                equal["generate_static_compiled"] = all(torch.equal(a, b) for a, b in zip(out, reference, strict=True))
                times["generate_static_compiled"] = []
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    paths["generate_static"]()
                    times["generate_static_compiled"].append(time.perf_counter() - t)
            finally:
                model.model.decoder.forward = original
        base = statistics.median(times["generate"])
        results[setting] = {
            "batch_size": batch, "beams": beams, "sentences": len(sentences),
            "paths": {name: {"seconds": [round(x, 3) for x in s], "median_s": round(statistics.median(s), 3),
                             "speed_vs_generate": round(base / statistics.median(s), 2),
                             "same_ids_as_generate": equal[name]} for name, s in times.items()},
            "failed": failed,
        }  # fmt: skip
        print(setting, {k: v["speed_vs_generate"] for k, v in results[setting]["paths"].items()}, flush=True)
    report = {
        "what": "decoding paths for a model that cannot be exported (PASCAL, transformer-base, random weights)",
        "new_tokens": n, "threads": args.threads, "rounds": args.rounds, "settings": results,
        "onnx_export_s": round(export_s, 1), "compile_first_calls_s": None if compile_s is None else round(compile_s, 1),
        "argv": [relative_path(a) for a in sys.argv[1:]], "commit": commit,
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "load_average_end": list(os.getloadavg())},
        "software": software(),
    }  # fmt: skip
    print(f"wrote {write_json(args.output, report, newline=True)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
