"""Issue 49, item 2: property-based tests (Hypothesis) over the public API boundaries and the file readers. Any
generated input either works, with the right result (the count and order of translations, the links, words and
documents read back), or raises the package's `UserError`; never a bare built-in exception, never a silent wrong
count. The study unit files (``benchmarks/``) raise the studies' own `UnitFileError` (a `ValueError`: ``benchmarks``
imports nothing heavy at the top, so it does not import the package's errors).

Each property runs under two settings profiles: ``fast`` (bounded, in the default run) and ``slow`` (many more
examples; ``-m slow``). ``HF_SYNTAX_MT_FUZZ_EXAMPLES=N`` sets the slow profile's examples per property.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
from collections import Counter
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hf_syntax_mt.data.documents import blank_line_spans, doc_id_spans, id_spans
from hf_syntax_mt.data.readers import parse_pharaoh, read_conllu, read_doc_ids, read_lines, read_pharaoh, split_lines
from hf_syntax_mt.errors import UserError
from hf_syntax_mt.evaluation import pronouns
from hf_syntax_mt.inference import translate_lines

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `import benchmarks.*`

from benchmarks import common  # noqa: E402
from benchmarks.studies import study_round2  # noqa: E402

PROFILES = {
    "fast": settings(max_examples=25, deadline=None, database=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
    "slow": settings(max_examples=int(os.environ.get("HF_SYNTAX_MT_FUZZ_EXAMPLES", "1000")), deadline=None,
                     database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
}  # fmt: skip
profiles = pytest.mark.parametrize("profile", ["fast", pytest.param("slow", marks=pytest.mark.slow)])
RAN: Counter = Counter()  # generated inputs per property (printed with -s)


def run(profile: str, strategy, prop) -> None:
    """Run ``prop`` on ``strategy``'s examples under ``profile``; count them."""

    def counted(example):
        RAN[prop.__name__] += 1
        prop(example)

    counted.__name__ = prop.__name__
    settings(PROFILES[profile])(given(strategy)(counted))()
    print(f"{prop.__name__}: {RAN[prop.__name__]} generated inputs ({profile})")


def works_or_user_error(call, *errors):
    """``call()``'s result, or None when it raised the package's `UserError` (or one of ``errors``); any other
    exception fails the property."""
    try:
        return call()
    except (UserError, *errors):
        return None


# values of every shape a caller could pass by mistake: scalars, strings, bytes, lists, tuples, dicts, nested
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-5, 20)
    | st.floats(allow_nan=True)
    | st.text(max_size=6)
    | st.binary(max_size=4)
)
ANYTHING = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                        | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12)  # fmt: skip
JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 20) | st.floats(allow_nan=False) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=12)  # fmt: skip
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


# ------------------------------------------------------------------------------------------------------------------
# The shared checkers
# ------------------------------------------------------------------------------------------------------------------
def checkers(args):
    from hf_syntax_mt.validation import check_spans, check_string_lists, check_strings

    value, n = args
    strings = works_or_user_error(lambda: check_strings(value, "x"))
    if strings is not None:
        assert not isinstance(value, (str, bytes)) and strings == [str(v) for v in value]
        assert all(type(s) is str for s in strings)
    lists = works_or_user_error(lambda: check_string_lists(value, "x"))
    if lists is not None:
        assert len(lists) == len(value) and all(all(type(s) is str for s in item) for item in lists)
    spans = works_or_user_error(lambda: check_spans(value, n))
    if spans is not None:
        assert len(spans) == len(value)
        covered = [i for s, e in spans for i in range(s, e)]
        assert all(0 <= s <= e <= n for s, e in spans) and len(covered) == len(set(covered))


@profiles
def test_checkers_return_what_they_promise_or_a_user_error(profile):
    run(profile, st.tuples(ANYTHING | st.lists(st.tuples(st.integers(-2, 8), st.integers(-2, 8)), max_size=4),
                           st.integers(0, 6)), checkers)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# translate_lines: one translation per line, in order, the documents' lines only (an echoing pipeline)
# ------------------------------------------------------------------------------------------------------------------
def echo_pipe(k: int):
    def pipe(inputs, batch_size, **kwargs):
        if inputs and all(isinstance(d, list) for d in inputs):  # documents: one list of results each
            return [[{"translation_text": f"<{s}>"} for s in d] for d in inputs]
        return [{"translation_text": f"<{s}>"} for s in inputs]

    pipe.model = SimpleNamespace(config=SimpleNamespace(context_sentences=k))
    return pipe


