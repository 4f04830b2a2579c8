"""A saved model works without the package (issue 15, items 1 and 2): `save_pretrained` writes a flat, self-contained
copy of the code the config, model and pipeline need, and a Python process that sees only torch, transformers and
their requirements (no `hf_syntax_mt`, no `datasets`, no parser library) loads the copied directory with the Auto
classes and `pipeline("translation", trust_remote_code=True)` and gets the outputs of the installed
package. The bundler itself is tested on small hand-made packages."""

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import pipeline
from transformers.dynamic_module_utils import get_imports, get_relative_import_files, get_relative_imports

import hf_syntax_mt  # noqa: F401  (registers "syntax-translation")
from hf_syntax_mt import SyntaxMTForConditionalGeneration
from hf_syntax_mt.data.parsers import get_parser
from hf_syntax_mt.data.subwords import align_parse
from hf_syntax_mt.demo.synthetic_corpus import write_corpus
from hf_syntax_mt.methods import registered
from hf_syntax_mt.remote_code import AVAILABLE_PACKAGES, RemoteCodeError, build_bundle
from hf_syntax_mt.training import build_model, model_config, train_tokenizer

# Runs in `python -I -S` (no PYTHONPATH, no site-packages) on a site folder that holds only torch, transformers and
# their requirements (`clean_site`), as a machine with only those installed. It checks that neither the package nor
# the optional libraries are importable, then refuses any import of the package, so the bundle cannot reach it.
ISOLATED = textwrap.dedent("""
    import importlib.abc, importlib.util, json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "hf_syntax_mt").exists()]
    for name in ("hf_syntax_mt", "datasets", "spacy", "stanza", "matplotlib", "sacrebleu"):
        assert importlib.util.find_spec(name) is None, f"{name} is importable"

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_syntax_mt":
                raise ImportError("the bundle imported hf_syntax_mt")

    sys.meta_path.insert(0, Refuse())
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, pipeline

    torch.set_num_threads(1)
    job = json.loads(sys.argv[1])
    out = {}
    for name, spec in job.items():
        config = AutoConfig.from_pretrained(spec["dir"], trust_remote_code=True)
        model = AutoModelForSeq2SeqLM.from_pretrained(spec["dir"], trust_remote_code=True).eval()
        inputs = {k: torch.tensor(v) for k, v in spec["inputs"].items()}
        with torch.no_grad():
            logits = model(**inputs).logits
        translate = pipeline("translation", model=spec["dir"], trust_remote_code=True, device="cpu")
        texts = [t["translation_text"] for t in translate(spec["texts"], max_new_tokens=8)]
        # a model loaded from the flat copy saves a flat copy again, which loads the same model
        resaved = spec["dir"] + "-resaved"
        model.save_pretrained(resaved)
        again = AutoModelForSeq2SeqLM.from_pretrained(resaved, trust_remote_code=True).eval()
        with torch.no_grad():
            resave_diff = (again(**inputs).logits - logits).abs().max().item()
        out[name] = {"config": type(config).__module__, "model": type(model).__module__,
                     "pipeline": type(translate).__module__, "logits": logits.tolist(), "texts": texts,
                     "parser": None if translate.parser is None else translate.parser.signature(),
                     "resave_diff": resave_diff, "resaved_files": sorted(p.name for p in Path(resaved).glob("*.py"))}
    out["leaked"] = sorted(m for m in sys.modules if m.split(".")[0] == "hf_syntax_mt")
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def clean_site(tmp_path_factory):
    """A folder of links to torch, transformers and the distributions they require (markers evaluated, no extras):
    the site-packages of a clean environment with only torch and transformers installed."""
    from importlib import metadata

    from packaging.requirements import Requirement

    site = tmp_path_factory.mktemp("clean-site")
    seen, todo = set(), ["torch", "transformers"]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = Path(dist.locate_file(top))
            if source.exists() and top != "__pycache__" and not top.endswith(".pth") and not (site / top).exists():
                (site / top).symlink_to(source)
    assert {"torch", "transformers"} <= {p.name for p in site.iterdir()} and not (site / "hf_syntax_mt").exists()
    return site


#: a model per registered method that reads the source parse, with the method's tester config (PASCAL's as before)
PARSING = {"pascal": dict(encoder_pascal_heads=[2, 0]),
           **{m.name: dict(m.tester_config) for m in registered() if m.from_parse and m.name != "pascal"}}  # fmt: skip


def parsed_inputs(model, tokenizer, parser, text) -> dict:
    """The encoder inputs of `text` that `model`'s methods compute from its parse (`config.parse_columns()`)."""
    columns = model.config.parse_columns()
    enc = align_parse(tokenizer, parser.parse([text])[0], text=text)
    inputs = {"input_ids": [enc["input_ids"]]}
    for column in columns:
        inputs[column] = [enc[column] or [0] if column == "word_heads" else enc[column]]
    return inputs


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A plain (no syntax option) SyntaxMT model and one model per method that reads the parse (`PARSING`), saved and
    then copied elsewhere, as a user who downloads them gets them. A parsing model's parser is a CoNLL-U file in its
    directory (relative path); the plain model's config records one too, which it must never use."""
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), splits={"test": 6}, seed=3, max_words=8)
    sources = corpus["test"]["src"].read_text(encoding="utf-8").splitlines()
    targets = corpus["test"]["tgt"].read_text(encoding="utf-8").splitlines()
    tokenizer = train_tokenizer(sources + targets, vocab_size=150, min_frequency=1)
    recorded = {"backend": "conllu", "path": "parses/test.src.conllu"}
    built = tmp_path_factory.mktemp("built")
    models = {}
    for name, options in {**PARSING, "plain": {}}.items():
        config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, init_std=0.5,
                              source_parser=recorded, **options)  # fmt: skip
        model = build_model(config, seed=1).eval()
        model.save_pretrained(built / name)
        tokenizer.save_pretrained(built / name)
        models[name] = model
    for name in PARSING:
        (built / name / "parses").mkdir()
        shutil.copy(corpus["test"]["src_conllu"], built / name / "parses" / "test.src.conllu")
    elsewhere = tmp_path_factory.mktemp("downloaded")
    dirs = {name: shutil.copytree(built / name, elsewhere / name) for name in models}
    return dirs, models, tokenizer, sources, corpus["test"]["src_conllu"]


