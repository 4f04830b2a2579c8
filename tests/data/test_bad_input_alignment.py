"""Bad input on the alignment surfaces (issue 29): guided-alignment files, `aer`, `align` and `translate`. Every
error names the file, line and field and says what to do; each expected result is built by hand."""

from __future__ import annotations

import logging

import pytest
import torch

import hf_syntax_mt  # noqa: F401  (registers the Auto classes and "syntax-translation")
from hf_syntax_mt.alignment import AlignmentTargets, align_corpus, token_words
from hf_syntax_mt.cli import main
from hf_syntax_mt.data.readers import read_lines
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

torch.set_num_threads(1)

SRC = ["the cat sleeps", "a red ball rolls away", "dogs bark", "the old man walks home slowly"]
TGT = ["le chat dort", "une balle rouge roule", "les chiens aboient", "le vieil homme rentre lentement"]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(SRC + TGT, vocab_size=80, min_frequency=1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tok):
    """A plain two-layer model, saved, and its in-memory copy."""
    directory = tmp_path_factory.mktemp("align-model")
    model = build_model(model_config(tok, d_model=16, layers=2, heads=2, ffn_dim=32, max_position_embeddings=12),
                        seed=0).eval()  # fmt: skip
    model.config._attn_implementation = "eager"
    model.generation_config.max_new_tokens = 5
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory, model


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------------------
# Guided-alignment files
# ------------------------------------------------------------------------------------------------------------------
def test_alignment_file_errors_name_the_file_line_and_link(tmp_path, caplog):
    from hf_syntax_mt.alignment import check_alignment_lines

    path = str(tmp_path / "train.align")
    ok = ["0-0 1-1 2-2", "0-0 2p1 1-2", "", "3-4 5-4"]
    # possible links are read (0-based lines back, 'ipj' kept) and a good file passes unchanged
    assert check_alignment_lines(ok, SRC, TGT, path) == ["0-0 1-1 2-2", "0-0 1-2 2p1", "", "3-4 5-4"]
    with pytest.raises(ValueError, match=rf"{path}:2: '1-x' is not a link 'i-j' \(sure\) or 'ipj' \(possible\)"):
        check_alignment_lines(["0-0", "1-x"], SRC[:2], TGT[:2], path)
    with pytest.raises(ValueError, match=rf"{path}:3: link '2-0' is past the sentence pair \(source 2 words, target "
                                         r"3 words; indices count whitespace-separated words from 0\)"):  # fmt: skip
        check_alignment_lines(ok[:2] + ["2-0"], SRC, TGT, path)
    # the same links counted from 1: the last word of "the cat sleeps" is word 3, past the sentence; the error says so
    one_based = ["1-1 2-2 3-3", "1-1 3p2 2-3", "2-3", "4-5 6-5"]
    with pytest.raises(ValueError, match=rf"{path}:1: link '3-3' is past .*No link in the file uses word 0: it "
                                         r"looks counted from 1; give --alignment_one_indexed"):  # fmt: skip
        check_alignment_lines(one_based, SRC, TGT, path)
    assert check_alignment_lines(one_based, SRC, TGT, path, one_indexed=True) == [
        "0-0 1-1 2-2", "0-0 1-2 2p1", "1-2", "3-4 5-4"]  # fmt: skip
    # a 1-indexed file whose links all stay inside their sentences: read as 0-based, with a warning
    inside = ["1-1 2-1", "1-1 2-2 3-3 4-3", "1-1", "1-1 2-2 3-3 4-3"]
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.alignment.targets"):
        check_alignment_lines(inside, SRC, TGT, path)
    assert f"no link of {path} uses word 0 of either side: if the file counts words from 1, give " in caplog.text


def test_possible_links_are_supervised_like_sure_ones(tok):
    """`ipj` links give guided-alignment targets (they were dropped): target word j's subwords point at the first
    subword of source word i, by hand from the tokenizer's offsets."""
    from datasets import Dataset

    from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor

    rows = Dataset.from_dict({"source": SRC[:1], "target": TGT[:1]})
    rows = rows.map(SyntaxMTPreprocessor(tok, columns=()), batched=True).add_column("alignment", ["0-0 2p2"])
    got = rows.map(AlignmentTargets(tok), batched=True, with_indices=True)["decoder_alignment"][0]
    src, tgt = tok(SRC[0], return_offsets_mapping=True), tok(text_target=TGT[0], return_offsets_mapping=True)
    sw, tw = token_words(SRC[0], src["offset_mapping"]), token_words(TGT[0], tgt["offset_mapping"])
    first = {w: sw.index(w) for w in (0, 2)}
    expected = [first[0] if w == 0 else first[2] if w == 2 else -100 for w in tw]
    assert got == expected and expected.count(first[2]) >= 1  # word 2 ("dort") is supervised


