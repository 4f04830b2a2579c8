"""Document-level context (Zhang et al. 2018, Section 2.2): reading documents, the context of each sentence,
context token ids, preprocessing and collation of the ``context_*`` fields."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import needs
import pytest
import torch
from datasets import Dataset, DatasetDict
from trees import chain_sentence

from hf_syntax_mt.data.collator import DataCollatorForSyntaxMT
from hf_syntax_mt.data.documents import DocumentContext, add_document_context, encode_context, read_documents
from hf_syntax_mt.data.parsers import Parser
from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor, prepare_dataset

REAL_DATA = needs.SHARED_DATA / "docnmt-en-de"  # ../shared beside the repo

# Hand-built documents. Single-sentence documents come first so that the first map batches hold first sentences
# only (an all-empty context column must not fix its type to list<null>).
DOCS = [
    ("a", ["A1."]),
    ("b", ["B1."]),
    ("c", ["C1.", "C2.", "C3.", "C4.", "C5."]),
    ("d", ["D1.", "D2."]),
    ("e", ["E1."]),
    ("f", ["F1.", "F2.", "F3.", "F4."]),
    ("g", ["G1.", "G2.", "G3."]),
]


def _docs_dataset(docs=DOCS) -> Dataset:
    return Dataset.from_dict(
        {
            "source": [s for _, sents in docs for s in sents],
            "target": [s.lower() for _, sents in docs for s in sents],
            "doc_id": [d for d, sents in docs for _ in sents],
        }
    )


def _expected_contexts(docs, k: int) -> list[list[str]]:
    """Direct computation: sentence j of a document gets sentences max(0, j-k)..j-1 of that document."""
    return [sents[max(0, j - k) : j] if k else [] for _, sents in docs for j in range(len(sents))]


class WhitespaceParser(Parser):
    """Word i depends on word i-1; the first word is the root."""

    name = "ws"
    model = "ws"

    def parse(self, texts):
        return [chain_sentence(t) for t in texts]

    def signature(self):
        return "ws"

    def to_config(self):
        return {"backend": "ws"}


# ------------------------------------------------------------------------------------------------------------------
# add_document_context
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_context_matches_direct_computation_across_batches(k):
    ds = _docs_dataset()
    out = add_document_context(ds, k, batch_size=2, map_kwargs={"writer_batch_size": 2})  # 17 rows, 9 batches
    assert out.column_names == ["source", "target", "doc_id", "context"]
    assert out["context"] == _expected_contexts(DOCS, k)
    assert out.features["context"].feature.dtype == "string"
    # context never crosses a document; the first sentence of each document has none
    doc_of = dict(zip(ds["source"], ds["doc_id"], strict=True))
    for row in out:
        assert all(doc_of[s] == row["doc_id"] for s in row["context"])
    firsts = [i for i, d in enumerate(ds["doc_id"]) if i == 0 or ds["doc_id"][i - 1] != d]
    assert all(out[i]["context"] == [] for i in firsts)


def test_context_with_select_and_datasetdict():
    ds = _docs_dataset()
    dd = DatasetDict({"train": ds, "test": ds.select(range(2, 9))})  # C1..C5, D1, D2
    out = add_document_context(dd, 2, batch_size=3)
    assert out["train"]["context"] == _expected_contexts(DOCS, 2)
    assert out["test"]["context"] == _expected_contexts([DOCS[2], DOCS[3]], 2)


def test_context_function_is_picklable_and_num_proc_2_matches(tmp_path):
    ds = _docs_dataset()
    fn = DocumentContext(ds["source"], ds["doc_id"], 2)
    clone = pickle.loads(pickle.dumps(fn))
    assert [clone.context(i) for i in range(len(ds))] == _expected_contexts(DOCS, 2)
    out = add_document_context(ds, 2, num_proc=2, batch_size=2)
    assert out["context"] == _expected_contexts(DOCS, 2)


def test_shuffled_documents_are_an_error():
    ds = _docs_dataset().select([2, 3, 9, 4])  # C1 C2 D1 C3: document c comes back
    with pytest.raises(ValueError, match=r"document 'c' starts at row 0 and appears again at row 3"):
        add_document_context(ds, 1)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_context_size_is_validated(bad):
    with pytest.raises(ValueError, match="k \\(context sentences\\)"):
        DocumentContext(["a"], ["d"], bad)


def test_missing_column_is_named():
    with pytest.raises(KeyError, match="'doc_id'"):
        add_document_context(Dataset.from_dict({"source": ["a"]}), 1)


# ------------------------------------------------------------------------------------------------------------------
# read_documents
# ------------------------------------------------------------------------------------------------------------------
def _write(path: Path, lines: list[str], compress: bool = False) -> Path:
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(text) if compress else text)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_read_documents_docid_format_keeps_empty_lines(tmp_path, compress):
    src = _write(tmp_path / "x.en", ["S1", "", "S3", "S4"], compress)
    tgt = _write(tmp_path / "x.de", ["T1", "T2", "", "T4"], compress)
    ids = _write(tmp_path / "x.docid", ["d7", "d7", "d2", "d2"], compress)
    ds = read_documents(src, tgt, ids)
    assert ds.column_names == ["source", "target", "doc_id"]
    assert ds["source"] == ["S1", "", "S3", "S4"]
    assert ds["target"] == ["T1", "T2", "", "T4"]
    assert ds["doc_id"] == ["d7", "d7", "d2", "d2"]
    assert add_document_context(ds, 3)["context"] == [[], ["S1"], [], ["S3"]]


def test_read_documents_blank_line_format(tmp_path):
    src = _write(tmp_path / "x.en", ["", "A1", "A2", "", "", "B1", " ", "C1", "C2", "C3", ""])
    tgt = _write(tmp_path / "x.de", ["", "a1", "a2", "", "", "b1", "", "c1", "c2", "c3", ""])
    ds = read_documents(src, tgt)
    assert ds["source"] == ["A1", "A2", "B1", "C1", "C2", "C3"]
    assert ds["target"] == ["a1", "a2", "b1", "c1", "c2", "c3"]
    assert ds["doc_id"] == ["doc0", "doc0", "doc1", "doc2", "doc2", "doc2"]
    source_only = read_documents(src)
    assert source_only.column_names == ["source", "doc_id"]
    assert source_only["doc_id"] == ds["doc_id"]
    assert add_document_context(ds, 2)["context"] == [[], ["A1"], [], [], ["C1"], ["C1", "C2"]]


def test_read_documents_errors(tmp_path):
    src = _write(tmp_path / "x.en", ["S1", "S2", "S3"])
    short = _write(tmp_path / "short.de", ["T1", "T2"])
    with pytest.raises(ValueError, match=r"x\.en has 3 lines, .*short\.de has 2 lines"):
        read_documents(src, short)
    with pytest.raises(ValueError, match=r"short\.de has 2 lines, .*x\.en has 3 lines"):
        read_documents(src, docid_file=short)
    back = _write(tmp_path / "back.docid", ["d1", "d2", "d1"])
    with pytest.raises(ValueError, match=r"back\.docid:3: document id 'd1' reappears .* started at line 1"):
        read_documents(src, docid_file=back)
    empty_id = _write(tmp_path / "empty.docid", ["d1", " ", "d2"])
    with pytest.raises(ValueError, match=r"empty\.docid:2: empty document id"):
        read_documents(src, docid_file=empty_id)
    blank_src = _write(tmp_path / "b.en", ["A1", "", "B1"])
    misaligned = _write(tmp_path / "b.de", ["a1", "b0", "b1"])
    with pytest.raises(ValueError, match=r"line 2: a blank line .* in .*b\.en but not in .*b\.de \('b0'\)"):
        read_documents(blank_src, misaligned)
    with pytest.raises(ValueError, match=r"line 2: a blank line .* in .*b\.en but not in .*b\.de \('b0'\)"):
        read_documents(misaligned, blank_src)  # the blank line is in the target file now


@needs.skip_without_data("docnmt-en-de")
def test_real_newstest2015_documents():
    stem = REAL_DATA / "newstest2015"
    ds = read_documents(f"{stem}.en", f"{stem}.de", f"{stem}.docid")
    assert len(ds) == 2169
    assert len(set(ds["doc_id"])) == 81
    out = add_document_context(ds, 2)
    n_first = sum(1 for c in out["context"] if not c)
    assert n_first == 81  # no empty lines in these files: exactly the first sentences have no context
    assert out[1]["context"] == [ds[0]["source"]]


# ------------------------------------------------------------------------------------------------------------------
# encode_context
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokenizer_name", ["data_marian_tokenizer", "data_fast_tokenizer"])
def test_encode_context_concatenates_and_keeps_most_recent_tokens(request, tokenizer_name):
    tok = request.getfixturevalue(tokenizer_name)
    sentences = ["Le chat mange du poisson.", "", "Il fait beau aujourd'hui."]
    # independent: each non-empty sentence with its special tokens, oldest first
    full = list(tok("Le chat mange du poisson.")["input_ids"]) + list(tok("Il fait beau aujourd'hui.")["input_ids"])
    assert full[-1] == tok.eos_token_id and full.count(tok.eos_token_id) == 2
    assert encode_context(tok, sentences, None) == full
    assert encode_context(tok, sentences, len(full) + 5) == full
    for n in (1, 3, len(full) - 1):
        assert encode_context(tok, sentences, n) == full[-n:]
    assert encode_context(tok, sentences, 0) == []
    assert encode_context(tok, [], 10) == []
    assert encode_context(tok, ["", "  ", None], None) == []


def test_encode_context_validates(data_fast_tokenizer):
    with pytest.raises(ValueError, match="max_length"):
        encode_context(data_fast_tokenizer, ["a"], -1)
    with pytest.raises(TypeError, match="list of strings"):
        encode_context(data_fast_tokenizer, "a sentence", None)


# ------------------------------------------------------------------------------------------------------------------
# Preprocessor and collator
# ------------------------------------------------------------------------------------------------------------------
def test_preprocessor_context_columns(data_fast_tokenizer):
    tok = data_fast_tokenizer
    ds = add_document_context(_docs_dataset(), 2)
    out = prepare_dataset(
        ds, tok, WhitespaceParser(), batch_size=2, max_context_length=6, columns=["parent_positions"]
    )
    assert out.column_names == ["input_ids", "attention_mask", "parent_positions", "labels", "context_input_ids",
                                "context_attention_mask"]  # fmt: skip
    assert out.features["context_input_ids"].feature.dtype == "int32"
    for row, context in zip(out, _expected_contexts(DOCS, 2), strict=True):
        full = [i for s in context for i in tok(s)["input_ids"]]
        assert row["context_input_ids"] == full[-6:]
        assert row["context_attention_mask"] == [1] * len(row["context_input_ids"])
    assert [len(r) for r in out["context_input_ids"][:3]] == [0, 0, 0]  # A1, B1, C1: first sentences
    # without a context column: no context fields
    plain = SyntaxMTPreprocessor(tok, WhitespaceParser())({"source": ["Le chat ."]})
    assert "context_input_ids" not in plain
    with pytest.raises(ValueError, match="max_context_length"):
        SyntaxMTPreprocessor(tok, WhitespaceParser(), max_context_length=0)


def test_preprocessor_for_config_takes_the_context_length(data_fast_tokenizer):
    from tiny_config import TINY

    from hf_syntax_mt import SyntaxMTConfig

    previous = ["Le chat mange du poisson ."] * 30  # longer than max_position_embeddings tokens
    for config, expected in (
        (SyntaxMTConfig(**TINY, context_sentences=2, max_context_length=7), 7),
        (SyntaxMTConfig(**TINY, context_sentences=2), TINY["max_position_embeddings"]),
    ):
        pre = SyntaxMTPreprocessor.for_config(config, data_fast_tokenizer, WhitespaceParser())
        out = pre({"source": ["Le chat ."], "context": [previous]})
        assert out["context_input_ids"] == [encode_context(data_fast_tokenizer, previous, expected)]
    pre = SyntaxMTPreprocessor.for_config(SyntaxMTConfig(**TINY), data_fast_tokenizer, WhitespaceParser())
    assert "context_input_ids" not in pre({"source": ["Le chat ."], "context": [previous]})  # a sentence-level model
    with pytest.raises(ValueError, match="set them in the config"):
        SyntaxMTPreprocessor.for_config(SyntaxMTConfig(**TINY), data_fast_tokenizer, max_context_length=3)
    with pytest.raises(ValueError, match=r"\['max_contxt_length'\] are not options of a registered method"):
        SyntaxMTPreprocessor(data_fast_tokenizer, columns=(), max_contxt_length=3)


def test_for_config_without_parse_needs_tokenizes_only(data_fast_tokenizer):
    """A context-only model needs no parser: `for_config` gives a tokenize-only preprocessor, whose rows equal plain
    tokenization plus `encode_context`."""
    from tiny_config import TINY

    from hf_syntax_mt import SyntaxMTConfig

    config = SyntaxMTConfig(**TINY, context_sentences=2, max_context_length=6)
    pre = SyntaxMTPreprocessor.for_config(config, data_fast_tokenizer)
    assert pre.tokenize_only
    docs = add_document_context(_docs_dataset(), k=2)
    out = docs.map(pre, batched=True, batch_size=3, remove_columns=docs.column_names,
                   features=pre.output_features(docs.column_names))  # fmt: skip
    for row, source, target, context in zip(out, docs["source"], docs["target"], docs["context"], strict=True):
        assert row["input_ids"] == data_fast_tokenizer(source)["input_ids"]
        assert row["labels"] == data_fast_tokenizer(text_target=target)["input_ids"]
        assert row["context_input_ids"] == encode_context(data_fast_tokenizer, context, 6)
        assert row["context_attention_mask"] == [1] * len(row["context_input_ids"])
    with pytest.raises(ValueError, match="parser"):  # a PASCAL model still needs one
        SyntaxMTPreprocessor.for_config(SyntaxMTConfig(**TINY, encoder_pascal_heads=[1, 0]), data_fast_tokenizer)


@pytest.mark.parametrize("side", ["right", "left"])
def test_collator_pads_context_fields(side):
    class Tok:
        pad_token_id = 58
        padding_side = side

    features = [
        {"input_ids": [5, 0], "attention_mask": [1, 1], "context_input_ids": [7, 8, 0], "context_attention_mask": [1] * 3},
        {"input_ids": [5, 6, 0], "attention_mask": [1, 1, 1], "context_input_ids": [], "context_attention_mask": []},
    ]  # fmt: skip
    batch = DataCollatorForSyntaxMT(Tok())(features)
    if side == "right":
        assert batch["context_input_ids"].tolist() == [[7, 8, 0], [58, 58, 58]]
        assert batch["input_ids"].tolist() == [[5, 0, 58], [5, 6, 0]]
    else:
        assert batch["context_input_ids"].tolist() == [[7, 8, 0], [58, 58, 58]]
        assert batch["input_ids"].tolist() == [[58, 5, 0], [5, 6, 0]]
    assert batch["context_attention_mask"].tolist() == [[1, 1, 1], [0, 0, 0]]
    assert batch["context_input_ids"].dtype == torch.long

    empty = [{**f, "context_input_ids": [], "context_attention_mask": []} for f in features]
    batch = DataCollatorForSyntaxMT(Tok(), pad_to_multiple_of=8)(empty)
    assert batch["context_input_ids"].shape == (2, 0) and batch["context_input_ids"].dtype == torch.long
    assert batch["context_attention_mask"].shape == (2, 0)
    assert batch["input_ids"].shape == (2, 8)

    features[0]["context_attention_mask"] = [1, 1]
    with pytest.raises(
        ValueError, match="'context_attention_mask' in row 0 has length 2 but context_input_ids has length 3"
    ):
        DataCollatorForSyntaxMT(Tok())(features)
    no_ids = [{"input_ids": [5], "context_attention_mask": [1]}]
    with pytest.raises(ValueError, match="no 'context_input_ids'"):
        DataCollatorForSyntaxMT(Tok())(no_ids)


def test_collator_left_padding_of_context():
    class Tok:
        pad_token_id = 58
        padding_side = "left"

    features = [
        {"input_ids": [5], "context_input_ids": [7], "context_attention_mask": [1]},
        {"input_ids": [5], "context_input_ids": [7, 8, 9], "context_attention_mask": [1, 1, 1]},
    ]
    batch = DataCollatorForSyntaxMT(Tok())(features)
    assert batch["context_input_ids"].tolist() == [[58, 58, 7], [7, 8, 9]]
    assert batch["context_attention_mask"].tolist() == [[0, 0, 1], [1, 1, 1]]


def test_documents_end_to_end_through_collator(data_marian_tokenizer):
    """read_documents -> add_document_context -> prepare_dataset -> collator: (B, M) context tensors."""
    ds = add_document_context(_docs_dataset(), 1)
    out = prepare_dataset(ds, data_marian_tokenizer, WhitespaceParser(), batch_size=4)
    batch = DataCollatorForSyntaxMT(data_marian_tokenizer)([out[i] for i in range(2, 5)])  # C1, C2, C3
    lengths = [len(data_marian_tokenizer(s)["input_ids"]) for s in ("C1.", "C2.")]
    assert batch["context_attention_mask"].sum(1).tolist() == [0, *lengths]
    assert batch["context_input_ids"].shape == (3, max(lengths))


def test_id_spans_are_the_runs_of_equal_ids():
    from hf_syntax_mt.data.documents import id_spans

    assert id_spans(["a", "a", "b", "c", "c", "c"]) == [(0, 2), (2, 3), (3, 6)]
    assert id_spans(["a", "b", "a"]) == [(0, 1), (1, 2), (2, 3)]  # runs, not ids: doc_id_spans refuses this input
    assert id_spans([]) == []
