"""Seq2SeqTrainer integration on the synthetic pair: the loss goes down, gradient accumulation equals the full
batch, resume_from_checkpoint continues the same run, predict_with_generate equals generate()."""

import pytest
import torch
from datasets import Dataset, concatenate_datasets
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

from hf_syntax_mt import SyntaxMTForConditionalGeneration
from hf_syntax_mt.data import DataCollatorForSyntaxMT, ParsedSentence, Parser, SyntaxMTPreprocessor
from hf_syntax_mt.demo.synthetic_corpus import gold_source_parses, load_synthetic_dataset
from hf_syntax_mt.training import build_model, model_config, train_tokenizer


@pytest.fixture(scope="module")
def synthetic():
    raw = load_synthetic_dataset(n_train=96, n_valid=8, n_test=8, seed=5, max_words=20)
    tokenizer = train_tokenizer(list(raw["train"]["source"]) + list(raw["train"]["target"]), vocab_size=300)
    raw = raw.map(gold_source_parses, batched=True)
    prep = SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse", max_source_length=64,
                                max_target_length=64)  # fmt: skip
    data = raw.map(prep, batched=True, remove_columns=raw["train"].column_names)
    return tokenizer, data


def tiny_model(tokenizer, seed=0, **overrides):
    dims = dict(d_model=32, layers=2, heads=4, ffn_dim=64, max_position_embeddings=128, dropout=0.0)
    # Marian's init, as these tests were calibrated with (the 200-step loss ratio below); the Xavier default of
    # model_config has its own tests (tests/training/test_attention_init.py)
    config = model_config(tokenizer, encoder_pascal_heads=[2, 0], attention_init="normal", **{**dims, **overrides})
    return build_model(config, seed=seed)


def trainer_for(model, tokenizer, data, tmp_path, cls=Seq2SeqTrainer, **overrides):
    args = dict(
        output_dir=str(tmp_path), per_device_train_batch_size=8, per_device_eval_batch_size=8, learning_rate=5e-3,
        max_steps=40, logging_steps=10, save_strategy="no", report_to=[], seed=0, use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, predict_with_generate=True, generation_max_length=40,
    )  # fmt: skip
    return cls(
        model=model,
        args=Seq2SeqTrainingArguments(**{**args, **overrides}),
        train_dataset=data["train"],
        data_collator=DataCollatorForSyntaxMT(tokenizer, model=model),
        processing_class=tokenizer,
    )


def mean_loss(model, tokenizer, dataset):
    collate = DataCollatorForSyntaxMT(tokenizer, model=model)
    model.eval()
    with torch.no_grad():
        return float(model(**collate([dataset[i] for i in range(len(dataset))])).loss)


def test_training_lowers_the_loss(synthetic, tmp_path):
    tokenizer, data = synthetic
    model = tiny_model(tokenizer)
    before = mean_loss(model, tokenizer, data["train"])
    trainer_for(model, tokenizer, data, tmp_path, max_steps=200).train()
    after = mean_loss(model, tokenizer, data["train"])
    assert after < 0.6 * before, (before, after)


def test_gradient_accumulation_equals_the_full_batch(synthetic, tmp_path):
    """One SGD step on 16 examples == one step on 2 accumulated micro-batches of 8 (different target lengths)."""
    tokenizer, data = synthetic
    results = []
    for batch, accumulation in [(16, 1), (8, 2)]:
        model = tiny_model(tokenizer, seed=1)
        trainer = trainer_for(model, tokenizer, data, tmp_path / f"{batch}", max_steps=1, train_sampling_strategy="sequential",
                              per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                              optim="sgd", learning_rate=1.0, lr_scheduler_type="constant", max_grad_norm=0.0)  # fmt: skip
        trainer.train()
        results.append({k: v.detach().clone() for k, v in model.named_parameters()})
    lengths = [sum(x != -100 for x in data["train"][i]["labels"]) for i in range(16)]
    assert sum(lengths[:8]) != sum(lengths[8:])  # the micro-batches really differ in size
    for name, value in results[0].items():
        torch.testing.assert_close(results[1][name], value, atol=1e-5, rtol=1e-4, msg=name)


