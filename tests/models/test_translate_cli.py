"""`hf-syntax-mt translate` on documents (issue 27): a doc-id file or blank-line separated documents are translated
document by document with the model's own context, each sentence exactly as `translate_document` translates it on
its document; a document-level model refuses plain sentences unless `--no-context`; a sentence-level model given
documents translates sentence by sentence; bad document input names the file and line."""

import json
import re
import shutil
import sys

import pytest
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.cli import main
from hf_syntax_mt.inference import translate_lines
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

DOC_A = ["Le chat noir dort sur le canapé du salon.", "Il rêve de souris.", "", "Le chat se réveille."]
DOC_B = ["Une femme lit un livre dans le jardin.", "Elle sourit.", "Elle tourne la page."]
DOC_C = ["Deux chiens courent dans la neige.", "Ils aboient."]
SENTENCES = [s for s in DOC_A + DOC_B + DOC_C if s]
GENERATE = dict(num_beams=2, batch_size=3)  # the CLI flags below say the same


def save(directory, context_sentences):
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=120, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32,
                          context_sentences=context_sentences, init_std=1.0)  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model, tokenizer


@pytest.fixture(scope="module")
def context_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ctx")
    model, tokenizer = save(directory, context_sentences=2)
    return str(directory), model, tokenizer


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sent")
    save(directory, context_sentences=0)
    return str(directory)


def texts(results):
    """The strings of the pipeline's ``[{"translation_text": ...}]`` (what `translate_document` returns)."""
    return [r["translation_text"] for r in results]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def translate(model_dir, tmp_path, *flags):
    out = tmp_path / "out.txt"
    # --device cpu: the references are CPU computations, on a machine with a GPU too
    assert main(["translate", "--model", model_dir, "--output", str(out), "--num-beams", "2", "--batch-size", "3",
                 "--device", "cpu", *flags]) == 0  # fmt: skip
    return out.read_text(encoding="utf-8").split("\n")[:-1]


def test_docids_translate_each_document_with_its_context(context_model, tmp_path):
    model_dir, model, tokenizer = context_model
    src = write(tmp_path / "in.txt", DOC_A + DOC_B + DOC_C)
    ids = write(tmp_path / "in.docid", ["a"] * len(DOC_A) + ["b"] * len(DOC_B) + ["c"] * len(DOC_C))
    got = translate(model_dir, tmp_path, "--input", src, "--docids", ids)
    expected = [
        t for doc in (DOC_A, DOC_B, DOC_C) for t in texts(model.translate_document(doc, tokenizer, **GENERATE))
    ]
    assert got == expected
    # the context is used: the same lines as plain sentences translate differently somewhere
    plain = translate(model_dir, tmp_path, "--input", src, "--no-context")
    assert plain != expected
    sentence_by_sentence = pipeline("syntax-translation", model=model_dir, device="cpu")(
        DOC_A + DOC_B + DOC_C, no_context=True, **GENERATE
    )
    assert plain == [r["translation_text"] for r in sentence_by_sentence]


def test_blank_line_documents_keep_the_blank_lines(context_model, tmp_path):
    model_dir, model, tokenizer = context_model
    doc_a = [s for s in DOC_A if s]  # no empty sentence in this format: a blank line ends a document
    src = write(tmp_path / "in.txt", doc_a + [""] + DOC_B + ["  "] + DOC_C)
    got = translate(model_dir, tmp_path, "--input", src, "--documents", "blank-lines")
    expected = [texts(model.translate_document(d, tokenizer, **GENERATE)) for d in (doc_a, DOC_B, DOC_C)]
    assert got == expected[0] + [""] + expected[1] + [""] + expected[2]


