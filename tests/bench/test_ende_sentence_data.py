"""`benchmarks/data/ende_sentence_data.build` on a hand-made miniature of ../shared/data: document ids (each Multi30k line
its own document, ids unique across parts), the Multi30k parses taken from their file and the rest parsed, the
rebuild skipped only when inputs, parser and outputs are unchanged, and mismatched files refused with file and line.
A stub parser stands in for spaCy (one test runs the real spaCy model when it is installed)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import needs
import pytest

from hf_syntax_mt.data.parsed import ParsedSentence, format_conllu
from hf_syntax_mt.data.readers import read_conllu, read_doc_ids, read_lines

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.data import ende_sentence_data as builder  # noqa: E402


class StubParser:
    """Whitespace words, the first one the root, every other word attached to it as `dep`; counts its calls."""

    name, model = "stub", "stub"

    def __init__(self, version: str = "1"):
        self.version, self.calls = version, []

    def signature(self) -> str:
        return f"stub-{self.version}"

    def parse(self, texts):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            words, spans, pos = [], [], 0
            for w in text.split():
                start = text.index(w, pos)
                words.append(w)
                spans.append((start, start + len(w)))
                pos = start + len(w)
            heads = [0] + [1] * (len(words) - 1)
            out.append(ParsedSentence(words, heads, ["root"] + ["dep"] * (len(words) - 1), ["X"] * len(words),
                                      text=text, spans=spans))  # fmt: skip
        return out


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


M30K_EN = ["A dog runs .", "Two men sit ."]
M30K_DE = ["Ein Hund rennt .", "Zwei Männer sitzen ."]


@pytest.fixture
def data(tmp_path) -> Path:
    """Every file the builder reads, a few lines each."""
    d = tmp_path / "data"
    _write(d / "multi30k" / "train.en", M30K_EN)
    _write(d / "multi30k" / "train.de", M30K_DE)
    # hand-made parses with the relation `nsubj`, which the stub parser never produces
    parses = [ParsedSentence(s.split(), [2, 0, 2, 2], ["det", "root", "nsubj", "punct"], ["DET", "VERB", "X", "PUNCT"],
                             text=s, spans=None) for s in ("A dog runs .",)]  # fmt: skip
    parses.append(ParsedSentence(["Two", "men", "sit", "."], [2, 3, 0, 3], ["nummod", "nsubj", "root", "punct"],
                                 ["NUM", "NOUN", "VERB", "PUNCT"], text="Two men sit ."))  # fmt: skip
    (d / "multi30k-parsed").mkdir(parents=True)
    with gzip.open(d / "multi30k-parsed" / "train.en.conllu.gz", "wt", encoding="utf-8") as f:
        f.write("".join(format_conllu(p, f"train-{k}") for k, p in enumerate(parses, start=1)))
    doc = d / "docnmt-en-de"
    for stem, docs in (("iwslt17.dev", ["iwslt17.dev.d0000"] * 2 + ["iwslt17.dev.d0001"]),
                       ("europarl7.dev", ["europarl7.dev.d0000"]),
                       ("iwslt17.test", ["iwslt17.test.d0000"] * 2), ("europarl7.test", ["europarl7.test.d0000"]),
                       ("newstest2015", ["newstest2015.d0000"])):  # fmt: skip
        _write(doc / f"{stem}.en", [f"{stem} English sentence {k} ." for k in range(len(docs))])
        _write(doc / f"{stem}.de", [f"{stem} deutscher Satz {k} ." for k in range(len(docs))])
        _write(doc / f"{stem}.docid", docs)
    bc = d / "bcontrast-en-de"
    for split, docs in (("train", ["dlg-a", "dlg-a", "dlg-b"]), ("test", ["dlg-t", "dlg-t"])):
        _write(bc / f"{split}.en", [f"Chat {split} {k} ." for k in range(len(docs))])
        _write(bc / f"{split}.de", [f"Chat {split} {k} auf Deutsch ." for k in range(len(docs))])
        _write(bc / f"{split}.docid", docs)
    return d


def test_training_set_keeps_documents_and_takes_multi30k_parses_from_their_file(data, tmp_path):
    parser = StubParser()
    result = builder.build(data, tmp_path / "cache", parser=parser)
    files = result["files"]["train"]
    assert read_lines(files["en"]) == M30K_EN + [f"iwslt17.dev English sentence {k} ." for k in range(3)] + [
        "europarl7.dev English sentence 0 ."] + [f"Chat train {k} ." for k in range(3)]  # fmt: skip
    expected_ids = ["multi30k.train.l000001", "multi30k.train.l000002", "iwslt17.dev.d0000", "iwslt17.dev.d0000",
                    "iwslt17.dev.d0001", "europarl7.dev.d0000", "bcontrast.train.dlg-a", "bcontrast.train.dlg-a",
                    "bcontrast.train.dlg-b"]  # fmt: skip
    assert read_doc_ids(files["docid"], 9) == expected_ids
    assert read_lines(files["part"]) == ["multi30k.train"] * 2 + ["iwslt17.dev"] * 3 + ["europarl7.dev"] + [
        "bcontrast.train"] * 3  # fmt: skip
    trees = read_conllu(files["conllu"])
    assert [t.text for t in trees] == read_lines(files["en"])
    assert trees[1].deprels == ["nummod", "nsubj", "root", "punct"] and trees[1].heads == [2, 3, 0, 3]  # from the file
    assert trees[2].deprels == ["root", "dep", "dep", "dep", "dep"]  # parsed by the stub
    # the Multi30k lines are not parsed again; every other English line is, once
    parsed = [t for call in parser.calls for t in call]
    assert not set(M30K_EN) & set(parsed) and "Chat test 1 ." in parsed and len(parsed) == len(set(parsed))
    assert result["train"] == {"pairs": 9, "documents": 7}
    test = result["files"]["bcontrast.test"]
    assert read_doc_ids(test["docid"], 2) == ["bcontrast.test.dlg-t"] * 2
    assert [t.text for t in read_conllu(test["conllu"])] == ["Chat test 0 .", "Chat test 1 ."]
    manifest = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert manifest["parser"] == "stub-1" and manifest["counts"]["iwslt17.dev"]["documents"] == 2
    assert manifest["inputs"]["multi30k/train.en"]["sha256"] == builder.sha256_file(data / "multi30k" / "train.en")


def test_rebuild_is_skipped_only_when_inputs_parser_and_outputs_are_unchanged(data, tmp_path):
    cache = tmp_path / "cache"
    first = builder.build(data, cache, parser=StubParser())
    again = StubParser()
    assert builder.build(data, cache, parser=again)["skipped"] and again.calls == []
    assert not builder.build(data, cache, parser=StubParser(version="2"))["skipped"]  # another parser
    assert builder.build(data, cache, parser=StubParser(version="2"))["skipped"]
    _write(data / "bcontrast-en-de" / "test.de", ["Chat geändert .", "Chat test 1 auf Deutsch ."])  # an input
    changed = builder.build(data, cache, parser=StubParser(version="2"))
    assert not changed["skipped"] and read_lines(cache / "bcontrast.test.de")[0] == "Chat geändert ."
    (cache / "train.docid").write_text("broken\n", encoding="utf-8")  # an output
    assert not builder.build(data, cache, parser=StubParser(version="2"))["skipped"]
    assert read_lines(cache / "train.docid")[0] == "multi30k.train.l000001"
    assert first["outputs"]["train.en"] == builder.build(data, cache, parser=StubParser())["outputs"]["train.en"]


def test_a_target_file_one_line_short_is_refused_naming_the_files_and_the_line(data, tmp_path):
    _write(data / "docnmt-en-de" / "iwslt17.dev.de", ["only one line ."])
    with pytest.raises(ValueError) as e:
        builder.build(data, tmp_path / "cache", parser=StubParser())
    message = str(e.value)
    assert "iwslt17.dev.de has 1 lines" in message and "iwslt17.dev.en has 3" in message
    assert "line 2 of" in message and str(data / "docnmt-en-de" / "iwslt17.dev.en") in message
    assert not (tmp_path / "cache" / "manifest.json").exists()


def test_a_docid_file_of_the_wrong_length_and_parses_of_another_file_are_refused(data, tmp_path):
    _write(data / "bcontrast-en-de" / "train.docid", ["dlg-a", "dlg-a", "dlg-b", "dlg-c"])
    with pytest.raises(ValueError, match=r"train\.docid has 4 lines but .*train\.en has 3: line 4 of .*train\.docid"):
        builder.build(data, tmp_path / "cache", parser=StubParser())
    _write(data / "bcontrast-en-de" / "train.docid", ["dlg-a", "dlg-b", "dlg-a"])
    with pytest.raises(ValueError, match=r"train\.docid:3: document id 'dlg-a' reappears"):
        builder.build(data, tmp_path / "cache", parser=StubParser())
    _write(data / "bcontrast-en-de" / "train.docid", ["dlg-a", "dlg-a", "dlg-b"])
    _write(data / "multi30k" / "train.en", ["A dog runs .", "Two women sit ."])
    with pytest.raises(ValueError, match=r"sentence 2 of .*train\.en\.conllu\.gz has the text 'Two men sit \.' but line "
                                         r"2 of .*train\.en is 'Two women sit \.'"):  # fmt: skip
        builder.build(data, tmp_path / "cache", parser=StubParser())


def test_empty_training_pairs_are_dropped_and_an_empty_test_line_is_refused(data, tmp_path):
    _write(data / "bcontrast-en-de" / "train.en", ["Chat train 0 .", "  ", "Chat train 2 ."])
    result = builder.build(data, tmp_path / "cache", parser=StubParser())
    assert result["counts"]["bcontrast.train"] == {"pairs": 2, "dropped_empty": 1, "documents": 2, "parsed_here": True}
    assert read_lines(result["files"]["train"]["en"])[-2:] == ["Chat train 0 .", "Chat train 2 ."]
    assert read_lines(result["files"]["train"]["docid"])[-2:] == ["bcontrast.train.dlg-a", "bcontrast.train.dlg-b"]
    _write(data / "docnmt-en-de" / "europarl7.test.de", [""])
    with pytest.raises(ValueError, match=r"europarl7\.test\.de:1: empty line in the evaluation set europarl7\.test"):
        builder.build(data, tmp_path / "cache2", parser=StubParser())


def test_spacy_gives_one_tree_per_line_even_for_two_sentences():
    needs.spacy_model(builder.SPACY_MODEL)
    from hf_syntax_mt.data.parsers import SpacyParser

    parser = SpacyParser(builder.SPACY_MODEL)
    lines = ["It rains. Then it stops!", "  Two  spaces here .", "It rains. Then it stops!"]
    parses, split = builder.parse_lines(parser, lines)
    assert [p.heads.count(0) for p in parses] == [1, 1, 1] and split == 0
    assert parses[1].words == ["Two", "spaces", "here", "."]  # whitespace tokens dropped
    block = format_conllu(parses[1], "x-1")
    assert block.splitlines()[1] == "# text =   Two  spaces here ."


def _german_parses(data: Path) -> None:
    """multi30k-parsed's German trees of the two captions, with `nsubj` (which the stub parser never produces)."""
    parses = [ParsedSentence(s.split(), [2, 3, 0, 3], ["det", "nsubj", "root", "punct"], ["DET", "NOUN", "VERB", "PUNCT"],
                             text=s) for s in M30K_DE]  # fmt: skip
    with gzip.open(data / "multi30k-parsed" / "train.de.conllu.gz", "wt", encoding="utf-8") as f:
        f.write("".join(format_conllu(p, f"train-{k}") for k, p in enumerate(parses, start=1)))


