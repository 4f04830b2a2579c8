"""Issue 65, item 5: every folder the package reads is checked before use, by one function per kind
(`model_files.check_model_folder`, `check_marian_folder`, `check_ctranslate2_folder`), and `export`, `translate`,
`evaluate --baseline-model` and the pipeline all call it. Each folder here is a real one (a tiny model saved with
save_pretrained, its Marian export written by `save_marian`, its CTranslate2 export by `export_to_ctranslate2`),
damaged in one way: the result is one ``error:`` line naming the damaged file and the fix, never a traceback, a
model with a random layer, or an exit status 0."""

import json
import os
import random
import re
import shutil
import sys

import pytest
import torch
from transformers import pipeline

from hf_syntax_mt.cli import main
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.export import save_marian
from hf_syntax_mt.model_files import check_ctranslate2_folder, check_marian_folder, check_model_folder
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

WORDS = "le la un une chat chien maison jardin mange dort voit grand petit rouge bleu vite".split()
TEXTS = [" ".join(random.Random(i).choice(WORDS) for _ in range(5)) for i in range(6)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(model folder, its Marian export, its CTranslate2 export or None): a tiny untrained model, saved."""
    rng = random.Random(0)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(200)]
    tokenizer = train_tokenizer(corpus, vocab_size=60, min_frequency=1)
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, dropout=0.0), seed=0)
    model.generation_config.max_length = 8
    root = tmp_path_factory.mktemp("folders")
    model.eval().save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    save_marian(model, root / "marian", tokenizer)
    ct2 = None
    try:
        import ctranslate2  # noqa: F401

        from hf_syntax_mt.export import export_to_ctranslate2

        ct2 = export_to_ctranslate2(root / "model", root / "ct2")
    except ImportError:
        pass
    return root / "model", root / "marian", ct2


def damaged(source, tmp_path, damage):
    """A copy of the folder `source` with `damage(folder)` applied."""
    folder = tmp_path / f"{source.name}-damaged"
    shutil.copytree(source, folder)
    damage(folder)
    return folder


def edit_json(name, **values):
    def edit(folder):
        data = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**data, **values}))

    return edit


def truncate(name, keep=0.5):
    return lambda folder: (folder / name).write_bytes((folder / name).read_bytes()[: int((folder / name).stat().st_size * keep)])  # fmt: skip


def console(monkeypatch, capsys, *argv):
    """`hf-syntax-mt ARGV` as the console script runs it: (exit status, the last stderr line)."""
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *argv])
    capsys.readouterr()
    status = main()
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return status, err.strip().splitlines()[-1]


# each damage: (the file the message names, a pattern of the message after it)
MODEL_DAMAGES = {
    "a layer added to config.json": (edit_json("config.json", encoder_layers=2), "model.safetensors",
                                     r"lacks 16 tensor\(s\) the model of .*config.json needs .*restore the config.json"),
    "an edited size": (edit_json("config.json", d_model=32), "model.safetensors",
                       r"holds .* of shape \[16\], but .*config.json makes it \[32\]: .*restore the config.json"),
    "half-written weights": (truncate("model.safetensors"), "model.safetensors",
                             r"is not a readable safetensors file .*truncated or damaged; restore it"),
    "a deleted tokenizer": (lambda f: (f / "tokenizer.json").unlink(), "",
                            r"has no tokenizer \(no tokenizer.json\): copy tokenizer.json"),
    "a start token outside the vocabulary": (
        edit_json("generation_config.json", decoder_start_token_id=99999), "generation_config.json",
        r"sets decoder_start_token_id=99999, but a token id must be an int from 0 to 59 .*; correct it, or delete"),
    "an end token outside the vocabulary": (edit_json("config.json", eos_token_id=-1), "config.json",
                                            r"sets eos_token_id=-1, but a token id must be an int from 0 to 59"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MODEL_DAMAGES))
def test_a_damaged_model_folder_is_refused_by_every_reader(folders, tmp_path, monkeypatch, capsys, case):
    """Failed before: `export` read no file first (a layer added to config.json exported a model with a random layer,
    exit 0; the others were 'this is a bug'), and the start token 99999 was an IndexError in `translate`."""
    damage, name, message = MODEL_DAMAGES[case]
    folder = damaged(folders[0], tmp_path, damage)
    named = re.escape(str(folder / name) if name else str(folder))
    with pytest.raises(UserError, match=rf"^model {re.escape(str(folder))}: {named} {message}"):
        check_model_folder(folder, f"model {folder}")
    text = tmp_path / "in.txt"
    text.write_text("\n".join(TEXTS) + "\n")
    runs = {
        "export": ["export", "--model", str(folder), "--to", "marian", "--output", str(tmp_path / "out")],
        "translate": ["translate", "--model", str(folder), "--input", str(text), "--output", str(tmp_path / "t.txt")],
        "evaluate": ["evaluate", "--hyp", str(text), "--ref", str(text), "--baseline", str(text), "--baseline-model",
                     str(folder)],
    }  # fmt: skip
    for command, argv in runs.items():
        status, last = console(monkeypatch, capsys, *argv)
        flag = "--baseline-model" if command == "evaluate" else "--model"
        assert status == 1 and re.match(rf"error: {flag} {re.escape(str(folder))}: {named} {message}", last), last
    assert not (tmp_path / "out").exists() and not (tmp_path / "t.txt").exists()  # nothing written


def test_the_pipeline_checks_the_folder_its_model_was_loaded_from(folders, tmp_path):
    """Failed before: transformers loads an added layer from random weights (a warning), and the pipeline translated
    with it; a start token outside the vocabulary failed in `generate` with an IndexError."""
    ok = pipeline("syntax-translation", model=str(folders[0]), device="cpu")
    assert len(ok(TEXTS[:2])) == 2  # the intact folder translates
    for case in ("a layer added to config.json", "a start token outside the vocabulary"):
        damage, name, message = MODEL_DAMAGES[case]
        folder = damaged(folders[0], tmp_path / case.replace(" ", "-"), damage)
        with pytest.raises(UserError, match=rf"^model {re.escape(str(folder))}: .*{name} {message}"):
            pipeline("syntax-translation", model=str(folder), device="cpu")


MARIAN_DAMAGES = {
    "a layer added to config.json": (edit_json("config.json", decoder_layers=2), "model.safetensors",
                                     r"lacks .* tensor\(s\) the model of .*config.json needs"),
    "half-written weights": (truncate("model.safetensors", 0.3), "model.safetensors",
                             r"is not a readable safetensors file"),
    "a broken tokenizer": (truncate("tokenizer.json"), "tokenizer.json", r"is not valid JSON"),
    "a start token outside the vocabulary": (edit_json("generation_config.json", decoder_start_token_id=60),
                                             "generation_config.json", r"sets decoder_start_token_id=60"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MARIAN_DAMAGES))
def test_a_damaged_marian_export_is_refused(folders, tmp_path, monkeypatch, capsys, case):
    """An exported Marian folder, as `translate` and `export --to ctranslate2` read it."""
    damage, name, message = MARIAN_DAMAGES[case]
    assert check_marian_folder(folders[1])["model_type"] == "marian"
    folder = damaged(folders[1], tmp_path, damage)
    with pytest.raises(UserError, match=rf"{re.escape(str(folder / name))} {message}"):
        check_marian_folder(folder)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(TEXTS) + "\n")
    status, last = console(monkeypatch, capsys, "translate", "--model", str(folder), "--input", str(text))
    assert status == 1 and re.match(rf"error: --model {re.escape(str(folder))}: .*{name} {message}", last), last
    if case == "half-written weights":  # export reads the same check (CTranslate2 or not: it fails before)
        argv = ["export", "--model", str(folder), "--to", "marian", "--output", str(tmp_path / "out")]
        status, last = console(monkeypatch, capsys, *argv)
        assert status == 1 and "model.safetensors is not a readable safetensors file" in last, last


def test_a_model_folder_is_not_a_marian_folder(folders):
    with pytest.raises(UserError, match=r"holds a 'syntax_mt' model, not a Marian one; give the folder save_marian"):
        check_marian_folder(folders[0])


def random_bytes(name):
    return lambda f: (f / name).write_bytes(random.Random(1).randbytes((f / name).stat().st_size))


def foreign_tokenizer(folder):
    """tokenizer.json of another vocabulary: its tokens renamed."""
    data = json.loads((folder / "tokenizer.json").read_text())
    data["model"]["vocab"] = {f"x{i}": i for i in range(len(data["model"]["vocab"]))}
    data["model"]["merges"] = []
    (folder / "tokenizer.json").write_text(json.dumps(data))


REEXPORT = r"export the model again: hf-syntax-mt export --model MODEL_DIR --to ctranslate2 --output NEW_DIR$"
CT2_DAMAGES = {
    "model.bin missing": (lambda f: (f / "model.bin").unlink(), "", r"has no model.bin \(CTranslate2's weights\)"),
    "model.bin truncated": (truncate("model.bin", 0.7), "model.bin",
                            r"is not a CTranslate2 model file \(the variable .* ends past the file's end"),
    "model.bin cut in its header": (truncate("model.bin", 0.0001), "model.bin", r"is not a CTranslate2 model file"),
    "model.bin random": (random_bytes("model.bin"), "model.bin", r"is not a CTranslate2 model file"),
    "model.bin with bytes after it": (lambda f: open(f / "model.bin", "ab").write(b"\0" * 8), "model.bin",
                                      r"is not a CTranslate2 model file \(8 bytes follow its last variable\)"),
    "vocabulary not JSON": (truncate("shared_vocabulary.json"), "shared_vocabulary.json", r"is not valid JSON"),
    "vocabulary one token short": (
        lambda f: (f / "shared_vocabulary.json").write_text(json.dumps(json.loads(
            (f / "shared_vocabulary.json").read_text())[:-1])), "shared_vocabulary.json",
        r"holds 59 tokens, but .*model.bin has 60 embedding rows"),
    "vocabulary not a list": (lambda f: (f / "shared_vocabulary.json").write_text('{"a": 1}'),
                              "shared_vocabulary.json", r"is not a list of tokens"),
    "tokenizer broken": (lambda f: (f / "tokenizer.json").write_text("{}"), "tokenizer.json", r"is not a tokenizer"),
    "tokenizer of another model": (foreign_tokenizer, "tokenizer.json", r"does not know \d+ token\(s\) of shared_vocabulary.json \('a', 'b', 'c'\): it belongs to another model"),
    "tokenizer deleted": (lambda f: (f / "tokenizer.json").unlink(), "", r"has no tokenizer"),
    "config.json not JSON": (truncate("config.json"), "config.json", r"is not valid JSON"),
    "export info not JSON": (truncate("hf_syntax_mt_export.json"), "hf_syntax_mt_export.json", r"is not valid JSON"),
    "export info with a bad length": (edit_json("hf_syntax_mt_export.json", max_position_embeddings="x"),
                                      "hf_syntax_mt_export.json", r"sets max_position_embeddings='x', which must be"),
    "export info of another format": (edit_json("hf_syntax_mt_export.json", format="onnx"),
                                      "hf_syntax_mt_export.json", r"sets format='onnx', not 'ctranslate2'"),
    "a start token outside the vocabulary": (edit_json("generation_config.json", decoder_start_token_id=99999),
                                             "generation_config.json", r"sets decoder_start_token_id=99999"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CT2_DAMAGES))
def test_a_damaged_ctranslate2_folder_is_refused(folders, tmp_path, monkeypatch, capsys, case):
    """Failed before: each of these was printed as a bug (a traceback from CTranslate2, json or transformers)."""
    if folders[2] is None:
        pytest.skip("the deploy extra (pip install 'hf-syntax-mt[deploy]')")
    from hf_syntax_mt.export.serve import CTranslate2Pipeline

    damage, name, message = CT2_DAMAGES[case]
    assert check_ctranslate2_folder(folders[2])["format"] == "ctranslate2"
    folder = damaged(folders[2], tmp_path, damage)
    named = re.escape(str(folder / name) if name else str(folder))
    with pytest.raises(UserError, match=rf"{named}.* {message}"):
        CTranslate2Pipeline(folder)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(TEXTS) + "\n")
    status, last = console(monkeypatch, capsys, "translate", "--model", str(folder), "--input", str(text))
    assert status == 1 and re.match(rf"error: --model {re.escape(str(folder))}: {named}.* {message}", last), last
    if "generation_config" not in name:
        assert re.search(REEXPORT, last), last


def test_an_intact_ctranslate2_folder_translates_as_its_model(folders, tmp_path):
    """The check passes what the export wrote, and the folder translates as the model does (greedy)."""
    if folders[2] is None:
        pytest.skip("the deploy extra (pip install 'hf-syntax-mt[deploy]')")
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt.export.serve import CTranslate2Pipeline

    model = AutoModelForSeq2SeqLM.from_pretrained(folders[0]).eval()
    tokenizer = AutoTokenizer.from_pretrained(folders[0])
    with torch.no_grad():
        ids = model.generate(**tokenizer(TEXTS, return_tensors="pt", padding=True), num_beams=1)
    expected = tokenizer.batch_decode(ids, skip_special_tokens=True)
    assert [r["translation_text"] for r in CTranslate2Pipeline(folders[2])(TEXTS, num_beams=1)] == expected


def test_export_refuses_a_ctranslate2_folder_as_its_model(folders, tmp_path, monkeypatch, capsys):
    if folders[2] is None:
        pytest.skip("the deploy extra (pip install 'hf-syntax-mt[deploy]')")
    argv = ["export", "--model", str(folders[2]), "--to", "ctranslate2", "--output", str(tmp_path / "out")]
    status, last = console(monkeypatch, capsys, *argv)
    assert status == 1 and "is a CTranslate2 folder (an export's output): give the model directory" in last, last
    assert os.listdir(tmp_path) == []