@pytest.mark.parametrize("chunk_sentences", [1, 4, 100])
def test_translate_lines_never_splits_a_document(context_model, chunk_sentences):
    model_dir, model, tokenizer = context_model
    lines = DOC_A + DOC_B + DOC_C
    spans = [(0, 4), (4, 7), (7, 9)]
    pipe = pipeline("syntax-translation", model=model_dir, device="cpu")
    got = translate_lines(pipe, lines, spans, chunk_sentences=chunk_sentences, **GENERATE)
    assert got == [
        t for doc in (DOC_A, DOC_B, DOC_C) for t in texts(model.translate_document(doc, tokenizer, **GENERATE))
    ]


def test_progress_bar_on_stderr(context_model, capsys):
    model_dir, _, _ = context_model
    pipe = pipeline("syntax-translation", model=model_dir, device="cpu")
    translate_lines(pipe, DOC_B, [(0, 3)], progress=True, num_beams=1)
    assert "Translating" in capsys.readouterr().err
    translate_lines(pipe, DOC_B, [(0, 3)], num_beams=1)  # 3 < PROGRESS_MIN_SENTENCES sentences: no bar
    assert "Translating" not in capsys.readouterr().err


def test_context_model_refuses_plain_sentences(context_model, tmp_path):
    model_dir, _, _ = context_model
    src = write(tmp_path / "in.txt", SENTENCES)
    with pytest.raises(ValueError, match=r"document-level model \(context_sentences=2.*--docids FILE.*--no-context"):
        main(["translate", "--model", model_dir, "--input", src])


def test_sentence_level_model_translates_documents_sentence_by_sentence(sentence_model, tmp_path, capsys):
    src = write(tmp_path / "in.txt", DOC_A + DOC_B)
    ids = write(tmp_path / "in.docid", ["a"] * len(DOC_A) + ["b"] * len(DOC_B))
    got = translate(sentence_model, tmp_path, "--input", src, "--docids", ids)
    assert "no document context (context_sentences=0): translating the 2 documents sentence by sentence" in (
        capsys.readouterr().err
    )
    expected = pipeline("syntax-translation", model=sentence_model, device="cpu")(DOC_A + DOC_B, **GENERATE)
    assert got == [r["translation_text"] for r in expected]
    blank = write(tmp_path / "blank.txt", DOC_B + [""] + DOC_C)
    got = translate(sentence_model, tmp_path, "--input", blank, "--documents", "blank-lines")
    expected = [
        r["translation_text"]
        for r in pipeline("syntax-translation", model=sentence_model, device="cpu")(DOC_B + DOC_C, **GENERATE)
    ]
    assert got == expected[:3] + [""] + expected[3:]


@pytest.mark.parametrize(
    "lines, ids, message",
    [
        (["a", "b", "c"], ["d1", "d1"], r"in.docid:3: .*in.docid has 2 lines, .*in.txt has 3 lines \(line 3 of .*in.txt has no document id\)"),
        (["a", "b"], ["d1", "d1", "d2"], r"in.docid:3: .*in.docid has 3 lines, .*in.txt has 2 lines \(no line 3 in"),
        (["a", "b", "c", "d"], ["d1", "d2", "d1", "d1"], r"in.docid:3: document id 'd1' reappears after another document \(its document started at line 1"),
        (["a", "b", "c"], ["d1", "  ", "d2"], r"in.docid:2: empty document id"),
        (["a", "", " ", "b"], ["d1", "d2", "d2", "d3"], r"in.docid:2: document 'd2' \(lines 2-3 of .*in.txt\) is empty: all its lines are blank"),
    ],
)  # fmt: skip
def test_bad_docids_name_file_and_line(context_model, tmp_path, lines, ids, message):
    model_dir, _, _ = context_model
    src, docids = write(tmp_path / "in.txt", lines), write(tmp_path / "in.docid", ids)
    with pytest.raises(ValueError, match=message):
        main(["translate", "--model", model_dir, "--input", src, "--docids", docids])


