"""Issue 65, item 5: a parse-cache shard is checked record by record (`data.cache_shards.read_shard`): a record is used
only if its key is its text's and its parse's words are that text's tokens (`parse_matches_text`); a line that is
not a record (one of 100,000 ``[`` included) is dropped from its shard with one warning naming the shard and the
line. Failed before: a record whose key and text were right but whose parse was of another sentence was returned,
and the deep line raised RecursionError naming no file, on every later run."""

import hashlib
import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_syntax_mt.data.cache_shards import parse_matches_text
from hf_syntax_mt.data.parsed import ParsedSentence
from hf_syntax_mt.data.parsers import CachedParser, ConllParser

TEXTS = ["le chat dort .", "un chien court vite .", "il pleut ."]
LOGGER = "hf_syntax_mt.data.parsers"


def key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def chain(words: list[str], text: str | None, spans=None) -> dict:
    return ParsedSentence(words, [0] + [1] * (len(words) - 1), ["_"] * len(words), ["_"] * len(words), text=text,
                          spans=spans).to_dict()  # fmt: skip


@pytest.fixture(scope="module")
def conllu(tmp_path_factory):
    rows = []
    for text in TEXTS:
        rows.append(f"# text = {text}\n" + "".join(f"{i}\t{w}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t_\t_\t_\n"
                                                    for i, w in enumerate(text.split(), start=1)))  # fmt: skip
    path = tmp_path_factory.mktemp("conllu") / "p.conllu"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_parse_matches_text_against_hand_built_cases():
    """Words located in the text (with or without spans), a multi-word token by its span, another text's words."""
    text = "Il mange du pain."
    spans = [(0, 2), (3, 8), (9, 11), (9, 11), (12, 16), (16, 17)]
    words = ["Il", "mange", "de", "le", "pain", "."]
    mwt = ParsedSentence(words, [2, 0, 5, 5, 2, 2], ["_"] * 6, ["_"] * 6, text=text, spans=spans, mwt=[(2, 4)])
    assert parse_matches_text(mwt, text)
    assert parse_matches_text(mwt, "Il  mange du pain. ")  # whitespace differs: a CoNLL-U lookup's text
    assert not parse_matches_text(mwt, "Il mange du riz.")
    plain = ParsedSentence.from_dict(chain(["le", "chat", "dort", "."], None))
    assert parse_matches_text(plain, "le chat dort .") and parse_matches_text(plain, " le chat  dort. ")
    assert not parse_matches_text(plain, "le chat dort . vite")  # a token left over
    assert not parse_matches_text(plain, "le chien dort .")
    assert not parse_matches_text(plain, "")  # words for an empty text
    assert parse_matches_text(ParsedSentence([], [], [], [], text=" "), " ")
    wrong_span = ParsedSentence.from_dict(chain(["le", "chat"], "le chat", spans=[(0, 2), (2, 7)]))
    assert not parse_matches_text(wrong_span, "le chat")  # the span of "chat" is " chat"
    gap = ParsedSentence.from_dict(chain(["le", "dort"], "le chat dort", spans=[(0, 2), (8, 12)]))
    assert not parse_matches_text(gap, "le chat dort")  # "chat" is in no word


