"""The train script's steps one by one (`training.script.run` is their list; issue 45), each on hand-built inputs:
which splits are scored, which checkpoint a resume names, which preprocessor a split gets and why one is refused,
the guided-alignment checks, document context, decoding, metrics, generation settings, signatures and the model
card's texts. The end-to-end runs are in `test_train_script.py`, `test_resume.py` and `test_portable_run.py`."""

from types import SimpleNamespace

import pytest
import sacrebleu
from datasets import Dataset
from transformers import MarianConfig

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.data.preprocess import SyntaxMTPreprocessor
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.prepare import (
    _config_values,
    any_do,
    check_flag_columns,
    choose_parser,
    choose_preprocessor,
    freeze_sentence_level,
    method_transforms,
    run_transforms,
    will_train,
)
from hf_syntax_mt.training.script import (
    Results,
    _default_limitations,
    card_datasets,
    card_languages,
    configure_generation,
    make_compute_metrics,
    make_decoder,
    parser_text,
    resume_checkpoint,
    sign_run,
    splits_to_score,
    training_text,
)
from hf_syntax_mt.training.script_args import DataArguments, ModelArguments

SMALL = dict(vocab_size=60, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
             pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["the cat sleeps", "a dog runs fast", "the bird sings", "le chat dort", "un chien court vite"]
    return train_tokenizer(texts * 4, vocab_size=60, min_frequency=1)


def flags(do_train=False, do_eval=False, do_predict=False, predict_with_generate=True):
    return SimpleNamespace(do_train=do_train, do_eval=do_eval, do_predict=do_predict,
                           predict_with_generate=predict_with_generate)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# What runs
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, trains, named, scored",
    [(flags(), True, False, ["validation", "test"]),  # no --do_* flag: train, evaluate and predict
     (flags(do_train=True), True, True, []),
     (flags(do_eval=True), False, True, ["validation"]),
     (flags(do_predict=True), False, True, ["test"]),
     (flags(do_train=True, do_eval=True, do_predict=True), True, True, ["validation", "test"]),
     (flags(predict_with_generate=False), True, False, [])],
)  # fmt: skip
def test_which_steps_run_follows_the_do_flags(args, trains, named, scored):
    """(An --eval_strategy alone is no --do_eval: test_an_eval_strategy_is_no_do_eval.)"""
    assert will_train(args) is trains
    assert any_do(args) is named  # some --do_* flag was given
    assert splits_to_score({"train": 1, "validation": 1, "test": 1}, args) == scored
    assert splits_to_score({"train": 1, "test": 1}, args) == [s for s in scored if s == "test"]  # no validation split


def test_resume_true_names_the_last_checkpoint(tmp_path):
    for step in (5, 10, 40):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    args = SimpleNamespace(output_dir=str(tmp_path), resume_from_checkpoint="true")
    assert resume_checkpoint(args) == str(tmp_path / "checkpoint-40")  # by number, not by name: 40 > 10 > 5
    args.resume_from_checkpoint = str(tmp_path / "checkpoint-5")
    assert resume_checkpoint(args) == str(tmp_path / "checkpoint-5")
    args.resume_from_checkpoint = None
    assert resume_checkpoint(args) is None


# ------------------------------------------------------------------------------------------------------------------
# Model and data
# ------------------------------------------------------------------------------------------------------------------
def test_a_config_from_a_checkpoint_takes_the_options_and_the_parser_to_record():
    base = SyntaxMTConfig(**SMALL)
    spacy = {"backend": "spacy", "model": "en_core_web_sm", "version": "3"}
    values = _config_values(base, {"encoder_pascal_heads": [2, 0]}, spacy, overrides={})
    assert values["encoder_pascal_heads"] == [2, 0] and values["source_parser"] == spacy
    assert not {"model_type", "transformers_version", "architectures"} & set(values)
    SyntaxMTConfig(**values)  # what build_config_and_model passes back: a valid config
    conllu = {"backend": "conllu", "path": "train.conllu"}  # --config_overrides source_parser=... wins
    assert _config_values(base, {}, spacy, overrides={"source_parser": conllu})["source_parser"] == conllu