@pytest.mark.parametrize(
    "lines, message",
    [
        (["", "a", "b"], r"in.txt:1: empty document: a blank first line"),
        (["a", "", "", "b"], r"in.txt:3: empty document: a second blank line in a row \(lines 2 and 3\)"),
        (["a", "b", " ", ""], r"in.txt:4: empty document: a second blank line in a row \(lines 3 and 4\)"),
    ],
)  # fmt: skip
def test_bad_blank_line_documents_name_file_and_line(context_model, tmp_path, lines, message):
    model_dir, _, _ = context_model
    src = write(tmp_path / "in.txt", lines)
    with pytest.raises(ValueError, match=message):
        main(["translate", "--model", model_dir, "--input", src, "--documents", "blank-lines"])


def test_given_contexts_replace_the_documents_own(context_model):
    model_dir, model, tokenizer = context_model
    pipe = pipeline("syntax-translation", model=model_dir, device="cpu")
    documents = [[s for s in DOC_A if s], DOC_B]
    own = [r["translation_text"] for doc in pipe(documents, **GENERATE) for r in doc]
    sentences = [s for d in documents for s in d]
    true = [d[max(0, i - 2) : i] for d in documents for i in range(len(d))]
    assert [r["translation_text"] for r in pipe(sentences, contexts=true, **GENERATE)] == own
    longer = [d[:i] for d in documents for i in range(len(d))]  # cut to the model's k = 2 as a document's own
    assert [r["translation_text"] for r in pipe(sentences, contexts=longer, **GENERATE)] == own
    with pytest.raises(ValueError, match="one list of context sentences per input sentence: 6 sentences, 5"):
        pipe(sentences, contexts=true[:5])
    with pytest.raises(ValueError, match="not documents"):
        pipe(documents, contexts=true)
    with pytest.raises(TypeError, match=r"contexts\[1\] must be a list"):
        pipe(sentences[:2], contexts=[[], "Le chat."])


def test_random_context_translates_each_document_with_another_documents_sentences(context_model, tmp_path, capsys):
    from hf_syntax_mt.evaluation.pronouns import random_contexts

    model_dir, model, tokenizer = context_model
    lines = DOC_A + DOC_B + DOC_C
    ids = ["a"] * len(DOC_A) + ["b"] * len(DOC_B) + ["c"] * len(DOC_C)
    src, docids = write(tmp_path / "in.txt", lines), write(tmp_path / "in.docid", ids)
    out = translate(model_dir, tmp_path, "--input", src, "--docids", docids, "--random-context", "5")
    assert "--random-context 5" in capsys.readouterr().err
    contexts = random_contexts(ids, lines, 2, seed=5)  # computed here from the ids, as Li et al.'s control
    assert all(set(c).isdisjoint(d) for c, d in zip(contexts, [DOC_A] * 4 + [DOC_B] * 3 + [DOC_C] * 2, strict=True))
    pipe = pipeline("syntax-translation", model=model_dir, device="cpu")
    expected = [pipe([line], contexts=[context], **GENERATE)[0]["translation_text"]
                for line, context in zip(lines, contexts, strict=True)]  # fmt: skip
    assert out == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [([], "needs documents"), (["--docids", "one.docid"], "at least two documents"),
     (["--docids", "in.docid", "--no-context"], "contradicts --no-context")],
)  # fmt: skip
def test_random_context_refuses_what_it_cannot_do(context_model, sentence_model, tmp_path, flags, message):
    model_dir = context_model[0]
    src = write(tmp_path / "in.txt", DOC_B + DOC_C)
    write(tmp_path / "in.docid", ["b"] * len(DOC_B) + ["c"] * len(DOC_C))
    write(tmp_path / "one.docid", ["b"] * (len(DOC_B) + len(DOC_C)))
    flags = [str(tmp_path / f) if f.endswith(".docid") else f for f in flags]
    with pytest.raises(ValueError, match=message):
        translate(model_dir, tmp_path, "--input", src, "--random-context", "0", *flags)
    with pytest.raises(ValueError, match="no document context"):
        translate(sentence_model, tmp_path, "--input", src, "--docids", str(tmp_path / "in.docid"),
                  "--random-context", "0")  # fmt: skip


