"""Issue 67, item 1: sequence-level knowledge distillation, ``hf-syntax-mt train --distill_from TEACHER``. A tiny
teacher trained by the train command itself; a dbsa_sync student trained a few steps on the teacher's translations of
the training sources (its target trees parsed from those translations by ``--target_parser conllu``). The student's
training targets equal the teacher's beam outputs computed here with `generate`, sentence by sentence; a second run
reuses the cache (no sentence translated again), a stopped cache goes on where it stopped (a half-written last line
dropped), the run file and the model card name the teacher and its decoding; bad input is one `UserError`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hf_syntax_mt.cli import main
from hf_syntax_mt.data.parsed import ParsedSentence, format_conllu
from hf_syntax_mt.demo.synthetic_corpus import write_corpus
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.evaluation import RUN_INFO
from hf_syntax_mt.training import distill, script

TINY = ["--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "4", "--ffn_dim",
        "64", "--max_position_embeddings", "64", "--vocab_size", "150", "--max_source_length", "32",
        "--max_target_length", "32"]  # fmt: skip
QUIET = ["--save_strategy", "no", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
         "--per_device_train_batch_size", "8"]  # fmt: skip
#: the teacher's decoding for the student (the teacher's own generation config says 1 beam, 20 tokens)
BEAMS, LENGTH = 3, 12


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), splits={"train": 24, "validation": 4}, seed=5, max_words=7)


@pytest.fixture(scope="module")
def teacher(corpus, tmp_path_factory) -> Path:
    """A teacher trained 150 steps by the train command (fr -> en recorded in its run file)."""
    out = tmp_path_factory.mktemp("teacher") / "teacher-fr-en"
    argv = ["train", "--output_dir", str(out), "--source_lang", "fr", "--target_lang", "en",
            "--train_source_file", str(corpus["train"]["src"]), "--train_target_file", str(corpus["train"]["tgt"]),
            *TINY, *QUIET, "--max_steps", "150", "--learning_rate", "3e-3", "--generation_num_beams", "1",
            "--generation_max_length", "20"]  # fmt: skip
    torch.manual_seed(0)
    assert main(argv) == 0
    return out


def beam_outputs(teacher: Path, sources: list[str]) -> list[str]:
    """The teacher's beam outputs, one sentence at a time with `generate` (no batching, no pipeline)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(teacher).eval()
    tokenizer = AutoTokenizer.from_pretrained(teacher)
    out = []
    with torch.no_grad():
        for text in sources:
            ids = model.generate(**tokenizer([text], return_tensors="pt"), num_beams=BEAMS, max_length=LENGTH)
            out.append(tokenizer.decode(ids[0], skip_special_tokens=True).strip())
    return out


def chain_conllu(texts: list[str], path: Path) -> Path:
    """Chain trees (word i headed by word i-1) of ``texts``: the student's target trees, found by text."""
    blocks = []
    for k, text in enumerate(dict.fromkeys(t for t in texts if t.split())):
        words = text.split()
        blocks.append(format_conllu(ParsedSentence(words, list(range(len(words))), ["dep"] * len(words),
                                                   ["X"] * len(words), text=text), f"s{k}"))  # fmt: skip
    path.write_text("".join(blocks), encoding="utf-8")
    return path


def student_argv(corpus, teacher: Path, out: Path, cache: Path, target_trees: Path, steps: int = 3) -> list[str]:
    return ["train", "--output_dir", str(out), "--distill_from", str(teacher), "--distill_cache_dir", str(cache),
            "--distill_num_beams", str(BEAMS), "--distill_max_length", str(LENGTH), "--distill_batch_size", "5",
            "--recipe", "dbsa_sync", "--source_lang", "fr", "--target_lang", "en",
            "--train_source_conllu", str(corpus["train"]["src_conllu"]),
            "--train_target_file", str(corpus["train"]["tgt"]),
            "--validation_source_file", str(corpus["validation"]["src"]),
            "--validation_target_file", str(corpus["validation"]["tgt"]),
            "--target_parser", "conllu", "--target_parser_model", str(target_trees),
            *TINY, *QUIET, "--max_steps", str(steps), "--generation_num_beams", "1", "--generation_max_length", "8",
            "--eval_strategy", "no"]  # fmt: skip


