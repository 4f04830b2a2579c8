"""Guided alignment (Garg et al. 2019, issue 14): the loss against a direct computation from the returned
cross-attention, its weight in the total loss, training pulls the supervised head onto the links, the Pharaoh ->
subword targets on a hand-built example, and the config options' checks and round trip."""

import pytest
import torch
from tiny_config import EOS, PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.alignment import AlignmentTargets, target_alignment, token_words


def model(**kw):
    torch.manual_seed(0)
    return SyntaxMTForConditionalGeneration(SyntaxMTConfig(**{**TINY, "init_std": 0.3, **kw}))


def batch():
    ids = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, 11, EOS, PAD]])
    return {
        "input_ids": ids, "attention_mask": (ids != PAD).long(),
        "labels": torch.tensor([[12, 13, 14, EOS], [15, 16, EOS, -100]]),
        "decoder_alignment": torch.tensor([[2, 0, -100, 4], [1, 0, -100, 0]]),  # -100: no link; row 1 pos 3 = padding
    }  # fmt: skip


def test_the_loss_is_the_nll_of_the_linked_source_token_under_the_supervised_heads():
    m = model(guided_alignment_weight=0.5, guided_alignment_layer=1, guided_alignment_heads=2).eval()
    b = batch()
    with torch.no_grad():
        out = m(**b, output_attentions=True)
    A = out.cross_attentions[1][:, :2].mean(1)  # the first two heads of decoder layer 1, (B, T, S)
    direct = 0.0
    for i in range(2):
        for t in range(4):
            s = int(b["decoder_alignment"][i, t])
            if s >= 0 and b["labels"][i, t] != -100:
                direct -= torch.log(A[i, t, s]).item()
    n_tokens = int((b["labels"] != -100).sum())
    torch.testing.assert_close(out.alignment_loss, torch.tensor(direct / n_tokens), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.loss, out.translation_loss + 0.5 * out.alignment_loss)
    # without the links (inference) nothing is recorded and the loss is the translation loss
    without = m(**{k: v for k, v in b.items() if k != "decoder_alignment"})
    assert without.alignment_loss is None if hasattr(without, "alignment_loss") else True
    torch.testing.assert_close(without.loss, out.translation_loss)