def test_sentences_are_batched_longest_first_and_come_back_in_input_order():
    from types import SimpleNamespace

    calls = []

    def pipe(sentences, batch_size, **kwargs):  # echoes, recording what each pipeline call was given
        calls.append(list(sentences))
        return [{"translation_text": f"<{s}>"} for s in sentences]

    pipe.model = SimpleNamespace(config=SimpleNamespace(context_sentences=0))
    lines = ["a b", "a b c d e", "", "a", "a b c d", "a b c"]
    assert translate_lines(pipe, lines, batch_size=1, chunk_sentences=2, progress=False) == [f"<{s}>" for s in lines]
    assert calls == [["a b c d e", "a b c d"], ["a b c", "a b"], ["a", ""]]  # a blank line: the pipeline's to answer


def test_translate_lines_refuses_a_document_model_without_documents_or_contexts():
    """From Python too, a document-level model's lines without documents are refused, not translated without their
    context; use_context=False says it, and reaches the pipeline as no_context=True."""
    from types import SimpleNamespace

    calls = []

    def pipe(sentences, batch_size, **kwargs):
        calls.append(kwargs)
        return [{"translation_text": s} for s in sentences]

    pipe.model = SimpleNamespace(config=SyntaxMTConfig(context_sentences=2))
    with pytest.raises(ValueError, match=r"context_sentences=2\), but the lines were given without documents"):
        translate_lines(pipe, ["a", "b"], progress=False)
    assert calls == []
    assert translate_lines(pipe, ["a", "b"], use_context=False, progress=False) == ["a", "b"]
    assert calls == [{"no_context": True}]


def test_device_and_bf16_translate_as_the_pipeline_does_on_that_device_under_autocast(context_model, tmp_path, capsys):
    """Issue 43: `--device cpu --bf16` translates as the pipeline on the CPU under bf16 autocast, and says so on
    stderr in one `device:` line."""
    import torch

    model_dir, _, _ = context_model
    src = write(tmp_path / "in.txt", SENTENCES)
    capsys.readouterr()
    got = translate(model_dir, tmp_path, "--input", src, "--no-context", "--device", "cpu", "--bf16")
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("device:")] == [
        "device: cpu, dtype: bfloat16 (autocast, float32 weights)"
    ]
    pipe = pipeline("syntax-translation", model=model_dir, device="cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = [r["translation_text"] for r in pipe(SENTENCES, no_context=True, **GENERATE)]
    assert got == expected
    translate(model_dir, tmp_path, "--input", src, "--no-context", "--device", "cpu")
    assert "device: cpu, dtype: float32\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    "device, message",
    [
        # a CPU build of torch is named before the import (cli_args.check_device), else torch's own answer
        (
            "cuda",
            r"--device cuda: (torch sees no CUDA device \(torch .*\); use --device cpu, or leave --device out|"
            r"the installed torch is built without CUDA \(a CPU build\), so it sees no CUDA device; use --device "
            r"cpu, leave --device out)",
        ),
        ("cuda:1", r"--device cuda:1: (torch sees no CUDA device|the installed torch is built without CUDA)"),
        ("gpu", r"--device gpu: not a device; give cpu, cuda, cuda:N or mps"),
        ("cpu:1", r"--device cpu:1: not a device"),
    ],
)
def test_a_device_torch_cannot_use_is_refused_before_the_model_loads(context_model, tmp_path, monkeypatch, device,
                                                                     message):  # fmt: skip
    import torch

    model_dir, _, _ = context_model
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same on a GPU machine
    src = write(tmp_path / "in.txt", SENTENCES)
    with pytest.raises(ValueError, match=message):
        main(["translate", "--model", model_dir, "--input", src, "--no-context", "--device", device])