LINES = st.lists(TEXT, max_size=6)
TRANSLATE_LINES = st.fixed_dictionaries({
    "lines": LINES | ANYTHING, "k": st.sampled_from([0, 1]), "use_context": st.booleans(),
    "documents": st.none() | st.lists(st.tuples(st.integers(-2, 7), st.integers(-2, 7)), max_size=3) | ANYTHING,
    "contexts": st.none() | st.lists(st.lists(TEXT, max_size=2), max_size=6) | ANYTHING,
    "batch_size": st.integers(-1, 3), "chunk_sentences": st.none() | st.integers(-1, 4),
})  # fmt: skip


def translate_lines_property(a):
    lines, documents = a["lines"], a["documents"]
    out = works_or_user_error(lambda: translate_lines(
        echo_pipe(a["k"]), lines, documents, use_context=a["use_context"], contexts=a["contexts"],
        batch_size=a["batch_size"], chunk_sentences=a["chunk_sentences"], progress=False))  # fmt: skip
    if out is None:
        return
    inside = set(range(len(lines))) if documents is None else {i for s, e in documents for i in range(s, e)}
    expected = [" ".join(split_lines(f"<{line}>")) if i in inside else "" for i, line in enumerate(lines)]
    assert out == expected  # one per line, in order; lines outside the documents stay empty


@profiles
def test_translate_lines_gives_one_translation_per_line_or_a_user_error(profile):
    run(profile, TRANSLATE_LINES, translate_lines_property)


# ------------------------------------------------------------------------------------------------------------------
# The pipeline's arguments (a tiny document model; generation replaced by an echo of each sentence and its context)
# ------------------------------------------------------------------------------------------------------------------
@cache
def tiny_pipeline():
    from transformers import pipeline

    from hf_syntax_mt.training import build_model, model_config, train_tokenizer

    tokenizer = train_tokenizer(["Le chat dort .", "Il pleut ."] * 10, vocab_size=60, min_frequency=1)
    config = model_config(tokenizer, d_model=8, layers=1, heads=2, ffn_dim=8, context_sentences=1)
    directory = Path(tempfile.mkdtemp(prefix="fuzz-model-"))
    build_model(config, seed=0).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return pipeline("syntax-translation", model=str(directory), device="cpu")


def echo_call(self, items, **kwargs):  # what Pipeline.__call__ returns, without generating: the source itself
    return [[{"translation_text": text}] for text, _, _ in items]


PIPELINE_CALL = st.fixed_dictionaries({
    "inputs": TEXT | st.lists(TEXT, max_size=4) | st.lists(st.lists(TEXT, max_size=3), max_size=3) | ANYTHING,
    "document": st.booleans(), "no_context": st.booleans(),
    "contexts": st.none() | st.lists(st.lists(TEXT, max_size=2), max_size=4) | ANYTHING,
    "document_method": st.booleans(),
})  # fmt: skip


def pipeline_property(a):
    pipe, inputs = tiny_pipeline(), a["inputs"]
    with mock.patch("transformers.Pipeline.__call__", echo_call):
        if a["document_method"]:
            out = works_or_user_error(lambda: pipe.translate_document(inputs))
            if out is not None:
                assert [r["translation_text"] for r in out] == [str(s) for s in inputs]
            return
        out = works_or_user_error(lambda: pipe(inputs, document=a["document"], contexts=a["contexts"],
                                               no_context=a["no_context"]))  # fmt: skip
    if out is None:
        return
    if isinstance(inputs, str):
        assert len(out) == 1 and out[0]["translation_text"] == inputs
    elif inputs and all(isinstance(d, (list, tuple)) for d in inputs):  # documents: the same shape back
        assert [[r["translation_text"] for r in d] for d in out] == [list(d) for d in inputs]
    else:
        assert [r["translation_text"] for r in out] == list(inputs)


@profiles
def test_the_pipeline_translates_its_input_in_shape_or_raises_a_user_error(profile):
    run(profile, PIPELINE_CALL, pipeline_property)


# ------------------------------------------------------------------------------------------------------------------
# File readers: Pharaoh alignments, CoNLL-U, document ids, pronoun items, study unit files
# ------------------------------------------------------------------------------------------------------------------
def write(data: bytes | str, name: str = "f.txt") -> Path:
    directory = Path(tempfile.mkdtemp(prefix="fuzz-"))
    path = directory / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


LINKS = st.frozensets(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=6)