def test_saved_code_is_flat_and_needs_only_torch_and_transformers(saved):
    dirs, _, _, _, _ = saved
    files = sorted(p.name for p in dirs["pascal"].glob("*.py"))
    assert {"configuration_syntax_mt.py", "modeling_syntax_mt.py", "pipeline_syntax_mt.py", "parsers.py"} <= set(files)
    config = json.loads((dirs["pascal"] / "config.json").read_text())
    for reference in [*config["auto_map"].values(), config["custom_pipelines"]["translation"]["impl"]]:
        assert (dirs["pascal"] / (reference.split(".")[0] + ".py")).name in files
    for path in dirs["pascal"].glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:  # relative: a file beside this one
                assert node.level == 1, (path.name, node.lineno)
                assert node.module is None or (dirs["pascal"] / f"{node.module}.py").exists(), (path.name, node.module)
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] == "hf_syntax_mt" for n in names), path.name
        # what transformers' remote-code loader will require (imports inside try blocks are optional) and copy
        assert set(get_imports(path)) <= AVAILABLE_PACKAGES, (path.name, set(get_imports(path)) - AVAILABLE_PACKAGES)
        assert all(Path(f).exists() for f in get_relative_import_files(path)), path.name


def reference_translation(model, tokenizer, parser, text):
    """By hand: parse, map the parse onto subwords (parents, tree, features: what the model reads), generate
    greedily."""
    inputs = parsed_inputs(model, tokenizer, parser, text)
    dtypes = {"parent_positions": torch.float}
    ids = model.generate(**{k: torch.tensor(v, dtype=dtypes.get(k)) for k, v in inputs.items()}, max_new_tokens=8)
    return tokenizer.decode(ids[0], skip_special_tokens=True)