def test_bf16_is_refused_on_a_gpu_without_it(monkeypatch):
    import torch

    from hf_syntax_mt.inference import check_bf16

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    with pytest.raises(ValueError, match=r"--bf16: cuda:0 \(Tesla V100-SXM2-16GB \(compute capability 7.0\)\) has no "
                       "bfloat16 support; leave out --bf16"):  # fmt: skip
        check_bf16(torch.device("cuda:0"))
    check_bf16(torch.device("cpu"))  # a CPU has bf16 (emulated where it lacks AVX512-BF16 / AMX)


def test_one_blank_line_after_the_last_document_is_a_separator(context_model, tmp_path):
    """Issue 44: a file ending in one blank line (as after every other document) was refused by `--documents
    blank-lines` as "a blank last line"; it is a separator, and the output keeps it."""
    model_dir, model, tokenizer = context_model
    src = write(tmp_path / "in.txt", DOC_B + [""] + DOC_C + [""])
    got = translate(model_dir, tmp_path, "--input", src, "--documents", "blank-lines")
    expected = [texts(model.translate_document(d, tokenizer, **GENERATE)) for d in (DOC_B, DOC_C)]
    assert got == expected[0] + [""] + expected[1] + [""]


def console(monkeypatch, capsys, *argv):
    """`hf-syntax-mt ARGV` as the console script runs it (main() reads sys.argv): (exit status, stderr)."""
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *argv])
    capsys.readouterr()
    status = main()
    return status, capsys.readouterr().err