TRAIN = ["--d_model", "16", "--encoder_layers", "1", "--decoder_layers", "1", "--attention_heads", "2", "--ffn_dim",
         "32", "--max_position_embeddings", "32", "--vocab_size", "60", "--tokenizer_min_frequency", "1",
         "--report_to", "none", "--use_cpu", "--disable_tqdm", "true", "--per_device_train_batch_size", "4",
         "--save_strategy", "no", "--max_steps", "1"]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("guided")
    return write(d / "train.src", SRC), write(d / "train.tgt", TGT), write(d / "train.align", ["0-0 1-1 2-2", "0-0",
                                                                                           "1p1", "0-0 5-4"])  # fmt: skip


def test_guided_alignment_runs_as_the_readme_shows_and_an_unused_file_is_refused(corpus, tmp_path):
    """The README's command has no --do_train (it was refused); a file without guided_alignment_weight was unused."""
    src, tgt, links = (str(p) for p in corpus)
    data = ["--train_source_file", src, "--train_target_file", tgt, "--train_alignment_file", links]
    assert main(["train", "--output_dir", str(tmp_path / "a"), *data, *TRAIN,
                 "--config_overrides", "guided_alignment_weight=0.05"]) == 0  # fmt: skip
    assert (tmp_path / "a" / "model.safetensors").is_file()
    with pytest.raises(
        ValueError,
        match=rf"--train_alignment_file {links} is read only by guided alignment, which "
        r"this model does not train: add --config_overrides guided_alignment_weight",
    ):
        main(["train", "--output_dir", str(tmp_path / "b"), *data, *TRAIN])
    bad = write(tmp_path / "bad.align", ["0-0", "0-0", "0-0", "0-9"])
    with pytest.raises(ValueError, match=rf"{bad}:4: link '0-9' is past the sentence pair \(source 6 words, target 5"):
        main(["train", "--output_dir", str(tmp_path / "c"), *data[:4], "--train_alignment_file", str(bad), *TRAIN,
              "--config_overrides", "guided_alignment_weight=0.05"])  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# aer
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "token, message",
    [("\u0661-2", r"is not a link 'i-j' \(sure\) or 'ipj' \(possible\), with i and j word indices in ASCII digits"),
     ("\u00b2-1", "in ASCII digits"), ("1-" + "9" * 5000, "has an index past 100,000, which is no word position"),
     ("1--2", "is not a link")],
)  # fmt: skip
def test_aer_names_the_file_and_line_of_an_unusual_token(tmp_path, token, message):
    gold, hyp = write(tmp_path / "gold", ["0-0", "1-1"]), write(tmp_path / "hyp", ["0-0", f"1-1 {token}"])
    with pytest.raises(ValueError, match=rf"{hyp}:2: .*{message}"):
        main(["aer", "--hyp", str(hyp), "--gold", str(gold)])


def test_aer_refuses_possible_links_in_the_hypothesis_and_an_empty_corpus(tmp_path):
    gold, hyp = write(tmp_path / "gold", ["0-0 1p1", "0-0"]), write(tmp_path / "hyp", ["0-0", "0-0 1p1"])
    with pytest.raises(ValueError, match=rf"{hyp}:2: possible link '1p1' in the hypothesis: .*Did you swap --hyp and "
                                         r"--gold\?"):  # fmt: skip
        main(["aer", "--hyp", str(hyp), "--gold", str(gold)])
    empty_gold, empty_hyp = write(tmp_path / "g0", ["", "1p1"]), write(tmp_path / "h0", ["", ""])
    with pytest.raises(ValueError, match=rf"{empty_hyp} has no link and {empty_gold} no sure link in 2 pairs: AER is "
                                         r"0/0, undefined"):  # fmt: skip
        main(["aer", "--hyp", str(empty_hyp), "--gold", str(empty_gold)])


