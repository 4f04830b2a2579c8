"""Parsers: ParsedSentence validation, CoNLL-U reading, spaCy (real fr_core_news_sm), stanza errors, cache."""

from __future__ import annotations

import gzip
import itertools
import json
import pickle

import needs
import pytest

from hf_syntax_mt.data.parsers import (
    CachedParser,
    ConllParser,
    MissingParseError,
    ParsedSentence,
    Parser,
    ParserNotAvailableError,
    SpacyParser,
    StanzaParser,
    get_parser,
    merge_sentences,
    read_conllu,
)

UD_FR = "ud/UD_French-GSD/fr_gsd-ud-test.conllu"  # in ../shared/data (needs.shared_data)
M30K_VAL_FR = "multi30k-parsed/val.fr.conllu.gz"


def _sent(**overrides):
    d = dict(words=["a", "b"], heads=[2, 0], deprels=["det", "root"], upos=["DET", "NOUN"])
    d.update(overrides)
    return ParsedSentence(**d)


# ---------------------------------------------------------------------------------------------------------------
# ParsedSentence
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"heads": [2]}, "heads has 1 entries but words has 2"),
        ({"deprels": ["det"]}, "deprels has 1"),
        ({"upos": ["DET", "NOUN", "X"]}, "upos has 3"),
        ({"heads": [3, 0]}, "heads\\[0\\] = 3 is out of range 0..2"),
        ({"heads": [-1, 0]}, "out of range"),
        ({"heads": [2, 1]}, "no root"),
        ({"heads": [1, 0]}, "points to the word itself"),
        ({"spans": [(0, 1)]}, "spans has 1 entries"),
        ({"text": "a b", "spans": [(0, 1), (2, 9)]}, "spans\\[1\\]"),
        ({"mwt": [(0, 3)]}, "mwt range"),
        ({"text": "a b", "spans": [(0, 1), (2, 3)], "mwt": [(0, 2)]}, "share one span"),
    ],
)
def test_parsed_sentence_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        _sent(**overrides)


def test_parsed_sentence_allows_empty_and_roundtrips():
    assert len(ParsedSentence([], [], [], [])) == 0
    s = _sent(heads=[0, 1], text="a b", spans=[(0, 1), (2, 3)])
    assert ParsedSentence.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_merge_sentences_attaches_later_roots_to_first_root():
    a = ParsedSentence(
        ["A", "dort", "."], [2, 0, 2], ["nsubj", "root", "punct"], ["X"] * 3, spans=[(0, 1), (2, 6), (6, 7)]
    )
    b = ParsedSentence(["B", "rit"], [2, 0], ["nsubj", "root"], ["X"] * 2, spans=[(8, 9), (10, 13)])
    m = merge_sentences([a, b], text="A dort. B rit")
    assert m.heads == [2, 0, 2, 5, 2]
    assert m.deprels == ["nsubj", "root", "punct", "nsubj", "parataxis"]
    assert m.spans[3] == (8, 9)


# ---------------------------------------------------------------------------------------------------------------
# CoNLL-U
# ---------------------------------------------------------------------------------------------------------------
CONLLU = """# sent_id = 1
# text = Il parle du chat.
1\tIl\til\tPRON\t_\t_\t2\tnsubj\t_\t_
2\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_
3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_
3\tde\tde\tADP\t_\t_\t5\tcase\t_\t_
4\tle\tle\tDET\t_\t_\t5\tdet\t_\t_
5\tchat\tchat\tNOUN\t_\t_\t2\tobl\t_\tSpaceAfter=No
5.1\tvu\tvoir\tVERB\t_\t_\t_\t_\t2:conj\t_
6\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_

# sent_id = 2
1\tDeux\tdeux\tNUM\t_\t_\t2\tnummod\t_\tSpacesBefore=\\s
2\tchats\tchat\tNOUN\t_\t_\t0\troot\t_\tSpacesAfter=\\s\\s
3\tdorment\tdormir\tVERB\t_\t_\t2\tacl\t_\tSpaceAfter=No
4\t!\t!\tPUNCT\t_\t_\t2\tpunct\t_\tSpaceAfter=No
"""


