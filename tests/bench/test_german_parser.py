"""`benchmarks/data/german_parser.py`: multi30k-parsed's German parser rebuilt with spaCy's commands (the package's
`train_spacy_parser`). The agreement measure on hand-built trees, the treebank checks, the training log's steps, and
one miniature training run end to end (40 sentences, 20 steps) whose model parses one tree per line and agrees with
its own trees written as CoNLL-U."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import needs
import pytest

from hf_syntax_mt.data.parsed import ParsedSentence, format_conllu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.data import german_parser  # noqa: E402

UD = needs.SHARED_DATA / "ud"


def _tree(words, heads, deprels):
    return ParsedSentence(words, heads, deprels, ["X"] * len(words))


def test_agreement_counts_heads_labels_and_sentences_as_a_direct_count():
    theirs = [_tree(["Ein", "Hund", "rennt"], [2, 3, 0], ["det", "nsubj", "root"]),
              _tree(["Zwei", "Männer"], [2, 0], ["nummod", "root"]),
              _tree(["Es", "regnet", "."], [2, 0, 2], ["expl", "root", "punct"])]  # fmt: skip
    mine = [_tree(["Ein", "Hund", "rennt"], [2, 3, 0], ["det", "obj", "root"]),  # one label differs
            _tree(["Zwei", "Männer"], [2, 0], ["nummod", "root"]),  # identical
            _tree(["Es", "regnet."], [2, 0], ["expl", "root"])]  # tokenised differently: 3 words disagree  # fmt: skip
    out = german_parser.agreement(mine, theirs)
    # words: 3 + 2 + 3 = 8; same head: 3 + 2 = 5; same head and relation: 2 + 2 = 4; identical sentences: 1 of 3
    assert out == {"sentences": 3, "words": 8, "same_head": round(5 / 8, 4), "same_head_and_relation": 0.5,
                   "identical_sentences": round(1 / 3, 4), "differently_tokenised_sentences": 1}  # fmt: skip


def test_treebanks_are_checked_by_name_and_sha256(tmp_path):
    with pytest.raises(SystemExit, match=r"missing treebank .*de_gsd-ud-test\.conllu"):
        german_parser.check_treebanks(tmp_path)
    for rel in german_parser.TREEBANKS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# sent_id = 1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"de_gsd-ud-test\.conllu: sha256 differs"):
        german_parser.check_treebanks(tmp_path)
    assert len(german_parser.check_treebanks(tmp_path, verify=False)) == 3
    if (UD / "UD_German-GSD" / "de_gsd-ud-test.conllu").is_file():  # the shared copies are the files PROVENANCE names
        assert set(german_parser.check_treebanks(UD.parent)) == set(german_parser.TREEBANKS)


def test_the_training_log_gives_the_last_and_the_best_step(tmp_path):
    (tmp_path / "train.log").write_text(
        "E    #       LOSS TOK2VEC  LOSS MORPH...  LOSS PARSER  POS_ACC  MORPH_ACC  DEP_UAS  DEP_LAS  SENTS_F  SCORE \n"
        "---  ------  ------------  -------------  -----------  -------  ---------  -------  -------  -------  ------\n"
        "  0       0          0.00         190.02       390.03    27.78      15.43     9.74     9.74     0.00    0.16\n"
        "  9    1600        512.00         801.10      1970.50    89.42      73.36    74.53    66.39    88.29    0.76\n"
        " 18    3200        400.00         700.00      1500.00    89.26      70.39    75.51    67.54    88.00    0.75\n",
        encoding="utf-8",
    )
    assert german_parser.training_steps(tmp_path) == {"epochs": 18, "last_step": 3200, "best_step": 1600,
                                                      "best_score": 0.76}  # fmt: skip


def _miniature(root: Path) -> Path:
    """The first sentences of the shared treebanks, in their layout (40 to train, 15 to choose the checkpoint)."""
    for rel, n in zip(german_parser.TREEBANKS, (20, 20, 15), strict=True):
        blocks = (UD.parent / rel).read_text(encoding="utf-8").strip("\n").split("\n\n")[:n]
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return root


def test_a_miniature_parser_trains_parses_one_tree_per_line_and_agrees_with_its_own_trees(tmp_path):
    needs.package("spacy")
    needs.shared_data("ud/UD_German-PUD/de_pud-ud-test.conllu")
    data = _miniature(tmp_path / "data")
    out = tmp_path / "parser"
    record = german_parser.train(data, out, progress=False, verify=False, max_steps=20, eval_frequency=10)
    assert set(record["seconds"]) == {"init", "convert", "train", "evaluate"}
    assert german_parser.training_steps(out)["last_step"] == 20
    assert set(german_parser.weight_hashes(german_parser.model_path(out))) == set(german_parser.PROVENANCE_SHA256)
    from hf_syntax_mt.data.parsers import SpacyParser

    lines = ["Ein Hund rennt über die Wiese.", "Zwei Männer sitzen. Sie reden.", "Ein  Kind   lacht ."]
    trees = SpacyParser(str(german_parser.model_path(out)), exclude=[]).parse(lines)
    assert [t.heads.count(0) for t in trees] == [1, 1, 1]  # one tree per line, even for two sentences
    assert trees[2].words == ["Ein", "Kind", "lacht", "."]  # whitespace tokens dropped
    # multi30k's layout with the model's own trees as multi30k-parsed: full agreement (the comparison's round trip)
    (data / "multi30k").mkdir()
    (data / "multi30k" / "val.de").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (data / "multi30k-parsed").mkdir()
    with gzip.open(data / "multi30k-parsed" / "val.de.conllu.gz", "wt", encoding="utf-8") as f:
        f.write("".join(format_conllu(t, f"val-{k}") for k, t in enumerate(trees, start=1)))
    same = german_parser.compare_with_multi30k(german_parser.model_path(out), data)
    assert same["identical_sentences"] == 1.0 and same["same_head_and_relation"] == 1.0 and same["sentences"] == 3
