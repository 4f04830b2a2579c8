"""The study aggregates trust no file: each hypothesis file is checked against the sha256 and the sentence count its
unit file records (a file swapped with another unit's, or cut to half its lines, stops the aggregate naming both
files), unit files are checked field by field (file, field, expected type), and unit names take ASCII seeds only.
Hand-built units in the three study layouts (round one, round two, docnmt_real)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: `import benchmarks.*`

from benchmarks import common  # noqa: E402
from benchmarks.studies import cpu_minute, docnmt_real, docnmt_stats, multi30k_study, study_round2  # noqa: E402

HYPS = {"a": ["a man rides a bike", "two dogs play", "a girl reads", "the cat sleeps"],
        "b": ["a woman walks", "two cats sit", "a boy eats", "the dog runs"]}  # fmt: skip


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _sha(lines: list[str]) -> str:
    return hashlib.sha256(_text(lines).encode()).hexdigest()


def _buckets(lines: list[str]) -> list[dict]:
    return [{"bucket": "1-10", "count": len(lines), "bleu": 10.0}]


def _write(results: Path, record: dict, hypotheses: dict[str, list[str]]) -> Path:
    """``results/runs/<unit>.json`` and its hypothesis files ``<unit>.<key>.txt``, as the studies write them."""
    (results / "runs").mkdir(parents=True, exist_ok=True)
    for key, lines in hypotheses.items():
        (results / "runs" / f"{record['unit']}.{key}.txt").write_text(_text(lines), encoding="utf-8")
    path = results / "runs" / f"{record['unit']}.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------------------
# Round two: tests[<test set>] holds each file's sha256 and buckets
# ------------------------------------------------------------------------------------------------------------------
def _round2(results: Path, method: str, hyps: list[str], sha: bool = True) -> Path:
    name = study_round2.unit_name("full", method, 0)
    tests = {t: {"bleu": 30.0, "chrf": 50.0, "buckets": _buckets(hyps), **({"hypotheses_sha256": _sha(hyps)} if sha
                                                                           else {})} for t in study_round2.MULTI30K_TESTS}  # fmt: skip
    record = {"unit": name, "setting": "full", "method": method, "seed": 0, "precision": "fp32", "device": "cpu",
              "steps": 10, "train_minutes": 1.0, "tests": tests}  # fmt: skip
    return _write(results, record, dict.fromkeys(study_round2.MULTI30K_TESTS, hyps))


def test_round2_refuses_a_hypothesis_file_swapped_with_another_units(tmp_path):
    _round2(tmp_path, "vanilla", HYPS["a"])
    pascal = _round2(tmp_path, "pascal", HYPS["b"])
    assert [u["hypotheses"]["test_2016_flickr"] for u in study_round2.load_units(tmp_path)] == [HYPS["b"], HYPS["a"]]
    swapped = tmp_path / "runs" / "full-pascal-seed0.test_2017_flickr.txt"
    swapped.write_bytes((tmp_path / "runs" / "full-vanilla-seed0.test_2017_flickr.txt").read_bytes())
    with pytest.raises(SystemExit) as e:
        study_round2.load_units(tmp_path)
    assert str(swapped) in str(e.value) and str(pascal) in str(e.value) and "sha256" in str(e.value)


def test_round2_refuses_a_cut_hypothesis_file_by_sha_or_by_line_count(tmp_path):
    _round2(tmp_path, "vanilla", HYPS["a"])
    cut = tmp_path / "runs" / "full-vanilla-seed0.test_2018_flickr.txt"
    cut.write_text(_text(HYPS["a"][:2]), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{cut}: sha256 .* is not the .* that .*full-vanilla-seed0.json records"):
        study_round2.load_units(tmp_path)
    _round2(tmp_path, "vanilla", HYPS["a"], sha=False)  # a unit that records no sha256: refused unless allowed
    with pytest.raises(SystemExit, match=r"full-vanilla-seed0.json: records no sha256 of its test_2016_flickr "
                                         r"hypotheses.*--allow-unhashed"):  # fmt: skip
        study_round2.load_units(tmp_path)
    assert study_round2.load_units(tmp_path, allow_unhashed=True)[0]["hypotheses"]["test_2018_flickr"] == HYPS["a"]
    cut.write_text(_text(HYPS["a"][:2]), encoding="utf-8")  # allowed: its buckets' count is still checked
    with pytest.raises(SystemExit, match=rf"{cut}: 2 lines, but .*full-vanilla-seed0.json scored 4 sentences"):
        study_round2.load_units(tmp_path, allow_unhashed=True)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("seed", "0", r"field 'seed' must be an integer, got '0' \(str\)"),
        ("tests", "test_2016_flickr", r"field 'tests' must be an object, got 'test_2016_flickr' \(str\)"),
        ("bleu", "31.2", r"field 'tests.test_2016_flickr.bleu' must be a number, got '31.2' \(str\)"),
        ("bleu", True, r"field 'tests.test_2016_flickr.bleu' must be a number, got True \(bool\)"),
        ("train_minutes", None, r"field 'train_minutes' must be a number, got None \(NoneType\)"),
        ("setting", "huge", r"field 'setting' must be one of \['full', 'long', 'low'\], got 'huge' \(str\)"),
        ("setting", ["full"], r"field 'setting' must be one of \['full', 'long', 'low'\], got \['full'\] \(list\)"),
    ],
)
def test_round2_names_the_file_and_field_of_a_wrong_type(tmp_path, field, value, message):
    path = _round2(tmp_path, "vanilla", HYPS["a"])
    record = json.loads(path.read_text(encoding="utf-8"))
    if field == "bleu":
        record["tests"]["test_2016_flickr"]["bleu"] = value
    else:
        record[field] = value
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{path}: {message}: correct it, or delete .* to run the unit again"):
        study_round2.load_units(tmp_path)


# ------------------------------------------------------------------------------------------------------------------
# Round one: one test file per unit, its sha256 and buckets at the top level
# ------------------------------------------------------------------------------------------------------------------
def _round1(results: Path, method: str, hyps: list[str]) -> Path:
    record = {"unit": common.unit_name(method, 0), "method": method, "seed": 0, "buckets": _buckets(hyps),
              "test": {"bleu": 30.0, "chrf": 50.0, "ribes": 0.8}, "train_minutes": 1.0, "tokens_per_second": 10.0,
              "device": "cpu", "hypotheses_sha256": _sha(hyps)}  # fmt: skip
    return _write(results, record, {"test": hyps})


def test_round1_checks_hypotheses_and_field_types(tmp_path):
    _round1(tmp_path, "vanilla", HYPS["a"])
    pascal = _round1(tmp_path, "pascal", HYPS["b"])
    assert [u["hypotheses"] for u in multi30k_study.load_units(tmp_path)] == [HYPS["a"], HYPS["b"]]
    swapped = tmp_path / "runs" / "pascal-seed0.test.txt"
    swapped.write_text(_text(HYPS["a"]), encoding="utf-8")
    with pytest.raises(common.UnitFileError, match=rf"{swapped}: sha256 .* that {pascal} records"):
        multi30k_study.load_units(tmp_path)
    _round1(tmp_path, "pascal", HYPS["b"])
    record = json.loads(pascal.read_text(encoding="utf-8"))
    pascal.write_text(json.dumps({**record, "test": {**record["test"], "bleu": "30.0"}}), encoding="utf-8")
    with pytest.raises(common.UnitFileError, match=r"field 'test.bleu' must be a number, got '30.0' \(str\)"):
        multi30k_study.load_units(tmp_path)
    pascal.write_text(json.dumps({**record, "seed": "0"}), encoding="utf-8")
    with pytest.raises(common.UnitFileError, match=rf"{pascal}: field 'seed' must be an integer, got '0' \(str\)"):
        multi30k_study.load_units(tmp_path)


# ------------------------------------------------------------------------------------------------------------------
# docnmt_real: hypotheses_sha256 keyed by test set (and <test set>.random), tests[<set>].sentences
# ------------------------------------------------------------------------------------------------------------------
def _docnmt(results: Path, kind: str, hyps: list[str]) -> Path:
    tests = {t: {"bleu": 30.0, "chrf": 50.0, "sentences": len(hyps)} for t in docnmt_real.TEST_SETS}
    record = {"unit": f"{kind}-seed0", "kind": kind, "seed": 0, "tests": tests, "random_context": {}, "pronouns": {},
              "train_minutes": 1.0, "device": "cpu", "steps": 1, "model_signature": "m",
              "hypotheses_sha256": {t: _sha(hyps) for t in docnmt_real.TEST_SETS}}  # fmt: skip
    return _write(results, record, dict.fromkeys(docnmt_real.TEST_SETS, hyps))


def test_docnmt_checks_hypotheses_and_field_types(tmp_path):
    control = {kind: _docnmt(tmp_path, kind, HYPS[key]) for kind, key in (("step1", "a"), ("control", "b"))}["control"]
    assert [u["hypotheses"]["iwslt17.test"] for u in docnmt_stats.load_units(tmp_path)] == [HYPS["a"], HYPS["b"]]
    cut = tmp_path / "runs" / "control-seed0.bcontrast.test.txt"
    cut.write_text(_text(HYPS["b"][:2]), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{cut}: sha256 .* that {control} records"):
        docnmt_stats.load_units(tmp_path)
    cut.unlink()
    with pytest.raises(SystemExit, match=rf"{control}: its hypotheses {cut} are missing"):
        docnmt_stats.load_units(tmp_path)
    _docnmt(tmp_path, "control", HYPS["b"])
    record = json.loads(control.read_text(encoding="utf-8"))
    control.write_text(json.dumps({**record, "tests": "iwslt17.test"}), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{control}: field 'tests' must be an object, got 'iwslt17.test' \(str\)"):
        docnmt_stats.load_units(tmp_path)
    control.write_text(json.dumps({**record, "seed": "1"}), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{control}: field 'seed' must be an integer, got '1' \(str\)"):
        docnmt_stats.load_units(tmp_path)
    control.write_text(json.dumps({k: v for k, v in record.items() if k != "kind"}), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{control}: the unit file has no field 'kind'"):
        docnmt_stats.load_units(tmp_path)


# ------------------------------------------------------------------------------------------------------------------
# Unit names: ASCII seeds
# ------------------------------------------------------------------------------------------------------------------
_PARSERS = (
    (multi30k_study.parse_unit, "vanilla-seed{}"),
    (study_round2.parse_unit, "full-vanilla-seed{}"),
    (docnmt_real.parse_unit, "document-seed{}"),
    (lambda n: common.parse_unit(n, cpu_minute.METHODS), "tiny-seed{}"),
)


@pytest.mark.parametrize("seed", ["²", "١", "0x1", " 1", "-1"])  # str.isdigit accepts "²" and "١"; int() refuses "²"
def test_unit_names_take_ascii_seeds_only(seed):
    for parse, name in _PARSERS:
        assert parse(name.format(12))[-1] == 12  # the same name with an ASCII seed is a unit
        with pytest.raises(SystemExit, match="unknown unit"):
            parse(name.format(seed))
    assert common.seed_number("12") == 12 and common.seed_number(seed) is None


def test_round2_aggregate_of_vanilla_alone_writes_the_table_and_no_plot(tmp_path, monkeypatch):
    from types import SimpleNamespace

    (tmp_path / "data").mkdir()
    for t in study_round2.MULTI30K_TESTS:
        for side in ("en", "de"):
            (tmp_path / "data" / f"{t}.{side}").write_text(_text(HYPS["a"]), encoding="utf-8")
    monkeypatch.setattr(study_round2.round_one, "files", lambda d, name: {"src": Path(d) / f"{name}.en",
                                                                          "tgt": Path(d) / f"{name}.de"})  # fmt: skip
    _round2(tmp_path / "results", "vanilla", HYPS["a"])
    args = SimpleNamespace(results=str(tmp_path / "results"), data=str(tmp_path / "data"), bootstrap_samples=10)
    text = study_round2.aggregate(args)
    assert (tmp_path / "results" / "results.md").read_text(encoding="utf-8") == text and "| vanilla |" in text
    assert not (tmp_path / "results" / "deltas.png").exists()  # nothing compared with vanilla: nothing drawn