def pharaoh_property(a):
    sure, extra, noise, one_indexed = a
    possible = sure | extra
    line = " ".join([f"{i + one_indexed}-{j + one_indexed}" for i, j in sorted(sure)]
                    + [f"{i + one_indexed}p{j + one_indexed}" for i, j in sorted(extra - sure)])  # fmt: skip
    gold = parse_pharaoh(line, one_indexed)
    assert gold.sure == sure and gold.possible == possible  # a well-formed line round-trips
    parsed = works_or_user_error(lambda: parse_pharaoh(line + " " + noise, one_indexed))
    if parsed is not None:
        assert parsed.sure >= sure and parsed.possible >= possible
    path = write((line + "\n" + noise).encode("utf-8", "surrogatepass") if noise else line.encode())
    read = works_or_user_error(lambda: read_pharaoh(path, one_indexed))
    if read is not None:
        assert len(read) == len(split_lines(path.read_text(encoding="utf-8")))


@profiles
def test_pharaoh_lines_round_trip_or_raise_a_user_error(profile):
    noise = st.text(st.sampled_from("0123456789-p \t\nx٣²"), max_size=12)
    run(profile, st.tuples(LINKS, LINKS, noise, st.sampled_from([0, 1])), pharaoh_property)


@st.composite
def conllu_sentences(draw):
    """Well-formed sentences (IDs 1..n, heads inside, one root) as CoNLL-U text, with their forms and heads."""
    sentences = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 5))
        forms = [draw(st.text(st.characters(categories=("L", "N")), min_size=1, max_size=5)) for _ in range(n)]
        order = draw(st.permutations(range(n)))  # a tree: the first word is the root, each other word's head comes
        heads = [0] * n  # earlier in the order
        for k in range(1, n):
            heads[order[k]] = order[draw(st.integers(0, k - 1))] + 1
        sentences.append((forms, heads))
    rows = [[f"{k + 1}\t{f}\t_\tX\t_\t_\t{h}\tdep\t_\t_\n" for k, (f, h) in enumerate(zip(forms, heads, strict=True))]
            for forms, heads in sentences]  # fmt: skip
    text = "".join("".join(sentence) + "\n" for sentence in rows)
    return text, sentences


def conllu_property(a):
    (text, sentences), noise, cut, garbage = a
    read = read_conllu(write(text, "s.conllu"))
    assert [s.words for s in read] == [forms for forms, _ in sentences]  # no sentence or word lost or added
    assert [list(s.heads) for s in read] == [heads for _, heads in sentences]
    damaged = text[:cut] + noise + text[cut:]
    works_or_user_error(lambda: read_conllu(write(damaged, "d.conllu")))
    works_or_user_error(lambda: read_conllu(write(garbage, "g.conllu")))  # any bytes: UTF-8 or not, gzip or not


@profiles
def test_conllu_round_trips_and_damage_is_a_user_error(profile):
    noise = st.text(st.sampled_from("\t\n#=-.0123456789 _x"), max_size=8)
    garbage = st.binary(max_size=40) | st.binary(max_size=30).map(lambda b: b"\x1f\x8b" + b)
    run(profile, st.tuples(conllu_sentences(), noise, st.integers(0, 60), garbage), conllu_property)


def docids_property(a):
    ids, lines, garbage = a
    text = write("".join(line + "\n" for line in lines))
    docids = write("".join(i + "\n" for i in ids), "ids.docid")
    spans = works_or_user_error(lambda: doc_id_spans(read_lines(text), docids, text))
    if spans is not None:
        read = read_doc_ids(docids)
        assert len(read) == len(lines) and spans == id_spans(read)
        assert [i for s, e in spans for i in range(s, e)] == list(range(len(lines)))  # every line, in order, once
    blank = works_or_user_error(lambda: blank_line_spans(lines))
    if blank is not None:
        assert all(all(lines[i].strip() for i in range(s, e)) for s, e in blank)
        assert sum(e - s for s, e in blank) == sum(1 for line in lines if line.strip())  # every sentence, once
    works_or_user_error(lambda: read_doc_ids(write(garbage, "g.docid")))


@profiles
def test_document_ids_and_blank_line_documents_cover_every_line_or_raise_a_user_error(profile):
    ids = st.lists(st.sampled_from(["a", "b", "c", " ", "", "a "]), max_size=6)
    lines = st.lists(st.sampled_from(["x", "y z", "", " "]), max_size=6)
    run(profile, st.tuples(ids, lines, st.binary(max_size=20)), docids_property)


GOOD_ITEM = {"id": "t-1-0", "corpus": "t", "doc_id": "d1", "source": "It sleeps.", "reference": "Er schläft.",
             "pronoun": "Er", "span": [0, 2], "variants": ["Sie", "Es"], "context": ["Der Hund ."], "case": "nom",
             "kind": "referential", "antecedent_distance": 1}  # fmt: skip