def test_aer_warns_in_one_line_when_the_gold_has_no_sure_link(tmp_path, capsys, caplog):
    """A gold file of possible links only printed `AER 0.00 precision 100.00 recall 0.00` without a word (issue 44):
    recall is 0/0 and AER only 1 - precision. One warning line now says so; one sure link silences it."""
    gold = write(tmp_path / "gold", ["0p0 1p1", "0p1"])
    hyp = write(tmp_path / "hyp", ["0-0 1-1", "0-1"])
    with caplog.at_level(logging.WARNING):
        assert main(["aer", "--hyp", str(hyp), "--gold", str(gold)]) == 0
    # by hand: A = P = 3 links, S = 0: AER = 1 - (0 + 3) / (3 + 0) = 0, precision 3/3, recall 0/0 shown as 0
    assert capsys.readouterr().out.startswith("AER 0.00  precision 100.00  recall 0.00")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith("the gold alignments have 3 possible links ('ipj') but no sure link ('i-j') in 2 "
                                  "pairs: recall is undefined")  # fmt: skip
    caplog.clear()
    one_sure = write(tmp_path / "gold1", ["0-0 1p1", "0p1"])
    with caplog.at_level(logging.WARNING):
        assert main(["aer", "--hyp", str(hyp), "--gold", str(one_sure)]) == 0
    # by hand: S = {(0, 0)}: AER = 1 - (1 + 3) / (3 + 1) = 0, recall 1/1
    assert capsys.readouterr().out.startswith("AER 0.00  precision 100.00  recall 100.00")
    assert "no sure link" not in caplog.text


def test_aer_with_the_wrong_index_base_says_which_flag(tmp_path, capsys, caplog):
    gold = write(tmp_path / "gold", ["1-1 2-2 3-3", "1-2 2-1"])  # 1-based, as the Hansards set
    perfect = write(tmp_path / "hyp", ["0-0 1-1 2-2", "0-1 1-0"])  # the same links, 0-based
    with caplog.at_level(logging.WARNING):
        assert main(["aer", "--hyp", str(perfect), "--gold", str(gold)]) == 0
    # by hand: line 1 shares (1, 1) and (2, 2), line 2 nothing: 1 - (2 + 2) / (5 + 5)
    assert "AER 60.00" in capsys.readouterr().out
    assert "no gold link uses word 0 while the predicted links do: if --gold counts words from 1" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert main(["aer", "--hyp", str(perfect), "--gold", str(gold), "--gold-one-indexed"]) == 0
    assert "AER 0.00" in capsys.readouterr().out and "uses word 0" not in caplog.text


# ------------------------------------------------------------------------------------------------------------------
# align and translate
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["align", "--batch-size", "0"], ["align", "--batch-size", "-3"],
                                  ["translate", "--num-beams", "0"], ["translate", "--batch-size", "0"]])  # fmt: skip
def test_batch_sizes_and_beams_below_one_are_refused_by_name(model_dir, argv, capsys):
    directory, _ = model_dir
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--model", str(directory)])
    assert exit_.value.code == 2
    assert f"argument {argv[1]}: must be at least 1, got {argv[2]}" in capsys.readouterr().err


def test_align_refuses_conflicting_inputs_and_one_direction_symmetrization(model_dir, tok, tmp_path):
    directory, _ = model_dir
    src, tgt, joined = write(tmp_path / "s", SRC), write(tmp_path / "t", TGT), write(tmp_path / "j", ["a ||| b"])
    with pytest.raises(ValueError, match="give --input .* or --src and --tgt, not both"):  # a UserError (issue 49)
        main(["align", "--model", str(directory), "--input", str(joined), "--src", str(src), "--tgt", str(tgt)])
    with pytest.raises(ValueError, match="--symmetrize backward combines the two directions of a symmetric model"):
        main(["align", "--model", str(directory), "--src", str(src), "--tgt", str(tgt), "--symmetrize", "backward"])
    with pytest.raises(ValueError, match="symmetrization 'union' combines both directions"):
        align_corpus(model_dir[1], tok, [s.split() for s in SRC], [t.split() for t in TGT], method="union")


