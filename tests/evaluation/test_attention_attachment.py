"""Attention-to-parent attachment scores: subword -> word aggregation and per-head scores on hand-built attention
matrices and trees, then end to end on a saved model against a direct per-sentence computation; figures."""

import numpy as np
import pytest
import torch

from hf_syntax_mt.data import DataCollatorForSyntaxMT, align_parse, read_conllu
from hf_syntax_mt.evaluation import attachment_scores, evaluate_files, word_attention
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

PNG = b"\x89PNG\r\n\x1a\n"


def test_word_attention_sums_over_attended_and_averages_over_attending_subwords():
    # tokens: A1 A2 B C </s>  (word A has two subwords)
    word_ids = [0, 0, 1, 2, None]
    att = np.array(
        [
            [0.1, 0.1, 0.5, 0.2, 0.1],
            [0.3, 0.1, 0.2, 0.2, 0.2],
            [0.2, 0.2, 0.2, 0.2, 0.2],
            [0.0, 0.0, 0.0, 0.9, 0.1],
            [0.2, 0.2, 0.2, 0.2, 0.2],
        ]
    )
    words = word_attention(att, word_ids, 3)
    # row A = mean of the rows of A1, A2; column A = A1 + A2; the </s> column is dropped
    expected = np.array(
        [
            [(0.2 + 0.4) / 2, (0.5 + 0.2) / 2, (0.2 + 0.2) / 2],
            [0.4, 0.2, 0.2],
            [0.0, 0.0, 0.9],
        ]
    )
    np.testing.assert_allclose(words, expected, atol=1e-12)


def test_attachment_scores_on_hand_built_trees():
    # sentence 1: "A B C", B is the root, A -> B, C -> B; B has two subwords: tokens A B1 B2 C </s>
    heads1, wids1 = [2, 0, 2], [0, 1, 1, 2, None]
    parent = np.array(  # head 0 of the layer: every word looks at its gold parent
        [[0.1, 0.45, 0.45, 0.0, 0.0], [1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0.0, 0.3, 0.3, 0.4, 0.0], [0.2] * 5]
    )
    selfish = np.eye(5)  # head 1: every token looks at itself -> never the parent
    split = np.array(  # head 2: subword argmax (C for A) differs from the word argmax (B, 0.65 > 0.35)
        [[0.0, 0.33, 0.32, 0.35, 0.0], [0.2] * 5, [0.2] * 5, [0.55, 0.2, 0.25, 0.0, 0.0], [0.2] * 5]
    )
    att1 = np.stack([parent, selfish, split])[None]  # (L=1, H=3, T, T)
    # sentence 2: "D E", D is the root and E -> D; tokens D E </s>
    heads2, wids2 = [0, 1], [0, 1, None]
    att2 = np.stack(
        [np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1]]), np.eye(3), np.array([[1, 0, 0], [0, 0, 1], [1, 0, 0]])]
    )[None]
    result = attachment_scores([att1, att2], [wids1, wids2], [heads1, heads2])
    # scored words: A, C (sentence 1), E (sentence 2); roots are not scored
    assert result["count"] == 3
    # head 0: A, C, E right; head 1: none; head 2: A right, C wrong (A 0.55 > B 0.45), E's only word is </s> -> D? no:
    # E's row puts all its weight on </s>, which is not a word, so every word gets 0 and argmax falls on word 0 = D.
    np.testing.assert_array_equal(result["correct"], [[3, 0, 2]])
    np.testing.assert_allclose(result["scores"], [[1.0, 0.0, 2 / 3]])


def test_attachment_scores_skip_words_cut_by_truncation():
    # "A B C" with C -> A, but C was truncated away (no subword) and B -> C points past the cut
    heads, wids = [0, 3, 1], [0, 1, None]
    att = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.3, 0.3, 0.4]])[None, None]
    result = attachment_scores([att], [wids], [heads])
    assert result["count"] == 0 and np.isnan(result["scores"]).all()


