"""Issue 56: the package's metrics as `evaluate` modules. Each shipped module script loads with `evaluate.load` from
the installed package with every Hugging Face service offline, and gives the numbers of the CLI command that
computes the same metric (`evaluate`, `evaluate --baseline`, `contrastive`, `aer`); `make_compute_metrics` gives
the train script's numbers."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import hf_syntax_mt
from hf_syntax_mt.cli import main
from hf_syntax_mt.demo.synthetic_corpus import generate_documents
from hf_syntax_mt.evaluate_modules import METRICS, make_compute_metrics, metric_path
from hf_syntax_mt.evaluation import corpus_ribes, corpus_scores
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.factory import build_model, model_config
from hf_syntax_mt.training.script import make_compute_metrics as script_compute_metrics
from hf_syntax_mt.training.script import make_decoder

pytest.importorskip("evaluate", reason="the evaluate modules need the evaluate package: pip install evaluate")

HYP = ["the cat sleeps on the sofa", "a dog runs in the park", "the bird sings", "it rains today", "we eat bread"]
BASE = ["the cat sleeps on sofa", "the dog runs in a park", "a bird sings", "it rains", "we eat the bread"]
REF = ["the cat sleeps on the sofa", "a dog runs in the park", "the bird is singing", "it is raining today",
       "we eat bread"]  # fmt: skip
PRED_LINKS = ["0-0 1-1 2-2", "0-1 1-0", "", "2-2 0-0"]
GOLD_LINKS = ["0-0 1-1 2p2", "0-0 1p0", "0-0", "0-0 1-1 2-2"]

OFFLINE = """
import json, os, shutil, sys, evaluate
from hf_syntax_mt.evaluate_modules import metric_path
inputs, lists = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {name: evaluate.load(metric_path(name)).compute(**kwargs) for name, kwargs in inputs.items()}
# transformers' run_translation.py: evaluate.load("sacrebleu") finds ./sacrebleu/sacrebleu.py before the Hub, and
# passes one list of references per prediction
os.makedirs("sacrebleu")
shutil.copy(metric_path("bleu"), "sacrebleu/sacrebleu.py")
out["run_translation"] = evaluate.load("sacrebleu").compute(**lists["one"])
out["two_references"] = evaluate.load(metric_path("chrf")).compute(**lists["two"])
print(json.dumps(out))
"""


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def contrastive_cli(tmp_path_factory):
    """`hf-syntax-mt contrastive --json` of a tiny document-level model on synthetic documents."""
    root = tmp_path_factory.mktemp("contrastive")
    documents = generate_documents(30, seed=5)
    tokenizer = train_tokenizer([s for d in documents for s in d.sources + d.targets], vocab_size=150)
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, max_position_embeddings=64,
                                     context_sentences=1, init_std=0.3), seed=2)  # fmt: skip
    model.save_pretrained(root / "m")
    tokenizer.save_pretrained(root / "m")
    assert main(["contrastive", "--model", str(root / "m"), "--synthetic", "12", "--seed", "4", "--json",
                 str(root / "c.json")]) == 0  # fmt: skip
    return json.loads((root / "c.json").read_text())


@pytest.fixture(scope="module")
def offline(tmp_path_factory, contrastive_cli):
    """Every shipped module loaded by path and computed in a fresh interpreter with the Hub, evaluate and datasets
    offline and an empty modules cache."""
    root = tmp_path_factory.mktemp("offline")
    scored = contrastive_cli["results"]
    inputs = {
        "bleu": {"predictions": HYP, "references": REF},
        "chrf": {"predictions": HYP, "references": REF},
        "paired_bootstrap": {"predictions": HYP, "baseline_predictions": BASE, "references": REF, "n_samples": 200,
                             "seed": 7},
        "contrastive": {"correct_scores": [r["correct_score"] for r in scored],
                        "contrastive_scores": [r["contrastive_score"] for r in scored]},
        "aer": {"predictions": PRED_LINKS, "references": GOLD_LINKS},
    }  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(root / "hf"), "HF_MODULES_CACHE": str(root / "hf" / "modules"),
           # the package's own folder only: this process's sys.path may hold another modules cache (an
           # `evaluate_modules` package of its own, from a metric loaded here before)
           "PYTHONPATH": os.pathsep.join([str(Path(hf_syntax_mt.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    lists = {"one": {"predictions": HYP, "references": [[r] for r in REF]},
             "two": {"predictions": HYP, "references": [[r, b] for r, b in zip(REF, BASE, strict=True)]}}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", OFFLINE, json.dumps(inputs), json.dumps(lists)], capture_output=True,
                         text=True, env=env, cwd=root)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_shipped_metric_loads_offline(offline):
    assert sorted(offline) == sorted([*METRICS, "run_translation", "two_references"])
    assert all(Path(metric_path(name)).is_file() for name in METRICS)


def test_bleu_chrf_and_the_bootstrap_equal_the_evaluate_cli(offline, tmp_path):
    hyp, base, ref = write(tmp_path / "hyp", HYP), write(tmp_path / "base", BASE), write(tmp_path / "ref", REF)
    assert main(["evaluate", "--hyp", hyp, "--ref", ref, "--baseline", base, "--bootstrap-samples", "200", "--seed",
                 "7", "--json", str(tmp_path / "e.json")]) == 0  # fmt: skip
    cli = json.loads((tmp_path / "e.json").read_text())
    system = cli["systems"]["system"]
    assert offline["bleu"] == {"score": system["bleu"], "signature": system["bleu_signature"], "count": 5}
    assert offline["chrf"] == {"score": system["chrf"], "signature": system["chrf_signature"], "count": 5}
    significance = {k: cli["significance"][k] for k in ("bleu", "chrf")}
    assert offline["paired_bootstrap"] == significance
    assert 0 < offline["bleu"]["score"] < 100 and "nrefs:1" in offline["bleu"]["signature"]
    # run_translation.py's way (references as lists, the module as ./sacrebleu/sacrebleu.py): the same BLEU
    assert offline["run_translation"] == offline["bleu"]
    # several references: sacrebleu's own multi-reference chrF
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    two = chrf.corpus_score(HYP, [REF, BASE])
    assert offline["two_references"] == {"score": two.score, "signature": str(chrf.get_signature()), "count": 5}
    assert "nrefs:2" in offline["two_references"]["signature"]


def test_contrastive_accuracy_equals_the_contrastive_cli(offline, contrastive_cli):
    assert offline["contrastive"] == {k: contrastive_cli[k] for k in ("accuracy", "n", "correct", "ties")}
    results = contrastive_cli["results"]
    by_hand = sum(r["correct_score"] > r["contrastive_score"] + 1e-6 for r in results)
    assert offline["contrastive"]["correct"] == by_hand and offline["contrastive"]["n"] == len(results) > 0


def test_aer_equals_the_aer_cli(offline, tmp_path):
    hyp, gold = write(tmp_path / "hyp.align", PRED_LINKS), write(tmp_path / "gold.align", GOLD_LINKS)
    assert main(["aer", "--hyp", hyp, "--gold", gold, "--json", str(tmp_path / "a.json")]) == 0
    cli = json.loads((tmp_path / "a.json").read_text())
    assert offline["aer"] == {k: v for k, v in cli.items() if k != "signature"}
    # by hand, pair by pair: |A| = 3+2+0+2, |S| = 2+1+1+3, |A∩S| = 2+0+0+2, |A∩P| = 3+1+0+2
    assert offline["aer"]["aer"] == pytest.approx(1 - (4 + 6) / (7 + 7))
    assert (offline["aer"]["precision"], offline["aer"]["recall"]) == pytest.approx((6 / 7, 4 / 7))


def test_the_trainer_compute_metrics_built_on_the_modules_gives_sacrebleus_numbers():
    """`make_compute_metrics` (and the train script's, which is built on it and adds RIBES) decodes the predictions
    and the padded labels and scores them as sacrebleu does on the strings."""
    tokenizer = train_tokenizer(HYP + REF + BASE, vocab_size=120)
    predictions = tokenizer(HYP, padding=True)["input_ids"]
    labels = [row + [-100] * (16 - len(row)) for row in tokenizer(text_target=REF)["input_ids"]]
    eval_preds = SimpleNamespace(predictions=predictions, label_ids=labels)
    decode = make_decoder(tokenizer)
    expected = corpus_scores(decode(predictions), decode(labels))
    assert decode(labels) == REF  # the tokenizer round-trips these sentences
    ours = make_compute_metrics(tokenizer)(eval_preds)
    assert ours == {"bleu": expected["bleu"], "chrf": expected["chrf"]}
    script = script_compute_metrics(decode)(eval_preds)
    assert script == {**ours, "ribes": corpus_ribes(decode(predictions), REF)["ribes"]}


def test_an_unknown_metric_names_the_shipped_ones():
    with pytest.raises(ValueError, match="no hf-syntax-mt metric 'bleurt'; the metrics are bleu, chrf"):
        metric_path("bleurt")
