"""Multi-task data (linearised parses), reading trees from DBSA heads, and UAS."""

import copy

import pytest
import torch

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.data.multitask import add_task_tokens, delinearize, linearize_parse, multitask_dataset
from hf_syntax_mt.data.parsers import ParsedSentence
from hf_syntax_mt.evaluation.probing import attachment_score, read_trees, uas_against_conllu, word_heads_from_attention

CAT = ParsedSentence(["the", "cat", "sat", "(on)", "the", "mat"], [2, 3, 0, 6, 6, 3],
                     ["det", "nsubj", "root", "case", "det", "obl"], ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN"])  # fmt: skip


def test_linearisation_by_hand_and_round_trip():
    assert linearize_parse(CAT) == "(root (nsubj (det the) cat) sat (obl (case -LRB-on-RRB-) (det the) mat))"
    heads, deprels, words = delinearize(linearize_parse(CAT))
    assert (heads, deprels, words) == (CAT.heads, CAT.deprels, CAT.words)


def test_round_trip_on_synthetic_trees():
    from hf_syntax_mt.demo.synthetic_corpus import load_synthetic_dataset

    data = load_synthetic_dataset(50, 0, 0, max_words=30)["train"]
    for row in data:
        parse = ParsedSentence(row["source_words"], row["source_heads"], row["source_deprels"], row["source_upos"])
        assert delinearize(linearize_parse(parse)) == (parse.heads, parse.deprels, parse.words)


@pytest.mark.parametrize("bad", ["(root a", "(root a))", "(root (det) a)", "(root a b)"])
def test_malformed_linearisation_is_reported(bad):
    with pytest.raises(ValueError):
        delinearize(bad)


def test_multitask_dataset_and_task_tokens(data_fast_tokenizer):
    from datasets import Dataset

    tok = copy.deepcopy(data_fast_tokenizer)  # the fixture is shared: do not add tokens to it
    data = Dataset.from_dict({"source": ["the cat sat (on) the mat"], "target": ["le chat"],
                              "source_parse": [CAT.to_dict()]})  # fmt: skip
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(
        vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, pad_token_id=tok.pad_token_id,
        eos_token_id=0, decoder_start_token_id=tok.pad_token_id))  # fmt: skip
    ids = add_task_tokens(tok, model)
    assert model.config.task_token_ids == ids and model.config.vocab_size == len(tok)
    both = multitask_dataset(data)
    assert list(both["target"]) == ["<2trans> le chat", "<2parse> " + linearize_parse(CAT)]
    labels = tok(text_target=list(both["target"]))["input_ids"]
    assert labels[0][0] == ids["translate"] and labels[1][0] == ids["parse"]
    # generation starts with the translate token unless told otherwise
    src = tok(["le chat"], return_tensors="pt")
    out = model.generate(**src, max_new_tokens=3)
    assert int(out[0, 1]) == ids["translate"]
    out = model.generate(**src, max_new_tokens=3, forced_bos_token_id=ids["parse"])
    assert int(out[0, 1]) == ids["parse"]


def test_word_heads_from_a_hand_built_attention():
    # words: w1={0,1} w2={2} w3={3,4}; </s> at 5. Gold: w1 -> w2, w2 root, w3 -> w1
    A = torch.full((6, 6), 0.01)
    A[1, 2] = 0.9  # final subword of w1 -> first subword of w2
    A[2, 2] = 0.8  # w2 -> itself: root
    A[4, 0] = 0.7  # final subword of w3 -> first subword of w1
    A[4, 4] = 0.2
    A[0, 4] = 5.0  # non-final subwords are not read
    assert word_heads_from_attention(A, [1, 1, 2, 3, 3, 0]) == [2, 0, 1]


def test_attachment_score_counts_and_skips():
    result = attachment_score([[2, 0, None], [0, 1]], [[2, 0, 2], [0, 2]])
    assert result == {"uas": 3 / 4, "correct": 3, "scored": 4, "skipped": 1}  # 2=2, 0=0, 0=0, 1!=2
    with pytest.raises(ValueError, match="2 predicted trees but 1"):
        attachment_score([[0], [0]], [[0]])