def test_attachment_scores_errors():
    with pytest.raises(ValueError, match="one of each per sentence"):
        attachment_scores([np.zeros((1, 1, 2, 2))], [], [[0]])
    with pytest.raises(ValueError, match=r"\(layers, heads, T, T\)"):
        attachment_scores([np.zeros((2, 2))], [[0, None]], [[0]])
    with pytest.raises(ValueError, match="expected \\(3, 3\\)"):
        word_attention(np.zeros((2, 2)), [0, 1, None], 2)


CONLLU = """# text = ba ke lomu
1\tba\t_\tX\t_\t_\t2\tdep\t_\t_
2\tke\t_\tX\t_\t_\t0\troot\t_\t_
3\tlomu\t_\tX\t_\t_\t2\tdep\t_\t_

# text = tika ba
1\ttika\t_\tX\t_\t_\t0\troot\t_\t_
2\tba\t_\tX\t_\t_\t1\tdep\t_\t_

# text = ke lomu tika ba ke
1\tke\t_\tX\t_\t_\t2\tdep\t_\t_
2\tlomu\t_\tX\t_\t_\t0\troot\t_\t_
3\ttika\t_\tX\t_\t_\t4\tdep\t_\t_
4\tba\t_\tX\t_\t_\t2\tdep\t_\t_
5\tke\t_\tX\t_\t_\t4\tdep\t_\t_

"""


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("attn_model")
    tokenizer = train_tokenizer(["ba ke lomu tika", "tika ba", "lomu ke ba"] * 5, vocab_size=30, min_frequency=1)
    config = model_config(tokenizer, attention_init="normal", d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0],
                          init_std=0.5)  # fmt: skip
    model = build_model(config, seed=3)
    model.save_pretrained(d)
    tokenizer.save_pretrained(d)
    (d / "gold.conllu").write_text(CONLLU, encoding="utf-8")
    return d, model, tokenizer


def direct_scores(model, tokenizer, parses, columns=("parent_positions",), contexts=None):
    """One sentence at a time (no padding), explicit loops over subwords for the word aggregation; ``columns``: the
    parse inputs the model reads; ``contexts``: a context text per sentence (``None``: no context)."""
    L, H = model.config.encoder_layers, model.config.encoder_attention_heads
    correct, count = np.zeros((L, H)), 0
    collate = DataCollatorForSyntaxMT(tokenizer)
    model.eval()
    for k, parse in enumerate(parses):
        row = align_parse(tokenizer, parse)
        batch = collate([{k: row[k] for k in ("input_ids", "attention_mask", *columns)}])
        if contexts is not None and contexts[k] is not None:
            batch["context_input_ids"] = torch.tensor([tokenizer(contexts[k])["input_ids"]])
        with torch.no_grad():
            attentions = model.get_encoder()(**batch, output_attentions=True).attentions
        wids, n = row["word_ids"], len(parse.words)
        for layer in range(L):
            for head in range(H):
                a = attentions[layer][0, head].numpy()
                for i in range(n):
                    if parse.heads[i] == 0:
                        continue
                    rows = [t for t, w in enumerate(wids) if w == i]
                    totals = [sum(a[t, s] for t in rows for s, w in enumerate(wids) if w == j) / len(rows)
                              for j in range(n)]  # fmt: skip
                    correct[layer, head] += int(np.argmax(totals) == parse.heads[i] - 1)
        count += sum(1 for h in parse.heads if h != 0)
    return correct / count, count


def test_evaluate_files_attention_matches_a_direct_computation(saved_model, tmp_path):
    d, model, tokenizer = saved_model
    gold = read_conllu(d / "gold.conllu")
    expected, count = direct_scores(model, tokenizer, gold)
    hyp = tmp_path / "hyp.txt"
    ref = tmp_path / "ref.txt"
    hyp.write_text("ba ke\ntika\nke lomu\n", encoding="utf-8")
    ref.write_text("ba ke lomu\ntika ba\nke lomu tika ba ke\n", encoding="utf-8")
    result = evaluate_files(hyp, ref, model=d, gold_conllu=d / "gold.conllu", heatmap=tmp_path / "heads.png",
                            arcs=tmp_path / "arcs.png", arcs_sentence=2)  # fmt: skip
    att = result["attention"]
    assert att["count"] == count == 7 and (att["layers"], att["heads"]) == (2, 4)
    np.testing.assert_allclose(att["scores"], expected, atol=1e-6)  # JSON keeps 6 decimals
    assert "variant:syntax_mt(encoder_pascal_heads=[2,0])" in att["signature"]
    assert "gold:gold.conllu@" in att["signature"]
    for key in ("heatmap", "arcs"):
        assert open(att[key], "rb").read(8) == PNG


