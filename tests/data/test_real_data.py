"""Slow tests on the real corpora in ../shared/data (read in place, never copied): every Multi30k validation
sentence with its spaCy parse maps onto subwords of a tokenizer trained on the fly, and a PASCAL model runs on it."""

import needs
import pytest
import torch

from hf_syntax_mt.data import ConllParser, DataCollatorForSyntaxMT, align_parse
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

DATA = needs.SHARED_DATA
CONLLU = DATA / "multi30k-parsed" / "val.fr.conllu.gz"
TEXT = DATA / "multi30k" / "val.fr"

pytestmark = [
    pytest.mark.slow,
    needs.skip_without_data("multi30k-parsed/val.fr.conllu.gz"),
]


def test_multi30k_val_parses_align_and_translate():
    lines = TEXT.read_text(encoding="utf-8").splitlines()
    parser = ConllParser(str(CONLLU))
    parses = parser.parse(lines)
    assert len(parses) == len(lines) == 1014
    tokenizer = train_tokenizer(lines, vocab_size=2000)
    rows = [align_parse(tokenizer, p, text=t, max_length=64) for p, t in zip(parses, lines, strict=True)]
    for row, parse in zip(rows, parses, strict=True):
        n = len(row["input_ids"])
        assert n <= 64 and len(row["parent_positions"]) == n
        assert all(0 <= p <= n - 1 for p in row["parent_positions"])
        # the root word's subwords point at the root's own middle position
        root = parse.heads.index(0)
        positions = [i for i, w in enumerate(row["word_ids"]) if w == root]
        if positions:
            assert row["parent_positions"][positions[0]] == sum(positions) / len(positions)
    config = model_config(tokenizer, d_model=32, layers=2, heads=4, ffn_dim=64, encoder_pascal_heads=[2, 0])
    model = build_model(config).eval()
    batch = DataCollatorForSyntaxMT(tokenizer)([{k: r[k] for k in ("input_ids", "attention_mask", "parent_positions")}
                                                 for r in rows[:16]])  # fmt: skip
    out = model.generate(**batch, max_new_tokens=5)
    assert out.shape[0] == 16 and torch.isfinite(model(**batch, decoder_input_ids=out).logits).all()