def test_resume_from_checkpoint_continues_the_same_run(synthetic, tmp_path):
    tokenizer, data = synthetic
    kw = dict(max_steps=6, save_strategy="steps", save_steps=3, learning_rate=1e-3)
    full = tiny_model(tokenizer, parent_ignoring=0.3)
    trainer_for(full, tokenizer, data, tmp_path / "full", **kw).train()
    checkpoint = tmp_path / "full" / "checkpoint-3"
    assert (checkpoint / "model.safetensors").exists() and not list(checkpoint.glob("pytorch_model*.bin"))

    resumed = tiny_model(tokenizer, seed=123, parent_ignoring=0.3)  # different init: the checkpoint must win
    trainer = trainer_for(resumed, tokenizer, data, tmp_path / "resumed", **kw)
    trainer.train(resume_from_checkpoint=str(checkpoint))
    assert trainer.state.global_step == 6
    for (name, a), (_, b) in zip(full.named_parameters(), resumed.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5, msg=name)


def test_predict_with_generate_equals_generate(synthetic, tmp_path):
    tokenizer, data = synthetic
    model = tiny_model(tokenizer, init_std=0.3)
    trainer = trainer_for(model, tokenizer, data, tmp_path)
    prediction = trainer.predict(data["test"], max_length=40, num_beams=2)
    batch = DataCollatorForSyntaxMT(tokenizer, model=model)([data["test"][i] for i in range(8)])
    expected = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              parent_positions=batch["parent_positions"], max_length=40, num_beams=2)  # fmt: skip
    got = torch.as_tensor(prediction.predictions)
    got[got == -100] = tokenizer.pad_token_id
    assert torch.equal(got[:, : expected.shape[1]], expected)
    assert isinstance(model, SyntaxMTForConditionalGeneration)


class ChainParser(Parser):
    """A stand-in parser: every whitespace word depends on the next one, the last word is the root."""

    name, model = "chain", "test"

    def parse(self, texts):
        trees = []
        for text in texts:
            words = text.split()
            heads = [i + 2 for i in range(len(words) - 1)] + [0]
            trees.append(ParsedSentence(words=words, heads=heads, deprels=["dep"] * len(words),
                                        upos=["X"] * len(words), text=text))  # fmt: skip
        return trees

    def signature(self):
        return "chain:test"

    def to_config(self):
        return {"backend": "chain"}


def test_training_with_empty_lines(synthetic, tmp_path):
    """Empty source and target lines are kept (source = `</s>` alone, labels = `</s>`) and train like any row."""
    tokenizer, _ = synthetic
    raw = load_synthetic_dataset(n_train=30, n_valid=1, n_test=1, seed=6, max_words=12)["train"]
    empty = Dataset.from_dict({"source": ["", "ba ke", ""], "target": ["", "", "xo"]})
    raw = concatenate_datasets([raw.select_columns(["source", "target"]), empty])
    prep = SyntaxMTPreprocessor(tokenizer, parser=ChainParser(), max_source_length=64, max_target_length=64)
    data = {"train": raw.map(prep, batched=True, remove_columns=["source", "target"])}
    rows = data["train"]
    assert len(rows) == 33
    assert rows[30]["input_ids"] == [tokenizer.eos_token_id] and rows[30]["parent_positions"] == [0.0]
    assert rows[31]["labels"] == [tokenizer.eos_token_id]
    # "ba ke": ke is the root, ba's parent is ke's middle subword
    enc = tokenizer("ba ke")
    ke = [i for i, w in enumerate(enc.word_ids()) if w == 1]
    assert rows[31]["parent_positions"][0] == sum(ke) / len(ke)
    model = tiny_model(tokenizer)
    trainer = trainer_for(model, tokenizer, data, tmp_path, max_steps=5, per_device_train_batch_size=11)
    assert trainer.train().training_loss > 0