def test_read_trees_from_a_model_whose_dbsa_head_is_forced(tmp_path, data_fast_tokenizer):
    """A DBSA head whose logits are replaced by the gold arcs must read back the gold tree (UAS 1)."""
    tok = data_fast_tokenizer
    torch.manual_seed(0)
    config = SyntaxMTConfig(
        vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, pad_token_id=tok.pad_token_id,
        eos_token_id=0, decoder_start_token_id=tok.pad_token_id, encoder_dbsa_heads=[1],
        max_position_embeddings=64)  # fmt: skip
    model = SyntaxMTForConditionalGeneration(config).eval()
    conllu = tmp_path / "gold.conllu"
    conllu.write_text(
        "# text = Le chat mange du poisson\n"
        "1\tLe\tle\tDET\t_\t_\t2\tdet\t_\t_\n2\tchat\tchat\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
        "3\tmange\tmanger\tVERB\t_\t_\t0\troot\t_\t_\n4-5\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "4\tde\tde\tADP\t_\t_\t6\tcase\t_\t_\n5\tle\tle\tDET\t_\t_\t6\tdet\t_\t_\n"
        "6\tpoisson\tpoisson\tNOUN\t_\t_\t3\tobj\t_\t_\n\n", encoding="utf-8")  # fmt: skip
    from hf_syntax_mt.data.parsers import read_conllu
    from hf_syntax_mt.data.subwords import align_parse

    gold = align_parse(tok, read_conllu(conllu)[0])["dbsa_heads"]
    attn = model.model.encoder.layers[0].self_attn
    original = attn._eager

    def forced(query, key, value, mask, dropout, *rest):
        out, probs = original(query, key, value, mask, dropout, *rest)
        probs = probs.clone()
        probs[:, 0] = torch.nn.functional.one_hot(torch.tensor(gold), probs.shape[-1]).float()
        return out, probs

    attn._eager = forced
    result = uas_against_conllu(model, tok, conllu)
    # "du" = de + le: one surface token, scored at its representative word; the other word is skipped
    assert result["uas"] == 1.0 and result["scored"] == 5 and result["skipped"] == 1
    inputs = {"input_ids": torch.tensor([[5, 6, 0]]), "word_index": torch.tensor([[1, 2, 0]])}
    with pytest.raises(ValueError, match="no encoder LISA heads"):
        read_trees(model, inputs, kind="lisa")


def test_uas_command_on_a_ud_sample(tmp_path, data_fast_tokenizer):
    """`hf-syntax-mt uas` reads a saved model and gold CoNLL-U and reports the same score as the API."""
    import json

    from hf_syntax_mt.cli import main

    tok = data_fast_tokenizer
    config = SyntaxMTConfig(
        vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, pad_token_id=tok.pad_token_id,
        eos_token_id=0, decoder_start_token_id=tok.pad_token_id, encoder_lisa_heads=[1], max_position_embeddings=64)  # fmt: skip
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    conllu = tmp_path / "g.conllu"
    conllu.write_text("# text = Le chat mange\n1\tLe\tle\tDET\t_\t_\t2\tdet\t_\t_\n2\tchat\tchat\tNOUN\t_\t_\t3\tnsubj"
                      "\t_\t_\n3\tmange\tmanger\tVERB\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")  # fmt: skip
    assert main(["uas", "--model", str(tmp_path / "m"), "--conllu", str(conllu), "--kind", "lisa",
                 "--json", str(tmp_path / "u.json")]) == 0  # fmt: skip
    written = json.loads((tmp_path / "u.json").read_text())
    expected = uas_against_conllu(model, tok, conllu, kind="lisa")
    assert written["uas"] == expected["uas"] and written["scored"] == 3
    assert "heads:lisa|gold:g.conllu" in written["signature"]


def test_lisa_reading_takes_the_root_at_its_first_subword():
    A = torch.full((4, 4), 0.01)
    A[1, 0] = 0.9  # w1 = {0, 1}: its last subword points to its own first subword -> root under LISA
    A[1, 1] = 0.5
    A[2, 0] = 0.8  # w2 -> w1
    assert word_heads_from_attention(A, [1, 1, 2, 0], root="first") == [0, 1]
    assert word_heads_from_attention(A, [1, 1, 2, 0], root="last") == [0, 1]  # A[1,1] still beats w2's column
    A[1, 1] = 0.001
    assert word_heads_from_attention(A, [1, 1, 2, 0], root="last") == [2, 1]
