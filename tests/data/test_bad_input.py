"""Bad input never silently misleads (issue 15): line splitting, invalid UTF-8, broken trees, per-call parsers,
pipeline inputs, over-long inputs and empty hypotheses. Each test builds the expected result by hand."""

from __future__ import annotations

import gzip
import logging

import pytest
import torch

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.data.parsers import ConllParser, ParsedSentence, read_conllu
from hf_syntax_mt.data.readers import TextDecodeError, iter_lines, read_lines
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

torch.set_num_threads(1)

WORDS = ["le", "chat", "noir", "dort", "sur", "canapé", "un", "chien", "court", "vite", "."]
SENTENCES = ["le chat noir dort", "un chien court vite .", "le chien dort sur le canapé ."]

# Characters str.splitlines() breaks at but a line-aligned file does not (a form feed, a file separator, a line
# separator, ...): six "\n"-terminated lines.
ODD_BREAKS = ["le chat\x0cdort", "un chien\x1ccourt", "le chat\u2028noir", "plain line", "", "dort\x85sur\x0b."]


def write_conllu(path, sentences: list[tuple[str, list[int]]]) -> None:
    """A CoNLL-U file of whitespace-tokenised sentences with the given heads."""
    blocks = []
    for text, heads in sentences:
        rows = [f"# text = {text}"]
        for i, (word, head) in enumerate(zip(text.split(), heads, strict=True), start=1):
            rows.append(f"{i}\t{word}\t_\tX\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_")
        blocks.append("\n".join(rows) + "\n")
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([" ".join(WORDS)] * 20 + SENTENCES * 20, vocab_size=80, min_frequency=1)