def tampered(model_dir, tmp_path, name, edit):
    """A copy of the model directory with `edit(directory, config)` applied (config.json rewritten after)."""
    directory = tmp_path / name
    shutil.copytree(model_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    edit(directory, config)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def conllu_model(tmp_path):
    """A PASCAL model whose recorded parser is a CoNLL-U file of its training sentences (inside its directory)."""
    tokenizer = train_tokenizer(SENTENCES * 20, vocab_size=120, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[1, 0],
                          source_parser={"backend": "conllu", "path": "parses.conllu"})  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 4
    directory = tmp_path / "conllu-model"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    text = SENTENCES[0]
    words = text.split()
    rows = "".join(f"{i + 1}\t{w}\t_\t_\t_\t_\t{0 if i == 0 else 1}\t_\t_\t_\n" for i, w in enumerate(words))
    (directory / "parses.conllu").write_text(f"# text = {text}\n{rows}\n", encoding="utf-8")
    return str(directory)


@pytest.mark.parametrize(
    "case, message",
    [
        ("short docids", r"in.docid:3: document id file and text have different line counts"),
        ("reused docids", r"in.docid:3: document id 'a' reappears after another document"),
        ("empty document", r"in.docid:2: document 'b' \(lines 2-2 of .*in.txt\) is empty"),
        ("two blank lines", r"in.txt:3: empty document: a second blank line in a row"),
        ("missing docids", r"--docids .*missing.docid: no such file; check the path$"),
        ("missing input", r"--input .*missing.txt: no such file; check the path$"),
        ("plain sentences", r"document-level model \(context_sentences=2.*--no-context"),
        ("no tokenizer", r"--model .*notok has no tokenizer \(no tokenizer.json\): copy tokenizer.json and "
                         r"tokenizer_config.json from the training run's output directory"),
        ("unknown model_type", r"config.json has model_type 'not_a_model', which neither hf-syntax-mt .* knows: the "
                               r"file was edited.*restore config.json from the training run"),
        ("custom pipeline", r"config.json declares its own code for the task 'syntax-translation' \(custom_pipelines\)"),
        ("conllu parser", r"no parse for text .*The model's parser is a CoNLL-U file, which holds the parses of its own "
                          r"sentences only; .*--parser conllu --parser-model FILE.conllu, or .*--parser spacy"),
        ("no cuda", r"--device cuda: (torch sees no CUDA device|the installed torch is built without CUDA)"),
    ],
)  # fmt: skip
def test_user_errors_are_one_line_without_a_traceback(context_model, tmp_path, monkeypatch, capsys, case, message):
    """Issue 44: every error a user can fix is one `error:` line and exit status 1 from the console script (these
    came inside a 16-line traceback, as a raw FileNotFoundError, with "install sentencepiece or tiktoken" or with
    transformers' advice to pass trust_remote_code=True, which the CLI does not have)."""
    import torch

    model_dir = context_model[0]
    lines = {"empty document": ["x", " ", "y", "z"], "two blank lines": ["x", "", "", "y"]}.get(case, SENTENCES[:4])
    ids = {"short docids": ["a", "a"], "reused docids": ["a", "b", "a", "a"]}.get(case, ["a", "b", "c", "c"])
    src, docids = write(tmp_path / "in.txt", lines), write(tmp_path / "in.docid", ids)
    flags = ["--input", src]
    if case in ("short docids", "reused docids", "empty document"):
        flags += ["--docids", docids]
    elif case == "two blank lines":
        flags += ["--documents", "blank-lines"]
    elif case == "missing docids":
        flags += ["--docids", str(tmp_path / "missing.docid")]
    elif case == "missing input":
        flags = ["--input", str(tmp_path / "missing.txt")]
    elif case == "no tokenizer":
        model_dir = tampered(model_dir, tmp_path, "notok", lambda d, c: (d / "tokenizer.json").unlink())
    elif case == "unknown model_type":
        model_dir = tampered(model_dir, tmp_path, "badtype", lambda d, c: c.update(model_type="not_a_model"))
    elif case == "custom pipeline":
        edit = lambda d, c: c.update(custom_pipelines={"syntax-translation": c["custom_pipelines"]["translation"]})  # noqa: E731
        model_dir = tampered(model_dir, tmp_path, "custompipe", edit)
    elif case == "conllu parser":
        model_dir = conllu_model(tmp_path)
        flags = ["--input", write(tmp_path / "new.txt", ["Un texte que le fichier ne contient pas."])]
    elif case == "no cuda":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        flags += ["--no-context", "--device", "cuda"]
    status, err = console(monkeypatch, capsys, "translate", "--model", model_dir, *flags)
    assert status == 1 and "Traceback" not in err
    last = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(last) == 1 and last[0] == err.splitlines()[-1]
    assert re.search(message, last[0]), last[0]
    assert "trust_remote_code" not in err and "sentencepiece or tiktoken" not in err


def test_debug_shows_the_traceback_and_bugs_keep_theirs(context_model, tmp_path, monkeypatch, capsys):
    model_dir = context_model[0]
    src = write(tmp_path / "in.txt", SENTENCES[:2])
    missing = str(tmp_path / "missing.docid")
    for argv, env in ((["translate", "--debug"], None), (["--debug", "translate"], None), (["translate"], "1")):
        if env:
            monkeypatch.setenv("HF_SYNTAX_MT_DEBUG", env)
        monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *argv, "--model", model_dir, "--input", src, "--docids",
                                          missing])  # fmt: skip
        with pytest.raises(FileNotFoundError, match="--docids .*missing.docid: no such file"):
            main()
    monkeypatch.delenv("HF_SYNTAX_MT_DEBUG")

    def bug(*args, **kwargs):
        raise ValueError("an internal inconsistency")  # raised outside the package's own code: a bug

    monkeypatch.setattr("hf_syntax_mt.inference.translate_lines", lambda *a, **k: bug())
    monkeypatch.setattr(
        sys, "argv", ["hf-syntax-mt", "translate", "--model", model_dir, "--input", src, "--no-context"]
    )
    capsys.readouterr()
    assert main() == 1  # a bug: its traceback, then how to report it (issue 49)
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: an internal inconsistency" in err
    assert err.rstrip("\n").splitlines()[-1].startswith("this is a bug in hf-syntax-mt")