def test_german_trees_come_from_multi30k_parsed_for_its_part_and_from_the_parser_for_the_rest(data, tmp_path):
    _german_parses(data)
    cache, parser = tmp_path / "cache", StubParser("de")
    result = builder.build_german(data, cache, parser=parser, english_parser=StubParser())
    files = result["files"]
    german = read_lines(files["train"]["de"])
    trees = read_conllu(files["train"]["de_conllu"])
    # one tree per German training line, with that line as its text; Multi30k's two from the file, the rest parsed
    assert [t.text for t in trees] == german and len(german) == 9
    assert [t.deprels for t in trees[:2]] == [["det", "nsubj", "root", "punct"]] * 2
    assert all(set(t.deprels) <= {"root", "dep"} for t in trees[2:])
    validation = read_conllu(files["newstest2015"]["de_conllu"])
    assert [t.text for t in validation] == ["newstest2015 deutscher Satz 0 ."]
    parsed = [t for call in parser.calls for t in call]
    assert not set(M30K_DE) & set(parsed) and len(parsed) == len(set(parsed)) == 8  # 7 training lines + validation
    assert result["from_multi30k_parsed"] == 2 and result["parser"] == "stub-de"
    # skipped when nothing changed; another parser parses again; a changed German training line too
    again = StubParser("de")
    assert builder.build_german(data, cache, parser=again, english_parser=StubParser())["skipped"] and not again.calls
    assert not builder.build_german(data, cache, parser=StubParser("de2"), english_parser=StubParser())["skipped"]
    _write(data / "bcontrast-en-de" / "train.de", ["Chat neu .", "Chat train 1 auf Deutsch .", "Chat train 2 ."])
    changed = builder.build_german(data, cache, parser=StubParser("de2"), english_parser=StubParser())
    assert not changed["skipped"] and read_conllu(files["train"]["de_conllu"])[6].text == "Chat neu ."