@pytest.fixture(scope="module")
def plain_model_dir(tmp_path_factory, tokenizer):
    """A saved model without syntax heads (its pipeline needs no parser)."""
    directory = tmp_path_factory.mktemp("plain")
    model = build_model(model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, init_std=0.3), seed=0)
    model.generation_config.max_new_tokens = 6
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ------------------------------------------------------------------------------------------------------------------
# Item 3: line-aligned files split at "\n" only
# ------------------------------------------------------------------------------------------------------------------
def test_read_lines_splits_at_newline_only(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_bytes("\r\n".join(ODD_BREAKS).encode("utf-8") + b"\r\n")
    assert read_lines(path) == ODD_BREAKS
    assert [line for _, line in iter_lines(path)] == ODD_BREAKS
    path.write_bytes("\n".join(ODD_BREAKS).encode("utf-8"))  # no final newline
    assert read_lines(path) == ODD_BREAKS
    gz = tmp_path / "odd.txt.gz"
    gz.write_bytes(gzip.compress(("\n".join(ODD_BREAKS) + "\n").encode("utf-8")))
    assert read_lines(gz) == ODD_BREAKS and [line for _, line in iter_lines(gz)] == ODD_BREAKS


def test_translate_cli_keeps_one_output_line_per_input_line(plain_model_dir, tmp_path, monkeypatch, capsys):
    import io
    import sys

    from transformers import pipeline

    from hf_syntax_mt.cli import main

    source, output = tmp_path / "src.txt", tmp_path / "hyp.txt"
    source.write_text("\n".join(ODD_BREAKS) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(plain_model_dir), "--input", str(source), "--output", str(output),
                 "--num-beams", "1"]) == 0  # fmt: skip
    lines = output.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines[:-1]) == len(ODD_BREAKS) == 6
    translator = pipeline("syntax-translation", model=str(plain_model_dir))
    expected = [translator(text)[0]["translation_text"] for text in ODD_BREAKS]  # each line on its own
    assert lines[:-1] == expected
    # the same from stdin to stdout; invalid UTF-8 on stdin is named too
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.read_bytes())))
    capsys.readouterr()
    assert main(["translate", "--model", str(plain_model_dir), "--num-beams", "1"]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == expected
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok\ncaf\xe9\n")))
    with pytest.raises(TextDecodeError, match=r"<stdin>:2: invalid UTF-8: byte 0xe9 at column 4"):
        main(["translate", "--model", str(plain_model_dir)])


def test_parallel_and_tsv_readers_split_at_newline_only(tmp_path):
    from hf_syntax_mt.data.preprocess import load_parallel_files
    from hf_syntax_mt.data.readers import read_tsv

    src, tgt = tmp_path / "a.src", tmp_path / "a.tgt"
    src.write_text("\n".join(ODD_BREAKS) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(f"t{i}" for i in range(6)) + "\n", encoding="utf-8")
    ds = load_parallel_files(src, tgt)
    assert ds["source"] == ODD_BREAKS and ds["target"] == [f"t{i}" for i in range(6)]
    tsv = tmp_path / "a.tsv"
    tsv.write_text("".join(f"{s}\tt{i}\r\n" for i, s in enumerate(["a\rb", "c\x0cd"])), encoding="utf-8")
    assert read_tsv(str(tsv)) == {"source": ["a\rb", "c\x0cd"], "target": ["t0", "t1"]}


# ------------------------------------------------------------------------------------------------------------------
# Item 6: invalid UTF-8 names the file, line and byte offset
# ------------------------------------------------------------------------------------------------------------------
def _latin1_file(path, lines: list[str], bad_line: int) -> int:
    """Write ``lines`` as UTF-8 except line ``bad_line`` (1-based), written in Latin-1; return the bad byte offset."""
    data = b""
    for k, line in enumerate(lines, start=1):
        if k == bad_line:
            offset = len(data) + len(line[: line.index("é")].encode("latin-1"))
        data += line.encode("latin-1" if k == bad_line else "utf-8") + b"\n"
    path.write_bytes(data)
    return offset


def test_invalid_utf8_in_a_text_file_names_file_line_and_byte(tmp_path):
    from hf_syntax_mt.evaluation import read_lines as read_hypotheses

    path = tmp_path / "hyp.txt"
    offset = _latin1_file(path, ["un chat", "über alles", "le café noir"], bad_line=3)
    assert offset == len(b"un chat\n") + len("über alles\n".encode()) + len("le caf")
    for reader in (read_lines, read_hypotheses, lambda p: list(iter_lines(p))):
        with pytest.raises(
            TextDecodeError, match=rf"{path}:3: invalid UTF-8: byte 0xe9 at column 7 .*byte offset {offset} "
        ):
            reader(path)


def test_invalid_utf8_in_conllu_names_file_line_and_byte(tmp_path):
    path = tmp_path / "bad.conllu"
    write_conllu(path, [("le chat", [2, 0]), ("un café", [2, 0])])
    good = path.read_bytes()
    path.write_bytes(good.replace("café".encode(), "café".encode("latin-1")))
    offset = good.index("café".encode()) + 3
    line = good[:offset].count(b"\n") + 1
    with pytest.raises(TextDecodeError, match=rf"{path}:{line}: invalid UTF-8.*byte offset {offset} "):
        read_conllu(path)
    with pytest.raises(TextDecodeError, match=rf"{path}:{line}:"):
        ConllParser(path).parse(["le chat"])


# ------------------------------------------------------------------------------------------------------------------
# Item 4: a per-call parser parses that call only; item 8: what the pipeline takes
# ------------------------------------------------------------------------------------------------------------------
LEFT_HEADS = [[2, 4, 2, 0], [2, 3, 0, 3, 3], [2, 3, 0, 3, 6, 3, 3]]  # the trees of SENTENCES in file A
RIGHT_HEADS = [[0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6]]  # a chain from the first word, file B


@pytest.fixture(scope="module")
def pascal_model_dir(tmp_path_factory, tokenizer):
    directory = tmp_path_factory.mktemp("pascal")
    write_conllu(directory / "a.conllu", list(zip(SENTENCES, LEFT_HEADS, strict=True)))
    write_conllu(directory / "b.conllu", list(zip(SENTENCES, RIGHT_HEADS, strict=True)))
    config = model_config(
        tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, encoder_pascal_heads=[2], init_std=0.5,
        source_parser={"backend": "conllu", "path": "a.conllu"},  # relative to the model directory (issue 15, item 9)
    )  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory, model


def parents_by_hand(tokenizer, parser, texts) -> list[list[float]]:
    from hf_syntax_mt.data.subwords import align_parse

    return [
        align_parse(tokenizer, p, text=t)["parent_positions"] for t, p in zip(texts, parser.parse(texts), strict=True)
    ]


def test_per_call_parser_applies_to_that_call_only(pascal_model_dir, tokenizer):
    """The parent positions the model receives come from the per-call parser in that call, and from the pipeline's
    own parser before and after it."""
    from transformers import pipeline

    directory, _ = pascal_model_dir
    parser_a, parser_b = ConllParser(directory / "a.conllu"), ConllParser(directory / "b.conllu")
    with_a, with_b = parents_by_hand(tokenizer, parser_a, SENTENCES), parents_by_hand(tokenizer, parser_b, SENTENCES)
    assert with_a != with_b
    translator = pipeline("syntax-translation", model=str(directory))
    seen, generate = [], translator.model.generate

    def spy(**kwargs):
        seen.append(kwargs["parent_positions"][0].tolist())
        return generate(**kwargs)

    translator.model.generate = spy

    def parents(**kwargs):
        seen.clear()
        translator(SENTENCES, **kwargs)
        return list(seen)

    own = translator.parser
    assert parents() == with_a
    assert parents(parser=parser_b) == with_b
    assert translator.parser is own and parents() == with_a
    assert parents(parser={"backend": "conllu", "path": str(directory / "b.conllu")}) == with_b
    assert parents() == with_a


@pytest.mark.parametrize("bad", [None, 3, 2.5, {"text": "le chat"}, [["le chat"], 3], ["le chat", None]])
def test_pipeline_says_what_it_takes(plain_model_dir, bad):
    from transformers import pipeline

    translator = pipeline("syntax-translation", model=str(plain_model_dir))
    with pytest.raises(TypeError, match="takes a string, a list of strings .* got "):
        translator(bad)


# ------------------------------------------------------------------------------------------------------------------
# Item 5: heads must form one tree wherever trees enter
# ------------------------------------------------------------------------------------------------------------------
CYCLE = [0, 3, 4, 2]  # words 2 -> 3 -> 4 -> 2 never reach the root
TWO_ROOTS = [0, 1, 0, 3]


@pytest.mark.parametrize(
    "heads, message",
    [
        (
            CYCLE,
            r"cycle that never reaches the root: words \[2, 3, 4\] .*2 \('chat'\) -> 3 \('noir'\) -> 4 \('dort'\) -> 2",
        ),
        (TWO_ROOTS, r"2 roots: words \[1, 3\] \(1-based ids\) all have head 0"),
        ([2, 1, 4, 3], r"no root"),
    ],
)
def test_conllu_with_a_cycle_or_two_roots_names_file_line_and_words(tmp_path, heads, message):
    path = tmp_path / "trees.conllu"
    write_conllu(path, [("un chien court vite .", [2, 3, 0, 3, 3]), ("le chat noir dort", heads)])
    start = path.read_text(encoding="utf-8").split("\n").index("# text = le chat noir dort") + 1
    with pytest.raises(ValueError, match=rf"{path}:{start}: invalid sentence: .*{message}"):
        read_conllu(path)


def test_parser_output_and_gold_columns_with_bad_trees_name_the_row(tokenizer):
    from datasets import Dataset

    from hf_syntax_mt.data import SyntaxMTPreprocessor
    from hf_syntax_mt.data.parsers import Parser
    from hf_syntax_mt.data.preprocess import parse_texts

    class CyclicParser(Parser):  # a backend whose second sentence comes out cyclic
        name = "cyclic"

        def parse(self, texts):
            return [ParsedSentence(t.split(), CYCLE if "noir" in t else [0, 1, 2, 3], ["dep"] * 4, ["X"] * 4)
                    for t in texts]  # fmt: skip

        def signature(self):
            return "cyclic"

        def to_config(self):
            return {"backend": "cyclic"}

    texts = ["un chien court vite", "le chat noir dort"]
    with pytest.raises(ValueError, match=r"failed on input 1: 'le chat noir dort'.*words \[2, 3, 4\]"):
        parse_texts(CyclicParser(), texts, lambda k: f"input {k}")
    gold = {"words": texts[1].split(), "heads": TWO_ROOTS, "deprels": ["dep"] * 4, "upos": ["X"] * 4}
    ds = Dataset.from_dict({"source": texts[1:], "target": ["x"], "source_parse": [gold]})
    prep = SyntaxMTPreprocessor(tokenizer, source_parse_column="source_parse")
    with pytest.raises(ValueError, match=r"invalid parse in row 0 \('le chat noir dort'\).*words \[1, 3\]"):
        ds.map(prep, batched=True, with_indices=True, remove_columns=ds.column_names)


def test_tree_distances_refuse_cyclic_word_heads():
    from hf_syntax_mt.methods.tree_distance import tree_distances

    word_index = torch.tensor([[1, 2, 3, 4, 0], [1, 2, 3, 4, 0]])
    chain = tree_distances(word_index, torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]]))[0, :4, :4]
    assert chain.tolist() == [[abs(i - j) for j in range(4)] for i in range(4)]  # a chain: |i - j| edges
    with pytest.raises(ValueError, match=r"batch row 1 contain a cycle: words \[2, 3, 4\]"):
        tree_distances(word_index, torch.tensor([[0, 1, 2, 3], CYCLE]))


