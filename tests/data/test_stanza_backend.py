"""The stanza backend run for real: a tiny English stanza pipeline trained in seconds with stanza's own trainers
(`stanza_tiny.py`) goes through `stanza.Pipeline` and `StanzaParser` into the subword trees, `datasets.map` with worker
processes, the parse cache, the translation pipeline on raw text and CoNLL-U files; a slow test scores the pipeline
trained on UD English-EWT (`benchmarks/data/stanza_english.py`) against the gold dev trees."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import needs
import pytest

needs.package("stanza")

from stanza_tiny import build_tiny_model  # noqa: E402

from hf_syntax_mt.data.parsed import ParsedSentence, format_conllu  # noqa: E402
from hf_syntax_mt.data.parsers import CachedParser, ConllParser, Parser, get_parser  # noqa: E402
from hf_syntax_mt.data.stanza_resources import write_stanza_resources  # noqa: E402

TEXTS = ["The dog sleeps.", "I don't like cats.", "She can't swim in the lake.", "Two children play football."]


@pytest.fixture(scope="session")
def stanza_tiny(tmp_path_factory) -> Path:
    """The tiny English stanza model directory (trained once per session)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build_tiny_model(tmp_path_factory.mktemp("stanza_tiny"))
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_parser(stanza_tiny):
    return get_parser("stanza", lang="en", model_dir=str(stanza_tiny))


def _direct(model_dir: Path, texts: list[str], **kwargs):
    """stanza.Pipeline called by hand, the way StanzaParser promises to call it (one sentence per text)."""
    import stanza

    nlp = stanza.Pipeline("en", dir=str(model_dir), processors="tokenize,mwt,pos,lemma,depparse",
                          tokenize_no_ssplit=True, download_method=None, use_gpu=False, verbose=False, **kwargs)  # fmt: skip
    return [nlp(t) for t in texts]


def test_stanza_parser_runs_the_real_pipeline(stanza_tiny, tiny_parser):
    assert tiny_parser.processors == ["tokenize", "mwt", "pos", "lemma", "depparse"]  # mwt: the package has one
    parses = tiny_parser.parse(TEXTS + ["", "   "])
    assert [p.words for p in parses[-2:]] == [[], []]
    for text, parse, doc in zip(TEXTS, parses, _direct(stanza_tiny, TEXTS), strict=False):
        (sent,) = doc.sentences  # one sentence per text
        assert parse.text == text
        assert parse.words == [w.text for w in sent.words]
        assert parse.heads == [w.head for w in sent.words] and parse.heads.count(0) == 1
        assert parse.deprels == [w.deprel for w in sent.words] and parse.upos == [w.upos for w in sent.words]
        for token in sent.tokens:  # every word carries its surface token's span, the token's text at that span
            assert text[token.start_char : token.end_char] == token.text
            for w in token.words:
                assert parse.spans[w.id - 1] == (token.start_char, token.end_char)
    # the contractions come out as UD multi-word tokens (the tiny tokenizer learnt them from its two examples)
    dont = parses[1]
    assert dont.mwt == [(1, 3)] and dont.words[1:3] == ["do", "n't"] and dont.spans[1] == dont.spans[2] == (2, 7)


def test_sentences_stanza_splits_are_merged_into_one_tree(stanza_tiny):
    """Pretokenized input: whitespace separates tokens, a newline separates sentences (stanza's rule); the two
    sentences come back as one tree whose second root hangs from the first as parataxis."""
    import stanza

    parser = get_parser("stanza", lang="en", model_dir=str(stanza_tiny), tokenize_pretokenized=True)
    assert "mwt" not in parser.processors  # nothing to expand in pretokenized input
    text = "The dog sleeps\nWe walked home ."
    (parse,) = parser.parse([text])
    nlp = stanza.Pipeline("en", dir=str(stanza_tiny), processors="tokenize,pos,lemma,depparse",
                          tokenize_pretokenized=True, download_method=None, use_gpu=False, verbose=False)  # fmt: skip
    first, second = nlp(text).sentences
    heads1, heads2 = [w.head for w in first.words], [w.head for w in second.words]
    root1, root2 = heads1.index(0) + 1, heads2.index(0) + 1
    expected = heads1 + [root1 if h == 0 else h + len(heads1) for h in heads2]
    assert parse.words == ["The", "dog", "sleeps", "We", "walked", "home", "."]
    assert parse.heads == expected and parse.heads.count(0) == 1
    assert parse.deprels[len(heads1) + root2 - 1] == "parataxis"
    assert parse.spans == [(0, 3), (4, 7), (8, 14), (15, 17), (18, 24), (25, 29), (30, 31)]


