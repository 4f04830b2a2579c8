"""Token-based batches (`TokenBatchSampler`, `SyntaxMTTrainer(max_tokens=...)`) and predictions in dataset order.

Checked against direct computations: every batch's padded tokens (n x longest side) counted by hand, every pair seen
exactly once per epoch, the batches the Trainer really trains on, two processes under torchrun, and a model that
memorises a copy task translating each test line into its own reference under ``group_by_length``.
"""

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset

from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.training import SyntaxMTTrainer, build_model, model_config, train_tokenizer
from hf_syntax_mt.training.batching import TokenBatchSampler, token_lengths
from hf_syntax_mt.training.script import main as train_main
from hf_syntax_mt.training.script_args import SyntaxMTTrainingArguments

REPO = Path(__file__).resolve().parents[2]


def random_lengths(n=500, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 60) for _ in range(n)]


def padded_tokens(batch, lengths):
    return len(batch) * max(lengths[i] for i in batch)


@pytest.mark.parametrize("max_tokens", [60, 128, 1000])
def test_batches_fit_and_cover_every_pair_once_per_epoch(max_tokens):
    lengths = random_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert all(padded_tokens(b, lengths) <= max_tokens for b in batches)
        seen = sorted(i for b in batches for i in b)
        assert seen == list(range(len(lengths)))  # each pair exactly once


def test_batches_group_similar_lengths_and_change_every_epoch():
    lengths = random_lengths(2000)
    sampler = TokenBatchSampler(lengths, 400, seed=0)
    spread = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in sampler]
    assert sum(spread) / len(spread) <= 1.0  # similar lengths: sorted before cutting
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert first != second and sorted(map(sorted, first)) != sorted(map(sorted, second))
    sampler.set_epoch(0)
    assert list(sampler) == first  # an epoch's batches depend on seed and epoch only


def test_processes_share_the_batches_without_overlap():
    lengths = random_lengths(301, seed=1)
    ranks = [TokenBatchSampler(lengths, 200, seed=5, num_replicas=3, rank=r) for r in range(3)]
    per_rank = [list(s) for s in ranks]
    assert len({len(b) for b in per_rank}) == 1 and all(len(b) == len(ranks[0]) for b in per_rank)
    everything = TokenBatchSampler(lengths, 200, seed=5).batches()
    served = [b for rank in per_rank for b in rank]
    assert sorted(map(tuple, served)) == sorted(map(tuple, everything + everything[: len(served) - len(everything)]))
    assert sorted({i for b in served for i in b}) == list(range(len(lengths)))


def test_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match=r"longer than max_tokens=10 \(the first: index 1, 11 tokens\)"):
        TokenBatchSampler([3, 11, 4], 10)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        TokenBatchSampler([3], 0)
    with pytest.raises(ValueError, match="rank 2 is not in"):
        TokenBatchSampler([3], 10, num_replicas=2, rank=2)


@pytest.fixture(scope="module")
def tiny():
    rng = random.Random(0)
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    pairs = [(" ".join(rng.choices(words, k=rng.randint(1, 14))), " ".join(rng.choices(words, k=rng.randint(1, 14))))
             for _ in range(120)]  # fmt: skip
    tok = train_tokenizer([w for p in pairs for w in p], vocab_size=60)
    enc = tok([s for s, _ in pairs], text_target=[t for _, t in pairs])
    ds = Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                            "labels": enc["labels"]})  # fmt: skip
    return tok, ds