# ------------------------------------------------------------------------------------------------------------------
# Item 7: the train script refuses a non-empty output directory; item 10: its messages name the flags
# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    from hf_syntax_mt.demo.synthetic_corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("corpus"), splits={"train": 32, "validation": 4, "test": 4}, seed=3,
                        max_words=6)  # fmt: skip


TRAIN = ["--d_model", "16", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2", "--ffn_dim",
         "32", "--max_position_embeddings", "64", "--vocab_size", "120", "--report_to", "none", "--use_cpu",
         "--disable_tqdm", "true", "--per_device_train_batch_size", "8", "--do_train", "--save_strategy", "steps",
         "--save_steps", "1"]  # fmt: skip


def test_train_script_refuses_a_non_empty_output_dir_and_resumes(small_corpus, tmp_path):
    from safetensors.torch import load_file

    from hf_syntax_mt.cli import main

    out = tmp_path / "run"
    data = ["--train_source_file", str(small_corpus["train"]["src"]), "--train_target_file",
            str(small_corpus["train"]["tgt"])]  # fmt: skip
    assert main(["train", "--output_dir", str(out), *data, *TRAIN, "--max_steps", "2"]) == 0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    first = load_file(out / "model.safetensors")
    with pytest.raises(ValueError, match=rf"--output_dir {out} already exists and is not empty with 2 checkpoint\(s\)"
                                         rf".*--resume_from_checkpoint {out}/checkpoint-2"):  # fmt: skip
        main(["train", "--output_dir", str(out), *data, *TRAIN, "--max_steps", "2", "--seed", "1"])
    assert all(torch.equal(first[k], v) for k, v in load_file(out / "model.safetensors").items())  # untouched
    # resuming continues the same run: step 3 only, from checkpoint-2
    assert main(["train", "--output_dir", str(out), *data, *TRAIN, "--max_steps", "3",
                 "--resume_from_checkpoint", str(out / "checkpoint-2")]) == 0  # fmt: skip
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    # --overwrite_output_dir starts afresh: the old checkpoints are gone, the new run's are there
    assert main(["train", "--output_dir", str(out), *data, *TRAIN, "--max_steps", "1", "--overwrite_output_dir"]) == 0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]


