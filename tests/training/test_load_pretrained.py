"""`training.factory.load_pretrained`: a checkpoint loaded with options its config did not have (two-step document
training) reports the parameters those options add in one line, and still names keys that are missing although the
checkpoint's own architecture has them, keys it holds that the model does not use, and shape mismatches (issue 44)."""

import logging

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_config import TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.training import build_model
from hf_syntax_mt.training.factory import _new_modules, load_pretrained
from hf_syntax_mt.training.script_args import SAVED_ONLY

torch.set_num_threads(1)


@pytest.fixture
def sentence_level(tmp_path):
    model = build_model(SyntaxMTConfig(**TINY), seed=0)
    model.save_pretrained(tmp_path / "sentence")
    return tmp_path / "sentence", model


def document_config(directory, **options):
    base = SyntaxMTConfig.from_pretrained(directory)
    values = {k: v for k, v in base.to_dict().items() if k not in SAVED_ONLY}
    return base, SyntaxMTConfig(**{**values, **options})


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_new_context_parameters_are_one_line_and_the_old_weights_load(sentence_level, caplog):
    directory, sentence = sentence_level
    base, config = document_config(directory, context_sentences=1)
    with caplog.at_level(logging.WARNING):
        model = load_pretrained(SyntaxMTForConditionalGeneration, str(directory), config, base)
    # independent: the names a document model has and the sentence-level one does not
    new = set(build_model(config).state_dict()) - set(sentence.state_dict())
    assert new and all(".context_" in n for n in new)
    messages = warnings_of(caplog)
    assert len(messages) == 1 and "\n" not in messages[0], messages
    assert messages[0].startswith(f"initialised {len(new)} new parameters of 3 module(s) that {directory} does not "
                                  "have, as the options added to its config (context_sentences=1) need them: ")  # fmt: skip
    assert messages[0].endswith("model.decoder.layers.*.context_attn, model.encoder.context_encoder, "
                                "model.encoder.layers.*.context_attn")  # fmt: skip
    for name, value in sentence.state_dict().items():  # the sentence-level weights are the checkpoint's
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0, msg=name)


def test_genuinely_missing_and_unexpected_keys_are_still_reported(sentence_level, caplog):
    directory, _ = sentence_level
    weights = load_file(str(directory / "model.safetensors"))
    dropped = [n for n in weights if n.startswith("model.encoder.layers.") and n.endswith(".fc1.weight")]
    assert len(dropped) == TINY["encoder_layers"]
    for name in dropped:
        del weights[name]
    weights["model.encoder.extra_head.weight"] = torch.zeros(2, 2)
    save_file(weights, str(directory / "model.safetensors"), metadata={"format": "pt"})
    base, config = document_config(directory, context_sentences=1)
    with caplog.at_level(logging.WARNING):
        load_pretrained(SyntaxMTForConditionalGeneration, str(directory), config, base)
    messages = warnings_of(caplog)
    assert len(messages) == 2 and messages[0].startswith("initialised "), messages
    assert messages[1] == (f"SyntaxMTForConditionalGeneration load report from {directory}: missing from the checkpoint "
                           "although its own config has them (newly initialised): model.encoder.layers.*.fc1.weight; in "
                           "the checkpoint but not used by this model: model.encoder.extra_head.weight")  # fmt: skip


def test_a_checkpoint_loaded_with_its_own_config_reports_nothing(sentence_level, caplog):
    directory, _ = sentence_level
    base, config = document_config(directory)
    with caplog.at_level(logging.WARNING):
        load_pretrained(SyntaxMTForConditionalGeneration, str(directory), config, base)
    assert warnings_of(caplog) == []


def test_new_modules_are_the_outermost_modules_the_old_model_lacks():
    base = {"m.layers.0.fc.weight", "m.layers.1.fc.weight", "m.embed.weight"}
    new = {"m.layers.0.ctx.q.weight", "m.layers.1.ctx.q.bias", "m.ctx_encoder.layers.0.fc.weight", "m.gate"}
    assert _new_modules(new, base) == ["m.ctx_encoder", "m.gate", "m.layers.*.ctx"]


def test_a_shape_mismatch_keeps_transformers_report_that_names_the_keys(sentence_level):
    """`from_pretrained` raises on a shape mismatch, pointing at "the above report": that report is not dropped."""
    directory, _ = sentence_level
    base = SyntaxMTConfig.from_pretrained(directory)
    config = SyntaxMTConfig(**{**{k: v for k, v in base.to_dict().items() if k not in SAVED_ONLY},
                               "encoder_ffn_dim": 2 * base.encoder_ffn_dim})  # fmt: skip
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    transformers_logger = logging.getLogger("transformers")  # the records of its children that pass their filters
    transformers_logger.addHandler(handler)
    try:
        with pytest.raises(RuntimeError, match="report"):
            load_pretrained(SyntaxMTForConditionalGeneration, str(directory), config, base)
    finally:
        transformers_logger.removeHandler(handler)
    report = [m for m in seen if "LOAD REPORT" in m]
    assert len(report) == 1 and "MISMATCH" in report[0] and "fc1.weight" in report[0], seen


def test_load_with_options_prints_no_load_report_and_loads_the_checkpoints_weights(sentence_level, capfd, caplog):
    """Issue 49: the documents page loaded a sentence-level model with `from_pretrained(..., context_sentences=2)`,
    which prints transformers' load report, a MISSING row per new parameter with raw ANSI codes. The documented
    call, `load_with_options`, prints none of it (nothing on stdout or stderr), logs the one line of
    `load_pretrained`, and gives the checkpoint's weights with the options set."""
    from hf_syntax_mt.training import load_with_options

    directory, sentence = sentence_level
    seen = []  # what transformers logs past its filters (its report goes to its own stderr handler)
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(handler)
    try:
        with caplog.at_level(logging.WARNING):
            model = load_with_options(str(directory), context_sentences=2, context_gating=False)
        out, err = capfd.readouterr()
        assert not [m for m in seen if "LOAD REPORT" in m or "MISSING" in m], seen
        assert "MISSING" not in out + err and "\x1b[" not in out + err, out + err
        # the plain call the page showed before logs the report (what this test guards against)
        SyntaxMTForConditionalGeneration.from_pretrained(directory, context_sentences=2)
        assert [m for m in seen if "LOAD REPORT" in m and "MISSING" in m]
    finally:
        transformers_logger.removeHandler(handler)
    assert (model.config.context_sentences, model.config.context_gating) == (2, False)
    assert model.config.encoder_layers == TINY["encoder_layers"]  # the rest of the config is the checkpoint's
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("hf_")]
    assert len(messages) == 1 and messages[0].startswith("initialised ") and "context_sentences=2" in messages[0]
    for name, value in sentence.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0, msg=name)


def test_load_with_options_names_an_unknown_option(sentence_level):
    from hf_syntax_mt.errors import UserError
    from hf_syntax_mt.training import load_with_options

    directory, _ = sentence_level
    with pytest.raises(UserError, match="has no field 'context_sentence'; did you mean context_sentences"):
        load_with_options(str(directory), context_sentence=2)