def test_training_pulls_the_supervised_head_onto_the_links():
    m = model(guided_alignment_weight=1.0, guided_alignment_layer=1).train()
    b = batch()
    optimizer = torch.optim.Adam(m.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        out = m(**b)
        first = first if first is not None else float(out.alignment_loss.detach())
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    m.eval()
    with torch.no_grad():
        out = m(**b, output_attentions=True)
    assert float(out.alignment_loss) < 0.5 * first
    head = out.cross_attentions[1][:, 0]  # (B, T, S)
    linked = (b["decoder_alignment"] >= 0) & (b["labels"] != -100)
    assert torch.equal(head.argmax(-1)[linked], b["decoder_alignment"][linked])


def test_align_reads_the_supervised_heads_of_a_guided_model_by_default():
    from hf_syntax_mt.alignment import align, alignment_read

    m = model(guided_alignment_weight=0.5, guided_alignment_layer=0, guided_alignment_heads=2).eval()
    b = batch()
    with torch.no_grad():
        cross = m(**b, output_attentions=True).cross_attentions  # per layer (B, H, T, S)

    def soft(layer, heads):  # the expected matrix of pair 0 (no padding), straight from the returned attention
        return cross[layer][0, :heads].mean(0)

    default = align(m, b["input_ids"], b["labels"], b["attention_mask"])  # guided layer 0, its 2 supervised heads
    torch.testing.assert_close(default[0].soft, soft(0, 2))
    assert default[0].links == [(int(i), j) for j, i in enumerate(soft(0, 2).argmax(-1).tolist())]
    every = align(m, b["input_ids"], b["labels"], b["attention_mask"], heads=4)
    torch.testing.assert_close(every[0].soft, soft(0, 4))
    other = align(m, b["input_ids"], b["labels"], b["attention_mask"], layer=1)  # not the guided layer: all heads
    torch.testing.assert_close(other[0].soft, soft(1, 4))
    assert alignment_read(m.config) == (0, 2) and alignment_read(m.config, layer=1) == (1, 4)
    assert alignment_read(model().config) == (1, 4)  # no guided alignment: the last layer, every head
    with pytest.raises(ValueError, match="heads=5.*1 to 4"):
        align(m, b["input_ids"], b["labels"], b["attention_mask"], heads=5)


def test_alignment_targets_map_word_links_onto_subwords():
    # "the cats sat" / "les chats assis": words split into subwords by character offsets
    src_text, tgt_text = "the cats sat", "les chats assis"
    src_offsets = [(0, 3), (4, 7), (7, 8), (9, 12), (0, 0)]  # the | cat s | sat | </s>
    tgt_offsets = [(0, 3), (4, 8), (8, 9), (10, 15), (0, 0)]  # les | chat s | assis | </s>
    assert token_words(src_text, src_offsets) == [0, 1, 1, 2, None]
    assert token_words(tgt_text, tgt_offsets) == [0, 1, 1, 2, None]
    links = {(0, 0), (1, 1), (2, 2), (0, 2)}  # "assis" (target word 2) has two links, to source words 0 and 2
    got = target_alignment([0, 1, 1, 2, None], [0, 1, 1, 2, None], links)
    # target word 2 links to source words [0, 2]; the middle (index 1) is word 2 -> its first subword, position 3
    assert got == [0, 1, 1, 3, -100]
    assert target_alignment([0, None], [0, None], set()) == [-100, -100]


def test_alignment_targets_on_a_dataset_with_a_real_tokenizer():
    from hf_syntax_mt.training import train_tokenizer

    tokenizer = train_tokenizer(["the cats sat on the mat", "les chats assis sur le tapis"] * 20, vocab_size=60)
    rows = {"source": ["the cats sat"], "target": ["les chats assis"], "alignment": ["0-0 1-1 2-2"]}
    rows["input_ids"] = [tokenizer("the cats sat")["input_ids"]]
    rows["labels"] = [tokenizer(text_target="les chats assis")["input_ids"]]
    out = AlignmentTargets(tokenizer)(rows, [0])["decoder_alignment"][0]
    assert len(out) == len(rows["labels"][0])
    src_words = token_words("the cats sat", tokenizer("the cats sat", return_offsets_mapping=True)["offset_mapping"])
    tgt_words = token_words("les chats assis", tokenizer(text_target="les chats assis",
                                                          return_offsets_mapping=True)["offset_mapping"])  # fmt: skip
    for t, w in enumerate(tgt_words):
        if w is None:
            assert out[t] == -100
        else:
            assert src_words[out[t]] == w and src_words.index(w) == out[t]  # the first subword of the same word
    bad = {**rows, "labels": [rows["labels"][0][:-1]]}
    with pytest.raises(ValueError, match="row 0: the target re-tokenised"):
        AlignmentTargets(tokenizer)(bad, [0])
    with pytest.raises(ValueError, match="row 0 of 'alignment'"):
        AlignmentTargets(tokenizer)({**rows, "alignment": ["0-x"]}, [0])


def test_guided_alignment_options_are_checked_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="guided_alignment_weight"):
        SyntaxMTConfig(**TINY, guided_alignment_weight=-1.0)
    with pytest.raises(ValueError, match="guided_alignment_layer"):
        SyntaxMTConfig(**TINY, guided_alignment_weight=0.1, guided_alignment_layer=2)
    with pytest.raises(ValueError, match="guided_alignment_heads"):
        SyntaxMTConfig(**TINY, guided_alignment_weight=0.1, guided_alignment_heads=5)
    m = model(guided_alignment_weight=0.05, guided_alignment_layer=0, guided_alignment_heads=3)
    m.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path)
    c = loaded.config
    assert (c.guided_alignment_weight, c.guided_alignment_layer, c.guided_alignment_heads) == (0.05, 0, 3)