def test_a_parse_of_another_sentence_under_the_right_key_and_text_is_not_used(conllu, tmp_path, caplog):
    first = CachedParser(ConllParser(conllu), tmp_path / "cache")
    expected = first.parse(TEXTS)
    # the record of TEXTS[1] with its own key and text, but the parse of TEXTS[0] (its words, and its text set right)
    planted = {"key": key(TEXTS[1]), "text": TEXTS[1], "parse": {**expected[0].to_dict(), "text": TEXTS[1],
                                                                 "spans": None}}  # fmt: skip
    shard = first.shard_dir / "zz-planted.jsonl"
    shard.write_text(json.dumps(planted) + "\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = CachedParser(ConllParser(conllu), tmp_path / "cache").parse(TEXTS)
    assert [p.words for p in again] == [t.split() for t in TEXTS]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"dropped 1 record(s) of the shard {shard}" in warning and "words are not their text's tokens" in warning
    assert not shard.exists()  # it held that record only: dropped with it


def test_a_deep_line_is_dropped_with_a_warning_naming_the_shard_and_line(conllu, tmp_path, caplog):
    first = CachedParser(ConllParser(conllu), tmp_path / "cache")
    good = [json.dumps({"key": key(t), "text": t, "parse": p.to_dict()}) for t, p in zip(TEXTS, first.parse(TEXTS),
                                                                                         strict=True)]  # fmt: skip
    for old in first.shards():
        old.unlink()
    shard = first.shard_dir / "00-deep.jsonl"
    shard.write_text("\n".join([good[0], "[" * 100_000, good[1]]) + "\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = CachedParser(ConllParser(conllu), tmp_path / "cache")
        assert [p.words for p in again.parse(TEXTS)] == [t.split() for t in TEXTS]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"dropped 1 line(s) of the shard {shard} that are not parse records (line 2: RecursionError)" in warning
    assert shard.read_text().splitlines() == good[:2]  # the shard keeps its good records
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        CachedParser(ConllParser(conllu), tmp_path / "cache").parse(TEXTS)
    assert not caplog.records  # dropped once, not warned on every later run


# a shard line: a record of one of the texts (its own parse, or another text's words under its key and text), a line
# that is not a record (deep nesting, torn JSON, any JSON value, bytes that are text), or a record with damaged fields
RIGHT = st.sampled_from(range(len(TEXTS))).map(lambda i: ("good", i))
SWAPPED = st.tuples(st.sampled_from(range(len(TEXTS))), st.sampled_from(range(len(TEXTS)))).filter(
    lambda ij: ij[0] != ij[1]).map(lambda ij: ("swapped", ij))  # fmt: skip
DEEP = st.integers(1_000, 50_000).map(lambda n: ("deep", n))
TORN = st.integers(1, 60).map(lambda n: ("torn", n))
JUNK = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
               max_size=20).map(lambda t: ("junk", t))  # fmt: skip
FIELDS = st.fixed_dictionaries({"key": st.sampled_from([key(t) for t in TEXTS]) | st.integers() | st.none(),
                                "text": st.sampled_from(TEXTS) | st.integers() | st.none(),
                                "parse": st.none() | st.integers() | st.just({"words": "abc", "heads": [0]})}
                               ).map(lambda d: ("fields", d))  # fmt: skip


def line_of(kind, value, records) -> str:
    if kind == "good":
        return records[value]
    if kind == "swapped":  # the words of text j under the key and text of text i
        i, j = value
        return json.dumps({"key": key(TEXTS[i]), "text": TEXTS[i], "parse": chain(TEXTS[j].split(), TEXTS[i])})
    if kind == "deep":
        return "[" * value
    if kind == "torn":
        return records[0][:value]
    if kind == "junk":
        return value
    return json.dumps(value)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(lines=st.lists(RIGHT | SWAPPED | DEEP | TORN | JUNK | FIELDS, max_size=6))
def test_whatever_a_shard_holds_each_text_gets_its_own_parse(conllu, tmp_path_factory, lines):
    """Each text's parse is its own; a warning names the shard wherever a line was dropped; what stays in the shard
    is exactly its good records, and a second read warns no more."""
    cache = tmp_path_factory.mktemp("cache")
    parser = CachedParser(ConllParser(conllu), cache)
    records = [json.dumps({"key": key(t), "text": t, "parse": chain(t.split(), t)}) for t in TEXTS]
    parser.shard_dir.mkdir(parents=True)
    shard = parser.shard_dir / "000.jsonl"
    written = [line_of(kind, value, records) for kind, value in lines]
    shard.write_text("".join(line + "\n" for line in written))
    handler = _Records()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        got = parser.parse(TEXTS)
        assert [p.words for p in got] == [t.split() for t in TEXTS]
        good = [line for line in written if line in records]
        if len(good) < len(written):
            assert any(str(shard) in message for message in handler.messages)
            assert (shard.read_text().splitlines() if shard.exists() else []) == good
        handler.messages.clear()
        CachedParser(ConllParser(conllu), cache).parse(TEXTS)
        assert not handler.messages
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())