class RecordingCollator(DataCollatorForSyntaxMT):
    """The collator, remembering the features of every batch it builds."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = []

    def __call__(self, features, *args, **kwargs):
        self.batches.append([(tuple(f["input_ids"]), tuple(f["labels"])) for f in features])
        return super().__call__(features, *args, **kwargs)


def test_trainer_trains_on_token_batches(tiny, tmp_path):
    tok, ds = tiny
    model = build_model(model_config(tok, d_model=16, layers=1, heads=2, ffn_dim=32, marian=True))
    collator = RecordingCollator(tok, model=model)
    lengths = token_lengths(ds)
    steps = len(TokenBatchSampler(lengths, 64))
    args = SyntaxMTTrainingArguments(output_dir=str(tmp_path), max_steps=steps, max_tokens=64, report_to="none",
                                     use_cpu=True, save_strategy="no", disable_tqdm=True, learning_rate=1e-3)  # fmt: skip
    trainer = SyntaxMTTrainer(model=model, args=args, train_dataset=ds, data_collator=collator, processing_class=tok)
    trainer.train()
    assert trainer.state.global_step == steps
    for batch in collator.batches:  # the padded tokens of what really went through the model
        assert len(batch) * max(max(len(s), len(t)) for s, t in batch) <= 64
    rows = sorted(r for b in collator.batches for r in b)
    assert rows == sorted((tuple(a), tuple(b)) for a, b in zip(ds["input_ids"], ds["labels"], strict=True))


def test_trainer_predicts_in_dataset_order_under_group_by_length(tiny, tmp_path):
    """transformers 5.x groups *predict* batches by length under group_by_length; the labels must come back in order."""
    tok, ds = tiny
    model = build_model(model_config(tok, d_model=16, layers=1, heads=2, ffn_dim=32, marian=True))
    args = SyntaxMTTrainingArguments(output_dir=str(tmp_path), train_sampling_strategy="group_by_length",
                                     per_device_eval_batch_size=8, report_to="none", use_cpu=True,
                                     predict_with_generate=True, generation_max_length=4, disable_tqdm=True)  # fmt: skip
    trainer = SyntaxMTTrainer(model=model, args=args, data_collator=DataCollatorForSyntaxMT(tok, model=model),
                              processing_class=tok)  # fmt: skip
    label_ids = trainer.predict(ds).label_ids
    for k, labels in enumerate(ds["labels"]):
        assert [t for t in label_ids[k].tolist() if t >= 0][: len(labels)] == labels  # then -100 / pad


def test_train_script_output_lines_belong_to_their_source_lines(tmp_path):
    """A model that memorises a copy task (upper-casing 12 sentences of 1..12 words) trained and predicted with
    group_by_length and token batches: each output line must be its own source line's reference."""
    words = "red blue green cat dog bird tree house river stone cloud fire".split()
    rows = [" ".join(words[(n + k) % 12] for k in range(n)) for n in range(1, 13)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{s.upper()}\n" for s in rows), encoding="utf-8")
    out = tmp_path / "run"
    argv = ["--output_dir", str(out), "--train_file", str(tmp_path / "pairs.tsv"), "--test_file",
            str(tmp_path / "pairs.tsv"), "--vanilla_marian", "--d_model", "64", "--encoder_layers", "1",
            "--decoder_layers", "1", "--attention_heads", "2", "--ffn_dim", "128", "--vocab_size", "120",
            "--tokenizer_min_frequency", "1", "--max_steps", "150", "--per_device_train_batch_size", "4",
            "--learning_rate", "3e-3", "--warmup_steps", "10", "--train_sampling_strategy", "group_by_length",
            "--per_device_eval_batch_size", "4", "--dropout", "0", "--do_train", "--do_predict", "--save_strategy",
            "no", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true"]  # fmt: skip
    assert train_main(argv) == 0
    outputs = (out / "test_generations.txt").read_text(encoding="utf-8").splitlines()
    assert outputs == [s.upper() for s in rows]
    info = json.loads((out / "hf_syntax_mt_run.json").read_text())
    assert info["scores"]["test"]["bleu"] == pytest.approx(100.0)


def test_two_processes_get_their_own_token_batches(tiny, tmp_path):
    """torchrun --nproc_per_node 2: each process trains on its own batches, together every pair once per epoch."""
    tok, ds = tiny
    ds.save_to_disk(tmp_path / "ds")
    tok.save_pretrained(tmp_path / "tok")
    script = tmp_path / "run.py"
    script.write_text(
        f"""
import json, os, torch
from datasets import load_from_disk
from transformers import AutoTokenizer
from hf_syntax_mt.data import DataCollatorForSyntaxMT
from hf_syntax_mt.training.script_args import SyntaxMTTrainingArguments
from hf_syntax_mt.training import SyntaxMTTrainer, build_model, model_config
torch.set_num_threads(1)
tok, ds = AutoTokenizer.from_pretrained({str(tmp_path / "tok")!r}), load_from_disk({str(tmp_path / "ds")!r})
model = build_model(model_config(tok, d_model=16, layers=1, heads=2, ffn_dim=32, marian=True))
args = SyntaxMTTrainingArguments(output_dir={str(tmp_path / "out")!r}, max_tokens=64, max_steps=1, report_to="none",
                                 use_cpu=True, save_strategy="no", disable_tqdm=True)
trainer = SyntaxMTTrainer(model=model, args=args, train_dataset=ds, data_collator=DataCollatorForSyntaxMT(tok),
                          processing_class=tok)
batches = [b["input_ids"].tolist() for b in trainer.get_train_dataloader()]
rank = int(os.environ["RANK"])
with open({str(tmp_path)!r} + f"/rank{{rank}}.json", "w") as f:
    json.dump(batches, f)
""",
        encoding="utf-8",
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script)], check=True,
                   env=env, cwd=tmp_path, capture_output=True, timeout=300)  # fmt: skip
    per_rank = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert len(per_rank[0]) == len(per_rank[1]) > 0
    pad = tok.pad_token_id

    def rows(batches):
        return [tuple(t for t in row if t != pad) for batch in batches for row in batch]

    served = Counter(rows(per_rank[0]) + rows(per_rank[1]))
    expected = Counter(tuple(ids) for ids in ds["input_ids"])
    assert not expected - served  # every pair, on one process or the other
    # only the batch repeated to even out the processes is served twice
    assert sum((served - expected).values()) <= max(len(b) for r in per_rank for b in r)