def test_attachment_scores_of_a_model_that_reads_features_and_trees(saved_model):
    """A model whose encoder needs the Sennrich & Haddow features and the tree of syntax-directed heads gets them
    from the gold parses (the Multi30k study's `features` unit needs this for its UAS column)."""
    from hf_syntax_mt.evaluation.attention import model_attachment_scores

    d, _, tokenizer = saved_model
    config = model_config(tokenizer, attention_init="normal", d_model=16, layers=2, heads=4, ffn_dim=32, encoder_tree_heads=[1, 0],
                          input_features=["pos", "deprel", "subword_tag"], init_std=0.5)  # fmt: skip
    model = build_model(config, seed=4)
    gold = read_conllu(d / "gold.conllu")
    columns = ("pos_ids", "deprel_ids", "subword_tag_ids", "word_index", "word_heads")
    assert set(config.parse_columns()) == set(columns)
    expected, count = direct_scores(model, tokenizer, gold, columns)
    result = model_attachment_scores(model, tokenizer, gold, batch_size=2)  # padding across sentences
    assert result["count"] == count == 7
    np.testing.assert_allclose(result["scores"], expected, atol=1e-6)


@pytest.fixture(scope="module")
def context_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("attn_context_model")
    tokenizer = train_tokenizer(["ba ke lomu tika", "tika ba", "lomu ke ba"] * 5, vocab_size=30, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0],
                          context_sentences=1, init_std=1.0)  # fmt: skip
    model = build_model(config, seed=3)
    model.save_pretrained(d)
    tokenizer.save_pretrained(d)
    (d / "gold.conllu").write_text(CONLLU, encoding="utf-8")
    (d / "hyp.txt").write_text("ba ke\ntika\nke lomu\n", encoding="utf-8")
    (d / "ref.txt").write_text("ba ke lomu\ntika ba\nke lomu tika ba ke\n", encoding="utf-8")
    return d, model, tokenizer


def test_attention_of_a_document_model_reads_each_sentence_with_its_context(context_model, tmp_path):
    """Documents d1 = sentences 1-2 and d2 = sentence 3 (issue 27): sentence 2 is read with sentence 1 as context."""
    d, model, tokenizer = context_model
    gold = read_conllu(d / "gold.conllu")
    (tmp_path / "gold.docid").write_text("d1\nd1\nd2\n", encoding="utf-8")
    files = dict(hypotheses=d / "hyp.txt", references=d / "ref.txt", model=d, gold_conllu=d / "gold.conllu")
    result = evaluate_files(**files, docids=tmp_path / "gold.docid")["attention"]
    with_context, count = direct_scores(model, tokenizer, gold, contexts=[None, "ba ke lomu", None])
    np.testing.assert_allclose(result["scores"], with_context, atol=1e-6)
    assert result["count"] == count and "context:1@gold.docid" in result["signature"]
    without = evaluate_files(**files, no_context=True)["attention"]
    np.testing.assert_allclose(without["scores"], direct_scores(model, tokenizer, gold)[0], atol=1e-6)
    assert "context:none" in without["signature"]
    assert not np.allclose(with_context, without["scores"])  # the context changes what the heads attend to
    with pytest.raises(ValueError, match=r"document-level model \(context_sentences=1\).*--docids FILE.*--no-context"):
        evaluate_files(**files)
    (tmp_path / "short.docid").write_text("d1\nd1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"short.docid:3: .*line 3 of .*gold.conllu has no document id"):
        evaluate_files(**files, docids=tmp_path / "short.docid")