def pronoun_property(a):
    changes, drop, jsonl = a
    item = {k: v for k, v in {**GOOD_ITEM, **changes}.items() if k not in drop}
    checked = works_or_user_error(lambda: pronouns.check_pronoun_item(item, "here") or True)
    if checked:  # a checked item is scored and grouped without a bare error
        breakdown = pronouns.pronoun_breakdown([item, GOOD_ITEM], [True, False])
        assert breakdown["n"] == 2 and breakdown["correct"] == 1
        assert len(pronouns.variant_references(item)) == len(item["variants"])
    path = write(jsonl, "items.jsonl")
    items = works_or_user_error(lambda: pronouns.load_pronoun_items(path))
    if items is not None:
        assert len(items) == sum(1 for line in split_lines(jsonl.decode("utf-8")) if line.strip())


@profiles
def test_pronoun_items_are_checked_whole_or_refused_with_a_user_error(profile):
    changes = st.dictionaries(st.sampled_from(sorted(GOOD_ITEM)), JSON, max_size=3)
    drop = st.sets(st.sampled_from(sorted(GOOD_ITEM)), max_size=2)
    jsonl = st.lists(st.just(json.dumps(GOOD_ITEM)) | st.text(max_size=10) | JSON.map(json.dumps),
                     max_size=3).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass"))  # fmt: skip
    run(profile, st.tuples(changes, drop, jsonl), pronoun_property)


def unit_property(a):
    changes, drop, test_changes, raw, removed = a
    with tempfile.TemporaryDirectory(prefix="fuzz-units-") as tmp:
        results = Path(tmp)
        (results / "runs").mkdir()
        name = study_round2.unit_name("full", "vanilla", 0)
        hyps = "a man\ntwo dogs\n"
        sha = hashlib.sha256(hyps.encode()).hexdigest()
        tests = {
            t: {
                "bleu": 1.0,
                "chrf": 2.0,
                "hypotheses_sha256": sha,
                "buckets": [{"bucket": "1-10", "count": 2, "bleu": 1.0}],
            }
            for t in study_round2.MULTI30K_TESTS
        }
        first = tests[study_round2.MULTI30K_TESTS[0]]
        first.update(test_changes)
        tests = {t: v for t, v in tests.items() if t not in removed}
        record = {"unit": name, "setting": "full", "method": "vanilla", "seed": 0, "precision": "fp32",
                  "device": "cpu", "steps": 1, "train_minutes": 1.0, "tests": tests, **changes}  # fmt: skip
        record = {k: v for k, v in record.items() if k not in drop}
        for t in study_round2.MULTI30K_TESTS:
            (results / "runs" / f"{name}.{t}.txt").write_text(hyps, encoding="utf-8")
        (results / "runs" / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
        units = works_or_user_error(lambda: study_round2.load_units(results), SystemExit)
        if units is not None:  # every test set of the setting, each checked against its recorded sha256
            assert len(units) == 1 and set(units[0]["hypotheses"]) >= set(study_round2.MULTI30K_TESTS)
            assert all(isinstance(units[0]["tests"][t].get("hypotheses_sha256"), str) for t in units[0]["tests"])
        (results / "runs" / f"{name}.json").write_bytes(raw)
        works_or_user_error(lambda: common.load_unit(results / "runs" / f"{name}.json", fields=study_round2.UNIT_FIELDS),
                            common.UnitFileError)  # fmt: skip


@profiles
def test_study_unit_files_load_whole_or_are_refused_naming_the_file(profile):
    keys = ["unit", "setting", "method", "seed", "precision", "device", "steps", "train_minutes", "tests"]
    raw = JSON.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=20)
    fields = st.sampled_from(["bleu", "buckets", "hypotheses_sha256", "chrf"])
    run(profile, st.tuples(st.dictionaries(st.sampled_from(keys), JSON, max_size=2), st.sets(st.sampled_from(keys),
                                                                                              max_size=2),
                           st.dictionaries(fields, JSON, max_size=2), raw,
                           st.sets(st.sampled_from(study_round2.MULTI30K_TESTS), max_size=1)), unit_property)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------------
