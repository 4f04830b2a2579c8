"""Issue 55, export to a plain transformers `MarianMTModel`: for every method whose inference graph is Marian's (the
registry says which: `Method.inference_needs is None`), the exported model's logits equal ours within 1e-5 in float32
and its greedy and beam-4 outputs are identical, with the method's own parameters perturbed (the bi-affine U away
from its identity start); every other method is refused, naming its options, why and where to go; the caller's model
is left as it was; `save_marian`'s directory loads with plain transformers, without hf_syntax_mt."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from transformers import MarianMTModel

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.errors import UserError, UserTypeError
from hf_syntax_mt.export import check_exportable, export_to_marian, save_marian
from hf_syntax_mt.methods import Method, get_method, register, registered, unregister

#: the registered methods a tester config switches on, split by whether their inference graph is Marian's
EXPORTABLE = [m.name for m in registered() if m.tester_config is not None and m.inference_needs is None]
REFUSED = [m.name for m in registered() if m.tester_config is not None and m.inference_needs is not None]


def build(name: str | None, seed: int = 0, **extra) -> SyntaxMTForConditionalGeneration:
    """The tiny model of method `name` (its `tester_config`; None: no method), with the method's trainable
    parameters moved away from their initial values (U = I would make the fold a no-op)."""
    options = {} if name is None else {k: list(v) if isinstance(v, list) else v
                                       for k, v in get_method(name).tester_config.items()}  # fmt: skip
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, **options, **extra})).eval()
    fragments = () if name is None else get_method(name).trainable
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if any(f in parameter_name for f in fragments):
                parameter.add_(torch.randn_like(parameter) * 0.5)
    return model


def inputs() -> dict:
    ids = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, 12, EOS, PAD, PAD], [13, 14, 15, 16, EOS, PAD]])
    return {"input_ids": ids, "attention_mask": (ids != PAD).long()}


def test_the_registry_splits_the_methods():
    """The split the issue states, read from the registry (a method that moves changes the tests with it)."""
    assert {"biaffine", "synchronous", "fertility", "guided_alignment"} <= set(EXPORTABLE)
    assert {"pascal", "tree", "tree_bias", "input_features", "alignment_bias", "document_context"} <= set(REFUSED)


@pytest.mark.parametrize("name", [None, *EXPORTABLE], ids=["vanilla", *EXPORTABLE])
def test_the_exported_marian_model_equals_ours(name):
    model = build(name)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    exported = export_to_marian(model)
    assert type(exported) is MarianMTModel and not exported.training
    assert not any("biaffine" in k or "fertility" in k for k in exported.state_dict())
    batch = inputs()
    decoder_input_ids = torch.tensor([[PAD, 20, 21, 22, 23], [PAD, 24, 25, EOS, PAD], [PAD, 26, 27, 28, 29]])
    with torch.no_grad():
        ours = model(**batch, decoder_input_ids=decoder_input_ids).logits  # (B, T, V)
        theirs = exported(**batch, decoder_input_ids=decoder_input_ids).logits
        assert ours.abs().max() > 1.0  # logits of a real size: the tolerance below means something
        torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5)
        for beams in (1, 4):
            settings = dict(max_new_tokens=10, num_beams=beams, do_sample=False)
            assert torch.equal(exported.generate(**batch, **settings), model.generate(**batch, **settings)), beams
    after = model.state_dict()  # the caller's model is left as it was
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_the_fold_is_what_changes_the_queries():
    """Independent of the logits: the exported q_proj rows of a DBSA head are U^T W (weight) and U^T b (bias), the
    other rows are the model's own."""
    model = build("biaffine")
    attention = model.model.encoder.layers[0].self_attn
    heads, d = attention.heads_of("biaffine"), attention.head_dim
    exported = export_to_marian(model).model.encoder.layers[0].self_attn.q_proj
    for j, h in enumerate(heads):
        rows = slice(h * d, (h + 1) * d)
        u = attention.biaffine_u[j]  # (d, d)
        torch.testing.assert_close(exported.weight[rows], u.T @ attention.q_proj.weight[rows], rtol=0, atol=1e-6)
        torch.testing.assert_close(exported.bias[rows], u.T @ attention.q_proj.bias[rows], rtol=0, atol=1e-6)
    plain = slice(heads.stop * d, None)
    assert torch.equal(exported.weight[plain], attention.q_proj.weight[plain])


def test_the_multitask_translate_token_goes_into_the_generation_config():
    model = build(None, task_token_ids={"translate": 40, "parse": 41})
    exported = export_to_marian(model)
    assert exported.generation_config.forced_bos_token_id == 40
    with torch.no_grad():
        settings = dict(max_new_tokens=6, num_beams=2, do_sample=False)
        ours, theirs = model.generate(**inputs(), **settings), exported.generate(**inputs(), **settings)
    assert torch.equal(ours, theirs) and (theirs[:, 1] == 40).all()


