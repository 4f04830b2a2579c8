"""Issue 57, item 6: a method whose supervision is missing says so once, at the first training step, naming the
columns it expected and how to make them; ``HF_SYNTAX_MT_MISSING_SUPERVISION=error`` makes it an error; a parse input
missing from a run the package controls (`SyntaxMTTrainer.train`) fails before the first step. Driven by the
registry: every registered method that declares supervision columns is tried, none is listed here by hand.

Failed before: transformers' own run_translation.py trained DBSA heads for 200 steps on data without parses and
nothing said so (the DBSA loss never ran)."""

import warnings

import pytest
import torch
from datasets import Dataset
from test_every_method import BASE, method_config, training_batch

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.methods import registered, supervision_names
from hf_syntax_mt.methods.supervision import ENV, MissingSupervisionWarning

torch.set_num_threads(1)
SUPERVISED = [m.name for m in registered() if m.tester_config and m.supervision_columns(SyntaxMTConfig(
    **BASE, **method_config(m.name)))]  # fmt: skip


def build(name, **extra):
    torch.manual_seed(0)
    return SyntaxMTForConditionalGeneration(SyntaxMTConfig(**BASE, **method_config(name), **extra)).train()


def without_supervision(batch):
    return {k: v for k, v in batch.items() if k not in supervision_names()}


def test_the_supervised_methods_are_found_from_the_registry():
    assert {"biaffine", "synchronous", "guided_alignment"} <= set(SUPERVISED)


@pytest.mark.parametrize("name", SUPERVISED)
def test_a_method_without_its_supervision_warns_once_at_the_first_step(name, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    model = build(name)
    expected = model.config and [
        c for m in registered() if m.name == name for c in m.supervision_columns(model.config)
    ]
    batch = without_supervision(training_batch())
    with pytest.warns(MissingSupervisionWarning) as caught:
        model(**batch).loss.backward()
    messages = [str(w.message) for w in caught if w.category is MissingSupervisionWarning]
    assert len(messages) == 1 and f"{name} expects" in messages[0]
    assert all(c in messages[0] for c in expected) and "SyntaxMTPreprocessor" in messages[0] and ENV in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingSupervisionWarning)
        model(**batch)  # once: the second step says nothing


@pytest.mark.parametrize("name", SUPERVISED)
def test_with_its_supervision_a_method_says_nothing_and_the_option_makes_it_an_error(name, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingSupervisionWarning)
        build(name)(**training_batch())
        build(name).eval()(**without_supervision(training_batch()))  # not training: nothing to supervise
    monkeypatch.setenv(ENV, "error")
    with pytest.raises(UserError, match=rf"{name} expects"):
        build(name)(**without_supervision(training_batch()))


def test_a_multitask_model_trained_on_rows_without_task_tokens_warns(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    batch = without_supervision(training_batch())
    task_ids = {"translate": 3, "parse": 4}
    model = build("pascal", task_token_ids=task_ids)
    with pytest.warns(MissingSupervisionWarning, match="labels start with no task token"):
        model(**batch)
    tagged = dict(batch, labels=torch.cat([torch.tensor([[3], [4]]), batch["labels"][:, 1:]], dim=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingSupervisionWarning)
        build("pascal", task_token_ids=task_ids)(**tagged)


def test_the_package_trainer_refuses_a_missing_parse_input_before_the_first_step(tmp_path):
    from hf_syntax_mt.training import build_trainer
    from hf_syntax_mt.training.script_args import SyntaxMTTrainingArguments

    batch = training_batch()
    rows = {"input_ids": batch["input_ids"].tolist(), "labels": batch["labels"].tolist()}
    model = build("pascal")
    args = SyntaxMTTrainingArguments(output_dir=str(tmp_path), max_steps=1, report_to=[], use_cpu=True)
    trainer, _, _ = build_trainer(model, None, args, train_dataset=Dataset.from_dict(rows))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(UserError, match=r"no parent_positions, which pascal reads at every step"):
        trainer.train()
    assert trainer.state.global_step == 0
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


@pytest.mark.parametrize("name", supervision_names())
def test_how_a_supervision_column_is_made_is_read_from_its_declaration(name):
    """The message's "how to make it" comes from the column's declaration (its parse side, or its method's data step
    and flag), not a hand list: every supervision column of every registered method has one."""
    from hf_syntax_mt.methods.registry import column_specs
    from hf_syntax_mt.methods.supervision import how_made

    how, side = how_made(name), column_specs()[name].parse
    if side is not None:
        assert f"from the {side} parses" in how and f"--train_{side}_conllu" in how
    else:  # made by a data step of its method: the step's train flag is named
        flags = [f"--{t.flag.format(split='train')}" for m in registered() if name in m.supervision
                 for t in m.transforms if t.flag]  # fmt: skip
        assert flags and all(flag in how for flag in flags)
    assert how_made("no_such_column") == ""


def test_the_alignment_targets_message_names_the_alignment_file():
    from hf_syntax_mt.methods.supervision import how_made

    assert "train --train_alignment_file" in how_made("decoder_alignment")
