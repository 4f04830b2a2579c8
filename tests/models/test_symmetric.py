"""`SymmetricTranslationModel` as a `PreTrainedModel`: its own config (both directions inside), save/load through the
Auto classes with identical outputs, Trainer checkpoints that resume to the same weights, joining two trained models
without touching their weights, and `align` against the two directions' own alignments."""

import pytest
import torch
from datasets import Dataset
from tiny_config import EOS, PAD, TINY
from transformers import AutoConfig, AutoModel, Seq2SeqTrainer, Seq2SeqTrainingArguments

from hf_syntax_mt import SymmetricTranslationConfig, SymmetricTranslationModel, SyntaxMTConfig
from hf_syntax_mt.alignment import DataCollatorForSymmetricTranslation, align, symmetrize


def config(gamma=0.5, **overrides):
    forward = SyntaxMTConfig(**{**TINY, "alignment_bias_layers": [1], **overrides})
    backward = SyntaxMTConfig(**TINY)
    return SymmetricTranslationConfig(forward=forward.to_dict(), backward=backward.to_dict(), symmetry_weight=gamma)


def batch():
    collate = DataCollatorForSymmetricTranslation(pad_token_id=PAD)
    return collate([{"input_ids": [5, 6, 7, 8, EOS], "labels": [13, 14, EOS]},
                    {"input_ids": [9, EOS], "labels": [15, 16, 17, 18, EOS]}])  # fmt: skip


def test_config_holds_both_directions_and_validates():
    c = config(gamma=0.25, alignment_layer=0)
    assert isinstance(c.forward, SyntaxMTConfig) and isinstance(c.backward, SyntaxMTConfig)
    assert c.alignment_layers == (0, 1)  # forward: its alignment_layer; backward: its last decoder layer
    with pytest.raises(ValueError, match="symmetry_weight=-1 must be a number >= 0"):
        SymmetricTranslationConfig(forward=TINY, backward=TINY, symmetry_weight=-1)
    with pytest.raises(ValueError, match="backward_alignment_layer=5 but the backward model has decoder_layers=2"):
        SymmetricTranslationConfig(forward=TINY, backward=TINY, backward_alignment_layer=5)


def test_save_and_load_through_the_auto_classes(tmp_path):
    torch.manual_seed(0)
    model = SymmetricTranslationModel(config()).eval()
    inputs = batch()
    expected = model(**inputs)
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).symmetry_weight == 0.5
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, SymmetricTranslationModel)
    assert loaded.config.forward.alignment_bias_layers == [1]
    got = loaded(**inputs)
    for key in ("loss", "forward_loss", "backward_loss", "symmetry_bonus"):
        assert torch.allclose(got[key], expected[key], atol=1e-6), key
    # each direction keeps its tied embeddings after loading
    fwd = loaded.forward_model
    assert fwd.lm_head.weight.data_ptr() == fwd.model.shared.weight.data_ptr()


def test_from_directions_keeps_the_trained_weights():
    from hf_syntax_mt import SyntaxMTForConditionalGeneration

    torch.manual_seed(1)
    fwd = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY))
    bwd = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY))
    before = {k: v.clone() for k, v in fwd.state_dict().items()}
    joint = SymmetricTranslationModel.from_directions(fwd, bwd, symmetry_weight=0.5, layers=(0, 1))
    assert joint.forward_model is fwd and joint.layers == (0, 1) and joint.symmetry_weight == 0.5
    for key, value in fwd.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert SymmetricTranslationModel(fwd, bwd).config.forward.d_model == TINY["d_model"]  # the old signature


def toy_pairs(n=48):
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(n):
        src = torch.randint(3, 40, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g).tolist()
        rows.append({"input_ids": src + [EOS], "labels": [t + 10 for t in reversed(src)] + [EOS]})
    return Dataset.from_list(rows)


def train(out, max_steps, resume=None):
    torch.manual_seed(0)
    model = SymmetricTranslationModel(config(dropout=0.1))
    args = Seq2SeqTrainingArguments(output_dir=str(out), per_device_train_batch_size=8, learning_rate=5e-3,
                                    max_steps=max_steps, save_strategy="steps", save_steps=3, report_to=[], seed=0,
                                    lr_scheduler_type="constant",  # the same rates whatever max_steps
                                    use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)  # fmt: skip
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=toy_pairs(),
                             data_collator=DataCollatorForSymmetricTranslation(pad_token_id=PAD))  # fmt: skip
    trainer.train(resume_from_checkpoint=resume)
    return model


def test_trainer_checkpoints_resume_to_the_same_weights(tmp_path):
    whole = train(tmp_path / "whole", 6)
    train(tmp_path / "parts", 3)
    assert (tmp_path / "parts" / "checkpoint-3" / "model.safetensors").is_file()
    resumed = train(tmp_path / "parts", 6, resume=str(tmp_path / "parts" / "checkpoint-3"))
    a, b = whole.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key


@pytest.mark.parametrize("method", ["forward", "backward", "intersection", "grow-diag-final-and"])
def test_align_symmetrises_the_two_directions(method):
    torch.manual_seed(0)
    model = SymmetricTranslationModel(config()).eval()
    b = batch()
    got = model.align(b["input_ids"], b["labels"], b["reverse_input_ids"], b["reverse_labels"], b["attention_mask"],
                      b["reverse_attention_mask"], method=method)  # fmt: skip
    st = align(model.forward_model, b["input_ids"], b["labels"], b["attention_mask"], 1)
    ts = align(model.backward_model, b["reverse_input_ids"], b["reverse_labels"], b["reverse_attention_mask"], 1)
    for k in range(2):
        forward = set(st[k].links)
        backward = {(i, j) for (j, i) in ts[k].links}
        assert all(0 <= i < int(b["attention_mask"][k].sum()) for i, _ in backward)
        expected = {"forward": forward, "backward": backward}.get(method) or symmetrize(forward, backward, method)
        assert got[k] == expected
