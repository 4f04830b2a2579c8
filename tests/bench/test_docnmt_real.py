"""`benchmarks/studies/docnmt_real.py` without training: the train-script arguments of each unit (parsed by the train
script itself), translation with given contexts against `translate_document` on a tiny document model, and the
aggregate's paired tests (`docnmt_stats.py`) against sacrebleu computed directly on hand-built unit files."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pytest
import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks.studies import docnmt_real as study  # noqa: E402
from benchmarks.studies import docnmt_stats as stats  # noqa: E402


def _files(tmp_path) -> dict:
    names = ("train", "newstest2015")
    return {n: {k: tmp_path / f"{n}.{k}" for k in ("en", "de", "docid")} for n in names}


def _args(tmp_path, quick=False):
    return study.parse_args(["--results", str(tmp_path / "results"), "--output-dir", str(tmp_path / "out")]
                            + (["--quick"] if quick else []))  # fmt: skip


def test_unit_arguments_parse_and_differ_only_where_the_design_says(tmp_path):
    from hf_syntax_mt.training.script import parse_args as train_args

    args = _args(tmp_path)
    files = _files(tmp_path)
    step1 = tmp_path / "out" / "step1-seed0" / "model"
    with pytest.raises(RuntimeError, match="run the unit step1-seed0 first"):
        study.train_argv(args, "document", 0, tmp_path / "d", files, tmp_path / "tok", "cpu")
    step1.mkdir(parents=True)
    (step1 / "config.json").write_text("{}")
    parsed = {kind: train_args(study.train_argv(args, kind, 1, tmp_path / kind, files, tmp_path / "tok", "cpu"))
              for kind in ("step1", "document", "control", "unfrozen")}  # fmt: skip
    model, data, training = parsed["step1"]
    assert model.model_name_or_path is None and model.config_overrides == "attention_init=xavier"
    # bf16 where the hardware computes it natively (common.choose_precision), else fp32
    assert training.bf16 == (study.common.choose_precision("auto", "cpu") == "bf16")
    assert training.max_steps == study.STEP1_STEPS and training.max_tokens == 2500
    assert training.lr_scheduler_type == "inverse_sqrt" and training.learning_rate == 7e-4
    assert data.train_docid_file is None and data.max_source_length == 128
    model, data, training = parsed["document"]
    assert model.model_name_or_path == str(step1) and model.context_sentences == 2 and model.freeze_sentence_level
    assert model.config_overrides == "context_encoder_layers=1,context_gating=true"
    assert data.train_docid_file == str(files["train"]["docid"]) and data.validation_docid_file
    # step 2 runs at the learning rate where step 1's inverse-square-root schedule ended
    assert training.learning_rate == pytest.approx(7e-4 * math.sqrt(800 / study.STEP1_STEPS), rel=1e-5)
    assert training.lr_scheduler_type == "constant_with_warmup" and training.max_steps == study.STEP2_STEPS
    control_model, control_data, control_training = parsed["control"]
    assert control_model.context_sentences is None and not control_model.freeze_sentence_level
    assert control_data.train_docid_file is None
    for field in ("learning_rate", "max_steps", "warmup_steps", "max_tokens", "seed", "bf16"):
        assert getattr(control_training, field) == getattr(training, field), field
    # the unfrozen document model is the document model less the freezing: every parameter trains, as in the control
    unfrozen_model, unfrozen_data, unfrozen_training = parsed["unfrozen"]
    assert not unfrozen_model.freeze_sentence_level and unfrozen_model.context_sentences == 2
    assert vars(unfrozen_model) == {**vars(model), "freeze_sentence_level": False}
    assert vars(unfrozen_data) == vars(data)
    same = ("learning_rate", "max_steps", "warmup_steps", "lr_scheduler_type", "max_tokens", "seed", "bf16")
    assert all(getattr(unfrozen_training, f) == getattr(training, f) for f in same)


def test_quick_refuses_the_committed_results_directory():
    with pytest.raises(SystemExit):
        study.parse_args(["--quick"])
    with pytest.raises(SystemExit, match="one step 1 unit"):
        study.parse_unit("step1-seed1")


@pytest.fixture(scope="module")
def document_model(tmp_path_factory):
    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    texts = ["the cat sleeps on the sofa .", "it dreams of mice .", "a woman reads a book .", "she smiles ."]
    tokenizer = train_tokenizer(texts * 20, vocab_size=80, min_frequency=1)
    config = model_config(tokenizer, d_model=16, layers=2, heads=4, ffn_dim=32, context_sentences=2, init_std=1.0)
    model = build_model(config, seed=0).eval()
    return model, tokenizer, texts


@pytest.mark.parametrize("batch_size", [1, 3])
def test_translation_with_given_contexts_equals_translate_document_with_the_true_ones(document_model, batch_size):
    model, tokenizer, texts = document_model
    gen = dict(num_beams=1, max_new_tokens=6)
    doc_ids = ["a", "a", "b", "b"]
    expected = study.translate_documents(model, tokenizer, texts, doc_ids, batch_size, **gen)
    by_document = model.translate_document(texts[:2], tokenizer, **gen) + model.translate_document(texts[2:], tokenizer,
                                                                                                   **gen)  # fmt: skip
    assert expected == [r["translation_text"] for r in by_document]
    true_contexts = [[], [texts[0]], [], [texts[2]]]
    assert study.translate_with_contexts(model, tokenizer, texts, true_contexts, batch_size, **gen) == expected
    swapped = [[], [texts[2]], [], [texts[0]]]  # another document's sentence
    other = study.translate_with_contexts(model, tokenizer, texts, swapped, batch_size, **gen)
    assert other[0] == expected[0] and other[2] == expected[2]  # no context either way
    assert other != expected  # this random model reads its context
    with pytest.raises(ValueError, match="4 sentences but 1 contexts"):
        study.translate_with_contexts(model, tokenizer, texts, [[]])


def _unit(kind, seed, hyps, random=None):
    tests = {name: {"bleu": sacrebleu.corpus_bleu(hyps, [REFS]).score, "chrf": 0.0, "bleu_signature": "b",
                    "chrf_signature": "c"} for name in study.TEST_SETS}  # fmt: skip
    return {"unit": f"{kind}-seed{seed}", "kind": kind, "seed": seed, "tests": tests, "random_context": {},
            "train_minutes": 1.0, "device": "cpu", "steps": 1, "model_signature": "m", "pronouns": {},
            "hypotheses": {**{n: hyps for n in study.TEST_SETS},
                           **({f"{n}.random": random for n in study.TEST_SETS} if random else {})}}  # fmt: skip


REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book", "the cat sleeps"]
WRONG = ["a woman walks a dog", "two cats sit on a wall", "a boy eats a cake", "the dog runs"]
HALF = REFS[:2] + WRONG[2:]


def test_comparisons_per_seed_and_pooled_match_sacrebleu():
    units = [_unit("document", 0, REFS, random=HALF), _unit("control", 0, WRONG),
             _unit("document", 1, HALF, random=WRONG), _unit("control", 1, HALF), _unit("document", 2, REFS)]  # fmt: skip
    references = {name: REFS + ["an unused reference"] for name in study.TEST_SETS}
    tests = stats.comparisons(units, references, samples=50)
    t = tests["iwslt17.test"]
    assert set(t["control"]) == {0, 1, "pooled"} and set(t["random"]) == {0, 1, "pooled"}  # seed 2: no control

    def bleu(h, r=REFS):
        return sacrebleu.corpus_bleu(h, [r]).score

    assert t["control"][0]["bleu"]["system"] == pytest.approx(100.0)
    assert t["control"][0]["bleu"]["baseline"] == pytest.approx(bleu(WRONG))
    assert t["random"][1]["bleu"]["baseline"] == pytest.approx(bleu(WRONG))
    assert t["random"][1]["bleu"]["system"] == pytest.approx(bleu(HALF))
    pooled = t["control"]["pooled"]["bleu"]
    assert pooled["system"] == pytest.approx(bleu(REFS + HALF, REFS + REFS))
    assert pooled["baseline"] == pytest.approx(bleu(WRONG + HALF, REFS + REFS))
    # the unfrozen document model is compared with the same controls, and only its own units count
    unfrozen = stats.comparisons(units + [_unit("unfrozen", 1, WRONG, random=REFS)], references, 50, "unfrozen")
    u = unfrozen["iwslt17.test"]
    assert set(u["control"]) == {1} and set(u["random"]) == {1}  # one seed: nothing to pool
    assert u["control"][1]["bleu"]["system"] == pytest.approx(bleu(WRONG))
    assert u["control"][1]["bleu"]["baseline"] == pytest.approx(bleu(HALF))
    assert u["random"][1]["bleu"]["baseline"] == pytest.approx(100.0)


def _study_files(tmp_path, units) -> tuple[Path, Path]:
    """(results, data): the units' files under results/runs, and references REFS for every test set under data."""
    results = tmp_path / "results"
    runs = results / "runs"
    runs.mkdir(parents=True)
    data = tmp_path / "data"
    for name in study.TEST_SETS:
        path = data / stats.EVAL_SETS[name].target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(r + "\n" for r in REFS), encoding="utf-8")
    for unit in units:
        hyps = unit.pop("hypotheses")
        unit["hypotheses_sha256"] = {k: hashlib.sha256("".join(h + "\n" for h in v).encode()).hexdigest()
                                     for k, v in hyps.items()}  # fmt: skip
        for key, lines in hyps.items():
            (runs / f"{unit['unit']}.{key}.txt").write_text("".join(h + "\n" for h in lines), encoding="utf-8")
        (runs / f"{unit['unit']}.json").write_text(json.dumps(unit), encoding="utf-8")
    return results, data