def counting(monkeypatch) -> list[int]:
    """Count the teacher's `translate_lines` calls (sentences per call)."""
    import hf_syntax_mt.inference as inference

    calls, original = [], inference.translate_lines

    def counted(pipe, lines, *args, **kwargs):
        calls.append(len(lines))
        return original(pipe, lines, *args, **kwargs)

    monkeypatch.setattr(inference, "translate_lines", counted)
    return calls


def test_the_student_trains_on_the_teachers_beam_outputs(corpus, teacher, tmp_path, monkeypatch):
    sources = corpus["train"]["src"].read_text(encoding="utf-8").splitlines()
    references = corpus["train"]["tgt"].read_text(encoding="utf-8").splitlines()
    expected = beam_outputs(teacher, sources)
    assert len(set(expected)) >= 8 and expected != references  # a teacher that translates, and not perfectly
    trees = chain_conllu(expected, tmp_path / "teacher_outputs.conllu")
    seen = []  # the training targets the student is preprocessed from

    def recording(raw, *args, **kwargs):
        seen.append(list(raw["train"]["target"]))
        return original(raw, *args, **kwargs)

    original = script.preprocess_splits
    monkeypatch.setattr(script, "preprocess_splits", recording)
    calls = counting(monkeypatch)
    cache = tmp_path / "cache"
    assert main(student_argv(corpus, teacher, tmp_path / "student", cache, trees)) == 0
    assert seen == [expected]
    assert sum(calls) == len(sources) and len(calls) == 1  # 24 sentences: one chunk of 8 batches of 5
    run = json.loads((tmp_path / "student" / RUN_INFO).read_text(encoding="utf-8"))
    record = run["distillation"]
    assert record["teacher"] == "teacher-fr-en" and record["engine"] == distill.ENGINE
    assert record["decoding"] == f"beams:{BEAMS}|max_length:{LENGTH}"
    assert (record["sentences"], record["translated"], record["reused"]) == (len(sources), len(sources), 0)
    teacher_run = json.loads((teacher / RUN_INFO).read_text(encoding="utf-8"))
    assert record["teacher_signature"] == teacher_run["model_signature"]
    assert "distilled_from:teacher-fr-en" in run["model_signature"] and run["recipe"].startswith("recipe dbsa_sync")
    card = (tmp_path / "student" / "README.md").read_text(encoding="utf-8")
    assert f"from the teacher `teacher-fr-en` (`{teacher_run['model_signature']}`)" in card
    assert f"decoded with `beams:{BEAMS}|max_length:{LENGTH}` by {distill.ENGINE}" in card
    (cached,) = cache.glob("*.jsonl")
    rows = [json.loads(line) for line in cached.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["sentences"] == len(sources) and {r["i"]: r["t"] for r in rows[1:]} == dict(enumerate(expected))

    # a second run: every translation from the cache, none made again, the file untouched
    stamp, seen[:], calls[:] = cached.stat().st_mtime_ns, [], []
    assert main(student_argv(corpus, teacher, tmp_path / "again", cache, trees, steps=1)) == 0
    assert calls == [] and seen == [expected] and cached.stat().st_mtime_ns == stamp
    again = json.loads((tmp_path / "again" / RUN_INFO).read_text(encoding="utf-8"))["distillation"]
    assert (again["translated"], again["reused"]) == (0, len(sources))


def test_a_stopped_cache_goes_on_where_it_stopped(corpus, teacher, tmp_path, monkeypatch):
    """The first chunk written, the second interrupted (Ctrl-C), a half-written line left at the end: the next call
    drops that line, translates only the sentences not written, and returns what one uninterrupted call returns."""
    import hf_syntax_mt.inference as inference

    sources = corpus["train"]["src"].read_text(encoding="utf-8").splitlines()
    settings = dict(num_beams=BEAMS, max_length=LENGTH, batch_size=1, cache_dir=tmp_path / "whole", device="cpu")
    whole, _ = distill.teacher_translations(str(teacher), sources, **settings)
    assert whole == beam_outputs(teacher, sources)
    original = inference.translate_lines

    def stopped(pipe, lines, *args, **kwargs):
        if stopped.calls:
            raise KeyboardInterrupt
        stopped.calls += 1
        return original(pipe, lines, *args, **kwargs)

    stopped.calls = 0
    monkeypatch.setattr(inference, "translate_lines", stopped)
    settings["cache_dir"] = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        distill.teacher_translations(str(teacher), sources, **settings)
    (cached,) = (tmp_path / "stopped").glob("*.jsonl")
    first = distill.CHUNK_BATCHES  # one chunk of batch size 1
    assert cached.read_text(encoding="utf-8").count("\n") == 1 + first
    with open(cached, "a", encoding="utf-8") as f:
        f.write('{"i": 3, "t": "half wri')  # the write a kill cut short
    monkeypatch.setattr(inference, "translate_lines", original)
    calls = counting(monkeypatch)
    resumed, record = distill.teacher_translations(str(teacher), sources, **settings)
    assert resumed == whole and sum(calls) == len(sources) - first
    assert (record["translated"], record["reused"]) == (len(sources) - first, first)
    assert cached.read_text(encoding="utf-8").count("\n") == 1 + len(sources)
    # another decoding is another cache file
    distill.teacher_translations(str(teacher), sources[:2], num_beams=1, max_length=LENGTH, cache_dir=tmp_path / "s")
    assert [p.name for p in (tmp_path / "s").glob("*.jsonl")] != [cached.name]


def test_bad_teachers_are_named(corpus, teacher, tmp_path):
    trees = tmp_path / "t.conllu"
    trees.write_text("", encoding="utf-8")
    (tmp_path / "no_model").mkdir()
    (tmp_path / "no_model" / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "ct2").mkdir()
    (tmp_path / "ct2" / "config.json").write_text('{"decoder_start_token": "<pad>"}', encoding="utf-8")
    (tmp_path / "ct2" / "model.bin").write_bytes(b"\0")

    def refused(argv: list[str], *expected: str) -> None:
        out = tmp_path / "out"
        with pytest.raises(UserError) as caught:
            main(argv)
        message = str(caught.value)
        assert all(e in message for e in expected), message
        assert "\n" not in message and not out.exists()

    base = student_argv(corpus, teacher, tmp_path / "out", tmp_path / "cache", trees)
    at = base.index("--distill_from") + 1

    def teacher_is(value: str) -> list[str]:
        return [*base[:at], value, *base[at + 1 :]]

    refused(teacher_is(str(tmp_path / "missing")), "--distill_from", "no such directory")
    refused(teacher_is(str(tmp_path / "no_model")), "--distill_from", "no config.json")
    refused(teacher_is(str(corpus["train"]["src"])), "--distill_from", "is a file")
    refused(teacher_is(str(tmp_path / "ct2")), "--distill_from", "CTranslate2 folder")
    lang = base.index("--target_lang") + 1
    refused([*base[:lang], "de", *base[lang + 1 :]], "translates fr -> en", "--target_lang is de")
    refused([*base, "--train_target_conllu", str(corpus["train"]["tgt_conllu"])], "--train_target_conllu",
            "teacher's translations")  # fmt: skip
    without = [a for k, a in enumerate(base) if k not in (at - 1, at)]
    refused(without, "--distill_num_beams", "no --distill_from was given")
    assert not (tmp_path / "cache").exists()  # nothing translated