def test_a_process_without_the_package_loads_and_translates_like_the_package(saved, clean_site, tmp_path):
    dirs, models, tokenizer, sources, conllu = saved
    unseen = "this sentence is in no CoNLL-U file"
    enc = align_parse(tokenizer, get_parser("conllu", path=conllu).parse([sources[0]])[0], text=sources[0])
    decoder = [[tokenizer.pad_token_id, 5, 6, 7]]
    parser = get_parser("conllu", path=conllu)
    job = {
        name: {"dir": str(dirs[name]), "texts": sources[:3],
               "inputs": {**parsed_inputs(models[name], tokenizer, parser, sources[0]), "decoder_input_ids": decoder}}
        for name in PARSING
    }  # fmt: skip
    job["plain"] = {"dir": str(dirs["plain"]), "texts": [sources[0], unseen],
                    "inputs": {"input_ids": [enc["input_ids"]], "decoder_input_ids": decoder}}  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    command = [sys.executable, "-I", "-S", "-c", ISOLATED, json.dumps(job), str(clean_site)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result["leaked"] == []

    for name, spec in job.items():
        got = result[name]
        # the classes came from the copied directory, not from an installed package
        assert all(got[k].startswith("transformers_modules.") for k in ("config", "model", "pipeline")), got
        assert got["resave_diff"] == 0.0
        assert got["resaved_files"] == sorted(p.name for p in dirs[name].glob("*.py"))
        # in-process, with the installed package: same weights, same code -> the same logits and translations
        model = SyntaxMTForConditionalGeneration.from_pretrained(dirs[name]).eval()
        with torch.no_grad():
            logits = model(**{k: torch.tensor(v) for k, v in spec["inputs"].items()}).logits
        assert "input_ids" in spec["inputs"] and set(spec["inputs"]) - {"input_ids", "decoder_input_ids"} == set(
            model.config.parse_columns()
        )  # every input the model's methods read was given
        torch.testing.assert_close(torch.tensor(got["logits"]), logits, rtol=0, atol=1e-5)  # thread counts differ
        local = pipeline("syntax-translation", model=str(dirs[name]), device="cpu")  # no trust flag: installed package
        assert got["texts"] == [t["translation_text"] for t in local(spec["texts"], max_new_tokens=8)]

    # each parsing model parsed with the CoNLL-U file in its own directory, and its translations are its method's
    for name in PARSING:
        assert result[name]["parser"] == parser.signature(), name
        expected = [reference_translation(models[name], tokenizer, parser, t) for t in sources[:3]]
        assert result[name]["texts"] == expected, name
    # the plain model never parses: it translates a sentence that no parser of its config knows
    assert result["plain"]["parser"] is None
    ids = models["plain"].generate(**tokenizer([unseen], return_tensors="pt"), max_new_tokens=8)
    assert result["plain"]["texts"][1] == tokenizer.decode(ids[0], skip_special_tokens=True)


# ---------------------------------------------------------------------------------------------------------------
# The bundler on hand-made packages
# ---------------------------------------------------------------------------------------------------------------
def make_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0].startswith("pkg_")]:
        del sys.modules[name]