def test_aggregate_writes_the_tables_from_unit_files(tmp_path):
    units = (_unit("step1", 0, WRONG), _unit("document", 0, REFS, random=HALF), _unit("control", 0, HALF))
    results, data = _study_files(tmp_path, units)
    args = study.parse_args(["--results", str(results), "--data", str(data), "--bootstrap-samples", "20"])
    text = stats.aggregate(args)
    assert (results / "results.md").read_text(encoding="utf-8") == text
    row = next(line for line in text.splitlines() if line.startswith("| iwslt17.test | control |"))
    half = sacrebleu.corpus_bleu(HALF, [REFS]).score
    assert f"{100 - half:+.2f}" in row
    assert "| step1 | 0 |" in text and "| document, random context |" not in text  # no random_context scores
    assert "replicate" not in text

    # a replicate (the same unit run elsewhere) is shown beside the seeds and compared with its seed's control
    replicate = _unit("document", 0, WRONG)
    replicate["hypotheses_sha256"] = {k: hashlib.sha256("".join(h + "\n" for h in v).encode()).hexdigest()
                                      for k, v in replicate["hypotheses"].items()}  # fmt: skip
    (results / "replicates").mkdir()
    for key, lines in replicate.pop("hypotheses").items():
        (results / "replicates" / f"document-seed0.{key}.txt").write_text("".join(h + "\n" for h in lines))
    (results / "replicates" / "document-seed0.json").write_text(json.dumps({**replicate, "cpu": "some CPU"}))
    text = stats.aggregate(args)
    assert f"{100 - half:+.2f}" in next(
        line for line in text.splitlines() if line.startswith("| iwslt17.test | control |")
    )
    row = next(line for line in text.splitlines() if line.startswith("| iwslt17.test | control | document-seed0 |"))
    wrong = sacrebleu.corpus_bleu(WRONG, [REFS]).score
    assert f"{wrong - half:+.2f}" in row  # against control-seed0 (HALF), not pooled into the seeds' rows
    assert "| document-seed0, replicate, own context | 0 |" in text