# The averaging sum against a model
# ------------------------------------------------------------------------------------------------------------------
def averaging_property(shapes):
    from hf_syntax_mt.training import CheckpointAverageCallback

    model = torch.nn.Linear(3, 2)
    callback = CheckpointAverageCallback(3, 5)
    saved = {k: torch.randn(s) for k, s in shapes.items()}
    callback.sum, callback.steps, callback.loaded_from = {k: v.clone() for k, v in saved.items()}, [10, 15], "f"
    state = SimpleNamespace(max_steps=20, global_step=15, is_world_process_zero=True)
    if works_or_user_error(lambda: callback.on_train_begin(None, state, None, model=model) or True):
        state.global_step = 20
        callback.on_step_end(None, state, None, model=model)  # the next averaged step adds the model to the sum
        assert callback.steps == [10, 15, 20]
        params = model.state_dict()
        assert set(callback.sum) == set(params)  # accepted: the sum is this model's, key for key
        for k, v in params.items():
            torch.testing.assert_close(callback.sum[k], saved[k] + v.detach())


@profiles
def test_an_averaging_sum_is_this_models_or_a_user_error(profile):
    shapes = st.dictionaries(st.sampled_from(["weight", "bias", "model.shared.weight"]),
                             st.sampled_from([(2, 3), (2,), (3, 3), (3,)]), max_size=3)  # fmt: skip
    run(profile, shapes, averaging_property)


def test_gzip_magic_with_garbage_is_a_user_error():
    """Found by the CoNLL-U property: a file that starts like gzip but is not gave a bare BadGzipFile / EOFError."""
    with pytest.raises(UserError, match=r"g.conllu: not a valid gzip file"):
        read_conllu(write(b"\x1f\x8b" + b"\x00" * 12, "g.conllu"))
    path = write(gzip.compress(b"1\tx\t_\tX\t_\t_\t0\troot\t_\t_\n")[:-6], "cut.conllu")
    with pytest.raises(UserError, match=r"cut.conllu: not a valid gzip file"):
        read_conllu(path)


# ------------------------------------------------------------------------------------------------------------------
# The parse cache's shards (issue 57): whatever a shard holds, each text gets its own parse
# ------------------------------------------------------------------------------------------------------------------
CACHE_TEXTS = ["le chat dort .", "un chien court .", "il pleut ."]


@cache
def cache_conllu() -> Path:
    rows = []
    for text in CACHE_TEXTS:
        words = text.split()
        rows.append(f"# text = {text}\n" + "".join(f"{i}\t{w}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t_\t_\t_\n"
                                                    for i, w in enumerate(words, start=1)))  # fmt: skip
    return write("\n".join(rows) + "\n", "cache.conllu")


KEYS = st.sampled_from([hashlib.sha256(t.encode()).hexdigest() for t in CACHE_TEXTS]) | st.text(max_size=4)
# a real parse of one of the texts under any key (a record planted for another text), a damaged parse (its words
# anything; its text anything but the texts asked for, or one of them with no word), or any JSON
REAL_PARSE = st.sampled_from(CACHE_TEXTS).map(lambda t: {"words": t.split(), "heads": [0] + [1] * (len(t.split()) - 1),
                                                         "text": t})  # fmt: skip
DAMAGED_PARSE = st.fixed_dictionaries({"words": st.lists(TEXT, max_size=3), "heads": st.lists(st.integers(-1, 4),
                                       max_size=3), "text": TEXT.filter(lambda t: t not in CACHE_TEXTS)})  # fmt: skip
EMPTY_PARSE = st.sampled_from(CACHE_TEXTS).map(lambda t: {"words": [], "heads": [], "text": t})
SHARD_RECORD = st.fixed_dictionaries({"key": KEYS, "parse": REAL_PARSE | DAMAGED_PARSE | EMPTY_PARSE | JSON}) | JSON
SHARD = (
    st.lists(SHARD_RECORD.map(json.dumps), max_size=4).map(lambda lines: "\n".join(lines).encode())
    | st.binary(max_size=30)
    | st.just(None)
)  # fmt: skip  (None: a folder named like a shard)


def cache_property(shards):
    from hf_syntax_mt.data.parsers import CachedParser, ConllParser

    with tempfile.TemporaryDirectory(prefix="fuzz-cache-") as tmp:
        parser = CachedParser(ConllParser(cache_conllu()), tmp)
        parser.shard_dir.mkdir(parents=True)
        for i, shard in enumerate(shards):
            path = parser.shard_dir / f"{i:03d}.jsonl"
            path.mkdir() if shard is None else path.write_bytes(shard)
        got = parser.parse(list(CACHE_TEXTS))
        assert [p.words for p in got] == [t.split() for t in CACHE_TEXTS]  # never a planted or damaged parse


@profiles
def test_the_parse_cache_gives_each_text_its_own_parse_whatever_its_shards_hold(profile):
    run(profile, st.lists(SHARD, max_size=3), cache_property)