def test_cpu_device_and_pickling(tiny_parser):
    from datasets.fingerprint import Hasher

    nlp = tiny_parser._load()
    assert str(nlp.device) == "cpu"
    model = nlp.processors["depparse"].trainer.model
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    blob = pickle.dumps(tiny_parser)
    assert len(blob) < 2000  # configuration only: the pipeline is reloaded in the worker
    restored = pickle.loads(blob)
    assert restored._nlp is None and restored.signature() == tiny_parser.signature()
    assert restored.parse(TEXTS) == tiny_parser.parse(TEXTS)
    assert Hasher.hash(restored) == Hasher.hash(pickle.loads(blob))  # a stable datasets fingerprint


def test_signature_follows_the_model_files(stanza_tiny, tiny_parser, tmp_path):
    """The signature (and so the parse cache and datasets' fingerprint) names the model's content: a copy has the
    same, a retrained depparse model a different one."""
    import torch

    copy = tmp_path / "copy"
    shutil.copytree(stanza_tiny, copy)
    assert get_parser("stanza", lang="en", model_dir=str(copy)).signature() == tiny_parser.signature()
    path = copy / "en" / "depparse" / "tiny.pt"
    checkpoint = torch.load(path, weights_only=True)
    name = next(k for k, v in checkpoint["model"].items() if torch.is_floating_point(v))
    checkpoint["model"][name] = checkpoint["model"][name] + 1.0
    torch.save(checkpoint, path)
    changed = get_parser("stanza", lang="en", model_dir=str(copy))
    assert changed.signature() != tiny_parser.signature()
    assert changed.signature().startswith("stanza:en-default-")


def test_a_token_stanza_writes_as_unk_keeps_its_surface_text():
    """stanza's tokenizer turned an EWT dev URL into the token text ``<UNK>`` (found by stanza_english.py's scorer):
    the word is the text at the token's span, so CoNLL-U files and word-level tools see the real token."""
    from stanza.models.common.doc import Document

    from hf_syntax_mt.data.parsers import StanzaParser

    text = "see http://x.org/?q=a&b=c now"
    conll = [[
        {"id": 1, "text": "see", "head": 0, "deprel": "root", "upos": "VERB", "start_char": 0, "end_char": 3},
        {"id": 2, "text": "<UNK>", "head": 1, "deprel": "obj", "upos": "X", "start_char": 4, "end_char": 25},
        {"id": 3, "text": "now", "head": 1, "deprel": "advmod", "upos": "ADV", "start_char": 26, "end_char": 29},
    ]]  # fmt: skip
    parse = StanzaParser._convert(Document(conll, text=text), text)
    assert parse.words == ["see", "http://x.org/?q=a&b=c", "now"] and parse.spans[1] == (4, 25)


def test_backend_conllu_reads_back_equal(tiny_parser, tmp_path):
    parses = tiny_parser.parse(TEXTS)
    path = tmp_path / "parsed.conllu"
    path.write_text("".join(format_conllu(p, f"s{k}") for k, p in enumerate(parses)), encoding="utf-8")
    assert ConllParser(path).parse(TEXTS) == parses