def test_german_trees_of_another_file_and_a_stale_cache_are_refused(data, tmp_path, monkeypatch):
    _german_parses(data)
    cache = tmp_path / "cache"
    builder.build(data, cache, parser=StubParser())
    with monkeypatch.context() as m:
        # a cache whose train.de is not what the parts give now (`build` would rebuild it; this one trusts the disk)
        (cache / "train.de").write_text("stale\n", encoding="utf-8")
        m.setattr(builder, "build", lambda *a, **k: json.loads((cache / "manifest.json").read_text()))
        with pytest.raises(ValueError, match=r"train\.de is not the German side of the training parts"):
            builder.build_german(data, cache, parser=StubParser("de"))
    _write(data / "multi30k" / "train.de", ["Ein Hund rennt .", "Zwei Frauen sitzen ."])
    with pytest.raises(ValueError, match=r"sentence 2 of .*train\.de\.conllu\.gz has the text 'Zwei Männer sitzen \.' "
                                         r"but line 2 of .*train\.de is 'Zwei Frauen sitzen \.'"):  # fmt: skip
        builder.build_german(data, cache, parser=StubParser("de"), english_parser=StubParser())


def test_the_default_german_parser_is_kept_beside_the_cache(data, tmp_path, monkeypatch):
    from benchmarks.data import german_parser

    _german_parses(data)
    asked = []

    def ensure(data_dir, output, progress=True):
        asked.append(Path(output))
        raise RuntimeError("stop here")

    monkeypatch.setattr(german_parser, "ensure", ensure)
    with pytest.raises(RuntimeError, match="stop here"):
        builder.build_german(data, tmp_path / "shared" / "ende", english_parser=StubParser())
    assert asked == [tmp_path / "shared" / "de_parser"]
    # the default cache keeps german_parser's own default
    assert builder.DEFAULT_CACHE.parent / "de_parser" == german_parser.DEFAULT_OUTPUT
