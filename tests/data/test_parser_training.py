"""`hf-syntax-mt train-parser` (`data.parser_training`, issue 64): a spaCy parser trained on CoNLL-U treebanks with
spaCy's commands. Bad treebanks, folders and languages are refused before spaCy runs; a parser trained for a few steps
on a hand-written treebank loads through `get_parser` and parses; a model trained with such a folder records no parser
(a local path does not travel) and says how to translate with it."""

from __future__ import annotations

import json
import logging
import os
import sys

import needs
import pytest

from hf_syntax_mt.data.parser_training import train_spacy_parser, training_steps
from hf_syntax_mt.errors import UserError

#: (text, heads, relations, UPOS): a tiny English treebank, hand-written
TREEBANK = [
    ("The dog runs .", [2, 3, 0, 3], ["det", "nsubj", "root", "punct"], ["DET", "NOUN", "VERB", "PUNCT"]),
    ("A cat sleeps .", [2, 3, 0, 3], ["det", "nsubj", "root", "punct"], ["DET", "NOUN", "VERB", "PUNCT"]),
    ("The man sees a bird .", [2, 3, 0, 5, 3, 3], ["det", "nsubj", "root", "det", "obj", "punct"],
     ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"]),
    ("Two women eat bread .", [2, 3, 0, 3, 3], ["nummod", "nsubj", "root", "obj", "punct"],
     ["NUM", "NOUN", "VERB", "NOUN", "PUNCT"]),
    ("A child plays in the park .", [2, 3, 0, 6, 6, 3, 3], ["det", "nsubj", "root", "case", "det", "obl", "punct"],
     ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"]),
    ("The bird sings .", [2, 3, 0, 3], ["det", "nsubj", "root", "punct"], ["DET", "NOUN", "VERB", "PUNCT"]),
]  # fmt: skip


def write_treebank(path, sentences=TREEBANK):
    blocks = []
    for k, (text, heads, deprels, upos) in enumerate(sentences, start=1):
        rows = [f"{i}\t{w}\t_\t{upos[i - 1]}\t_\t_\t{heads[i - 1]}\t{deprels[i - 1]}\t_\t_"
                for i, w in enumerate(text.split(), start=1)]  # fmt: skip
        blocks.append(f"# sent_id = {k}\n# text = {text}\n" + "\n".join(rows) + "\n\n")
    path.write_text("".join(blocks), encoding="utf-8")
    return path


def write_text(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_treebanks_folders_and_settings_are_refused_before_spacy_runs(tmp_path):
    good = write_treebank(tmp_path / "good.conllu")
    (tmp_path / "header.conllu").write_text("# newdoc id = x\n\n", encoding="utf-8")
    out = tmp_path / "out"
    cases = [
        (dict(train=[tmp_path / "none.conllu"]), r"--train .*none\.conllu: no such file"),
        (dict(train=[tmp_path]), r"--train .*: is a folder; give a CoNLL-U file"),
        (dict(train=[tmp_path / "header.conllu"]), r"--train .*header\.conllu: holds no sentence with words"),
        (dict(train=str(good)), r"--train .*: give a list of CoNLL-U files"),
        (
            dict(train=[good, write_text(tmp_path / "x.txt", "a b\n")]),
            r"--train .*x\.txt:1: expected 10 tab-separated columns",
        ),
        (dict(dev=tmp_path / "none.conllu"), r"--dev .*none\.conllu: no such file"),
        (dict(max_steps=0), r"--max-steps 0: give a whole number from 1"),
        (dict(max_seconds=float("nan")), r"--max-seconds nan: give a positive number"),
        (dict(config_overrides={"--x": 1}), r"config_overrides '--x'"),
    ]
    for change, message in cases:
        kwargs = dict(lang="en", train=[good], dev=good, output=out, progress=False) | change
        with pytest.raises(UserError, match=message):
            train_spacy_parser(**kwargs)
    assert not out.exists()  # nothing was written
    (out / "keep").mkdir(parents=True)
    needs.package("spacy")
    with pytest.raises(UserError, match=r"--output .*out: the folder is not empty"):
        train_spacy_parser("en", [good], good, out, progress=False)
    with pytest.raises(UserError, match=r"good\.conllu lies inside --output"):  # overwrite empties it: never an input
        train_spacy_parser("en", [good], good, tmp_path, progress=False, overwrite=True)
    with pytest.raises(UserError, match=r"--lang qq: spaCy has no language 'qq'"):
        train_spacy_parser("qq", [good], good, tmp_path / "new", progress=False)
    assert (out / "keep").is_dir() and not (tmp_path / "new").exists()


def test_without_spacy_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    good = write_treebank(tmp_path / "good.conllu")
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` raises ImportError
    with pytest.raises(UserError, match=r"spaCy is not installed .*pip install 'hf-syntax-mt\[spacy\]'"):
        train_spacy_parser("en", [good], good, tmp_path / "out", progress=False)


def test_training_steps_reads_spacys_table_and_names_a_folder_without_a_log(tmp_path):
    with pytest.raises(UserError, match="has no train.log"):
        training_steps(tmp_path)
    (tmp_path / "train.log").write_text(
        "E    #       LOSS TOK2VEC  ...  SCORE \n---  ------  ------------  ------\n"
        "  0       0          0.00    0.63\n  3       3          0.10    0.75\n  6       6          0.41    0.73\n",
        encoding="utf-8",
    )
    assert training_steps(tmp_path) == {"epochs": 6, "last_step": 6, "best_step": 3, "best_score": 0.75}


@pytest.mark.slow  # four spaCy processes: 40-90 s here on shared cores
def test_a_parser_trained_for_a_few_steps_loads_and_parses(tmp_path, caplog):
    needs.package("spacy")
    from hf_syntax_mt.cli import main
    from hf_syntax_mt.data.parser_config import portable_parser_config
    from hf_syntax_mt.data.parsers import get_parser

    treebank = write_treebank(tmp_path / "tiny.conllu")
    out = tmp_path / "parser"
    record = train_spacy_parser("en", [treebank], treebank, out, max_steps=6, eval_frequency=3, progress=False,
                                config_overrides={"components.parser.min_action_freq": 1})  # fmt: skip
    assert json.loads((out / "train_parser.json").read_text(encoding="utf-8")) == record
    assert record["train"][0]["sentences"] == record["dev"]["sentences"] == len(TREEBANK)
    assert (record["last_step"], record["epochs"]) == (6, 6) and set(record["seconds"]) == {
        "init", "convert", "train", "evaluate"}  # fmt: skip
    assert all(0 <= record["dev_scores"][k] <= 100 for k in ("uas", "las", "pos"))
    model = out / "model-best"
    parser = get_parser("spacy", model=str(model), exclude=[])  # as --parser spacy --parser_model DIR/model-best
    # the model learnt this treebank's labels: its relations (spaCy names the root ROOT and keeps "dep" for rare
    # relations) and its UPOS tags
    nlp = parser._load()
    relations = {d for _, _, deprels, _ in TREEBANK for d in deprels}
    assert set(nlp.get_pipe("parser").labels) == (relations - {"root"}) | {"ROOT", "dep"}
    assert {label.split("=")[1] for label in nlp.get_pipe("morphologizer").labels} == {
        u for *_, upos in TREEBANK for u in upos}  # fmt: skip
    tree = parser.parse(["The cat sees  a dog ."])[0]
    assert tree.words == ["The", "cat", "sees", "a", "dog", "."] and tree.heads.count(0) == 1
    # a folder is not portable: the model records no parser, and the warning says how to translate with it
    with caplog.at_level(logging.WARNING):
        assert portable_parser_config(parser) is None
    assert f"--parser spacy --parser-model {model}" in caplog.text
    # the folder is parsed with by `parse` too; a folder that holds no pipeline is named as a folder
    (tmp_path / "in.txt").write_text("A dog sleeps .\n", encoding="utf-8")
    main(["parse", "--parser", "spacy", "--parser_model", str(model), "--input", str(tmp_path / "in.txt"), "--output",
          str(tmp_path / "in.conllu")])  # fmt: skip
    assert "# text = A dog sleeps ." in (tmp_path / "in.conllu").read_text(encoding="utf-8")
    with pytest.raises(UserError, match=r"no spaCy pipeline in the folder .*corpus.*OUTPUT/model-best"):
        get_parser("spacy", model=str(out / "corpus"))


@pytest.mark.skipif(os.name != "posix", reason="SIGINT inheritance is POSIX behaviour")
def test_max_seconds_stops_a_command_started_from_a_background_job(tmp_path, monkeypatch):
    """A job started with `&` inherits SIGINT ignored, so Python installs no KeyboardInterrupt handler in the child and
    the interrupt of --max-seconds did nothing (a 1,200 s German parser ran 2,344 s). The child now gets SIGINT's
    default back: it stops with KeyboardInterrupt (its cleanup runs, as spaCy saves model-last); a child that ignores
    SIGINT itself is terminated after the grace period."""
    import signal
    import sys
    import time

    from hf_syntax_mt.data import parser_training

    monkeypatch.setattr(parser_training, "GRACE_SECONDS", 2.0)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job's shell leaves it
    try:
        loop = "import time\ntry:\n    while True: time.sleep(0.05)\nfinally:\n    print('saved', flush=True)"
        start = time.perf_counter()
        code, timed_out = parser_training.run_logged(
            [sys.executable, "-c", loop], tmp_path / "a.log", dict(os.environ), 1.5
        )
        assert timed_out and code != 0 and time.perf_counter() - start < 30
        assert "KeyboardInterrupt" in (tmp_path / "a.log").read_text() and "saved" in (tmp_path / "a.log").read_text()
        stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)"
        code, timed_out = parser_training.run_logged(
            [sys.executable, "-c", stubborn], tmp_path / "b.log", dict(os.environ), 1.0
        )
        assert timed_out and code == -signal.SIGTERM
        code, timed_out = parser_training.run_logged(
            [sys.executable, "-c", "print(1)"], tmp_path / "c.log", dict(os.environ), 30
        )
        assert (code, timed_out) == (0, False) and (tmp_path / "c.log").read_text() == "1\n"
    finally:
        signal.signal(signal.SIGINT, previous)
