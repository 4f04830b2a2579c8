"""Issue 57, the kinds of "Why" not covered by their own files: an output over a file of ``--model`` (2), unbounded
numbers (3), strings taken as lists (4), bare errors from the package (5), the parse cache (6) and the smaller ones
(9). Each test failed on the code before the issue (the docstrings say how)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoConfig, pipeline

import hf_syntax_mt  # noqa: F401  (registers the pipeline task)
from hf_syntax_mt.cli import main
from hf_syntax_mt.cli_args import build_parser, refuse_overwriting
from hf_syntax_mt.data.parsers import CachedParser, ConllParser
from hf_syntax_mt.errors import UserError, UserTypeError
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
SENTENCES = ["le chat dort .", "un chien court vite .", "le chien dort sur le canapé ."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=60, min_frequency=1)
    directory = tmp_path_factory.mktemp("model")
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, context_sentences=1),
                        seed=0)  # fmt: skip
    model.generation_config.max_new_tokens = 4
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def console(monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *map(str, argv)])
    capsys.readouterr()
    status = main()
    return status, capsys.readouterr().err


def write_conllu(path: Path, texts=SENTENCES) -> Path:
    blocks = []
    for text in texts:
        rows = [f"# text = {text}"] + [f"{i}\t{w}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                                        for i, w in enumerate(text.split(), start=1)]  # fmt: skip
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------------------
# 2. An output can destroy the model
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["translate", "evaluate", "uas", "contrastive", "align"])
def test_no_output_may_be_a_file_of_the_model(model_dir, tmp_path, monkeypatch, capsys, command):
    """Failed before: `translate --output M/config.json` and `evaluate --json M/config.json` exited 0 and the model
    no longer loaded."""
    model = tmp_path / "m"
    shutil.copytree(model_dir, model)
    (tmp_path / "in.txt").write_text("le chat dort .\n", encoding="utf-8")
    link = tmp_path / "linked"
    link.symlink_to(model)  # the same folder through a link: resolved paths are compared
    inputs = {"translate": ["--input", tmp_path / "in.txt", "--no-context"],
              "evaluate": ["--hyp", tmp_path / "in.txt", "--ref", tmp_path / "in.txt"],
              "uas": ["--conllu", write_conllu(tmp_path / "g.conllu")], "contrastive": ["--synthetic", "2"],
              "align": ["--src", tmp_path / "in.txt", "--tgt", tmp_path / "in.txt"]}[command]  # fmt: skip
    out = "--json" if command in ("evaluate", "uas", "contrastive") else "--output"
    before = (model / "config.json").read_bytes()
    for target in (model / "config.json", link / "model.safetensors", model / "generation_config.json"):
        status, err = console(monkeypatch, capsys, command, "--model", model, *inputs, out, target)
        assert status == 1 and err.startswith(f"error: {out} {target} is a file of the folder --model"), err
    assert (model / "config.json").read_bytes() == before
    AutoConfig.from_pretrained(model)  # still loads
    # a new report beside the model is fine
    refuse_overwriting(build_parser().parse_args(["evaluate", "--hyp", "h", "--ref", "r", "--model", str(model),
                                                  "--json", str(model / "eval.json")]))  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# 3. Unbounded numbers
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, message",
    [
        (["translate", "--model", "m", "--num-beams", "100000"], "argument --num-beams: must be at most 128, got 100000"),
        (["translate", "--model", "m", "--batch-size", "99999999999999999999"],
         "argument --batch-size: must be at most 4096, got 99999999999999999999"),
    ],
)  # fmt: skip
def test_beams_and_batches_have_an_upper_bound_named_in_the_error(argv, message, capsys):
    """Failed before: --num-beams 100000 was killed by the out-of-memory killer; a huge --batch-size printed an
    islice error as a bug."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert capsys.readouterr().err.strip().endswith(message)