def _pronouns(n: int, accuracy: float) -> dict:
    score = {"n": n, "accuracy": accuracy}
    return {**score, "by_pronoun": {"er": score}, "by_noun_in_context": {"true": score, "false": score}}


def _rescored(old_items: Path, referential: float, new_items: int = 2) -> dict:
    """A rescore file as `pronoun_items.py --rescore` writes it, for step1-seed0 only; figures no other file holds."""
    by_distance = {"0": {"n": 1, "accuracy": 0.125}, "3+": {"n": 1, "accuracy": 0.375}}
    return {"old_items_sha256": hashlib.sha256(old_items.read_bytes()).hexdigest(), "old_item_count": 3,
            "new_item_count": new_items, "common_items": 2,
            "units": {"runs/step1-seed0": {"none": {"n": 2, "accuracy": 0.5, "referential": {"n": 2, "accuracy": referential},
                                                    "referential_by_distance": by_distance}}}}  # fmt: skip


def test_pronoun_table_names_its_item_set_and_reads_the_referential_figures_from_the_rescore(tmp_path):
    old_items, items = tmp_path / "old.jsonl", tmp_path / "items.jsonl"
    old_items.write_text('{"id": 1}\n{"id": 2}\n{"id": 3}\n', encoding="utf-8")
    items.write_text('{"id": 1}\n\n{"id": 3}\n', encoding="utf-8")  # 2 items: blank lines do not count
    new_sha, old_sha = (hashlib.sha256(f.read_bytes()).hexdigest() for f in (items, old_items))
    recorded = study.item_file(items)  # what a unit records of the items it scored
    assert (recorded["sha256"], recorded["items"]) == (new_sha, 2)
    step1 = {**_unit("step1", 0, WRONG), "pronouns": {"none": _pronouns(3, 0.5)}}  # scored on the old items
    document = {**_unit("document", 0, REFS), "pronouns": {"document": _pronouns(2, 1.0)},
                "pronoun_items": recorded}  # fmt: skip
    results, data = _study_files(tmp_path, [step1, document])
    rescored = results / stats.RESCORED
    rescored.write_text(json.dumps(_rescored(old_items, 0.25)), encoding="utf-8")
    args = study.parse_args(["--results", str(results), "--data", str(data), "--items", str(items),
                             "--bootstrap-samples", "5"])  # fmt: skip
    lines = stats.aggregate(args).splitlines()
    label = next(line for line in lines if line.startswith("Item sets: "))
    assert (f"step1-seed0: 3 items of sha256 `{old_sha[:12]}` (`pronoun_items.rescored.json`'s `old_items_sha256`: "
            f"the unit file records no hash of its items), not the current `items.jsonl` (2 items, sha256 "
            f"`{new_sha[:12]}`)") in label  # fmt: skip
    assert f"document-seed0: 2 items of sha256 `{new_sha[:12]}` (recorded in the unit file), the current" in label
    assert "| step1-seed0 | none | 3 | 0.500 |" in lines[lines.index(label) + 2 :][2]  # the whole-set table follows
    heading = next(line for line in lines if line.startswith("Referential items by antecedent distance"))
    assert f"on the 3 items of sha256 `{old_sha[:12]}`, regrouped on the 2 items of the 2-item file" in heading
    table = lines[lines.index(heading) + 2 :]
    assert table[0] == "| unit | context | common items | referential | distance 0 | distance 3+ |"
    assert table[2] == "| step1-seed0 | none | 0.500 (2) | 0.250 (2) | 0.125 (1) | 0.375 (1) |"
    assert not table[3].startswith("| document-seed0")  # not in the rescore: no row

    # the figures and the staleness come from the file: another rescore, another table
    rescored.write_text(json.dumps(_rescored(old_items, 0.75, new_items=5)), encoding="utf-8")
    text = stats.aggregate(args)
    assert "| step1-seed0 | none | 0.500 (2) | 0.750 (2) |" in text
    assert "the current `items.jsonl` has 2 items: make the rescore again" in text
    rescored.unlink()  # no rescore: no referential table, and only the count says which items step 1 scored
    text = stats.aggregate(args)
    assert "Referential items" not in text
    assert "step1-seed0: 3 items (the unit file records no hash of its items), not the current `items.jsonl`" in text
    bad = _rescored(old_items, 0.25)
    del bad["units"]["runs/step1-seed0"]["none"]["referential"]
    rescored.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{rescored}: field 'units.runs/step1-seed0.none' missing"):
        stats.aggregate(args)