@pytest.fixture()
def conllu_file(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    return path


def test_read_conllu_mwt_empty_nodes_and_text(conllu_file):
    s1, s2 = read_conllu(conllu_file)
    assert s1.words == ["Il", "parle", "de", "le", "chat", "."]  # the empty node 5.1 is skipped
    assert s1.heads == [2, 0, 5, 5, 2, 2]
    assert s1.mwt == [(2, 4)]
    assert s1.spans == [(0, 2), (3, 8), (9, 11), (9, 11), (12, 16), (16, 17)]
    assert s1.text[9:11] == "du"
    # no "# text": rebuilt from SpacesBefore / SpacesAfter / SpaceAfter=No
    assert s2.text == " Deux chats  dorment!"
    assert [s2.text[a:b] for a, b in s2.spans] == ["Deux", "chats", "dorment", "!"]


def test_read_conllu_gz(tmp_path):
    path = tmp_path / "small.conllu.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(CONLLU)
    assert [s.words[0] for s in read_conllu(path)] == ["Il", "Deux"]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("2\tparle\tparler\tVERB\t_\t_\t0\troot\t_", "small.conllu:4: expected 10 tab-separated columns, found 9"),
        ("2\tparle\tparler\tVERB\t_\t_\tX\troot\t_\t_", "small.conllu:4: HEAD must be an integer"),
        ("2\tparle\tparler\tVERB\t_\t_\t9\troot\t_\t_", "small.conllu:4: HEAD 9 is out of range"),
        ("7\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_", "small.conllu:4: word ID 7 is out of sequence"),
        ("x\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_", "small.conllu:4: invalid word ID"),
    ],
)
def test_read_conllu_errors_name_file_and_line(tmp_path, bad_line, message):
    lines = CONLLU.split("\n")
    lines[3] = bad_line
    path = tmp_path / "small.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_conllu(path)


def test_read_conllu_text_mismatch_names_line(tmp_path):
    path = tmp_path / "small.conllu"
    path.write_text(CONLLU.replace("# text = Il parle du chat.", "# text = Elle parle du chat."), encoding="utf-8")
    with pytest.raises(ValueError, match="small.conllu:3: token 'Il' not found"):
        read_conllu(path)


def test_read_real_ud_french_gsd():
    sentences = read_conllu(needs.shared_data(UD_FR))
    assert len(sentences) == 416
    with_mwt = [s for s in sentences if s.mwt]
    assert with_mwt
    for s in sentences:
        assert sum(h == 0 for h in s.heads) == 1
        for a, b in s.mwt or []:
            surface = s.text[s.spans[a][0] : s.spans[a][1]]
            assert b - a >= 2 and surface and not any(c.isspace() for c in surface)
            assert all(s.spans[w] == s.spans[a] for w in range(a, b))
        for w, (a, b) in enumerate(s.spans):
            if not any(x <= w < y for x, y in s.mwt or []):
                assert s.text[a:b] == s.words[w]
    du = next(s for s in with_mwt if "du" in s.text.split())
    (a, b), *_ = du.mwt
    assert du.words[a:b] == ["de", "le"]


def test_read_real_multi30k_slice():
    with gzip.open(needs.shared_data(M30K_VAL_FR), "rt", encoding="utf-8") as f:
        head = "".join(itertools.islice(f, 200))
    blocks = head.split("\n\n")[:-1]  # complete blocks only
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".conllu", delete=False, encoding="utf-8") as out:
        out.write("\n\n".join(blocks) + "\n\n")
    sentences = read_conllu(out.name)
    assert len(sentences) == len(blocks) > 5
    for s in sentences:
        assert [s.text[a:b] for a, b in s.spans] == s.words


