"""Contrastive scoring (hf_syntax_mt.evaluation.contrastive) against a direct per-example computation; the DiscEvalMT loader."""

import json
import shutil
from pathlib import Path

import needs
import pytest
import torch

from hf_syntax_mt.cli import main
from hf_syntax_mt.demo.synthetic_corpus import contrastive_examples, generate_documents
from hf_syntax_mt.evaluation.contrastive import load_discevalmt, score_contrastive
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

DISCEVALMT = needs.SHARED_DATA / "discevalmt-en-fr"
needs_discevalmt = needs.skip_without_data("discevalmt-en-fr")
TINY = dict(d_model=16, layers=2, heads=4, ffn_dim=32, max_position_embeddings=64, dropout=0.0, init_std=0.3)


@pytest.fixture(scope="module")
def documents():
    return generate_documents(60, seed=11)


@pytest.fixture(scope="module")
def tokenizer(documents):
    texts = [s for d in documents for s in d.sources + d.targets]
    return train_tokenizer(texts, vocab_size=200)


@pytest.fixture(scope="module")
def examples(documents):
    examples = list(contrastive_examples(documents))[:7]
    # no context at all, a context longer than k, and a tie (both candidates equal)
    examples.append({**examples[0], "context": []})
    examples.append({**examples[1], "context": [examples[2]["source"], *examples[1]["context"]]})
    examples.append({**examples[3], "contrastive": examples[3]["correct"]})
    return examples


def tiny_model(tokenizer, context_sentences):
    options = {"context_sentences": context_sentences} if context_sentences else {}
    return build_model(model_config(tokenizer, **TINY, **options), seed=3).eval()


def direct_scores(model, tokenizer, example, k):
    """Obviously-correct reference: one candidate at a time, decoder inputs built by hand, sum of log_softmax."""
    src = torch.tensor([tokenizer(example["source"])["input_ids"]])
    context = [i for s in (example["context"][-k:] if k else []) for i in tokenizer(s)["input_ids"]]
    extra = {"context_input_ids": torch.tensor([context])} if context else {}
    scores = []
    for candidate in (example["correct"], example["contrastive"]):
        tgt = tokenizer(text_target=candidate)["input_ids"]
        decoder_input_ids = torch.tensor([[model.config.decoder_start_token_id] + tgt[:-1]])
        with torch.no_grad():
            logits = model(input_ids=src, decoder_input_ids=decoder_input_ids, **extra).logits[0]  # (T, V)
        log_probs = torch.log_softmax(logits, dim=-1)
        scores.append(sum(float(log_probs[j, t]) for j, t in enumerate(tgt)))
    return scores


@pytest.mark.parametrize("k", [0, 1, 2], ids=["no-context", "k=1", "k=2"])
def test_scores_equal_direct_computation(tokenizer, examples, k):
    model = tiny_model(tokenizer, k)
    result = score_contrastive(model, tokenizer, examples, batch_size=4)
    assert result["n"] == len(examples) and result["uses_context"] == bool(k)
    for example, row in zip(examples, result["results"], strict=True):
        good, bad = direct_scores(model, tokenizer, example, k)
        assert row["correct_score"] == pytest.approx(good, abs=1e-4)
        assert row["contrastive_score"] == pytest.approx(bad, abs=1e-4)
        assert row["correct"] == (good > bad + 1e-6) and row["tie"] == (abs(good - bad) <= 1e-6)
    assert result["results"][-1]["tie"] and not result["results"][-1]["correct"]
    assert result["ties"] == sum(r["tie"] for r in result["results"]) >= 1
    assert result["accuracy"] == pytest.approx(sum(r["correct"] for r in result["results"]) / len(examples))


@pytest.mark.parametrize("k", [0, 1])
def test_batching_and_padding_do_not_change_scores(tokenizer, examples, k):
    model = tiny_model(tokenizer, k)
    one = score_contrastive(model, tokenizer, examples, batch_size=1)["results"]
    for batch_size in (3, 64):
        other = score_contrastive(model, tokenizer, examples, batch_size=batch_size)["results"]
        for a, b in zip(one, other, strict=True):
            assert a["correct_score"] == pytest.approx(b["correct_score"], abs=1e-5)
            assert a["contrastive_score"] == pytest.approx(b["contrastive_score"], abs=1e-5)