def test_the_parse_command_with_stanza_keeps_multiword_tokens_and_empty_lines(stanza_tiny, tiny_parser, tmp_path,
                                                                              monkeypatch):  # fmt: skip
    """`hf-syntax-mt parse --parser stanza` (issue 64): one block per line, the multi-word tokens (`don't` = do n't)
    as range lines, and the file reads back to the parser's own trees."""
    from hf_syntax_mt.cli import main
    from hf_syntax_mt.data.preprocess import parse_texts
    from hf_syntax_mt.data.readers import read_conllu

    lines = [TEXTS[1], "", *TEXTS[2:]]
    (tmp_path / "in.en").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(stanza_tiny))  # where --parser stanza --parser_model en looks
    main(["parse", "--parser", "stanza", "--parser_model", "en", "--input", str(tmp_path / "in.en"), "--output",
          str(tmp_path / "in.en.conllu")])  # fmt: skip
    text = (tmp_path / "in.en.conllu").read_text(encoding="utf-8")
    assert text.count("# sent_id = ") == len(lines) and "# sent_id = 2\n# text = \n\n" in text
    back = read_conllu(tmp_path / "in.en.conllu")
    assert back == parse_texts(tiny_parser, lines)
    assert back[0].mwt and any(line.split("\t")[0] == f"{s + 1}-{e}" for s, e in back[0].mwt for line in
                                text.splitlines())  # fmt: skip


class _Refuse(Parser):
    """Fails when asked to parse: what a cache hit never does."""

    name, model = "stanza", "en"

    def __init__(self, signature):
        self._sig = signature

    def parse(self, texts):
        raise AssertionError(f"parsed {texts} although they are cached")

    def signature(self):
        return self._sig

    def to_config(self):
        return {}


def test_datasets_map_with_workers_and_cache(tiny_parser, data_marian_tokenizer, tmp_path):
    from datasets import Dataset

    from hf_syntax_mt.data.preprocess import prepare_dataset
    from hf_syntax_mt.data.subwords import align_parse

    texts = TEXTS * 2
    ds = Dataset.from_dict({"source": texts, "target": ["Le chien dort."] * len(texts)})
    cached = CachedParser(tiny_parser, tmp_path / "cache")
    multi = prepare_dataset(ds, data_marian_tokenizer, cached, num_proc=2, batch_size=2)
    single = prepare_dataset(ds, data_marian_tokenizer, tiny_parser, batch_size=8)
    assert multi.to_dict() == single.to_dict()
    for row, parse in zip(multi, tiny_parser.parse(texts), strict=True):  # the subword tree, built by hand
        enc = align_parse(data_marian_tokenizer, parse, text=parse.text)
        assert row["input_ids"] == enc["input_ids"]
        assert row["parent_positions"] == pytest.approx(enc["parent_positions"])
    # the workers wrote the parses as shards; a new process serves every text from them without parsing
    assert len(cached.shards()) >= 2
    served = CachedParser(_Refuse(tiny_parser.signature()), tmp_path / "cache").parse(texts)
    assert served == tiny_parser.parse(texts)


def test_translation_pipeline_on_raw_english(stanza_tiny, tiny_parser, tmp_path, monkeypatch):
    import torch
    from transformers import pipeline

    import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
    from hf_syntax_mt.data.subwords import align_parse
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    tokenizer = train_tokenizer(TEXTS * 20, vocab_size=80, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, encoder_pascal_heads=[2, 0],
                          source_parser={"backend": "stanza", "lang": "en"}, init_std=0.3)  # fmt: skip
    model = build_model(config, seed=0).eval()
    model.generation_config.max_new_tokens = 8
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    expected = []
    for text, parse in zip(TEXTS, tiny_parser.parse(TEXTS), strict=True):
        enc = align_parse(tokenizer, parse, text=text)
        ids = model.generate(input_ids=torch.tensor([enc["input_ids"]]),
                             parent_positions=torch.tensor([enc["parent_positions"]]))  # fmt: skip
        expected.append(tokenizer.decode(ids[0], skip_special_tokens=True))
    given = pipeline("syntax-translation", model=str(tmp_path / "m"), parser=tiny_parser, device="cpu")
    assert [g["translation_text"] for g in given(TEXTS, batch_size=3)] == expected
    # the config's {"backend": "stanza", "lang": "en"} finds the models through $STANZA_RESOURCES_DIR
    monkeypatch.setenv("STANZA_RESOURCES_DIR", str(stanza_tiny))
    recorded = pipeline("syntax-translation", model=str(tmp_path / "m"), device="cpu")
    assert recorded.parser.signature() == tiny_parser.signature()
    assert [g["translation_text"] for g in recorded(TEXTS)] == expected


