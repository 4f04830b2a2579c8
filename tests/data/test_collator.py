"""DataCollatorForSyntaxMT: padding values, own-position padding, validation, decoder inputs."""

from __future__ import annotations

import pytest
import torch

from hf_syntax_mt.data.collator import DataCollatorForSyntaxMT


class _Tok:
    pad_token_id = 58
    padding_side = "right"


class _Model:
    def prepare_decoder_input_ids_from_labels(self, labels):
        # Marian-style shift right with decoder_start = pad, -100 -> pad
        shifted = labels.new_full(labels.shape, 58)
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == -100, 58)


FEATURES = [
    {
        "input_ids": [5, 6, 7, 0],
        "attention_mask": [1, 1, 1, 1],
        "parent_positions": [1.0, 1.0, 1.5, 3.0],
        "lisa_parents": [1, 1, 1, 3],
        "dbsa_heads": [1, 2, 2, 3],
        "labels": [9, 0],
        "word_feature": [3, 4, 4, 0],
        "weight": [0.5, 1.0, 1.0, 1.0],
    },
    {
        "input_ids": [8, 0],
        "attention_mask": [1, 1],
        "parent_positions": [0.0, 1.0],
        "lisa_parents": [0, 1],
        "dbsa_heads": [0, 1],
        "labels": [10, 11, 12, 0],
        "word_feature": [2, 0],
        "weight": [1.0, 1.0],
    },
]


def test_padding_values_right():
    batch = DataCollatorForSyntaxMT(_Tok())(FEATURES)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 0], [8, 0, 58, 58]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [[9, 0, -100, -100], [10, 11, 12, 0]]
    # padding tokens point to their own positions (2 and 3)
    assert batch["parent_positions"].dtype == torch.float32
    assert batch["parent_positions"].tolist() == [[1.0, 1.0, 1.5, 3.0], [0.0, 1.0, 2.0, 3.0]]
    assert batch["lisa_parents"].tolist() == [[1, 1, 1, 3], [0, 1, 2, 3]]
    assert batch["dbsa_heads"].tolist() == [[1, 2, 2, 3], [0, 1, 2, 3]]
    assert batch["lisa_parents"].dtype == torch.long
    # generic fields: ints with 0, floats with 0.0
    assert batch["word_feature"].tolist() == [[3, 4, 4, 0], [2, 0, 0, 0]]
    assert batch["weight"].dtype == torch.float32 and batch["weight"].tolist()[1] == [1.0, 1.0, 0.0, 0.0]
    assert "decoder_input_ids" not in batch


def test_pad_to_multiple_of_and_decoder_inputs():
    batch = DataCollatorForSyntaxMT(_Tok(), model=_Model(), pad_to_multiple_of=8)(FEATURES)
    assert batch["input_ids"].shape == (2, 8) and batch["labels"].shape == (2, 8)
    assert batch["parent_positions"][1].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert batch["decoder_input_ids"].tolist() == [[58, 9, 0, 58, 58, 58, 58, 58], [58, 10, 11, 12, 0, 58, 58, 58]]


def test_left_padding_shifts_positions():
    tok = _Tok()
    tok.padding_side = "left"
    batch = DataCollatorForSyntaxMT(tok)(FEATURES)
    assert batch["input_ids"].tolist()[1] == [58, 58, 8, 0]
    # pads at 0, 1 point to themselves; real tokens moved right by 2, so do their parents
    assert batch["parent_positions"].tolist()[1] == [0.0, 1.0, 2.0, 3.0]
    assert batch["dbsa_heads"].tolist()[1] == [0, 1, 2, 3]
    assert batch["parent_positions"].tolist()[0] == [1.0, 1.0, 1.5, 3.0]


def test_length_mismatch_names_field_row_and_lengths():
    bad = [dict(FEATURES[0]), dict(FEATURES[1])]
    bad[1]["parent_positions"] = [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="field 'parent_positions' in row 1 has length 3 but input_ids has length 2"):
        DataCollatorForSyntaxMT(_Tok())(bad)
    bad = [dict(FEATURES[0]), dict(FEATURES[1])]
    bad[0]["decoder_dbsa_heads"] = [0, 1, 2]
    bad[1]["decoder_dbsa_heads"] = [0, 1, 2, 3]
    with pytest.raises(ValueError, match="field 'decoder_dbsa_heads' in row 0 has length 3 but labels has length 2"):
        DataCollatorForSyntaxMT(_Tok())(bad)


def test_missing_field_in_a_row():
    bad = [dict(FEATURES[0]), {k: v for k, v in FEATURES[1].items() if k != "weight"}]
    with pytest.raises(ValueError, match="row 1 has fields"):
        DataCollatorForSyntaxMT(_Tok())(bad)


def test_with_real_tokenizer_and_preprocessor(tmp_path, data_marian_tokenizer):
    from datasets import Dataset

    from hf_syntax_mt.data.parsers import ParsedSentence
    from hf_syntax_mt.data.preprocess import prepare_dataset

    texts = ["Le chat mange du poisson .", "Il fait beau ."]
    parses = []
    for t in texts:
        words = t.split()
        parses.append(ParsedSentence(words, list(range(len(words))), ["_"] * len(words), ["_"] * len(words)).to_dict())
    ds = Dataset.from_dict({"source": texts, "target": ["The cat eats fish .", "It is sunny ."], "parse": parses})
    ds = prepare_dataset(
        ds, data_marian_tokenizer, None, source_parse_column="parse", columns=["parent_positions", "dbsa_heads"]
    )
    batch = DataCollatorForSyntaxMT(data_marian_tokenizer)([ds[0], ds[1]])
    S = batch["input_ids"].shape[1]
    n1 = len(ds[1]["input_ids"])
    assert batch["input_ids"][1, n1:].eq(data_marian_tokenizer.pad_token_id).all()
    assert batch["parent_positions"][1, n1:].tolist() == [float(p) for p in range(n1, S)]
    assert batch["parent_positions"][1, :n1].tolist() == ds[1]["parent_positions"]
    assert set(batch) == {"input_ids", "attention_mask", "parent_positions", "dbsa_heads", "labels"}


def test_word_level_and_syntax_columns_are_padded_by_their_own_rules():
    rows = [
        {"input_ids": [5, 6, 0], "word_index": [1, 2, 0], "word_heads": [2, 0], "pos_ids": [3, 4, 0],
         "labels": [7, 0], "decoder_dbsa_heads": [1, 1]},
        {"input_ids": [5, 6, 7, 8, 0], "word_index": [1, 1, 2, 3, 0], "word_heads": [0, 1, 1], "pos_ids": [3, 3, 4, 5, 0],
         "labels": [7, 8, 9, 0], "decoder_dbsa_heads": [1, 3, 3, 3]},
    ]  # fmt: skip
    batch = DataCollatorForSyntaxMT(_Tok())(rows)
    assert batch["word_heads"].tolist() == [[2, 0, 0], [0, 1, 1]]  # its own length, padded with 0
    assert batch["word_index"].tolist() == [[1, 2, 0, 0, 0], [1, 1, 2, 3, 0]]  # 0 = no word
    assert batch["pos_ids"].tolist() == [[3, 4, 0, 0, 0], [3, 3, 4, 5, 0]]
    assert batch["decoder_dbsa_heads"].tolist() == [[1, 1, 2, 3], [1, 3, 3, 3]]  # target side, own position