def test_train_script_messages_name_the_split_flags(small_corpus, tmp_path):
    from hf_syntax_mt.cli import main

    src, tgt, conllu = (str(small_corpus["train"][k]) for k in ("src", "tgt", "src_conllu"))
    with pytest.raises(ValueError, match="got --validation_source_file and --validation_source_conllu$"):
        main(["train", "--output_dir", str(tmp_path / "a"), "--train_source_file", src, "--train_target_file", tgt,
              "--validation_source_file", src, "--validation_source_conllu", conllu, "--validation_target_file", tgt,
              *TRAIN])  # fmt: skip
    with pytest.raises(ValueError, match=r"pascal trains on source trees: give --train_source_conllu"):
        main(["train", "--output_dir", str(tmp_path / "b"), "--train_source_file", src, "--train_target_file", tgt,
              "--encoder_pascal_heads", "1", *TRAIN])  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# Item 8: config values and keys
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(pascal_sigma=1e-30, encoder_pascal_heads=[1, 0]), r"pascal_sigma=1e-30 must be > 0 and at least 0\.001"),
        (dict(pascal_sigma="abc"), "pascal_sigma='abc' must be a finite number, not str"),
        (dict(parent_ignoring=float("nan")), "parent_ignoring=nan must be a finite number"),
        (dict(d_model=-64), "d_model=-64 must be an int >= 1"),
        (dict(vocab_size=0), "vocab_size=0 must be an int >= 1"),
        (dict(d_model=18), "d_model=18 is not divisible by encoder_attention_heads=4"),
        (dict(activation_function="nope"), r"activation_function='nope' is not a transformers activation: use one of"),
        (dict(activation_function="gleu"), r"did you mean gelu"),
        (dict(dropout=1.5), r"dropout=1\.5 is a probability"),
        (dict(encoder_pscal_heads=[1, 0]), "has no option 'encoder_pscal_heads'. Did you mean 'encoder_pascal_heads'"),
        (dict(pascal_sigmma=0.5), "has no option 'pascal_sigmma'. Did you mean 'pascal_sigma'"),
    ],
)
def test_config_errors_name_the_option(overrides, message):
    from tiny_config import TINY

    from hf_syntax_mt import SyntaxMTConfig

    with pytest.raises(ValueError, match=message):
        SyntaxMTConfig(**{**TINY, **overrides})


