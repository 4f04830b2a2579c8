"""`hf-syntax-mt train --tokenizer_layout opus-mt` (issue 67, item 3): a model trained in opus-mt's layout exports to a
Marian folder that CTranslate2's *stock* converter and `MarianTokenizer` take unchanged (no code of this package on
that side), its float32 greedy outputs equal `generate`'s; the fast tokenizer training reads tokenizes as
`MarianTokenizer` does (Hypothesis over awkward text; real corpora in the slow test); the `<pad>` row, which the tied
output projection gives a gradient, stays zero; the stock converter refuses a model of the package's layout, as
`export`'s note says."""

import json
import sys
from pathlib import Path

import needs
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file
from transformers import AutoTokenizer, MarianMTModel, MarianTokenizer

from hf_syntax_mt.cli import main as cli_main
from hf_syntax_mt.demo.synthetic_corpus import write_corpus
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.training import build_model, model_config, train_opus_mt_tokenizer, train_tokenizer
from hf_syntax_mt.training.opus_mt import OPUS_MT_FILES, PadRowCallback, save_opus_mt_files

ctranslate2 = pytest.importorskip("ctranslate2")
spm = pytest.importorskip("sentencepiece")

TINY = ["--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "4",
        "--ffn_dim", "64", "--max_position_embeddings", "64", "--vocab_size", "120"]  # fmt: skip