def test_bundle_follows_nested_relative_imports_and_renames_clashes(on_path):
    make_package(on_path, {
        "pkg_a/__init__.py": "",
        "pkg_a/model.py": """
            from .sub.helper import double
            from .util import ten

            class Model:
                def run(self, x):
                    from .sub.util import three  # a lazy import is followed too
                    return double(x) + ten() + three()
            """,
        "pkg_a/util.py": "from . import extra\n\ndef ten():\n    return extra.TEN\n\ndef unused():\n    from . import alias\n    return alias\n",
        "pkg_a/extra.py": "TEN = 10\n",
        "pkg_a/alias.py": "import datasets  # would fail the bundle, but only a lazy `from . import` reaches it\n",
        "pkg_a/sub/__init__.py": "",
        "pkg_a/sub/helper.py": "from ..util import ten\n\ndef double(x):\n    return 2 * x + ten() - 10\n",
        "pkg_a/sub/util.py": "def three():\n    return 3\n",
    })  # fmt: skip
    from pkg_a.model import Model

    bundle = build_bundle([Model])
    # two different util.py files: both kept, under their dotted names
    assert sorted(bundle.files) == ["extra", "helper", "model", "pkg_a_sub_util", "pkg_a_util"]  # no alias
    assert bundle.reference(Model) == "model.Model"
    assert "from .helper import double" in bundle.files["model"]
    assert "from .pkg_a_util import ten" in bundle.files["helper"]
    # `from . import extra` is rewritten to a form transformers' loader follows; the lazy `from . import alias` stays
    assert "from .extra import __name__" in bundle.files["pkg_a_util"]
    assert "    from . import alias\n" in bundle.files["pkg_a_util"]
    flat = on_path / "pkg_flat"
    flat.mkdir()
    bundle.write(flat)
    (flat / "__init__.py").write_text("")
    importlib.invalidate_caches()
    module = importlib.import_module("pkg_flat.model")  # the flat copy runs on its own
    assert module.Model().run(4) == Model().run(4) == 21
    assert sorted(get_relative_imports(flat / "pkg_a_util.py")) == ["extra"]  # what transformers copies


def test_optional_imports_stay_optional_and_module_level_ones_fail_at_save_time(on_path):
    make_package(on_path, {
        "pkg_b/__init__.py": "",
        "pkg_b/lazy.py": "def load():\n    import datasets\n    return datasets\n\nclass Lazy:\n    pass\n",
        "pkg_b/eager.py": "import datasets\n\nclass Eager:\n    pass\n",
        "pkg_b/absolute.py": "from pkg_b.lazy import load\n\nclass Absolute:\n    pass\n",
        "pkg_b/guarded.py": "try:\n    import datasets\nexcept ImportError:\n    datasets = None\n\nclass Guarded:\n    pass\n",
    })  # fmt: skip
    from pkg_b.absolute import Absolute
    from pkg_b.eager import Eager
    from pkg_b.guarded import Guarded
    from pkg_b.lazy import Lazy

    text = build_bundle([Lazy]).files["lazy"]
    assert "try:" in text and "except ImportError:" in text
    flat = on_path / "lazy.py"
    flat.write_text(text, encoding="utf-8")
    assert get_imports(flat) == []  # transformers will not require `datasets` ...
    namespace = {}
    exec(compile(text, "lazy.py", "exec"), namespace)
    assert namespace["load"]().__name__ == "datasets"  # ... and the function still imports it
    guarded = build_bundle([Guarded]).files["guarded"]  # already optional: copied as it is
    assert guarded.split("\n", 1)[1] == (on_path / "pkg_b" / "guarded.py").read_text()
    with pytest.raises(RemoteCodeError, match="module-level import of datasets.*Import it inside the function"):
        build_bundle([Eager])
    with pytest.raises(RemoteCodeError, match="absolute import of 'pkg_b'"):
        build_bundle([Absolute])


def test_marian_class_loads_a_pascal_checkpoint_but_computes_another_model(saved):
    """Item 2's `MarianMTModel.from_pretrained(DIR)`: transformers gives no hook to refuse it (nothing of this package
    runs when Marian reads the config), so the model card documents it (test_model_card); this test backs it: Marian
    loads every weight of a PASCAL checkpoint and computes a different function, and loads a plain one unchanged."""
    from transformers import MarianMTModel

    dirs, models, tokenizer, sources, conllu = saved
    enc = align_parse(tokenizer, get_parser("conllu", path=conllu).parse([sources[0]])[0], text=sources[0])
    inputs = dict(input_ids=torch.tensor([enc["input_ids"]]), decoder_input_ids=torch.tensor([[0, 5, 6]]))
    with torch.no_grad():
        for name, differs in (("pascal", True), ("plain", False)):
            marian = MarianMTModel.from_pretrained(dirs[name]).eval()
            extra = {"parent_positions": torch.tensor([enc["parent_positions"]])} if name == "pascal" else {}
            ours = models[name](**inputs, **extra).logits
            assert torch.allclose(marian(**inputs).logits, ours, atol=1e-5) != differs, name