def test_config_keys_that_transformers_writes_still_load(tmp_path, caplog):
    import json

    from tiny_config import TINY
    from transformers import AutoConfig, MarianConfig

    from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration

    config = SyntaxMTConfig(**TINY, encoder_pascal_heads=[2, 0], pascal_sigma=0.5)
    SyntaxMTForConditionalGeneration(config).save_pretrained(tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())
    assert {"transformers_version", "architectures", "auto_map", "custom_pipelines", "model_type"} <= set(stored)
    for loaded in (SyntaxMTConfig.from_pretrained(tmp_path), AutoConfig.from_pretrained(tmp_path)):
        assert (loaded.encoder_pascal_heads, loaded.pascal_sigma, loaded.d_model) == ([2, 0], 0.5, 16)
    # a stored config with the keys transformers 4.x and opus-mt conversions wrote (torch_dtype, _name_or_path, ...)
    marian = {**MarianConfig(**{k: v for k, v in TINY.items()}).to_dict(), "_name_or_path": "opus-mt-fr-en",
              "torch_dtype": "float32", "_num_labels": 3, "add_bias_logits": False, "normalize_before": False,
              "static_position_embeddings": True, "gradient_checkpointing": False, "num_beams": 4, "max_length": 512,
              "bad_words_ids": [[98]], "num_hidden_layers": 2, "output_past": True, "id2label": {"0": "LABEL_0"}}  # fmt: skip
    loaded = SyntaxMTConfig.from_dict(marian)
    assert (loaded.d_model, loaded.vocab_size, loaded.encoder_pascal_heads) == (16, 99, None)
    # an unknown key in a stored file: kept with a warning, unless it looks like a typo of an option
    (tmp_path / "other.json").write_text(json.dumps({**marian, "written_by_another_tool": 1}))
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.configuration_syntax_mt"):
        assert SyntaxMTConfig.from_dict({**marian, "written_by_another_tool": 1}).written_by_another_tool == 1
        assert SyntaxMTConfig.from_json_file(tmp_path / "other.json").written_by_another_tool == 1
    # one warning per file, naming every key nothing reads (the opus-mt conversion's and the other tool's)
    assert "'written_by_another_tool'" in caplog.text and "'normalize_before'" in caplog.text
    assert "are not options of this model" in caplog.text
    with pytest.raises(ValueError, match="has no option 'written_by_another_tool'"):  # typed by hand: an error
        SyntaxMTConfig(**{**TINY, "written_by_another_tool": 1})
    with pytest.raises(ValueError, match="has no option 'encoder_pscal_heads'. Did you mean 'encoder_pascal_heads'"):
        SyntaxMTConfig.from_dict({**marian, "encoder_pscal_heads": [1, 0]})
    with pytest.raises(ValueError, match="has no option 'encoder_pscal_heads'"):
        SyntaxMTConfig.from_pretrained(tmp_path, encoder_pscal_heads=[1, 0])


