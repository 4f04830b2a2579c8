"""`hf-syntax-mt evaluate`: every printed number carries its signatures; the JSON equals the library functions;
bad input files are named."""

import json

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