SYMMETRIC = ISOLATED.split("import torch\n")[0] + textwrap.dedent("""
    import torch
    from transformers import AutoConfig, AutoModel

    torch.set_num_threads(1)
    job = json.loads(sys.argv[1])
    config = AutoConfig.from_pretrained(job["dir"], trust_remote_code=True)
    model = AutoModel.from_pretrained(job["dir"], trust_remote_code=True).eval()
    inputs = {k: torch.tensor(v) for k, v in job["inputs"].items()}
    with torch.no_grad():
        out = model(**inputs)
    links = model.align(inputs["input_ids"], inputs["labels"], inputs["reverse_input_ids"], inputs["reverse_labels"],
                        inputs["attention_mask"], inputs["reverse_attention_mask"], method="union")
    print("RESULT " + json.dumps({
        "config": type(config).__module__, "model": type(model).__module__, "loss": out.loss.item(),
        "bonus": out.symmetry_bonus.item(), "links": [sorted(map(list, pair)) for pair in links],
        "leaked": sorted(m for m in sys.modules if m.split(".")[0] == "hf_syntax_mt")}))
""")


def test_a_symmetric_joint_model_loads_without_the_package(clean_site, tmp_path):
    """Issue 29: `SymmetricTranslationModel.save_pretrained` writes its flat code and `auto_map` (it wrote neither, so
    the directory needed the package): a process with only torch and transformers loads it with AutoModel and
    computes the installed package's loss, trace bonus and links."""
    from hf_syntax_mt.symmetric import DataCollatorForSymmetricTranslation, SymmetricTranslationModel

    sources, targets = ["the cat sleeps", "a dog runs fast"], ["le chat dort", "un chien court vite"]
    tokenizer = train_tokenizer(sources + targets, vocab_size=60, min_frequency=1)
    forward, backward = (build_model(model_config(tokenizer, d_model=16, layers=2, heads=2, ffn_dim=32, init_std=0.5),
                                     seed=seed).eval() for seed in (0, 1))  # fmt: skip
    joint = SymmetricTranslationModel.from_directions(forward, backward, symmetry_weight=0.5).eval()
    joint.save_pretrained(tmp_path / "joint")
    config = json.loads((tmp_path / "joint" / "config.json").read_text())
    assert config["auto_map"] == {"AutoConfig": "symmetric.SymmetricTranslationConfig",
                                  "AutoModel": "symmetric.SymmetricTranslationModel"}  # fmt: skip
    for path in (tmp_path / "joint").glob("*.py"):  # what transformers' loader will require and copy
        assert set(get_imports(path)) <= AVAILABLE_PACKAGES, (path.name, set(get_imports(path)) - AVAILABLE_PACKAGES)
        assert all(Path(f).exists() for f in get_relative_import_files(path)), path.name
    rows = [{"input_ids": tokenizer(s)["input_ids"], "labels": tokenizer(text_target=t)["input_ids"]}
            for s, t in zip(sources, targets, strict=True)]  # fmt: skip
    batch = DataCollatorForSymmetricTranslation(pad_token_id=tokenizer.pad_token_id)(rows)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    job = {"dir": str(tmp_path / "joint"), "inputs": {k: v.tolist() for k, v in batch.items()}}
    done = subprocess.run([sys.executable, "-I", "-S", "-c", SYMMETRIC, json.dumps(job), str(clean_site)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert got["leaked"] == [] and got["model"].startswith("transformers_modules.")
    with torch.no_grad():
        out = joint(**batch)
    links = joint.align(batch["input_ids"], batch["labels"], batch["reverse_input_ids"], batch["reverse_labels"],
                        batch["attention_mask"], batch["reverse_attention_mask"], method="union")  # fmt: skip
    assert abs(got["loss"] - out.loss.item()) < 1e-5 and abs(got["bonus"] - out.symmetry_bonus.item()) < 1e-5
    assert got["links"] == [sorted(map(list, pair)) for pair in links]