def test_the_api_bounds_batch_sizes_too():
    from hf_syntax_mt.inference import translate_lines

    pipe = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(context_sentences=0)))
    with pytest.raises(UserError, match=r"batch_size must be at most 4,096 \(more can only exhaust memory\)"):
        translate_lines(pipe, ["a ."], batch_size=99999999999999999999, progress=False)


# ------------------------------------------------------------------------------------------------------------------
# 4. Strings taken as lists
# ------------------------------------------------------------------------------------------------------------------
def test_a_parser_refuses_a_string_of_texts_and_caches_nothing(tmp_path):
    """Failed before: CachedParser.parse("The dog sleeps .") parsed (and cached) one character at a time."""
    parser = CachedParser(ConllParser(write_conllu(tmp_path / "p.conllu")), tmp_path / "cache")
    with pytest.raises(UserTypeError, match=r"texts must be a list of texts .* not a str"):
        parser.parse("le chat dort .")
    assert parser.shards() == []
    assert [p.words for p in parser.parse(["le chat dort ."])] == [["le", "chat", "dort", "."]]


def test_card_metadata_noun_genders_and_list_options_refuse_a_string(tmp_path):
    """Failed before: one-letter tags, datasets and languages in the model card; NounGenders opened '/'; '1,1' was
    '3 entries'."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`
    from benchmarks.data.german_nouns import NounGenders  # the pronoun study's lexicon (issue 58 moved it)
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.evaluation.model_card import card_metadata

    for kwargs, name in ((dict(tags="abc"), "tags"), (dict(datasets="wmt14"), "datasets"), (dict(languages="fr"),
                                                                                            "languages")):  # fmt: skip
        with pytest.raises(UserTypeError, match=rf"^{name} must be a list of .* not a str"):
            card_metadata("m", **kwargs)
    assert card_metadata("m", languages=["fr", "en"], tags=["x"]).language == ["fr", "en"]
    with pytest.raises(UserTypeError, match=r"paths must be a list of CoNLL-U files, not one path \('x.conllu'\)"):
        NounGenders.from_conllu("x.conllu")
    tiny = dict(vocab_size=20, d_model=8, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8, pad_token_id=0,
                decoder_start_token_id=0)  # fmt: skip
    for value in ("1,1", 2):
        with pytest.raises(UserTypeError, match=r"encoder_tree_bias_heads=.* must be a list"):
            SyntaxMTConfig(**tiny, encoder_tree_bias_heads=value)
    assert SyntaxMTConfig(**tiny, encoder_tree_bias_heads=(1, 1)).encoder_tree_bias_heads == [1, 1]


# ------------------------------------------------------------------------------------------------------------------
# 5. Bare errors from package code
# ------------------------------------------------------------------------------------------------------------------
def test_a_run_file_whose_data_args_is_not_an_object_is_ignored(model_dir, tmp_path):
    """Failed before: AttributeError ('list' object has no attribute 'get') from languages.py."""
    from hf_syntax_mt.languages import model_languages

    copy = tmp_path / "m"
    shutil.copytree(model_dir, copy)
    (copy / "hf_syntax_mt_run.json").write_text(json.dumps({"data_args": ["fr", "en"]}))
    model = SimpleNamespace(name_or_path=str(copy), config=SimpleNamespace())
    assert model_languages(model, SimpleNamespace()).get("source") is None


def test_register_after_itself_is_a_user_error():
    """Failed before: ValueError from list.index in registry.register."""
    from hf_syntax_mt.methods import get_method, register

    method = get_method("pascal")
    with pytest.raises(UserError, match=r"a method cannot come after itself"):
        register(method, after=method.name)


@pytest.mark.parametrize("max_length", ["5", -5, 1.5])
def test_the_pipeline_checks_max_length(model_dir, max_length):
    """Failed before: a TypeError / a tokenizer error for "5" and -5."""
    pipe = pipeline("syntax-translation", model=str(model_dir), device="cpu")
    with pytest.raises(UserError, match=r"max_length \(source truncation, in subword tokens\) must be an int >= 2"):
        pipe(["le chat dort ."], max_length=max_length, no_context=True)


def test_train_args_json_holding_a_list_is_named(tmp_path):
    """Failed before: AttributeError from HfArgumentParser.parse_json_file."""
    from hf_syntax_mt.training.script_args import parse_args

    (tmp_path / "args.json").write_text('["--output_dir", "x"]')
    with pytest.raises(UserError, match=r"args.json: holds a JSON list, not an object of flag names and values"):
        parse_args([str(tmp_path / "args.json")])
    (tmp_path / "args.json").write_text('{"output_dir": "x"')
    with pytest.raises(UserError, match=r"args.json: not valid JSON"):
        parse_args([str(tmp_path / "args.json")])


def test_a_damaged_stanza_model_is_a_user_error(tmp_path, monkeypatch):
    """Failed before: StanzaParser._load wrapped only OSError: a resources.json that is not JSON gave a bare
    JSONDecodeError."""
    stanza = pytest.importorskip("stanza")
    from hf_syntax_mt.data.parsers import StanzaParser

    (tmp_path / "resources.json").write_text("{not json")

    def damaged(**kwargs):
        raise json.JSONDecodeError("Expecting property name", "{not json", 1)

    monkeypatch.setattr(stanza, "Pipeline", damaged)
    with pytest.raises(UserError, match=r"stanza could not load its model for language 'fr' .* is damaged"):
        StanzaParser("fr", model_dir=str(tmp_path))


# ------------------------------------------------------------------------------------------------------------------
# 6. The parse cache survives any one bad file
# ------------------------------------------------------------------------------------------------------------------
def test_the_parse_cache_skips_a_bad_shard_or_record_and_parses_again(tmp_path, caplog):
    """Failed before: a shard with invalid UTF-8 or a folder named *.jsonl made every later parse fail; a planted
    record was returned for the requested text."""
    conllu = write_conllu(tmp_path / "p.conllu")
    first = CachedParser(ConllParser(conllu), tmp_path / "cache")
    expected = first.parse(list(SENTENCES))
    shard_dir = first.shard_dir
    (shard_dir / "00-bad-utf8.jsonl").write_bytes(b'{"key": "x"}\n\xff\xfe\n')
    (shard_dir / "01-folder.jsonl").mkdir()
    planted_key = hashlib.sha256(SENTENCES[1].encode()).hexdigest()
    other = expected[0].to_dict()  # the parse of another text under this text's key, in the newest shard
    (shard_dir / "zz-planted.jsonl").write_text(json.dumps({"key": planted_key, "parse": other}) + "\n")
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.data.parsers"):
        again = CachedParser(ConllParser(conllu), tmp_path / "cache").parse(list(SENTENCES))
    assert [p.words for p in again] == [p.words for p in expected]  # the planted parse is not returned
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("00-bad-utf8.jsonl" in w for w in warnings) == 1 and sum("01-folder.jsonl" in w for w in warnings) == 1
    assert sum("zz-planted.jsonl" in w and "1 record(s)" in w for w in warnings) == 1


# ------------------------------------------------------------------------------------------------------------------
# 9. Smaller
# ------------------------------------------------------------------------------------------------------------------
def test_contexts_with_use_context_false_and_translate_document_false_are_refused(model_dir):
    """Failed before: the contexts were used silently; document=False was a TypeError about duplicate keywords."""
    from hf_syntax_mt.inference import translate_lines

    pipe = pipeline("syntax-translation", model=str(model_dir), device="cpu")
    with pytest.raises(UserError, match=r"contexts= was given with use_context=False"):
        translate_lines(pipe, ["a ."], use_context=False, contexts=[["b ."]], progress=False)
    with pytest.raises(UserError, match=r"translate_document\(\.\.\., document=False\)"):
        pipe.translate_document(["le chat dort ."], document=False)


def test_card_metadata_refuses_a_licence_that_is_no_hub_id_and_a_nan_score():
    """Failed before: license='MIT' or '' and a BLEU of NaN were written into the model index."""
    from hf_syntax_mt.evaluation.model_card import card_metadata

    for licence in ("MIT", ""):
        with pytest.raises(UserError, match=r"is not a Hub licence id"):
            card_metadata("m", license=licence)
    scores = {"test": {"bleu": float("nan"), "bleu_signature": "s", "chrf": 1.0, "chrf_signature": "s"}}
    with pytest.raises(UserError, match=r"scores\['test'\]\['bleu'\] = nan is not a finite number"):
        card_metadata("m", scores=scores)


def test_train_refuses_one_file_twice_a_negative_max_steps_and_a_folder(tmp_path):
    """Failed before: the same file as source and target and --max_steps -3 said nothing; a folder was "data file
    not found"."""
    from hf_syntax_mt.data.readers import load_parallel_files
    from hf_syntax_mt.training.script_args import parse_args

    text = tmp_path / "a.txt"
    text.write_text("x\n")
    out = ["--output_dir", str(tmp_path / "o")]
    with pytest.raises(UserError, match=r"--train_target_file .*a.txt is the file that --train_source_file names"):
        parse_args([*out, "--train_source_file", str(text), "--train_target_file", str(text)])
    with pytest.raises(UserError, match=r"--max_steps must be a number of steps >= 1 \(or -1"):
        parse_args([*out, "--max_steps", "-3"])
    with pytest.raises(UserError, match=r"is a folder, not a file"):
        load_parallel_files(tmp_path, text)