def test_the_export_keeps_the_dtype_and_mode_and_does_not_move_the_model():
    model = build("biaffine").to(torch.float64).train()
    exported = export_to_marian(model)
    assert {p.dtype for p in exported.parameters()} == {torch.float64}
    assert exported.training and next(model.parameters()).dtype == torch.float64
    assert exported.lm_head.weight.data_ptr() == exported.model.shared.weight.data_ptr()  # still tied


@pytest.mark.parametrize("name", REFUSED)
def test_a_method_that_needs_our_code_at_inference_is_refused(name):
    model = build(name)
    option = next(iter(get_method(name).tester_config))
    with pytest.raises(UserError) as error:
        export_to_marian(model)
    message = str(error.value)
    assert option in message and get_method(name).inference_needs in message and "docs/deploying.md" in message
    with pytest.raises(UserError, match=option):
        check_exportable(model.config)


def test_every_blocking_option_is_named_at_once():
    config = SyntaxMTConfig(**TINY, encoder_pascal_heads=[1, 0], context_sentences=1, encoder_dbsa_heads=[1, 0])
    with pytest.raises(UserError) as error:
        check_exportable(config)
    message = str(error.value)
    assert "encoder_pascal_heads=[1, 0]" in message and "context_sentences=1" in message
    assert "encoder_dbsa_heads" not in message  # DBSA exports


class Undeclared(Method):
    """A method that says nothing about its inference graph: refused by default."""

    name = "undeclared"

    def active(self, config):
        return bool((config.method_options or {}).get("undeclared"))


def test_a_new_method_is_refused_until_it_declares_its_inference_graph():
    register(Undeclared())
    try:
        config = SyntaxMTConfig(**TINY, method_options={"undeclared": {"on": True}})
        with pytest.raises(UserError, match=r"method_options\['undeclared'\].*inference_needs"):
            check_exportable(config)
    finally:
        unregister("undeclared")


def test_a_symmetric_model_is_refused_with_the_fix():
    from hf_syntax_mt import SymmetricTranslationConfig, SymmetricTranslationModel

    config = SyntaxMTConfig(**TINY)
    model = SymmetricTranslationModel(SymmetricTranslationConfig(forward=config, backward=config))
    with pytest.raises(UserTypeError, match="forward_model"):
        export_to_marian(model)


def saved(tmp_path):
    """A synchronous-loss model with a trained tokenizer's layout (<pad> = 0 = decoder start), saved by
    `save_marian`: (model, tokenizer, directory)."""
    from hf_syntax_mt.training import train_tokenizer

    tokenizer = train_tokenizer(["le chat dort", "un chien mange", "la maison rouge"] * 20, vocab_size=60)
    model = build("synchronous", vocab_size=len(tokenizer), pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return model, tokenizer, save_marian(model, tmp_path / "marian", tokenizer)


def test_save_marian_writes_a_plain_transformers_directory(tmp_path):
    """config.json is a Marian one (no auto_map, no custom pipeline, no code beside it), and transformers' Auto class
    loads a MarianMTModel that generates what our model generates."""
    import json

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model, tokenizer, out = saved(tmp_path)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "marian" and config["architectures"] == ["MarianMTModel"]
    assert not {"auto_map", "custom_pipelines", "encoder_dbsa_heads", "sync_loss_weight"} & set(config)
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"} <= {
        p.name for p in out.iterdir()
    }
    assert not list(out.glob("*.py"))
    loaded, loaded_tokenizer = AutoModelForSeq2SeqLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert type(loaded) is MarianMTModel
    settings = dict(max_new_tokens=6, num_beams=2)
    with torch.no_grad():
        expected = model.generate(**tokenizer(["le chat dort"], return_tensors="pt"), **settings)
        got = loaded.generate(**loaded_tokenizer(["le chat dort"], return_tensors="pt"), **settings)
    assert torch.equal(got, expected)
    with pytest.raises(UserError, match="not empty"):
        save_marian(model, out, tokenizer)


@pytest.mark.slow
def test_save_marian_loads_without_hf_syntax_mt(tmp_path):
    """The directory loads in a fresh interpreter where hf_syntax_mt cannot be imported (a fresh transformers import:
    about 30 s here, so slow)."""
    model, tokenizer, out = saved(tmp_path)
    with torch.no_grad():
        expected = model.generate(**tokenizer(["le chat dort"], return_tensors="pt"), max_new_tokens=6, num_beams=2)
    script = (
        "import sys; sys.modules['hf_syntax_mt'] = None\n"
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        f"m = AutoModelForSeq2SeqLM.from_pretrained({str(out)!r}); t = AutoTokenizer.from_pretrained({str(out)!r})\n"
        "print(type(m).__name__, m.generate(**t(['le chat dort'], return_tensors='pt'), max_new_tokens=6, "
        "num_beams=2)[0].tolist())"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""}, cwd=Path(out).parent)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split(None, 1) == ["MarianMTModel", f"{expected[0].tolist()}\n"]