def test_write_stanza_resources_refuses_an_incomplete_directory(stanza_tiny, tmp_path):
    from hf_syntax_mt.errors import UserError

    with pytest.raises(UserError, match=r"model_dir=.* has no en/tokenize/tiny\.pt"):
        write_stanza_resources(tmp_path, lang="en", package="tiny")
    copy = tmp_path / "copy"
    shutil.copytree(stanza_tiny, copy)
    shutil.copyfile(copy / "en" / "pretrain" / "tiny.pt", copy / "en" / "pretrain" / "other.pt")
    with pytest.raises(UserError, match=r"holds 2 word-vector files .* pass pretrain=NAME"):
        write_stanza_resources(copy, lang="en", package="tiny")
    resources = json.loads(write_stanza_resources(copy, lang="en", package="tiny", pretrain="tiny").read_text())
    assert resources["en"]["packages"]["default"]["depparse"] == "tiny"


def test_a_package_without_mwt_loads_without_it(stanza_tiny, tiny_parser, tmp_path):
    """Languages whose stanza package has no multi-word-token expander (Chinese, Japanese...) load: StanzaParser lets
    stanza add mwt only where the package has one (it used to ask for mwt always, a missing-model error there)."""
    copy = tmp_path / "copy"
    shutil.copytree(stanza_tiny, copy)
    shutil.rmtree(copy / "en" / "mwt")
    write_stanza_resources(copy, lang="en", package="tiny")
    parser = get_parser("stanza", lang="en", model_dir=str(copy))
    assert parser.processors == ["tokenize", "pos", "lemma", "depparse"]
    (parse,) = parser.parse(["The dog sleeps."])
    assert parse.words == tiny_parser.parse(["The dog sleeps."])[0].words and parse.mwt is None


# --------------------------------------------------------------------------------------------------------------
# The pipeline trained on UD English-EWT (benchmarks/data/stanza_english.py)
# --------------------------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
TRAINED = Path(os.environ.get("HF_SYNTAX_MT_STANZA_EN", ROOT / "runs" / "stanza_en"))
EWT_DEV = needs.SHARED_DATA / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
#: measured here (2026-11-28) with the committed run of stanza_english.py, on the first 400 EWT dev sentences parsed
#: from raw text: 90.25% of them come out with the gold words, and on those the UAS is 59.4% (3,440 / 5,793 words);
#: the floors leave room for a retrained model's variation (the settings are small: stanza_english.json)
UAS_FLOOR = 0.55
SAME_WORDS_FLOOR = 0.85


@pytest.mark.slow
def test_trained_ewt_model_parses_dev_above_its_floor():
    from hf_syntax_mt.data.readers import read_conllu
    from hf_syntax_mt.evaluation.probing import attachment_score

    if not (TRAINED / "resources.json").is_file():
        pytest.skip(f"no trained English stanza model in {TRAINED} (python benchmarks/data/stanza_english.py)")
    needs.shared_data(EWT_DEV.relative_to(needs.SHARED_DATA).as_posix())
    gold = read_conllu(EWT_DEV)[:400]
    parser = get_parser("stanza", lang="en", model_dir=str(TRAINED))
    predicted = parser.parse([g.text for g in gold])
    same = [(p, g) for p, g in zip(predicted, gold, strict=True) if p.words == g.words]
    assert len(same) / len(gold) >= SAME_WORDS_FLOOR
    score = attachment_score([p.heads for p, _ in same], [g.heads for _, g in same])
    assert score["uas"] >= UAS_FLOOR, score
    assert all(isinstance(p, ParsedSentence) and p.heads.count(0) == 1 for p in predicted if p.words)
