"""`hf-syntax-mt evaluate`: every printed number carries its signatures; the JSON equals the library functions;
bad input files are named."""

import json

import numpy as np
import pytest
import sacrebleu

from hf_syntax_mt.cli import main
from hf_syntax_mt.evaluation import bucket_scores, corpus_ribes, paired_bootstrap

REFS = ["the cat sat on the mat", "a dog barks loudly at night", "she reads", "they built a small house by the lake",
        "it rains", "birds sing in the early morning"] * 3  # fmt: skip
HYPS = ["the cat sat on a mat", "a dog barks at night", "she is reading", "they built a house by a lake",
        "it is raining", "birds sing early in the morning"] * 3  # fmt: skip
BASE = ["cat the mat on", "dog a night", "she reads", "house small a built they", "rains", "morning birds"] * 3
SRCS = ["le chat", "un chien aboie fort la nuit dans le parc près de la rivière", "elle lit", "ils ont construit",
        "il pleut", "les oiseaux chantent tôt le matin quand le soleil se lève sur les collines au loin"] * 3  # fmt: skip


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_evaluate_prints_and_writes_every_score_with_signatures(tmp_path, capsys):
    hyp, ref = write(tmp_path / "hyp.txt", HYPS), write(tmp_path / "ref.txt", REFS)
    base, src = write(tmp_path / "base.txt", BASE), write(tmp_path / "src.txt", SRCS)
    out = tmp_path / "eval.json"
    assert main(["evaluate", "--hyp", hyp, "--ref", ref, "--src", src, "--baseline", base, "--name", "pascal",
                 "--baseline-name", "vanilla", "--bootstrap-samples", "100", "--seed", "5",
                 "--bucket-chart", str(tmp_path / "b.png"), "--json", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    pascal = result["systems"]["pascal"]
    assert pascal["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert pascal["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert pascal["ribes"] == pytest.approx(corpus_ribes(HYPS, REFS)["ribes"])
    assert result["buckets"]["pascal"] == bucket_scores([len(s.split()) for s in SRCS], HYPS, REFS)
    expected = paired_bootstrap(BASE, HYPS, REFS, n_samples=100, seed=5)
    assert result["significance"]["bleu"]["p_value"] == pytest.approx(expected["bleu"]["p_value"])
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    # signatures printed: sacrebleu's (BLEU, chrF, bootstrap), RIBES's, and a model signature per system
    for text in (pascal["bleu_signature"], pascal["chrf_signature"], pascal["ribes_signature"],
                 expected["bleu"]["signature"], pascal["model_signature"]):  # fmt: skip
        assert text in printed
    assert "hf-syntax-mt:" in pascal["model_signature"] and "system:hyp.txt|sha:" in pascal["model_signature"]


@pytest.mark.parametrize(
    "files, message",
    [
        ({"hyp": HYPS[:-1], "ref": REFS}, r"line counts differ: hypotheses .*hyp.txt has 17 lines, references .*ref.txt has 18"),
        ({"hyp": [], "ref": REFS}, r"hypothesis file .*hyp.txt is empty"),
        ({"hyp": HYPS, "ref": REFS, "src": SRCS[:3]}, r"sources .*src.txt has 3 lines"),
    ],
)  # fmt: skip
def test_evaluate_names_bad_files(tmp_path, files, message):
    args = ["evaluate"]
    for key, lines in files.items():
        args += [f"--{key}", write(tmp_path / f"{key}.txt", lines)]
    with pytest.raises(ValueError, match=message):
        main(args)


CONLLU_SENTENCES = ["le chat dort", "il rêve de souris", "une femme lit", "elle sourit"]


def saved_model(directory, **options):
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    tokenizer = train_tokenizer(CONLLU_SENTENCES * 10, vocab_size=60, min_frequency=1)
    model = build_model(model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, **options), seed=0)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def gold_file(path):
    """Each sentence's words attach to the first word (the root)."""
    blocks = []
    for text in CONLLU_SENTENCES:
        rows = [f"{i + 1}\t{w}\t_\t_\t_\t_\t{0 if i == 0 else 1}\t_\t_\t_" for i, w in enumerate(text.split())]
        blocks.append(f"# text = {text}\n" + "\n".join(rows) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return str(path)


def test_evaluate_docids_without_attention_scores_is_refused(tmp_path):
    """Issue 44: `--docids` (and `--no-context`) only apply to the attention scores; without --gold-conllu and
    --model they were ignored without a word."""
    hyp, ref = write(tmp_path / "hyp.txt", HYPS), write(tmp_path / "ref.txt", REFS)
    ids = write(tmp_path / "ids.txt", ["a"] * len(HYPS))
    for flags in (["--docids", ids], ["--no-context"]):
        with pytest.raises(ValueError, match=rf"{flags[0]} is about the attention scores .* add --model DIR and "
                           rf"--gold-conllu FILE, or leave out {flags[0]}"):  # fmt: skip
            main(["evaluate", "--hyp", hyp, "--ref", ref, *flags])


def test_evaluate_on_a_device_in_bf16_and_docids_of_a_sentence_level_model(tmp_path, capsys):
    """Issue 43: `--device cpu --bf16` scores the attention as `model_attachment_scores` under bf16 autocast, with a
    `device:` line on stderr; issue 44: `--docids` with a sentence-level model says it is not used."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hf_syntax_mt.data import read_conllu
    from hf_syntax_mt.evaluation.attention import model_attachment_scores

    model_dir = saved_model(tmp_path / "model")
    gold = gold_file(tmp_path / "gold.conllu")
    lines = write(tmp_path / "hyp.txt", CONLLU_SENTENCES)
    ids = write(tmp_path / "ids.txt", ["a", "a", "b", "b"])
    out = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["evaluate", "--hyp", lines, "--ref", lines, "--model", model_dir, "--gold-conllu", gold,
                 "--docids", ids, "--device", "cpu", "--bf16", "--json", str(out)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "note: " + model_dir + " has no document context (context_sentences=0): --docids is not used" in err
    assert [line for line in err.splitlines() if line.startswith("device:")] == [
        "device: cpu, dtype: bfloat16 (autocast, float32 weights)"
    ]
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model_attachment_scores(model, AutoTokenizer.from_pretrained(model_dir), read_conllu(gold))
    scores = json.loads(out.read_text())["attention"]["scores"]
    assert np.allclose(scores, expected["scores"], atol=1e-6, equal_nan=True)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["evaluate", "--hyp", "{hyp}", "--ref", "{ref}", "--docids", "{hyp}"], r"--docids is about the attention"),
        (["evaluate", "--hyp", "{hyp}", "--ref", "{missing}"], r"--ref .*missing.txt: no such file; check the path$"),
        (["uas", "--model", "{missing}", "--conllu", "{hyp}"], r"--model .*missing.txt: no such directory"),
        (["contrastive", "--model", "{tmp}", "--synthetic", "2"], r"has no config.json, so it is not a saved model"),
        (["aer", "--hyp", "{hyp}", "--gold", "{missing}"], r"missing.txt"),
    ],
)  # fmt: skip
def test_every_subcommand_gives_user_errors_in_one_line(tmp_path, monkeypatch, capsys, argv, message):
    """Issue 44: as the console script runs them, user errors of every subcommand are one `error:` line, exit 1."""
    import re
    import sys

    paths = {"hyp": write(tmp_path / "hyp.txt", HYPS), "ref": write(tmp_path / "ref.txt", REFS),
             "missing": str(tmp_path / "missing.txt"), "tmp": str(tmp_path)}  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt", *(a.format(**paths) for a in argv)])
    capsys.readouterr()
    assert main() == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 1 and err.splitlines()[-1].startswith("error: ")
    assert re.search(message, err.splitlines()[-1]), err