def test_context_is_read_only_by_context_models(tokenizer, examples):
    shuffled = [{**ex, "context": examples[(i + 1) % len(examples)]["context"]} for i, ex in enumerate(examples)]
    for k, changes in ((0, False), (1, True)):
        model = tiny_model(tokenizer, k)
        a = [r["correct_score"] for r in score_contrastive(model, tokenizer, examples)["results"]]
        b = [r["correct_score"] for r in score_contrastive(model, tokenizer, shuffled)["results"]]
        assert (torch.tensor(a) - torch.tensor(b)).abs().max().item() > 1e-3 if changes else a == b


def test_max_context_length_keeps_the_most_recent_tokens(tokenizer, examples):
    model = tiny_model(tokenizer, 2)
    ex = examples[8]  # two context sentences
    last = tokenizer(ex["context"][-1])["input_ids"]
    cut = score_contrastive(model, tokenizer, [ex], max_context_length=len(last))["results"][0]
    only_last = score_contrastive(model, tokenizer, [{**ex, "context": ex["context"][-1:]}])["results"][0]
    assert cut["correct_score"] == pytest.approx(only_last["correct_score"], abs=1e-5)


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"source": None}, ValueError),
        ({"context": "one string"}, ValueError),
        ({"contrastive": 3}, ValueError),
    ],
)
def test_invalid_examples(tokenizer, examples, bad, error):
    model = tiny_model(tokenizer, 0)
    with pytest.raises(error):
        score_contrastive(model, tokenizer, [{**examples[0], **bad}])


def test_invalid_arguments(tokenizer, examples):
    with pytest.raises(ValueError, match="batch_size"):
        score_contrastive(tiny_model(tokenizer, 0), tokenizer, examples, batch_size=0)
    pascal = build_model(model_config(tokenizer, **TINY, encoder_pascal_heads=[1, 0]))
    with pytest.raises(ValueError, match="parses"):
        score_contrastive(pascal, tokenizer, examples)


# ---------------------------------------------------------------- DiscEvalMT


def official_pairs(subset):
    """Independent reading of the official json: (prev en, current en, prev fr, good fr, bad fr) per example."""
    name = {"anaphora": "anaphora.json", "lexical_choice": "lexical-choice.json"}[subset]
    data = json.loads((DISCEVALMT / name).read_text(encoding="utf-8"))
    rows = []
    for key in sorted(data, key=int):
        if subset == "anaphora":
            for t in data[key]["trg"]:
                good = t["correct"] if "correct" in t else t["semi-correct"]
                rows.append((*data[key]["src"], good[0], good[1], t["incorrect"][1]))
        else:
            for e in data[key]["examples"]:
                rows.append((*e["src"], e["trg"]["correct"][0], e["trg"]["correct"][1], e["trg"]["incorrect"][1]))
    return rows


@needs_discevalmt
@pytest.mark.parametrize("subset", ["anaphora", "lexical_choice"])
def test_load_discevalmt_matches_the_official_pairing(subset):
    examples = load_discevalmt(DISCEVALMT, subset)
    assert len(examples) == 200
    assert all(ex["correct"] != ex["contrastive"] and ex["source"] and ex["context"][0] for ex in examples)
    got = [
        (ex["context"][0], ex["source"], ex["context_target"][0], ex["correct"], ex["contrastive"]) for ex in examples
    ]
    assert got == official_pairs(subset)