def test_help_shows_defaults_and_no_repository_paths():
    """Issue 44: `--batch-size` and `--num-beams` had no help or default shown; help texts cited ../shared/data."""
    from hf_syntax_mt.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    translate_help = " ".join(commands["translate"].format_help().split())
    assert "--batch-size BATCH_SIZE sentences per generate() call (default: 16)" in translate_help
    assert (
        "--num-beams NUM_BEAMS beam size (1: greedy decoding; default: the model's generation config" in translate_help
    )
    assert "--model MODEL a saved model's directory" in translate_help  # issue 56: --model had no help
    assert "(default: None)" not in translate_help and "(default: False)" not in translate_help
    for name, command in commands.items():
        assert "shared/data" not in command.format_help() and "../" not in command.format_help(), name


@pytest.mark.parametrize("argv", [["--help"], ["translate", "--help"], ["evaluate", "-h"], ["align", "--help"]])
def test_help_imports_neither_torch_nor_transformers(argv):
    """Issue 44: `translate --help` took 7-19 s because `import hf_syntax_mt` imports torch and transformers; the
    console script (`hf_syntax_mt_cli:main`) answers --help from the parser alone, with the same text."""
    import subprocess

    from hf_syntax_mt.cli import build_parser

    code = ("import sys, hf_syntax_mt_cli\nsys.argv = ['hf-syntax-mt', *sys.argv[1:]]\ntry:\n    hf_syntax_mt_cli.main()\n"
            "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            "print('IMPORTED', sorted(m for m in ('torch', 'transformers', 'hf_syntax_mt') if m in sys.modules))")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    assert run.stdout.rstrip().endswith("IMPORTED []"), run.stdout[-300:] + run.stderr[-2000:]
    parser = build_parser()
    command = parser._subparsers._group_actions[0].choices[argv[0]] if len(argv) > 1 else parser
    assert run.stdout.startswith(command.format_help())


def test_evaluate_checks_its_model_as_translate_does(context_model, tmp_path, monkeypatch, capsys):
    """`evaluate --model` with an edited config.json (and no --docids) names the file, not transformers' advice to
    pass trust_remote_code=True."""
    model_dir = tampered(context_model[0], tmp_path, "badtype", lambda d, c: c.update(model_type="not_a_model"))
    hyp = write(tmp_path / "hyp.txt", SENTENCES[:2])
    status, err = console(monkeypatch, capsys, "evaluate", "--hyp", hyp, "--ref", hyp, "--model", model_dir)
    assert status == 1 and "Traceback" not in err and "trust_remote_code" not in err
    assert re.search(r"config.json has model_type 'not_a_model'", err.splitlines()[-1]), err


def test_the_pipeline_leaves_a_blank_sentence_empty_and_keeps_it_as_context(context_model, sentence_model):
    """The pipeline gives a blank sentence "" without decoding it (as every engine and `translate` do); inside a
    document the blank sentence is still context: every other sentence translates exactly as it does alone with
    its previous two source sentences (the blank one among them) given as its context."""
    pipe = pipeline("syntax-translation", model=context_model[0], device="cpu")
    got = texts(pipe(DOC_A, document=True, **GENERATE))
    assert got[2] == "" and DOC_A[2] == "" and all(got[i] for i in (0, 1, 3))
    for i, sentence in enumerate(DOC_A):
        if sentence:
            assert got[i] == texts(pipe([sentence], contexts=[DOC_A[max(0, i - 2) : i]], **GENERATE))[0], i
    assert texts(pipe.translate_document(DOC_A, **GENERATE)) == got
    plain = pipeline("syntax-translation", model=sentence_model, device="cpu")
    alone = texts(plain([SENTENCES[0]], **GENERATE))
    assert texts(plain(["  ", SENTENCES[0], "", "\t"], **GENERATE)) == ["", *alone, "", ""]
    assert texts(plain([" "], **GENERATE)) == [""]