def test_conll_parser_lookup_and_missing(conllu_file, tmp_path):
    parser = ConllParser(conllu_file)
    s1, s2, empty = parser.parse(["Il parle du chat.", "  Deux   chats dorment!  ", ""])
    assert s1.words[2:4] == ["de", "le"]
    assert s2.words == ["Deux", "chats", "dorment", "!"]  # whitespace-normalised match
    assert len(empty) == 0
    with pytest.raises(MissingParseError, match="no parse for text 'Inconnu.' in CoNLL-U file"):
        parser.parse(["Inconnu."])
    with pytest.raises(KeyError):
        parser.parse(["Inconnu."])
    assert parser.signature().startswith("conllu:small.conllu@")
    clone = get_parser(**json.loads(json.dumps(parser.to_config())))
    assert clone.signature() == parser.signature()
    assert pickle.loads(pickle.dumps(parser)).parse(["Il parle du chat."])[0] == s1
    with pytest.raises(FileNotFoundError, match="nope.conllu"):
        ConllParser(tmp_path / "nope.conllu")


# ---------------------------------------------------------------------------------------------------------------
# spaCy (real French pipeline) and stanza (no models installed here)
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spacy_fr():
    needs.spacy_model("fr_core_news_sm")
    return SpacyParser("fr_core_news_sm")


def test_spacy_parser_real_french(spacy_fr):
    texts = ["Le chat mange du poisson au marché.", "  Deux  hommes\tmarchent. ", "", "Il pleut. Elle rit."]
    out = spacy_fr.parse(texts)
    assert len(out) == 4
    s = out[0]
    assert s.words == ["Le", "chat", "mange", "du", "poisson", "au", "marché", "."]
    assert [s.text[a:b] for a, b in s.spans] == s.words
    assert s.mwt is None
    assert sum(h == 0 for h in s.heads) == 1
    # whitespace tokens are dropped, spans still point into the original text
    ws = out[1]
    assert ws.words == ["Deux", "hommes", "marchent", "."]
    assert [ws.text[a:b] for a, b in ws.spans] == ws.words
    assert len(out[2]) == 0
    # two sentences in one line: still one tree with one root
    assert sum(h == 0 for h in out[3].heads) == 1
    assert spacy_fr.signature() == "spacy:fr_core_news_sm-3.8.0"


def test_spacy_parser_config_and_pickle(spacy_fr):
    config = spacy_fr.to_config()
    assert json.loads(json.dumps(config)) == config and config["backend"] == "spacy"
    clone = pickle.loads(pickle.dumps(spacy_fr))
    assert clone._nlp is None  # the pipeline is reloaded lazily
    assert clone.parse(["Le chat dort."])[0] == spacy_fr.parse(["Le chat dort."])[0]
    assert isinstance(get_parser(**config), SpacyParser)


@needs.skip_without("spacy")
def test_spacy_missing_model_says_how_to_install():
    with pytest.raises(ParserNotAvailableError, match="python -m spacy download xx_no_such_model"):
        SpacyParser("xx_no_such_model")
    # issue 56: no bare `pip install` of a name: on PyPI such packages are third-party uploads
    with pytest.raises(OSError, match="third-party uploads: install one only pinned by its sha256") as caught:
        SpacyParser("xx_no_such_model")
    assert "pip install" not in str(caught.value)


@needs.skip_without("stanza")
def test_stanza_missing_model_says_how_to_install(tmp_path):
    with pytest.raises(ParserNotAvailableError, match=r"stanza\.download\('fr'"):
        StanzaParser("fr", model_dir=str(tmp_path / "stanza_resources"))
    with pytest.raises(ParserNotAvailableError, match="pip install stanza"):
        get_parser("stanza", lang="de", model_dir=str(tmp_path))