# ------------------------------------------------------------------------------------------------------------------
# Item 8: inputs and outputs longer than max_position_embeddings
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")  # min_new_tokens forces the longest output
def test_translating_past_max_position_embeddings_truncates_with_a_warning(tmp_path, tokenizer, caplog):
    from transformers import pipeline

    limit = 6
    config = model_config(tokenizer, d_model=16, layers=1, heads=2, ffn_dim=32, init_std=0.3,
                          max_position_embeddings=limit)  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    text = " ".join(SENTENCES)
    assert len(tokenizer(text)["input_ids"]) > limit
    translator = pipeline("syntax-translation", model=str(tmp_path))
    with caplog.at_level(logging.WARNING):
        got = translator(text, max_new_tokens=20, min_new_tokens=20)[0]["translation_text"]
    assert f"truncated to {limit} tokens" in caplog.text
    assert (
        f"max_new_tokens=20 after 1 decoder token(s) would pass the model's max_position_embeddings={limit}"
        in caplog.text
    )
    # by hand: the first limit - 1 tokens and </s>; the decoder reads at most `limit` positions
    ids = tokenizer(text)["input_ids"][: limit - 1] + [tokenizer.eos_token_id]
    out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=limit, min_new_tokens=limit)
    assert out.shape[1] == limit + 1
    assert got == tokenizer.decode(out[0], skip_special_tokens=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        capped = model.generate(input_ids=torch.tensor([ids]), max_length=50, min_length=50)
    assert torch.equal(capped, out) and "max_length=50 would pass" in caplog.text


# ------------------------------------------------------------------------------------------------------------------
# Item 10: blank source lines warn; a system that output nothing scores 0
# ------------------------------------------------------------------------------------------------------------------
def test_blank_source_lines_warn_on_the_parse_free_path(tokenizer, caplog):
    from datasets import Dataset

    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor

    ds = Dataset.from_dict({"source": ["le chat", "", "un chien", "  "], "target": ["a", "b", "c", "d"]})
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.data.preprocess"):
        out = ds.map(
            SyntaxMTPreprocessor(tokenizer, columns=(), max_source_length=16, max_target_length=16),
            batched=True,
            with_indices=True,
            remove_columns=ds.column_names,
        )
    assert "2 empty source line(s) (rows 1, 3) kept" in caplog.text
    assert out["input_ids"][1] == tokenizer("")["input_ids"]  # the special tokens alone


def test_an_all_empty_hypothesis_file_scores_zero_with_a_warning(tmp_path, caplog):
    import json

    import sacrebleu

    from hf_syntax_mt.cli import main

    refs = ["the cat sleeps", "a dog runs fast", "it rains"]
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    (tmp_path / "hyp.txt").write_text("\n\n\n", encoding="utf-8")
    (tmp_path / "base.txt").write_text("the cat sleeps\na dog\nit rains\n", encoding="utf-8")
    (tmp_path / "src.txt").write_text("le chat dort\nun chien court vite\nil pleut\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.evaluation"):
        assert main(["evaluate", "--hyp", str(tmp_path / "hyp.txt"), "--ref", str(tmp_path / "ref.txt"), "--src",
                     str(tmp_path / "src.txt"), "--baseline", str(tmp_path / "base.txt"), "--bootstrap-samples", "20",
                     "--json", str(tmp_path / "eval.json")]) == 0  # fmt: skip
    assert "all 3 lines are empty (the system output nothing); it scores 0" in caplog.text
    system = json.loads((tmp_path / "eval.json").read_text())["systems"]["system"]
    assert (system["bleu"], system["chrf"], system["ribes"]) == (0.0, 0.0, 0.0)
    assert system["bleu"] == sacrebleu.corpus_bleu(["", "", ""], [refs]).score
    (tmp_path / "none.txt").write_text("", encoding="utf-8")  # no line at all: still an error (not aligned)
    with pytest.raises(ValueError, match="none.txt is empty: expected one segment per line"):
        main(["evaluate", "--hyp", str(tmp_path / "none.txt"), "--ref", str(tmp_path / "ref.txt")])