@needs_discevalmt
def test_load_discevalmt_rejects_a_broken_pairing(tmp_path):
    for path in DISCEVALMT.glob("lexical*"):
        shutil.copy(path, tmp_path / path.name)
    lines = (tmp_path / "lexical_choice.current.fr").read_text(encoding="utf-8").split("\n")
    lines[0], lines[1] = lines[1], lines[0]  # contrastive first: no longer the json's pairing
    (tmp_path / "lexical_choice.current.fr").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match="does not match"):
        load_discevalmt(tmp_path, "lexical_choice")
    with pytest.raises(ValueError, match="subset"):
        load_discevalmt(tmp_path, "coreference")
    with pytest.raises(FileNotFoundError):
        load_discevalmt(tmp_path, "anaphora")


@needs_discevalmt
def test_source_context_models_score_half_of_anaphora_by_construction(tmp_path):
    """Twins (same English, candidates swapped): a model reading only the source side gets one of the two right."""
    examples = load_discevalmt(DISCEVALMT, "anaphora")
    texts = [s for ex in examples for s in (ex["source"], ex["correct"], ex["contrastive"], *ex["context"])]
    tokenizer = train_tokenizer(texts, vocab_size=300)
    index = {(ex["context"][0], ex["source"], ex["correct"], ex["contrastive"]): i for i, ex in enumerate(examples)}
    swapped = [(ex["context"][0], ex["source"], ex["contrastive"], ex["correct"]) for ex in examples]
    twins = [(i, index[key]) for i, key in enumerate(swapped) if key in index]
    assert len(twins) >= 198
    for k in (0, 1):
        results = score_contrastive(tiny_model(tokenizer, k), tokenizer, examples, batch_size=64)["results"]
        assert all(results[i]["correct"] != results[j]["correct"] for i, j in twins if not results[i]["tie"])


@needs_discevalmt
def test_cli_contrastive(tmp_path, capsys):
    examples = load_discevalmt(DISCEVALMT, "lexical_choice")[:6]
    texts = [s for ex in examples for s in (ex["source"], ex["correct"], ex["contrastive"], *ex["context"])]
    tokenizer = train_tokenizer(texts, vocab_size=150)
    model = tiny_model(tokenizer, 1)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    out = tmp_path / "out.json"
    argv = ["contrastive", "--model", str(tmp_path / "m"), "--discevalmt", str(DISCEVALMT), "--subset",
            "lexical_choice", "--limit", "6", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    expected = score_contrastive(model, tokenizer, examples)
    saved = json.loads(out.read_text())
    assert saved["accuracy"] == pytest.approx(expected["accuracy"]) and saved["n"] == 6
    assert f"{100 * expected['accuracy']:.2f}" in printed
    assert "data:discevalmt-lexical_choice|n:6" in saved["signature"] and "context:1" in saved["signature"]


# ---------------------------------------------------------------- the context-vs-no-context demo script


@pytest.mark.slow
def test_synthetic_document_demo_script(tmp_path):
    """scripts/synthetic_document_demo.py end to end, tiny: both models trained for the same steps, then scored."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "synthetic_document_demo.py"
    spec = importlib.util.spec_from_file_location("synthetic_document_demo", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    out = tmp_path / "demo.json"
    argv = ["--train-docs", "30", "--test-docs", "10", "--max-steps", "3", "--d-model", "16", "--batch-size", "4",
            "--vocab-size", "150", "--json", str(out)]  # fmt: skip
    assert demo.main(argv) == 0
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"context (k=1)", "no context"}
    first, second = results.values()
    assert first["steps"] == second["steps"] == 3 and first["n"] == second["n"] > 0
    assert first["parameters"] > second["parameters"]  # the context encoder and context attentions
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in results.values())


def test_cli_contrastive_on_synthetic_documents(tmp_path, capsys, tokenizer):
    model = tiny_model(tokenizer, 1)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    assert main(["contrastive", "--model", str(tmp_path / "m"), "--synthetic", "8", "--seed", "4"]) == 0
    printed = capsys.readouterr().out
    expected = score_contrastive(model, tokenizer, contrastive_examples(generate_documents(8, seed=4)))
    assert f"= {100 * expected['accuracy']:.2f} ({expected['correct']}/{expected['n']}," in printed
    assert "data:synthetic-documents(docs=8,seed=4)" in printed