def test_syntax_trainer_logs_every_loss_term_and_accumulation_stays_exact(tmp_path):
    """DBSA (both sides) + synchronous loss through SyntaxMTTrainer: each term is logged, the logged terms add up
    to the logged loss, the parse loss goes down, and 2 x 4 accumulation gives the gradient of one batch of 8."""
    from hf_syntax_mt.demo.synthetic_corpus import gold_parses
    from hf_syntax_mt.training import SyntaxMTTrainer

    raw = load_synthetic_dataset(n_train=64, n_valid=0, n_test=0, seed=3, max_words=12)["train"]
    tokenizer = train_tokenizer(list(raw["source"]) + list(raw["target"]), vocab_size=300)
    raw = raw.map(gold_parses, batched=True)
    config = model_config(tokenizer, d_model=32, layers=2, heads=4, ffn_dim=64, dropout=0.0,
                          encoder_dbsa_heads=[1, 0], decoder_dbsa_heads=[1, 0], sync_loss_weight=0.5)  # fmt: skip
    prep = SyntaxMTPreprocessor.for_config(config, tokenizer, source_parse_column="source_parse",
                                           target_parse_column="target_parse")  # fmt: skip
    data = raw.map(prep, batched=True, with_indices=True, remove_columns=raw.column_names)
    trainer = trainer_for(build_model(config, seed=0), tokenizer, {"train": data}, tmp_path, cls=SyntaxMTTrainer,
                          max_steps=30, predict_with_generate=False)  # fmt: skip
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h and "dbsa_loss" in h]
    assert len(logs) == 3
    for h in logs:
        total = h["translation_loss"] + 0.5 * h["dbsa_loss"] + 0.5 * h["sync_loss"]
        assert abs(total - h["loss"]) < 1e-3 * max(1.0, h["loss"]), h
    assert logs[-1]["dbsa_loss"] < logs[0]["dbsa_loss"]

    collator = DataCollatorForSyntaxMT(tokenizer)
    rows = [data[i] for i in range(8)]
    grads = []
    for chunks in ([rows], [rows[:4], rows[4:]]):
        model = build_model(config, seed=1)
        n_items = sum(sum(1 for y in r["labels"] if y != -100) for r in rows)
        for chunk in chunks:
            model(**collator(chunk), num_items_in_batch=n_items).loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_syntax_trainer_drives_the_global_fertility_schedule(synthetic, tmp_path):
    from hf_syntax_mt.training import SyntaxMTTrainer

    tokenizer, data = synthetic
    model = tiny_model(
        tokenizer, alignment_bias_layers=[1], global_fertility_weight=0.1, global_fertility_start_step=3
    )
    trainer = trainer_for(model, tokenizer, data, tmp_path, cls=SyntaxMTTrainer, max_steps=5, logging_steps=5,
                          predict_with_generate=False)  # fmt: skip
    trainer.train()
    assert model.alignment_training_step == 4  # the step counter reached the model: the loss switched on at step 3
    logged = [h for h in trainer.state.log_history if "loss" in h][-1]
    assert logged["fertility_loss"] > 0


def test_logged_fertility_loss_is_the_same_under_gradient_accumulation(synthetic, tmp_path):
    """Issue 16: a batch of 8 and 2 x 4 accumulated log the same fertility loss (the callback used to log the mean of
    the micro-batch terms, each divided by the tokens of the whole batch: too small by the accumulation factor)."""
    from hf_syntax_mt.training import SyntaxMTTrainer

    tokenizer, data = synthetic
    logged = []
    for batch, accumulation in [(8, 1), (4, 2)]:
        model = tiny_model(tokenizer, alignment_bias_layers=[1], global_fertility_weight=0.1)
        trainer = trainer_for(model, tokenizer, data, tmp_path / f"{batch}", cls=SyntaxMTTrainer, max_steps=1,
                              logging_steps=1, learning_rate=0.0, per_device_train_batch_size=batch,
                              gradient_accumulation_steps=accumulation, predict_with_generate=False,
                              train_sampling_strategy="sequential")  # fmt: skip
        trainer.train()
        logged.append(next(h for h in trainer.state.log_history if "loss" in h))
    for name in ("fertility_loss", "translation_loss"):
        assert logged[0][name] > 0
        assert abs(logged[0][name] - logged[1][name]) < 1e-3 * logged[0][name], (name, logged)
