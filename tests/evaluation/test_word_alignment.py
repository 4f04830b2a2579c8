"""Word alignments: Pharaoh reading, AER against hand-computed cases, symmetrisation on a hand-built example, and
`align_corpus` / `hf-syntax-mt align` against the cross-attention read directly from the model."""

import json

import pytest
import torch

from hf_syntax_mt.alignment import (
    GoldAlignment,
    align_corpus,
    alignment_error_rate,
    parse_pharaoh,
    read_parallel_words,
    read_pharaoh,
    symmetrize,
)
from hf_syntax_mt.cli import main as cli_main
from hf_syntax_mt.training import build_model, model_config, train_tokenizer


def gold(sure, possible=()):
    return GoldAlignment(frozenset(sure), frozenset(set(sure) | set(possible)))


def test_parse_pharaoh_sure_possible_and_one_indexed():
    g = parse_pharaoh("1-1 2p3 3-2", one_indexed=True)
    assert g.sure == {(0, 0), (2, 1)}
    assert g.possible == {(0, 0), (1, 2), (2, 1)}
    assert parse_pharaoh("") == gold(set())


@pytest.mark.parametrize(("line", "message"), [("0-1 1_2", "'1_2' is not a link"), ("0-1 x-2", "'x-2' is not"),
                                               ("1-0", "below the first index")])  # fmt: skip
def test_bad_pharaoh_names_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "gold.txt"
    path.write_text("1-1\n" + line.replace("0-1", "1-2") + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"gold.txt:2: .*{message}"):
        read_pharaoh(path, one_indexed=True)


@pytest.mark.parametrize(
    ("predicted", "golds", "aer", "precision", "recall"),
    [
        # |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2: AER = 1 - 3/5
        ([{(0, 0), (1, 2), (2, 2)}], [gold({(0, 0), (1, 1)}, {(1, 2)})], 0.4, 2 / 3, 1 / 2),
        ([{(0, 0), (1, 1)}], [gold({(0, 0), (1, 1)}, {(1, 2)})], 0.0, 1.0, 1.0),
        ([set()], [gold({(0, 0)})], 1.0, 0.0, 0.0),
        # summed over the corpus, not averaged per pair: (1 + 1 + 0 + 1) / (1 + 1 + 2 + 1)
        ([{(0, 0)}, {(0, 0), (5, 5)}], [gold({(0, 0)}), gold({(1, 1)}, {(0, 0)})], 1 - 3 / 5, 2 / 3, 1 / 2),
    ],
)
def test_aer_against_hand_computed_cases(predicted, golds, aer, precision, recall):
    result = alignment_error_rate(predicted, golds)
    assert result["aer"] == pytest.approx(aer)
    assert result["precision"] == pytest.approx(precision)
    assert result["recall"] == pytest.approx(recall)


def test_an_alignment_file_of_empty_lines_links_nothing(tmp_path):
    (tmp_path / "none.txt").write_text("\n\n", encoding="utf-8")
    predicted = read_pharaoh(tmp_path / "none.txt")
    assert predicted == [gold(set()), gold(set())]
    assert alignment_error_rate(predicted, [gold({(0, 0)}), gold({(1, 1)})])["aer"] == 1.0


def test_aer_refuses_files_of_different_lengths():
    with pytest.raises(ValueError, match="2 predicted alignments but 1 gold"):
        alignment_error_rate([set(), set()], [gold(set())])


def test_symmetrize_on_a_hand_built_example():
    forward = {(0, 0), (1, 1), (2, 1), (4, 4)}
    reverse = {(0, 0), (1, 1), (2, 2), (3, 4)}
    assert symmetrize(forward, reverse, "intersection") == {(0, 0), (1, 1)}
    assert symmetrize(forward, reverse, "union") == forward | reverse
    # grow-diag from (1, 1): (2, 1) aligns source word 2, then (2, 2) target word 2 (diagonal of (1, 1));
    # (4, 4) and (3, 4) are not next to the intersection: final-and adds (4, 4) (both words unaligned), then
    # (3, 4) no longer qualifies (target word 4 is aligned)
    assert symmetrize(forward, reverse) == {(0, 0), (1, 1), (2, 1), (2, 2), (4, 4)}
    with pytest.raises(ValueError, match="symmetrization 'gdf'"):
        symmetrize(forward, reverse, "gdf")


