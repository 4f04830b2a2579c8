"""The target dependency-relation method (`methods.decoder_deprel`): its column from a target parse, computed by its
own `Column.compute` with the config's label vocabulary, against a hand-built example; its loss against a direct
cross-entropy on the decoder output; no attention kept for it; its classifier dropped by the export; its options
round-trip through save_pretrained and bad ones are refused."""

import pytest
import torch
from tiny_config import PAD, TINY
from transformers.models.marian.modeling_marian import shift_tokens_right

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.data.parsed import ParsedSentence
from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.methods import column_specs, get_method

LABELS = ["nsubj", "root", "obj"]


def tiny_config(**options) -> SyntaxMTConfig:
    return SyntaxMTConfig(**TINY, **options)


def test_the_column_gives_each_target_subword_its_words_relation_in_the_configs_vocabulary(data_marian_tokenizer):
    tok = data_marian_tokenizer
    text = "le chat mange la souris"
    parse = ParsedSentence(text.split(), [2, 3, 0, 5, 3], ["det", "nsubj", "root", "det", "obj:lvc"], ["_"] * 5)
    config = tiny_config(decoder_deprel_weight=0.5, decoder_deprel_labels=LABELS)
    out = align_parse(tok, parse, text=text, target=True, columns=["decoder_deprel_ids"], config=config)
    by_hand = {0: -100, 1: 0, 2: 1, 3: -100, 4: 2}  # det is not in LABELS; "obj:lvc" -> "obj"
    assert out["decoder_deprel_ids"] == [-100 if w is None else by_hand[w] for w in out["word_ids"]]
    assert out["input_ids"] == tok(text_target=text)["input_ids"]  # aligned with the labels
    short = align_parse(tok, parse, text=text, target=True, columns=["decoder_deprel_ids"], config=config,
                        max_length=3)  # fmt: skip
    assert short["decoder_deprel_ids"] == out["decoder_deprel_ids"][:2] + [-100]  # cut, the final </s> kept
    assert column_specs()["decoder_deprel_ids"].parse == "target"


def test_the_loss_is_the_cross_entropy_of_the_classifier_on_the_decoder_output_and_keeps_no_attention():
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(tiny_config(decoder_deprel_weight=0.5, decoder_deprel_labels=LABELS))
    model.train()
    input_ids, labels = (
        torch.tensor([[5, 6, 7, 2], [8, 9, 2, 1]]),
        torch.tensor([[10, 11, 12, 2], [13, 2, -100, -100]]),
    )
    target = torch.tensor([[0, 2, -100, -100], [1, -100, 1, 1]])  # the last two of row 1 are padding: not counted
    mask = (input_ids != PAD).long()
    out = model(input_ids=input_ids, attention_mask=mask, labels=labels, decoder_deprel_ids=target)
    with torch.no_grad():  # directly: the decoder's output states of the same inputs, the classifier, the NLL
        decoder_input_ids = shift_tokens_right(labels, PAD, PAD)
        states = model.model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_input_ids)[0]
        logits = model.decoder_deprel_head(states)  # (B, T, L)
        keep = (target != -100) & (labels != -100)
        direct = -sum(torch.log_softmax(logits[b, t], -1)[target[b, t]] for b, t in keep.nonzero().tolist())
    n = int((labels != -100).sum())
    torch.testing.assert_close(out["decoder_deprel_loss"].detach(), direct / n, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.loss.detach(), out.translation_loss.detach() + 0.5 * direct / n, rtol=1e-4,
                               atol=1e-5)  # fmt: skip
    method = get_method("decoder_deprel")
    assert method.wants_record(model, {"labels": labels}) == (False, set())  # its loss reads no attention


def test_the_export_drops_the_classifier():
    model = SyntaxMTForConditionalGeneration(tiny_config(decoder_deprel_weight=0.5))
    state = dict(model.state_dict())
    get_method("decoder_deprel").export_state(model, state)
    assert not any(k.startswith("decoder_deprel_head.") for k in state)
    assert set(model.state_dict()) - set(state) == {"decoder_deprel_head.weight", "decoder_deprel_head.bias"}


def test_its_options_round_trip_through_save_pretrained_and_bad_labels_are_refused(tmp_path):
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(tiny_config(decoder_deprel_weight=0.25, decoder_deprel_labels=LABELS))
    model.save_pretrained(tmp_path)
    loaded = SyntaxMTForConditionalGeneration.from_pretrained(tmp_path)
    assert (loaded.config.decoder_deprel_weight, loaded.config.decoder_deprel_labels) == (0.25, LABELS)
    assert loaded.decoder_deprel_head.out_features == len(LABELS)  # the classifier's size is the labels'
    torch.testing.assert_close(loaded.decoder_deprel_head.weight, model.decoder_deprel_head.weight)
    for bad in (["nsubj", "nsubj"], [], "nsubj", ["nsubj", ""], [1, 2]):
        with pytest.raises(UserError, match="decoder_deprel_labels=.* must be a list"):
            tiny_config(decoder_deprel_weight=0.5, decoder_deprel_labels=bad)
    with pytest.raises(UserError, match="decoder_deprel_weight"):
        tiny_config(decoder_deprel_weight=-1.0)