QUIET = ["--report_to", "none", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "steps", "--save_steps", "6"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A DBSA model (its parse columns mapped onto the SentencePiece subwords) trained 6 steps with the opus-mt layout
    through `hf-syntax-mt train`: (run directory, corpus files)."""
    d = tmp_path_factory.mktemp("opus")
    corpus = write_corpus(d / "corpus", splits={"train": 96, "test": 12}, seed=3, max_words=8)
    out = d / "run"
    argv = ["train", "--output_dir", str(out), "--train_source_conllu", str(corpus["train"]["src_conllu"]),
            "--train_target_file", str(corpus["train"]["tgt"]), *TINY, *QUIET, "--tokenizer_layout", "opus-mt",
            "--config_overrides", "encoder_dbsa_heads=[1,0]", "--max_steps", "6", "--per_device_train_batch_size",
            "16", "--learning_rate", "3e-3", "--max_target_length", "16"]  # fmt: skip
    assert cli_main(argv) == 0
    return out, corpus


@pytest.fixture(scope="module")
def opus_tokenizer(tmp_path_factory, data_corpus):
    return train_opus_mt_tokenizer(data_corpus * 10, tmp_path_factory.mktemp("opus_tok"), vocab_size=120)


@pytest.fixture(scope="module")
def marian_of_opus(opus_tokenizer):
    """`MarianTokenizer` of the same folder (its SentencePiece files)."""
    return MarianTokenizer.from_pretrained(opus_tokenizer.name_or_path)


def stock_loader_registered() -> bool:
    from ctranslate2.converters import transformers as converters

    return type(converters._MODEL_LOADERS.get("MarianConfig")) is converters.MarianMTLoader


def tokens_until_eos(tokens: list[str]) -> list[str]:
    return tokens[: tokens.index("</s>")] if "</s>" in tokens else tokens


# ------------------------------------------------------------------------------------------------------------------
# The run, its export, the stock converter
# ------------------------------------------------------------------------------------------------------------------
def test_an_opus_mt_run_converts_with_the_stock_converter_and_greedy_equals_generate(
    run, tmp_path, monkeypatch, capsys
):
    out, corpus = run
    # the run and its checkpoint hold the SentencePiece files; pad last is the decoder start, banned from generation
    for folder in (out, out / "checkpoint-6"):
        assert all((folder / name).is_file() for name in (*OPUS_MT_FILES, "tokenizer.json")), folder
    config = json.loads((out / "config.json").read_text())
    pad = config["vocab_size"] - 1
    assert (config["pad_token_id"], config["decoder_start_token_id"], config["eos_token_id"]) == (pad, pad, 0)
    assert json.loads((out / "generation_config.json").read_text())["bad_words_ids"] == [[pad]]
    weights = load_file(out / "model.safetensors")
    embeddings = weights["model.shared.weight"]
    assert not embeddings[pad].any() and embeddings[:pad].abs().sum(1).gt(0).all()  # trained 6 steps: still zero

    # the package's Marian export; its output names the tools that take it
    marian = tmp_path / "marian"
    monkeypatch.setattr(sys, "argv", ["hf-syntax-mt"])
    capsys.readouterr()
    assert cli_main(["export", "--model", str(out), "--to", "marian", "--output", str(marian)]) == 0
    assert "layout: opus-mt's" in capsys.readouterr().err
    assert all((marian / name).is_file() for name in OPUS_MT_FILES)

    # MarianTokenizer (the SentencePiece files) tokenizes like the fast tokenizer training read, sources and targets
    fast, sentencepiece_tokenizer = AutoTokenizer.from_pretrained(out), MarianTokenizer.from_pretrained(marian)
    assert fast.is_fast and len(fast) == len(sentencepiece_tokenizer) == pad + 1
    sources = corpus["test"]["src"].read_text(encoding="utf-8").splitlines()
    targets = corpus["test"]["tgt"].read_text(encoding="utf-8").splitlines()
    assert fast(sources)["input_ids"] == sentencepiece_tokenizer(sources)["input_ids"]
    assert fast(text_target=targets)["input_ids"] == sentencepiece_tokenizer(text_target=targets)["input_ids"]

    # CTranslate2's own converter, its own Marian loader: pad dropped, the vocabulary is SentencePiece's pieces
    assert stock_loader_registered()
    ct2 = tmp_path / "ct2"
    ctranslate2.converters.TransformersConverter(str(marian)).convert(str(ct2), quantization="float32")
    processor = spm.SentencePieceProcessor(model_file=str(marian / "source.spm"))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    assert json.loads((ct2 / "shared_vocabulary.json").read_text()) == pieces

    # float32 greedy, sources tokenized as a SentencePiece server does, equals generate's tokens
    model = MarianMTModel.from_pretrained(marian).eval()
    limit = model.generation_config.max_length
    translator = ctranslate2.Translator(str(ct2), device="cpu", intra_threads=1)
    batch = [processor.encode(s, out_type=str) + ["</s>"] for s in sources]
    results = translator.translate_batch(batch, beam_size=1, max_decoding_length=limit - 2)  # start, forced </s>
    with torch.no_grad():
        ids = model.generate(**sentencepiece_tokenizer(sources, return_tensors="pt", padding=True), num_beams=1)
    expected = [tokens_until_eos(sentencepiece_tokenizer.convert_ids_to_tokens(row[1:])) for row in ids.tolist()]
    assert [r.hypotheses[0] for r in results] == expected
    assert len({tuple(e) for e in expected}) > 1


def test_the_parse_columns_align_alike_with_both_tokenizers(run):
    """The parse columns the run computed with the fast tokenizer (offsets) are those of `MarianTokenizer`'s path
    (SentencePiece's own offsets, `data.subwords`)."""
    from hf_syntax_mt.data import align_parse
    from hf_syntax_mt.data.parsers import read_conllu

    out, corpus = run
    fast, slow = AutoTokenizer.from_pretrained(out), MarianTokenizer.from_pretrained(out)
    for parse in read_conllu(corpus["test"]["src_conllu"]):
        a, b = (align_parse(t, parse) for t in (fast, slow))
        assert (a["input_ids"], a["word_ids"], a["dbsa_heads"]) == (b["input_ids"], b["word_ids"], b["dbsa_heads"])


# ------------------------------------------------------------------------------------------------------------------
# The tokenizer
# ------------------------------------------------------------------------------------------------------------------
PIECES = [*"abcdeéèàçlmnoprstu.,'", " ", "  ", "\t", "\n", "▁", "☃", "日", "ﬁ", "\u00a0", "\u3000", "</s>", "<unk>"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_the_fast_tokenizer_tokenizes_as_marian_tokenizer(opus_tokenizer, marian_of_opus, text):
    """Spaces at the ends and in runs, a literal `▁`, tabs and newlines, characters SentencePiece never saw, special
    tokens inside the text: the same ids, source and target side (MarianTokenizer's `>>xx<<` language codes are its
    own: a model of this layout has none)."""
    assert opus_tokenizer(text)["input_ids"] == marian_of_opus(text)["input_ids"]
    assert opus_tokenizer(text_target=text)["input_ids"] == marian_of_opus(text_target=text)["input_ids"]


def test_the_opus_mt_tokenizer_layout(opus_tokenizer):
    """</s> = 0, <unk> = 1, SentencePiece's pieces in its order, <pad> last; vocab.json says the same."""
    directory = opus_tokenizer.name_or_path
    processor = spm.SentencePieceProcessor(model_file=f"{directory}/source.spm")
    vocab = opus_tokenizer.get_vocab()
    assert (opus_tokenizer.eos_token_id, opus_tokenizer.unk_token_id, opus_tokenizer.pad_token_id) == (
        0,
        1,
        len(vocab) - 1,
    )
    assert [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])] == [
        *(processor.id_to_piece(i) for i in range(processor.get_piece_size())), "<pad>"]  # fmt: skip
    assert json.loads((Path(directory) / "vocab.json").read_text(encoding="utf-8")) == vocab


def test_sentencepiece_files_are_not_written_for_a_tokenizer_they_no_longer_describe(opus_tokenizer, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(opus_tokenizer.name_or_path)
    (tmp_path / "same").mkdir()
    assert save_opus_mt_files(tokenizer, tmp_path / "same") and (tmp_path / "same" / "source.spm").is_file()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<2parse>"]})  # the vocabulary grows past <pad>
    (tmp_path / "grown").mkdir()
    assert not save_opus_mt_files(tokenizer, tmp_path / "grown") and not any((tmp_path / "grown").iterdir())


def test_a_vocabulary_too_small_for_the_characters_is_a_user_error(tmp_path, data_corpus):
    """SentencePiece keeps every character of the text (34 here, + </s>, <unk>, <pad>)."""
    with pytest.raises(UserError, match=r"vocab_size=30: .* at least 37; give a larger --vocab_size"):
        train_opus_mt_tokenizer(data_corpus, tmp_path, vocab_size=30)
    assert len(train_opus_mt_tokenizer(data_corpus, tmp_path, vocab_size=37)) <= 37


@needs.skip_without_data("docnmt-en-de/iwslt17.dev.en")
@pytest.mark.slow
def test_the_fast_tokenizer_tokenizes_real_text_as_marian_tokenizer(tmp_path):
    """Trained on 1,000 IWSLT17 dev pairs (en, de), every line of IWSLT17 test tokenized alike (2,271 lines a
    side)."""
    data = needs.SHARED_DATA / "docnmt-en-de"
    read = lambda name: (data / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
    fast = train_opus_mt_tokenizer(read("iwslt17.dev.en")[:1000] + read("iwslt17.dev.de")[:1000], tmp_path, 1000)
    marian = MarianTokenizer.from_pretrained(tmp_path)
    for name in ("iwslt17.test.en", "iwslt17.test.de"):
        lines = read(name)
        assert fast(lines)["input_ids"] == marian(lines)["input_ids"], name


# ------------------------------------------------------------------------------------------------------------------
# The pad row, the flags, the package's layout
# ------------------------------------------------------------------------------------------------------------------
def test_the_pad_row_gets_a_gradient_that_the_callback_zeroes(opus_tokenizer, data_corpus):
    """The tied output projection gives the <pad> row a gradient (its logit): with `PadRowCallback` it is zero, the
    other rows' are not; after training the hook is gone. `SyntaxMTTrainer` adds the callback for this layout only."""
    from transformers import Seq2SeqTrainingArguments

    from hf_syntax_mt.training import SyntaxMTTrainer

    model = build_model(model_config(opus_tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, dropout=0.0))
    batch = opus_tokenizer(data_corpus[:3], text_target=data_corpus[3:6], return_tensors="pt", padding=True)
    batch["labels"][batch["labels"] == opus_tokenizer.pad_token_id] = -100
    pad, weight = opus_tokenizer.pad_token_id, model.get_input_embeddings().weight

    def gradient():
        model.zero_grad()
        model(**batch).loss.backward()
        return weight.grad.clone()

    assert not weight[pad].any() and gradient()[pad].abs().sum() > 0
    callback = PadRowCallback()
    callback.on_train_begin(None, None, None, model=model)
    grad = gradient()
    assert not grad[pad].any() and grad[:pad].abs().sum(1).gt(0).sum() > 10
    callback.on_train_end(None, None, None)
    assert gradient()[pad].abs().sum() > 0

    args = Seq2SeqTrainingArguments(output_dir="unused", report_to="none", use_cpu=True)
    package = build_model(model_config(train_tokenizer(data_corpus * 3, 80, 1), d_model=16, layers=1, heads=2,
                                       ffn_dim=32))  # fmt: skip
    moved = build_model(model_config(opus_tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, dropout=0.0))
    with torch.no_grad():  # an opus-mt-layout checkpoint whose <pad> row an earlier training moved: left to train
        moved.get_input_embeddings().weight[pad] = 0.5
    adds = [any(isinstance(c, PadRowCallback) for c in SyntaxMTTrainer(model=m, args=args).callback_handler.callbacks)
            for m in (model, package, moved)]  # fmt: skip
    assert adds == [True, False, False]


@pytest.mark.parametrize("flag", [["--tokenizer_name", "x"], ["--model_name_or_path", "x"]])
def test_the_layout_is_refused_with_a_given_tokenizer(flag):
    from hf_syntax_mt.training.prepare import check_model_flags
    from hf_syntax_mt.training.script_args import ModelArguments

    with pytest.raises(UserError, match=f"--tokenizer_layout opus-mt .* {flag[0]} .*drop --tokenizer_layout"):
        check_model_flags(ModelArguments(tokenizer_layout="opus-mt", **{flag[0][2:]: flag[1]}))


def test_a_package_layout_export_names_the_tools_that_refuse_it(tmp_path, data_corpus):
    """The stock converter fails on the package's layout (pad = 0 kept in the vocabulary, its row dropped), as
    `layout_note` (export's output) says."""
    from hf_syntax_mt.export.marian import layout_note, save_marian

    tokenizer = train_tokenizer(data_corpus * 3, vocab_size=80, min_frequency=1)
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, marian=True))
    marian = save_marian(model, tmp_path / "marian", tokenizer)
    note = layout_note(marian, "marian")
    assert "not opus-mt's" in note and "ct2-transformers-converter, MarianTokenizer" in note and "do not" in note
    assert "tokenizer.json only" in layout_note(marian, "ctranslate2")
    assert stock_loader_registered()
    with pytest.raises(ValueError, match="vocabulary"):
        ctranslate2.converters.TransformersConverter(str(marian)).convert(str(tmp_path / "ct2"))