@pytest.fixture(scope="module")
def tiny_model():
    src = ["the cat sleeps", "a red ball rolls away", "dogs bark", "the old man walks home slowly"]
    tgt = ["le chat dort", "une balle rouge roule", "les chiens aboient", "le vieil homme rentre lentement"]
    tok = train_tokenizer(src + tgt, vocab_size=80, min_frequency=1)
    torch.manual_seed(0)
    model = build_model(model_config(tok, d_model=16, layers=2, heads=2, ffn_dim=32, attention_init="normal"), seed=0)
    model.config._attn_implementation = "eager"
    return model.eval(), tok, [s.split() for s in src], [t.split() for t in tgt]


def direct_links(model, tok, src_words, tgt_words, layer, shift=False, heads=None):
    """Argmax source word per target word, from `output_attentions` with loops over tokens (the slow, plain way);
    ``shift``: each subword's row is the next step's, where the subword is the decoder input (Shift-Att);
    ``heads``: average only the first N heads."""
    enc = tok(" ".join(src_words), text_target=" ".join(tgt_words), return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], labels=enc["labels"], output_attentions=True)
    cross = out.cross_attentions[layer][0][:heads].mean(0)  # (J, I), heads averaged
    sw = enc.word_ids(0)
    tw = tok(text_target=" ".join(tgt_words)).word_ids()
    links = set()
    for j in range(len(tgt_words)):
        rows = [t + shift for t, w in enumerate(tw) if w == j]
        row = cross[rows].mean(0)  # (I,)
        scores = [sum(float(row[t]) for t, w in enumerate(sw) if w == i) for i in range(len(src_words))]
        links.add((max(range(len(scores)), key=scores.__getitem__), j))
    return links


@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("layer", [0, 1])
def test_align_corpus_matches_the_attention_read_directly(tiny_model, layer, shift):
    model, tok, src, tgt = tiny_model
    got = align_corpus(model, tok, src, tgt, layer=layer, batch_size=3, progress=False, shift=shift)  # padded batches
    assert got == [direct_links(model, tok, s, t, layer, shift) for s, t in zip(src, tgt, strict=True)]
    assert all(len(links) == len(t) for links, t in zip(got, tgt, strict=True))  # one link per target word