def test_bench_parsing_takes_the_data_directory(tmp_path, capsys):
    """Failed before: no --data flag; it read ../shared/data relative to the checkout."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.speed import bench_parsing

    with pytest.raises(SystemExit, match=rf"missing corpus file\(s\) \['{tmp_path}/multi30k/val.en'.*--data"):
        bench_parsing.main(["--data", str(tmp_path), "--backends", "conllu", "--output", str(tmp_path / "o.json")])


def test_an_unhashed_cut_hypothesis_file_is_named(tmp_path, monkeypatch):
    """Failed before: `study_round2.py --aggregate --allow-unhashed` on a cut file stopped without naming it."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.studies import study_round2 as r2

    refs = ["a man rides a bike", "two dogs play", "a girl reads"]
    data = tmp_path / "data"
    (data / "multi30k").mkdir(parents=True)
    for t in r2.MULTI30K_TESTS:
        for lang in ("de", "en"):
            (data / "multi30k" / f"{t}.{lang}").write_text("".join(r + "\n" for r in refs))
    monkeypatch.setattr(r2.round_one, "files", lambda d, name: {"src": Path(d) / "multi30k" / f"{name}.en",
                                                                "tgt": Path(d) / "multi30k" / f"{name}.de"})  # fmt: skip
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    name = r2.unit_name("full", "vanilla", 0)
    record = {"unit": name, "setting": "full", "method": "vanilla", "seed": 0, "precision": "fp32", "device": "cpu",
              "steps": 1, "train_minutes": 1.0, "tests": {t: {"bleu": 1.0, "chrf": 1.0} for t in r2.MULTI30K_TESTS}}  # fmt: skip
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))
    for t in r2.MULTI30K_TESTS:
        (results / "runs" / f"{name}.{t}.txt").write_text("".join(r + "\n" for r in refs[:2]))  # cut
    cut = results / "runs" / f"{name}.{r2.MULTI30K_TESTS[0]}.txt"
    with pytest.raises(SystemExit, match=rf"{cut}: 2 lines, but the .* references .* have 3"):
        r2.aggregate(SimpleNamespace(results=str(results), data=str(data), bootstrap_samples=5, allow_unhashed=True))
