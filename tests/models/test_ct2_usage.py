"""Issue 67, item 4: a CTranslate2 folder says how to use it. The README `export --to ctranslate2` writes holds the
exact `translate_batch` call (tokenization, the translate token of a multi-task model as `target_prefix`, beams,
length limit, patience); run literally, with nothing of hf-syntax-mt imported, it writes the lines `translate` writes
for the folder. `translate` on a folder takes `--threads` and `--compute-type` and prints them; on any other model
they are refused."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import torch

from hf_syntax_mt.cli import main
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.export import export_to_ctranslate2
from hf_syntax_mt.export.ct2_usage import readme_code
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

ctranslate2 = pytest.importorskip("ctranslate2", reason="the deploy extra (pip install 'hf-syntax-mt[deploy]')")

WORDS = "le la un une chat chien maison jardin mange dort voit grand petit rouge bleu vite".split()


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) for _ in range(n)]


@pytest.fixture(scope="module", params=["plain", "multitask"])
def exported(request, tmp_path_factory):
    """(model directory, CTranslate2 folder): an untrained tiny model (weights of std 0.3: outputs differ with the
    input), 2 beams, 10 tokens, early_stopping=True; the multi-task one starts with its translate token."""
    from hf_syntax_mt.data.multitask import add_task_tokens

    root = tmp_path_factory.mktemp(request.param)
    tokenizer = train_tokenizer(sentences(300, seed=0), vocab_size=80, min_frequency=1)
    torch.manual_seed(0)
    model = build_model(model_config(tokenizer, d_model=32, layers=2, heads=4, ffn_dim=64, init_std=0.3)).eval()
    if request.param == "multitask":
        add_task_tokens(tokenizer, model)
    model.generation_config.update(max_length=10, num_beams=2, early_stopping=True)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root / "model", export_to_ctranslate2(root / "model", root / "ct2")


def test_the_readme_call_run_literally_writes_what_translate_writes(exported, tmp_path, capsys):
    model_dir, folder = exported
    readme = (folder / "README.md").read_text(encoding="utf-8")
    info = json.loads((folder / "hf_syntax_mt_export.json").read_text(encoding="utf-8"))
    generation = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))  # the export's
    options = info["translate_batch"]
    # 10 tokens: the decoder start, 8 decoded, the forced </s> (generation_config's forced_eos_token_id)
    assert generation["forced_eos_token_id"] == generation["eos_token_id"]
    assert (options["beam_size"], options["max_decoding_length"], options["patience"]) == (2, 8, 1)
    assert "beam_size=2," in readme and "max_decoding_length=8," in readme and "patience=1," in readme
    forced = f"|forced_bos_token_id:{generation['forced_bos_token_id']}" if "forced_bos_token_id" in generation else ""
    assert info["decoding"] == f"beams:2|max_length:10|early_stopping:true{forced}" and info["decoding"] in readme
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["decoder_start_token"] == "<pad>" and "`decoder_start_token`: `<pad>`" in readme
    assert ("forced_bos_token_id" in generation) == (model_dir.parent.name.startswith("multitask"))
    if "forced_bos_token_id" in generation:  # the multi-task model: its translate token is the target prefix
        from transformers import AutoTokenizer

        token = AutoTokenizer.from_pretrained(model_dir).convert_ids_to_tokens(generation["forced_bos_token_id"])
        assert info["target_prefix"] == [token] and f"target_prefix=[{[token]!r}] * len(source)" in readme
    else:
        assert info["target_prefix"] is None and "target_prefix" not in readme_code(readme)
    source = tmp_path / "in.txt"
    source.write_text("".join(s + "\n" for s in sentences(20, seed=3)), encoding="utf-8")
    program = tmp_path / "readme_call.py"
    program.write_text(readme_code(readme), encoding="utf-8")
    check = f"import runpy, sys; runpy.run_path({str(program)!r}); assert 'hf_syntax_mt' not in sys.modules"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([sys.executable, "-c", check], cwd=folder, input=source.read_text(encoding="utf-8"),
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert main(["translate", "--model", str(folder), "--input", str(source), "--output", str(tmp_path / "out")]) == 0
    translated = (tmp_path / "out").read_text(encoding="utf-8")
    assert ran.stdout == translated and len(set(translated.splitlines())) >= 10
    err = capsys.readouterr().err
    assert f"decoding: {info['decoding']} (the model's generation config)" in err
    assert "compute type: float32, threads: CTranslate2's default (--threads 0)" in err


def test_translate_takes_threads_and_compute_type_for_a_ctranslate2_folder_only(exported, tmp_path, capsys):
    model_dir, folder = exported
    source = tmp_path / "in.txt"
    source.write_text("".join(s + "\n" for s in sentences(6, seed=4)), encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(source), "--output", str(tmp_path / "out")]
    assert main([*argv, "--threads", "1", "--compute-type", "int8"]) == 0
    err = capsys.readouterr().err
    resolved = ctranslate2.Translator(str(folder), compute_type="int8").compute_type  # int8_float32 on a CPU
    assert f"engine: CTranslate2, compute type: int8 -> {resolved}, threads: 1 (--threads)" in err
    assert (tmp_path / "out").read_text(encoding="utf-8").count("\n") == 6
    for flag, value in (("--threads", "2"), ("--compute-type", "int8")):
        with pytest.raises(UserError, match=f"{flag} is CTranslate2's, and --model .* is no CTranslate2 folder"):
            main(["translate", "--model", str(model_dir), "--input", str(source), flag, value])
