"""`format_conllu` writes what `read_conllu` reads back: words, heads, relations, UPOS, spans and multi-word tokens,
with the text verbatim (odd whitespace included) and hand-checked SpaceAfter=No marks."""

from __future__ import annotations

import pytest

from hf_syntax_mt.data.parsed import ParsedSentence, format_conllu
from hf_syntax_mt.data.readers import read_conllu


def test_round_trip_with_a_multiword_token_and_odd_whitespace(tmp_path):
    text = "  Il parle du chat,\tvite."
    #        0 2  5     11 14  18 20   25
    french = ParsedSentence(
        words=["Il", "parle", "de", "le", "chat", ",", "vite", "."],
        heads=[2, 0, 5, 5, 2, 2, 2, 2],
        deprels=["nsubj", "root", "case", "det", "obl", "punct", "advmod", "punct"],
        upos=["PRON", "VERB", "ADP", "DET", "NOUN", "PUNCT", "ADV", "PUNCT"],
        text=text,
        spans=[(2, 4), (5, 10), (11, 13), (11, 13), (14, 18), (18, 19), (20, 24), (24, 25)],
        mwt=[(2, 4)],
    )
    block = format_conllu(french, "fr-1")
    lines = block.splitlines()
    assert lines[:2] == ["# sent_id = fr-1", "# text =   Il parle du chat,\tvite."]
    assert lines[4] == "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_"
    assert lines[5].split("\t")[:8] == ["3", "de", "_", "ADP", "_", "_", "5", "case"]
    # SpaceAfter=No: "chat" before ",", "vite" before ".", and "." at the end of the text
    no_space = [line.split("\t")[1] for line in lines[2:] if line.endswith("SpaceAfter=No")]
    assert no_space == ["chat", "vite", "."]
    (tmp_path / "x.conllu").write_text(block + block.replace("fr-1", "fr-2"), encoding="utf-8")
    back = read_conllu(tmp_path / "x.conllu")
    assert len(back) == 2
    for got in back:
        assert (got.words, got.heads, got.deprels, got.upos, got.text, got.spans, got.mwt) == (
            french.words, french.heads, french.deprels, french.upos, french.text, french.spans, french.mwt)  # fmt: skip
    assert french.to_conllu("fr-1") == block


def test_an_empty_sentence_or_a_tab_inside_a_word_is_refused():
    with pytest.raises(ValueError, match="sentence e-1: a sentence without words"):
        format_conllu(ParsedSentence([], [], [], [], text=""), "e-1")
    with pytest.raises(ValueError, match=r"sentence t-1: word 2 'b\\tc' is empty or holds a tab"):
        format_conllu(ParsedSentence(["a", "b\tc"], [0, 1], ["root", "dep"], ["X", "X"]), "t-1")


def test_an_empty_sentence_is_a_block_of_comments_that_reads_back_as_an_empty_sentence(tmp_path):
    empty = ParsedSentence([], [], [], [], text="", spans=[])
    assert format_conllu(empty, "2", empty=True) == "# sent_id = 2\n# text = \n\n"
    with pytest.raises(ValueError, match="a sentence without words has no CoNLL-U block"):
        format_conllu(empty, "2")  # the default keeps refusing it
    (tmp_path / "x.conllu").write_text(
        "# newdoc id = d1\n\n"  # a header block without `# text`: no sentence
        "# sent_id = 1\n# text = Hi\n1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\tSpaceAfter=No\n\n"
        "# sent_id = 2\n# text = \n\n"
        "# sent_id = 3\n# text =   \n\n"
        "# sent_id = 4\n# text = Yes\n1\tYes\t_\tINTJ\t_\t_\t0\troot\t_\tSpaceAfter=No\n\n"
        "# sent_id = 5\n# text = ",  # the last block, without the final blank line
        encoding="utf-8",
    )
    got = read_conllu(tmp_path / "x.conllu")
    assert [(s.words, s.text) for s in got] == [(["Hi"], "Hi"), ([], ""), ([], "  "), (["Yes"], "Yes"), ([], "")]
    assert got[1] == empty