def test_stanza_conversion_of_mwt_and_multiple_sentences():
    """The stanza Document -> ParsedSentence conversion, on a hand-built stanza Document (no model needed)."""
    needs.package("stanza")
    from stanza.models.common.doc import Document

    text = "Il parle du chat. Elle rit."
    conll = [
        [
            {"id": 1, "text": "Il", "head": 2, "deprel": "nsubj", "upos": "PRON", "start_char": 0, "end_char": 2},
            {"id": 2, "text": "parle", "head": 0, "deprel": "root", "upos": "VERB", "start_char": 3, "end_char": 8},
            {"id": (3, 4), "text": "du", "start_char": 9, "end_char": 11},
            {"id": 3, "text": "de", "head": 5, "deprel": "case", "upos": "ADP"},
            {"id": 4, "text": "le", "head": 5, "deprel": "det", "upos": "DET"},
            {"id": 5, "text": "chat", "head": 2, "deprel": "obl", "upos": "NOUN", "start_char": 12, "end_char": 16},
            {"id": 6, "text": ".", "head": 2, "deprel": "punct", "upos": "PUNCT", "start_char": 16, "end_char": 17},
        ],
        [
            {"id": 1, "text": "Elle", "head": 2, "deprel": "nsubj", "upos": "PRON", "start_char": 18, "end_char": 22},
            {"id": 2, "text": "rit", "head": 0, "deprel": "root", "upos": "VERB", "start_char": 23, "end_char": 26},
            {"id": 3, "text": ".", "head": 2, "deprel": "punct", "upos": "PUNCT", "start_char": 26, "end_char": 27},
        ],
    ]
    doc = Document(conll, text=text)
    s = StanzaParser._convert(doc, text)
    assert s.words == ["Il", "parle", "de", "le", "chat", ".", "Elle", "rit", "."]
    assert s.heads == [2, 0, 5, 5, 2, 2, 8, 2, 8]
    assert s.deprels[7] == "parataxis"
    assert s.mwt == [(2, 4)]
    assert s.spans[2] == s.spans[3] == (9, 11)


def test_get_parser_unknown_backend():
    with pytest.raises(
        ValueError, match=r"unknown parser backend 'udpipe'; valid backends: \['conllu', 'spacy', 'stanza'\]"
    ):
        get_parser("udpipe")


# ---------------------------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------------------------
class CountingParser(Parser):
    """Whitespace 'parser' (first word is the root, every other word depends on it) that counts its calls."""

    name = "counting"
    model = "ws"

    def __init__(self, log_file):
        self.log_file = str(log_file)

    def parse(self, texts):
        with open(self.log_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(texts) + "\n")
        out = []
        for t in texts:
            words = t.split()
            heads = [0] + [1] * (len(words) - 1)
            out.append(ParsedSentence(words, heads, ["dep"] * len(words), ["X"] * len(words), text=t))
        return out

    def signature(self):
        return "counting:ws-1"

    def to_config(self):
        return {"backend": "counting"}


def _calls(log_file):
    try:
        return [json.loads(line) for line in open(log_file, encoding="utf-8")]
    except FileNotFoundError:
        return []


def test_cached_parser_parses_each_text_once(tmp_path):
    log = tmp_path / "calls.jsonl"
    cached = CachedParser(CountingParser(log), tmp_path / "cache")
    first = cached.parse(["a b c", "d e", "a b c"])
    assert _calls(log) == [["a b c", "d e"]]  # duplicates parsed once
    # a fresh wrapper (new process) reads the cache file: nothing new is parsed
    again = CachedParser(CountingParser(log), tmp_path / "cache").parse(["d e", "a b c", "f"])
    assert _calls(log) == [["a b c", "d e"], ["f"]]
    assert again[:2] == [first[1], first[0]]
    assert cached.signature() == "counting:ws-1"
    restored = pickle.loads(pickle.dumps(cached))
    assert restored._memory is None and restored.parse(["f"])[0].words == ["f"]
    assert len(_calls(log)) == 2