def test_quick_subset_takes_the_first_lines_of_the_first_documents(tmp_path):
    files = {"x": {k: tmp_path / f"x.{k}" for k in ("en", "de", "docid")}}
    for key, lines in (("en", ["a0", "a1", "a2", "b0", "c0", "c1"]), ("de", ["A0", "A1", "A2", "B0", "C0", "C1"]),
                       ("docid", ["a", "a", "a", "b", "c", "c"])):  # fmt: skip
        files["x"][key].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert study.documents(files, "x", 2, 2) == (["a0", "a1", "b0"], ["A0", "A1", "B0"], ["a", "a", "b"], [0, 1, 3])
    assert study.documents(files, "x")[3] == [0, 1, 2, 3, 4, 5]


def test_weights_fingerprint_follows_the_tensors_not_the_file(document_model, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    model, _, _ = document_model
    model.save_pretrained(tmp_path / "a")
    first = study.weights_sha256(tmp_path / "a")
    tensors = load_file(str(tmp_path / "a" / "model.safetensors"))
    (tmp_path / "b").mkdir()
    order = dict(reversed(list(tensors.items())))  # the same tensors written in another order, other metadata
    save_file(order, str(tmp_path / "b" / "model.safetensors"), metadata={"format": "pt", "note": "other"})
    assert (tmp_path / "a" / "model.safetensors").read_bytes() != (tmp_path / "b" / "model.safetensors").read_bytes()
    assert study.weights_sha256(tmp_path / "b") == first
    key = sorted(tensors)[3]
    tensors[key] = tensors[key].clone()
    flat = tensors[key].view(-1)
    flat[0] = torch.nextafter(flat[0], flat[0] + 1)  # one weight, one unit in the last place
    save_file(tensors, str(tmp_path / "b" / "model.safetensors"), metadata={"format": "pt"})
    assert study.weights_sha256(tmp_path / "b") != first


def test_step2_trains_step1_again_on_a_new_machine_and_checks_its_fingerprint(document_model, tmp_path, monkeypatch):
    model, _, _ = document_model
    args = _args(tmp_path)
    with pytest.raises(RuntimeError, match="run the unit step1-seed0 first"):
        study.ensure_step1(args, {}, "cpu")  # nothing on disk, nothing committed
    calls = []

    def fake_train(args, kind, seed, files, device):  # what train() leaves behind: the model and its run file
        calls.append((kind, seed))
        model.save_pretrained(study.step1_dir(args))
        (study.step1_dir(args) / "hf_syntax_mt_run.json").write_text("{}")

    monkeypatch.setattr(study, "train", fake_train)
    model.save_pretrained(tmp_path / "ref")
    sha = study.weights_sha256(tmp_path / "ref")
    runs = Path(args.results) / "runs"
    runs.mkdir(parents=True)
    committed = {"recipe": {**args.recipe, "step1_steps": 123}, "weights_sha256": sha, "commit": "abc"}
    (runs / "step1-seed0.json").write_text(json.dumps(committed))
    with pytest.raises(RuntimeError, match="step1_steps.*123"):  # another recipe: refused, nothing trained
        study.ensure_step1(args, {}, "cpu")
    assert calls == []
    (runs / "step1-seed0.json").write_text(json.dumps({**committed, "recipe": args.recipe}))
    assert study.ensure_step1(args, {}, "cpu") == {"weights_sha256": sha, "rebuilt": True, "matches_committed": True}
    assert calls == [("step1", 0)]
    # on disk now: used as it is
    assert study.ensure_step1(args, {}, "cpu") == {"weights_sha256": sha, "rebuilt": False, "matches_committed": True}
    assert calls == [("step1", 0)]
    (runs / "step1-seed0.json").write_text(
        json.dumps({**committed, "recipe": args.recipe, "weights_sha256": "0" * 64})
    )
    assert study.ensure_step1(args, {}, "cpu")["matches_committed"] is False
    unit = {"step1": {"weights_sha256": sha, "rebuilt": True, "matches_committed": False}}
    assert "NOT the committed step 1" in stats.step1_note(unit) and sha[:12] in stats.step1_note(unit)
    assert stats.step1_note({"weights_sha256": sha}) == f"; weights sha256 {sha[:12]}"


def test_evaluation_cache_returns_what_was_computed_for_the_same_settings_only(tmp_path):
    calls = []

    def compute(value):
        calls.append(value)
        return {"hypotheses": [value], "minutes": 0.5}

    assert study.cached(tmp_path, "iwslt17.test", {"num_beams": 4}, lambda: compute("x")) == compute("x")
    calls.clear()
    assert study.cached(tmp_path, "iwslt17.test", {"num_beams": 4}, lambda: compute("y"))["hypotheses"] == ["x"]
    assert calls == []  # a unit cut off after this test set does not translate it again
    assert study.cached(tmp_path, "iwslt17.test", {"num_beams": 5}, lambda: compute("z"))["hypotheses"] == ["z"]
    assert study.cached(tmp_path, "iwslt17.test", {"num_beams": 5}, lambda: compute("w"))["hypotheses"] == ["z"]
    assert calls == ["z"]


def _from_caches():
    from benchmarks.gpu import docnmt_from_caches

    return docnmt_from_caches


TRAINER_LOG = """{'loss': '2.9', 'epoch': '4.5'}
***** train metrics *****
  epoch                    =     4.6189
  global_step              =       2000
  num_input_tokens_seen    =    4490112
  train_runtime            = 0:05:00.83
***** validation metrics *****
  validation_bleu               =     6.1218
  validation_loss               =     4.9176
    iwslt17.test: BLEU 8.93, random context 8.88
"""


def test_a_lost_models_unit_reads_the_trainers_final_metrics_from_its_log():
    m = _from_caches()
    metrics = m.log_metrics(TRAINER_LOG)
    assert metrics["train"]["global_step"] == "2000" and metrics["validation"]["validation_bleu"] == "6.1218"
    assert m.seconds(metrics["train"]["train_runtime"]) == pytest.approx(300.83)
    with pytest.raises(SystemExit, match="validation metrics"):  # a unit cut off before its end has no such block
        m.log_metrics(TRAINER_LOG.split("***** validation")[0])


def test_a_lost_models_cache_is_used_only_where_its_settings_are_what_this_data_gives(tmp_path):
    m = _from_caches()
    study.cached(tmp_path, "iwslt17.test", {"num_beams": 4, "sources": "abc"}, lambda: {"hypotheses": ["x"]})
    assert m.load_cache(tmp_path, "iwslt17.test", {"num_beams": 4, "sources": "abc"}) == {"hypotheses": ["x"]}
    assert m.load_cache(tmp_path, "bcontrast.test", {"num_beams": 4}) is None  # not computed: listed as missing
    with pytest.raises(SystemExit, match="other settings"):
        m.load_cache(tmp_path, "iwslt17.test", {"num_beams": 4, "sources": "abd"})
    assert stats.partial_note({"partial": {"missing": ["pronouns.none"]}}).endswith("missing: pronouns.none")
    assert stats.partial_note({}) == ""


def test_the_study_modules_import_no_circle():
    """docnmt_real (the units) imports docnmt_stats (the analysis); both take the shared constants from docnmt_setup,
    which imports neither (issue 49: the circle docnmt_real <-> docnmt_stats is gone)."""
    import ast

    studies = Path(study.__file__).parent

    def imported(name):
        tree = ast.parse((studies / f"{name}.py").read_text(encoding="utf-8"))
        found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        found |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        return {m.rsplit(".", 1)[-1] for m in found if m.startswith("benchmarks.studies.")}

    assert imported("docnmt_setup") == set()
    assert "docnmt_real" not in imported("docnmt_stats") and "docnmt_setup" in imported("docnmt_stats")
    assert {"docnmt_setup", "docnmt_stats"} <= imported("docnmt_real")
    assert stats.KINDS is study.KINDS and stats.RECIPE is study.RECIPE  # one definition, shared