def test_align_reads_the_given_layer_of_a_symmetric_model(model_dir, tok):
    """--layer was ignored for a symmetric model: now both directions are read at it."""
    from hf_syntax_mt.symmetric import SymmetricTranslationModel

    forward, backward = (build_model(model_config(tok, d_model=16, layers=2, heads=2, ffn_dim=32, init_std=1.0),
                                     seed=seed).eval() for seed in (0, 1))  # fmt: skip
    for direction in (forward, backward):
        direction.config._attn_implementation = "eager"
    joint = SymmetricTranslationModel.from_directions(forward, backward).eval()
    src, tgt = [s.split() for s in SRC], [t.split() for t in TGT]
    by_layer = {layer: align_corpus(forward, tok, src, tgt, layer=layer, progress=False) for layer in (0, 1)}
    assert by_layer[0] != by_layer[1] and joint.layers == (1, 1)  # the layers differ; the default reads layer 1
    assert align_corpus(joint, tok, src, tgt, layer=0, method="forward", progress=False) == by_layer[0]
    assert align_corpus(joint, tok, src, tgt, method="forward", progress=False) == by_layer[1]
    flipped = align_corpus(backward, tok, tgt, src, layer=0, progress=False)
    assert align_corpus(joint, tok, src, tgt, layer=0, method="backward", progress=False) == [
        {(i, j) for j, i in links} for links in flipped]  # fmt: skip


@pytest.mark.parametrize("command", ["align", "translate"])
def test_a_missing_model_directory_is_named(tmp_path, command):
    missing = tmp_path / "runs" / "nothing-here"
    src = write(tmp_path / "s", SRC)
    extra = ["--src", str(src), "--tgt", str(src)] if command == "align" else ["--input", str(src)]
    with pytest.raises(ValueError, match=rf"--model {missing}: no such directory \({missing}\); give the directory"):
        main([command, "--model", str(missing), *extra])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no config.json, so it is not a saved model"):
        main([command, "--model", str(tmp_path / "empty"), *extra])


def test_align_truncates_an_over_long_line_with_a_warning_and_goes_on(model_dir, tok, caplog):
    """max_position_embeddings=12: line 2 is cut (a warning names it; it stopped the run), the other lines align as
    on their own, and the words past the cut get no link."""
    _, model = model_dir
    long_source = " ".join(SRC * 2)
    src, tgt = [SRC[0].split(), long_source.split(), SRC[2].split()], [TGT[0].split(), TGT[1].split(), TGT[2].split()]
    assert len(tok(long_source)["input_ids"]) > 12
    with caplog.at_level(logging.WARNING, logger="hf_syntax_mt.alignment.words"):
        links = align_corpus(model, tok, src, tgt, progress=False)
    assert "line 2: the source has" in caplog.text and "max_position_embeddings=12: truncated" in caplog.text
    assert "line 1:" not in caplog.text and "line 3:" not in caplog.text
    assert [links[0], links[2]] == align_corpus(model, tok, [src[0], src[2]], [tgt[0], tgt[2]], progress=False)
    assert {j for _, j in links[1]} == set(range(len(tgt[1])))  # one link per target word
    kept = tok(long_source, truncation=True, max_length=12, return_offsets_mapping=True)["offset_mapping"]
    words_kept = max(w for w in token_words(long_source, kept) if w is not None) + 1
    assert words_kept < len(src[1]) and max(i for i, _ in links[1]) < words_kept


def test_a_word_holding_the_subword_marker_links_inside_its_sentence(model_dir, tok):
    """'dogs▁bark' is one whitespace word that sentencepiece's pre-tokenizer splits in two: its links stay inside
    the two-word source (word_ids() counted three words and linked past the sentence)."""
    _, model = model_dir
    src, tgt = [["dogs▁bark", "loud"], ["▁", "cat"]], [TGT[2].split(), TGT[0].split()]
    links = align_corpus(model, tok, src, tgt, progress=False)
    for pair, s, t in zip(links, src, tgt, strict=True):
        assert {j for _, j in pair} == set(range(len(t))) and all(i < len(s) for i, _ in pair), (pair, s)


def test_translate_drops_a_utf8_bom(model_dir, tmp_path):
    directory, _ = model_dir
    plain, bom = tmp_path / "plain.txt", tmp_path / "bom.txt"
    write(plain, SRC[:2])
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_lines(bom) == SRC[:2]
    for name in ("plain", "bom"):
        assert main(["translate", "--model", str(directory), "--input", str(tmp_path / f"{name}.txt"), "--output",
                     str(tmp_path / f"{name}.out"), "--num-beams", "1"]) == 0  # fmt: skip
    assert (tmp_path / "bom.out").read_text(encoding="utf-8") == (tmp_path / "plain.out").read_text(encoding="utf-8")