def test_the_parser_is_none_when_every_split_is_pre_parsed_with_conllu(tmp_path):
    conllu = tmp_path / "train.conllu"
    conllu.write_text("1\tcats\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    data = DataArguments(parser="conllu", parser_model=str(conllu))
    parsed = Dataset.from_dict({"source": ["cats"], "target": ["chats"], "source_parse": [None]})
    plain = Dataset.from_dict({"source": ["cats"], "target": ["chats"]})
    assert choose_parser(data, {"train": parsed, "test": parsed}) == (None, None)
    parser, recorded = choose_parser(data, {"train": parsed, "test": plain})  # one split needs the parser
    assert parser is not None and recorded is None  # a CoNLL-U file parses only its own sentences: not recorded
    assert choose_parser(DataArguments(parser="none"), {"train": plain}) == (None, None)


def test_freezing_needs_a_syntax_model():
    with pytest.raises(ValueError, match="--freeze_sentence_level needs a SyntaxMT model"):
        freeze_sentence_level(object(), MarianConfig(**SMALL), ModelArguments(freeze_sentence_level=True))
    freeze_sentence_level(object(), MarianConfig(**SMALL), ModelArguments())  # not asked: nothing to do


def test_guided_alignment_and_its_file_come_together():
    guided, plain = SyntaxMTConfig(**SMALL, guided_alignment_weight=0.05), SyntaxMTConfig(**SMALL)
    data = DataArguments(train_alignment_file="train.align")
    linked, unlinked = ["source", "target", "alignment"], ["source", "target"]
    check_flag_columns(guided, data, linked, training=True)
    check_flag_columns(plain, DataArguments(), unlinked, training=True)
    check_flag_columns(guided, data, unlinked, training=False)  # not training: nothing is read
    with pytest.raises(ValueError, match=r"guided_alignment_weight=0\.05 trains on word alignments: give "
                                         "--train_alignment_file"):  # fmt: skip
        check_flag_columns(guided, data, unlinked, training=True)
    with pytest.raises(ValueError, match=r"--train_alignment_file train\.align is read only by guided alignment"):
        check_flag_columns(plain, data, linked, training=True)
    with pytest.raises(ValueError, match="is read only by guided alignment"):
        check_flag_columns(MarianConfig(**SMALL), data, linked, training=True)


def test_each_split_gets_the_preprocessor_its_columns_and_model_need(tokenizer):
    data, parser = DataArguments(max_source_length=32, max_target_length=32), None
    plain, parsed = ["source", "target"], ["source", "target", "source_parse"]
    vanilla, bare = MarianConfig(**SMALL), SyntaxMTConfig(**SMALL)
    pascal = SyntaxMTConfig(**SMALL, encoder_pascal_heads=[2, 0])
    dbsa = SyntaxMTConfig(**SMALL, decoder_dbsa_heads=[0, 1])
    fn = choose_preprocessor("train", plain, vanilla, tokenizer, parser, data)
    assert fn.tokenize_only and (fn.max_source_length, fn.max_target_length) == (32, 32)
    fn = choose_preprocessor("train", parsed, vanilla, tokenizer, parser, data)  # parses given to a vanilla model
    assert type(fn) is SyntaxMTPreprocessor and fn.source_parse_column == "source_parse"
    assert choose_preprocessor("train", plain, bare, tokenizer, parser, data).tokenize_only
    fn = choose_preprocessor("test", parsed, pascal, tokenizer, parser, data)
    assert isinstance(fn, SyntaxMTPreprocessor) and fn.source_parse_column == "source_parse"
    with pytest.raises(ValueError, match=r"the model translates with source trees but the test split has none: "
                                         r"give --test_source_conllu or --parser"):  # fmt: skip
        choose_preprocessor("test", plain, pascal, tokenizer, parser, data)
    with pytest.raises(ValueError, match=r"the model trains on target trees but the train split has none: give "
                                         "--train_target_conllu or --target_parser"):  # fmt: skip
        choose_preprocessor("train", parsed, dbsa, tokenizer, parser, data)
    # a split that only decodes reads no target tree: none asked, the ones it brings are used (its loss has them)
    assert choose_preprocessor("validation", parsed, dbsa, tokenizer, parser, data).tokenize_only
    fn = choose_preprocessor("validation", [*parsed, "target_parse"], dbsa, tokenizer, parser, data)
    assert fn.target_parse_column == "target_parse" and list(map(str, fn.target_columns)) == ["decoder_dbsa_heads"]
    # nor does a split of a model that does not train: its training split decodes
    assert choose_preprocessor("train", parsed, dbsa, tokenizer, parser, data, training=False).tokenize_only


def test_document_context_is_the_previous_sentences_of_the_same_document():
    ds = Dataset.from_dict({"source": ["a", "b", "c", "d", "e"], "target": list("ABCDE"),
                            "doc_id": ["x", "x", "x", "y", "y"]})  # fmt: skip
    from hf_syntax_mt.methods import TransformContext

    def steps(split, rows, k):  # the train script's raw steps of a model with context_sentences=k
        config = SyntaxMTConfig(**SMALL, context_sentences=k)
        return run_transforms(method_transforms(config), "raw", rows, config, TransformContext(split, rows, None))

    assert steps("train", ds, 0) is ds  # k = 0: a sentence-level model, nothing added
    context = steps("train", ds, 2)["context"]
    assert context == [[], ["a"], ["a", "b"], [], ["d"]]  # by hand: up to 2 previous sentences, oldest first
    with pytest.raises(ValueError, match="context_sentences=2 needs document boundaries: give --test_docid_file"):
        steps("test", ds.remove_columns("doc_id"), 2)


# ------------------------------------------------------------------------------------------------------------------
# Generation, scoring, signatures, model card
# ------------------------------------------------------------------------------------------------------------------
def test_generation_settings_come_from_the_lengths_and_beams():
    model = SimpleNamespace(generation_config=SimpleNamespace(max_length=None, num_beams=1))
    args = SimpleNamespace(generation_num_beams=None, generation_max_length=None)
    configure_generation(model, DataArguments(max_target_length=77), args)
    assert (model.generation_config.max_length, model.generation_config.num_beams) == (77, 1)
    assert args.generation_max_length == 77
    args = SimpleNamespace(generation_num_beams=4, generation_max_length=20)
    configure_generation(model, DataArguments(max_target_length=77), args)
    assert model.generation_config.num_beams == 4 and args.generation_max_length == 20  # given: kept


def test_decoding_drops_the_label_padding_and_special_tokens(tokenizer):
    ids = tokenizer(["the cat sleeps", "a dog"])["input_ids"]
    width = max(len(r) for r in ids)
    padded = [r + [-100] * (width - len(r)) for r in ids]  # labels as the Trainer returns them
    assert make_decoder(tokenizer)(padded) == [tokenizer.decode(r, skip_special_tokens=True).strip() for r in ids]


def test_compute_metrics_scores_the_decoded_predictions_against_the_labels():
    words = {1: "the", 2: "cat", 3: "sleeps", 4: "dog"}

    def decode(rows):
        return [" ".join(words[i] for i in row) for row in rows]

    preds, labels = [[1, 2, 3], [1, 4, 3]], [[1, 2, 3], [1, 2, 3]]
    scores = make_compute_metrics(decode)(SimpleNamespace(predictions=(preds,), label_ids=labels))
    refs = ["the cat sleeps", "the cat sleeps"]
    hyps = ["the cat sleeps", "the dog sleeps"]
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert set(scores) == {"bleu", "chrf", "ribes"}


def test_the_run_is_signed_with_its_parser_data_and_steps(tmp_path):
    conllu = tmp_path / "train.conllu"
    conllu.write_text("1\tcats\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    raw = {"train": [0, 1, 2], "test": [0, 1]}  # only their lengths sign the run
    results = Results()
    parser = SimpleNamespace(signature=lambda: "spacy|en_core_web_sm|3.7")
    sign_run(results, SyntaxMTConfig(**SMALL), parser, DataArguments(), raw, seed=3, steps=120)
    assert results.parser_signature == "spacy|en_core_web_sm|3.7"
    assert results.model_signature.endswith("|parser:spacy/en_core_web_sm/3.7|seed:3|data:train:3,test:2|steps:120")
    sign_run(results, SyntaxMTConfig(**SMALL), None, DataArguments(train_source_conllu=str(conllu)), raw, 0, 1)
    assert "train.conllu" in results.parser_signature  # the CoNLL-U files the model was trained on
    sign_run(results, SyntaxMTConfig(**SMALL), None, DataArguments(), raw, 0, 1)
    assert results.parser_signature is None and "|parser:none|" in results.model_signature


def test_the_model_card_texts():
    args = SimpleNamespace(world_size=2, per_device_train_batch_size=16, gradient_accumulation_steps=4,
                           learning_rate=5e-4, lr_scheduler_type=SimpleNamespace(value="inverse_sqrt"), seed=7,
                           time_budget_seconds=3600.0)  # fmt: skip
    assert training_text(300, args, 1234.4) == (
        "300 optimizer steps on 2 process(es), per-device batch 16, gradient accumulation 4, learning rate 0.0005 "
        "(inverse_sqrt), seed 7, wall-clock budget 3600 s; train runtime 1234 s."
    )
    args.time_budget_seconds, args.lr_scheduler_type = None, "linear"
    assert training_text(3, args, None).endswith("(linear), seed 7; train runtime 0 s.")
    assert parser_text(DataArguments(), None, None) == "none (the model has no syntax input)"
    spacy = {"backend": "spacy", "model": "fr_core_news_sm"}
    assert parser_text(DataArguments(parser_description="spaCy 3.7."), "spacy|fr", spacy) == (
        'spaCy 3.7. Parser signature: `spacy|fr`. At inference the pipeline parses raw text with '
        '`{"backend": "spacy", "model": "fr_core_news_sm"}`.'
    )  # fmt: skip
    assert parser_text(DataArguments(), "conllu|train.conllu", None).endswith("pass one to the pipeline as `parser=`.")
    assert _default_limitations(12).startswith("Trained for 12 steps only;")


def test_the_model_cards_datasets_and_languages(tmp_path, caplog):
    """Issue 49: the card's metadata names the dataset each scored split came from (a Hub dataset with its config and
    split, or the reference file's name, never its local path) and the languages where the flags are ISO codes."""
    raw = {"train": [1], "validation": [1], "test": [1]}
    scores = {"validation": {}, "test": {}, "test_last_step": {}}
    files = DataArguments(train_source_file=str(tmp_path / "train.en"), train_target_file=str(tmp_path / "train.de"),
                          validation_file=str(tmp_path / "dev.tsv"), test_source_file=str(tmp_path / "t.en"),
                          test_target_file=str(tmp_path / "test_2016_flickr.de"))  # fmt: skip
    assert card_datasets(files, raw, scores) == ([], {
        "validation": {"type": "dev.tsv", "name": "dev.tsv (validation)", "split": "validation"},
        "test": {"type": "test_2016_flickr.de", "name": "test_2016_flickr.de (test)", "split": "test"},
    })  # fmt: skip
    hub = DataArguments(dataset_name="wmt/wmt16", dataset_config_name="de-en")
    assert card_datasets(hub, {"train": [1], "test": [1]}, {"test": {}}) == (["wmt/wmt16"], {
        "test": {"type": "wmt/wmt16", "name": "wmt/wmt16 (test)", "config": "de-en", "split": "test"}})  # fmt: skip
    for local in ("json", str(tmp_path)):  # a file builder or a local folder is no Hub dataset
        datasets, evals = card_datasets(DataArguments(dataset_name=local), {"train": [1], "test": [1]}, {"test": {}})
        assert datasets == [] and "/" not in evals["test"]["type"]
    assert card_datasets(files, raw, {"test": {}})[1].keys() == {"test"}  # a split not scored has no result
    assert card_languages(DataArguments(source_lang="en", target_lang="de_DE")) == ["en", "de_DE"]
    with caplog.at_level("WARNING"):
        assert card_languages(DataArguments(source_lang="fra", target_lang="english words")) == ["fra"]
    assert "--target_lang 'english words' is not an ISO 639 language code" in caplog.text


def test_the_model_card_license_flag(tmp_path):
    """The card's licence is a flag (a model trained on research-only or share-alike data keeps those terms), checked
    before anything runs."""
    from hf_syntax_mt.errors import UserError
    from hf_syntax_mt.training.script_args import parse_args

    argv = ["--output_dir", str(tmp_path / "run"), "--use_cpu"]
    assert parse_args(argv)[2].model_card_license == "apache-2.0"
    assert parse_args([*argv, "--model_card_license", "cc-by-sa-4.0"])[2].model_card_license == "cc-by-sa-4.0"
    with pytest.raises(UserError, match="--model_card_license 'CC BY-SA' is not a Hub licence id"):
        parse_args([*argv, "--model_card_license", "CC BY-SA"])
    assert not (tmp_path / "run").exists()


def test_an_eval_strategy_is_no_do_eval():
    """TrainingArguments turns do_eval on for --eval_strategy steps: the run still trains and scores every split
    (it trained nothing and scored only the validation set)."""
    from hf_syntax_mt.training.script_args import parse_args

    base = ["--output_dir", "unused", "--train_source_file", "s", "--train_target_file", "t", "--use_cpu"]
    _, _, args = parse_args([*base, "--eval_strategy", "steps", "--eval_steps", "5"])
    assert args.do_eval and not args.do_eval_given  # transformers' own, not given
    assert will_train(args) and not any_do(args)
    assert splits_to_score({"train": 1, "validation": 1, "test": 1}, args) == ["validation", "test"]
    _, _, args = parse_args([*base, "--eval_strategy", "steps", "--eval_steps", "5", "--do_eval"])
    assert not will_train(args) and splits_to_score({"validation": 1, "test": 1}, args) == ["validation"]