def test_align_and_aer_commands(tiny_model, tmp_path, capsys):
    model, tok, src, tgt = tiny_model
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    pairs = [" ".join(s) + " ||| " + " ".join(t) for s, t in zip(src, tgt, strict=True)] + ["lonely ||| "]
    (tmp_path / "pairs.txt").write_text("\n".join(pairs) + "\n", encoding="utf-8")
    assert cli_main(["align", "--model", str(tmp_path / "model"), "--input", str(tmp_path / "pairs.txt"),
                     "--output", str(tmp_path / "out.txt"), "--layer", "1", "--batch-size", "2"]) == 0  # fmt: skip
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == len(pairs) and lines[-1] == ""  # an empty side: an empty line, never a missing one
    expected = [direct_links(model, tok, s, t, 1) for s, t in zip(src, tgt, strict=True)]
    assert [parse_pharaoh(line).sure for line in lines[:-1]] == expected
    # score them against a gold file that holds exactly those links, 1-indexed, plus one possible link
    gold_lines = [" ".join(f"{i + 1}-{j + 1}" for i, j in sorted(e)) for e in expected] + ["1p1"]
    (tmp_path / "gold.txt").write_text("\n".join(gold_lines) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert cli_main(["aer", "--hyp", str(tmp_path / "out.txt"), "--gold", str(tmp_path / "gold.txt"),
                     "--gold-one-indexed", "--json", str(tmp_path / "aer.json")]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("AER 0.00  precision 100.00  recall 100.00")
    assert json.loads((tmp_path / "aer.json").read_text())["aer"] == 0.0
    assert cli_main(["align", "--model", str(tmp_path / "model"), "--input", str(tmp_path / "pairs.txt"),
                     "--output", str(tmp_path / "shift.txt"), "--layer", "1", "--shift"]) == 0  # fmt: skip
    lines = (tmp_path / "shift.txt").read_text(encoding="utf-8").split("\n")[:-1]
    shifted = [direct_links(model, tok, s, t, 1, shift=True) for s, t in zip(src, tgt, strict=True)]
    assert shifted != expected  # (this model's layer 1 reads differently one step later)
    expected = shifted
    assert [parse_pharaoh(line).sure for line in lines[:-1]] == expected and lines[-1] == ""
    assert cli_main(["align", "--model", str(tmp_path / "model"), "--input", str(tmp_path / "pairs.txt"),
                     "--output", str(tmp_path / "head.txt"), "--layer", "1", "--heads", "1"]) == 0  # fmt: skip
    lines = (tmp_path / "head.txt").read_text(encoding="utf-8").split("\n")[:-1]
    expected = [direct_links(model, tok, s, t, 1, heads=1) for s, t in zip(src, tgt, strict=True)]
    assert expected != [direct_links(model, tok, s, t, 1) for s, t in zip(src, tgt, strict=True)]  # head 0 differs
    assert [parse_pharaoh(line).sure for line in lines[:-1]] == expected and lines[-1] == ""


def test_read_parallel_words_errors_name_the_file(tmp_path):
    (tmp_path / "a").write_text("x y\nz\n", encoding="utf-8")
    (tmp_path / "b").write_text("u\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has 2 lines but .* has 1"):
        read_parallel_words(tmp_path / "a", tmp_path / "b")
    (tmp_path / "c").write_text("x ||| y\nno separator\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"c:2: expected 'source \|\|\| target'"):
        read_parallel_words(None, None, tmp_path / "c")


@pytest.mark.parametrize("method", ["forward", "backward", "intersection", "grow-diag-final-and"])
def test_align_corpus_with_a_symmetric_model_combines_both_directions(tiny_model, method, tmp_path):
    from hf_syntax_mt import SymmetricTranslationModel

    forward, tok, src, tgt = tiny_model
    backward = build_model(
        model_config(tok, d_model=16, layers=2, heads=2, ffn_dim=32, attention_init="normal"), seed=1
    ).eval()
    backward.config._attn_implementation = "eager"
    joint = SymmetricTranslationModel.from_directions(forward, backward).eval()
    shift = method == "grow-diag-final-and"  # Shift-Att in both directions
    got = align_corpus(joint, tok, src, tgt, batch_size=3, progress=False, method=method, shift=shift)
    st = align_corpus(forward, tok, src, tgt, progress=False, shift=shift)
    ts = [{(i, j) for j, i in links} for links in align_corpus(backward, tok, tgt, src, progress=False, shift=shift)]
    expected = {"forward": st, "backward": ts}.get(method) or [
        symmetrize(a, b, method) for a, b in zip(st, ts, strict=True)
    ]
    assert got == expected
    if method == "intersection":  # the command loads the joint model through AutoModel
        joint.save_pretrained(tmp_path / "joint")
        tok.save_pretrained(tmp_path / "joint")
        (tmp_path / "src").write_text("\n".join(" ".join(s) for s in src) + "\n", encoding="utf-8")
        (tmp_path / "tgt").write_text("\n".join(" ".join(t) for t in tgt) + "\n", encoding="utf-8")
        assert cli_main(["align", "--model", str(tmp_path / "joint"), "--src", str(tmp_path / "src"), "--tgt",
                         str(tmp_path / "tgt"), "--output", str(tmp_path / "out"), "--symmetrize", method]) == 0  # fmt: skip
        lines = (tmp_path / "out").read_text(encoding="utf-8").split("\n")[:-1]
        assert [parse_pharaoh(line).sure for line in lines] == expected
