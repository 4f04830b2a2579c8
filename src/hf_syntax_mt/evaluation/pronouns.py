"""A contrastive pronoun test built from real documents, in the spirit of ContraPro (Müller et al. 2018): wherever an
English ``it`` (or ``its``) is word-aligned to a German 3rd-person singular pronoun in the reference, the reference is
paired with contrastive variants that put the other genders' form of the same case in its place. A model passes an
item when it scores the true reference above every variant (teacher-forced log-probability, as
:func:`hf_syntax_mt.evaluation.contrastive.score_contrastive`).

Here: the items' file (:func:`write_pronoun_items`, :func:`load_pronoun_items`, which checks every field's type),
scoring (:func:`score_pronoun_items`, which reports the referential items by antecedent distance beside the whole
set) and the random-context control (:func:`random_contexts`, also behind ``hf-syntax-mt translate
--random-context``). The items are built by the pronoun study (``benchmarks/data/pronoun_items.py``), whose German
rules and noun lexicon live beside it. Each item records its ``kind``: ``referential`` (an antecedent noun of the
pronoun's gender in the same or one of the previous sentences: ``antecedent``, ``antecedent_distance``; both None
where it was not found with confidence), fixed by the construction (``expletive``, ``cleft``, ``clausal``,
``impersonal``) or ``no_antecedent``; a case the German word order contradicts, a plural ``sie`` and a
nominative ``er``/``sie`` with a form of *sein* and a predicate noun (where ``es`` is right too) are dropped.

Only pointers, the verbatim sentences and the variant *forms* are stored; :func:`variant_references` builds the
variant sentences in memory (the TED part of the test data is CC BY-NC-ND: no modified text is written).
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import UserError, UserTypeError
from ..validation import check_count, check_sequence, check_strings

__all__ = [
    "DISTANCE_BUCKETS",
    "KINDS",
    "check_pronoun_item",
    "distance_bucket",
    "load_pronoun_items",
    "pronoun_breakdown",
    "random_contexts",
    "score_pronoun_items",
    "variant_references",
    "write_pronoun_items",
]

#: the kinds an item can have; only ``referential`` items test context
KINDS = ("referential", "no_antecedent", "expletive", "cleft", "clausal", "impersonal")
#: antecedent distances as the scores group them (sentences back; ``3+``: further)
DISTANCE_BUCKETS = ("0", "1", "2", "3+", "unknown")


def distance_bucket(distance: int | None) -> str:
    """``"0"``, ``"1"``, ``"2"``, ``"3+"``, or ``"unknown"`` (None: a referential item whose antecedent was not
    found with confidence)."""
    if distance is None:
        return "unknown"
    from ..validation import check_count

    distance = check_count(distance, "distance (sentences back to the antecedent)", minimum=0, maximum=10**6)
    return str(distance) if distance < 3 else "3+"


def variant_references(item: Mapping) -> list[str]:
    """The contrastive references of ``item``: its reference with each variant form in the pronoun's span."""
    s, e = item["span"]
    reference = item["reference"]
    if reference[s:e] != item["pronoun"]:
        raise UserError(f"item {item.get('id')}: characters {s}-{e} of the reference are {reference[s:e]!r}, not the "
                         f"pronoun {item['pronoun']!r}")  # fmt: skip
    return [reference[:s] + form + reference[e:] for form in item["variants"]]


def write_pronoun_items(path: str | Path, items: Iterable[Mapping]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)
    path.write_text(text, encoding="utf-8")
    return path


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_pronoun_item(item: Mapping, where: str) -> None:
    """Raise `UserError` naming ``where`` (``file:line``) and the field when ``item`` is not a well-formed pronoun
    item: strings ``source`` / ``reference`` / ``pronoun`` / ``case`` / ``doc_id``, ``span`` two ints inside the reference that hold the
    pronoun, ``variants`` a non-empty list of strings, ``context`` a list of strings, and (when present) ``kind`` one
    of :data:`KINDS` with ``antecedent_distance`` an int >= 0 for a referential
    item."""
    if not isinstance(item, Mapping):
        raise UserTypeError(f"{where}: an item is a JSON object (a dict), got {type(item).__name__}: {item!r:.60}")
    # case: what the scores are grouped by (pronoun_key); doc_id: whose context the random control must not take
    required = ("source", "reference", "pronoun", "span", "variants", "context", "case", "doc_id")
    missing = [f for f in required if f not in item]
    if missing:
        raise UserError(f"{where}: item lacks the field(s) {missing}; items come from build_pronoun_items "
                         "(benchmarks/data/pronoun_items.py), which writes every one of them")  # fmt: skip
    for field in ("source", "reference", "pronoun", "case", "doc_id"):
        if not isinstance(item[field], str):
            raise UserError(f"{where}: field {field!r} must be a string, got {item[field]!r}")
    for field in ("corpus", "kind"):
        if field in item and not isinstance(item[field], str):
            raise UserError(f"{where}: field {field!r} must be a string, got {item[field]!r}")
    span = item["span"]
    if not isinstance(span, list) or len(span) != 2 or not all(_is_int(x) for x in span):
        raise UserError(f"{where}: field 'span' must be [start, end] (two ints, character offsets into the "
                         f"reference), got {span!r}")  # fmt: skip
    if not 0 <= span[0] <= span[1] <= len(item["reference"]):
        raise UserError(f"{where}: field 'span' {span!r} is outside the reference ({len(item['reference'])} "
                         "characters): [start, end] with 0 <= start <= end <= its length")  # fmt: skip
    for field, allow_empty in (("variants", False), ("context", True)):
        value = item[field]
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value) or not (value or allow_empty):
            what = "the contrastive pronoun forms" if field == "variants" else "the previous source sentences"
            raise UserError(f"{where}: field {field!r} must be a {'' if allow_empty else 'non-empty '}list of "
                             f"strings ({what}), got {value!r}")  # fmt: skip
    if "kind" in item:
        if item["kind"] not in KINDS:
            raise UserError(f"{where}: field 'kind' must be one of {list(KINDS)}, got {item['kind']!r}")
        distance = item.get("antecedent_distance")
        if item["kind"] == "referential" and not (distance is None or (_is_int(distance) and distance >= 0)):
            raise UserError(
                f"{where}: a referential item's 'antecedent_distance' must be an int >= 0 (or null: "
                f"antecedent not found with confidence), got {distance!r}"
            )
    try:
        variant_references(item)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def load_pronoun_items(path: str | Path) -> list[dict]:
    """Items written by :func:`write_pronoun_items`, each checked by :func:`check_pronoun_item` (errors name the file
    and line)."""
    from ..data.readers import iter_json_objects

    items = []
    for k, item in iter_json_objects(path):
        check_pronoun_item(item, f"{path}:{k}")
        items.append(item)
    return items


# ------------------------------------------------------------------------------------------------------------------
# Context controls and scoring
# ------------------------------------------------------------------------------------------------------------------
def random_contexts(doc_ids: Sequence[str], sentences: Sequence[str], k: int, seed: int = 0) -> list[list[str]]:
    """For each sentence, the context that a sentence of *another* document has: every document is paired with a
    different one (a seeded random derangement), and sentence i gets the previous ``k`` sentences of sentence
    ``i % len(other)`` of it. The amount of context is kept where the other document is long enough (the first
    sentence still gets none); only its content comes from elsewhere (Li et al. 2020's control)."""
    doc_ids = check_strings(doc_ids, "doc_ids", "document ids, one per sentence")
    sentences = check_strings(sentences, "sentences")
    k = check_count(k, "k (context sentences)", minimum=0)
    if len(doc_ids) != len(sentences):
        raise UserError(f"{len(doc_ids)} document ids but {len(sentences)} sentences")
    documents: dict[str, list[str]] = {}
    for doc, sentence in zip(doc_ids, sentences, strict=True):
        documents.setdefault(doc, []).append(sentence)
    names = list(documents)
    if len(names) < 2:
        raise UserError("random context needs at least two documents")
    rng = random.Random(seed)
    while True:
        shuffled = names[:]
        rng.shuffle(shuffled)
        if all(a != b for a, b in zip(names, shuffled, strict=True)):
            break
    other = dict(zip(names, shuffled, strict=True))
    out, position = [], Counter()
    for doc in doc_ids:
        i = position[doc]
        position[doc] += 1
        source = documents[other[doc]]
        j = i % len(source)
        out.append(source[max(0, j - k) : j])
    return out


def _random_item_contexts(items: Sequence[Mapping], seed: int) -> list[list[str]]:
    """Each item gets the context of an item of another document (of the same corpus when there is one) with as many
    context sentences, drawn with a seeded generator."""
    rng = random.Random(seed)
    pools: dict[tuple, list[int]] = defaultdict(list)
    for idx, item in enumerate(items):
        pools[item.get("corpus"), len(item["context"])].append(idx)
    out = []
    for item in items:
        pool = [j for j in pools[item.get("corpus"), len(item["context"])] if items[j]["doc_id"] != item["doc_id"]]
        if not pool:
            pool = [j for j, other in enumerate(items) if other["doc_id"] != item["doc_id"]]
        out.append(list(items[rng.choice(pool)]["context"]) if pool else [])
    return out


def _accuracy(flags: list[bool]) -> dict:
    return {"n": len(flags), "correct": sum(flags), "accuracy": sum(flags) / len(flags) if flags else float("nan")}


def pronoun_key(item: Mapping) -> str:
    """The German pronoun an item is grouped by: the form (``er``, ``ihm``), possessives as ``sein-``/``ihr-``."""
    if item["case"] == "poss":
        return "ihr-" if item["pronoun"].lower().startswith("ihr") else "sein-"
    return item["pronoun"].lower()


def pronoun_breakdown(items: Sequence[Mapping], outcome: Sequence[bool]) -> dict:
    """The accuracy of per-item outcomes overall and by group: ``by_pronoun`` (:func:`pronoun_key`),
    ``by_noun_in_context``, ``by_corpus``, ``by_kind`` (items without a ``kind``: ``"unknown"``), and ``referential``
    (the referential items only) with ``referential_by_distance`` (antecedent distance ``"0"``, ``"1"``, ``"2"``,
    ``"3+"``) and ``referential_by_pronoun``. Each group maps to ``{"n", "correct", "accuracy"}``; ``results`` is ``outcome``."""
    if len(items) != len(outcome):
        raise UserError(f"{len(items)} items but {len(outcome)} outcomes")
    names = ("by_pronoun", "by_noun_in_context", "by_corpus", "by_kind", "referential_by_distance",
             "referential_by_pronoun")  # fmt: skip
    groups: dict[str, dict[str, list[bool]]] = {name: defaultdict(list) for name in names}
    referential = []
    for item, ok in zip(items, outcome, strict=True):
        ok = bool(ok)
        groups["by_pronoun"][pronoun_key(item)].append(ok)
        groups["by_noun_in_context"][str(bool(item.get("noun_in_context"))).lower()].append(ok)
        groups["by_corpus"][item.get("corpus", "")].append(ok)
        groups["by_kind"][item.get("kind", "unknown")].append(ok)
        if item.get("kind") == "referential":
            referential.append(ok)
            groups["referential_by_distance"][distance_bucket(item["antecedent_distance"])].append(ok)
            groups["referential_by_pronoun"][pronoun_key(item)].append(ok)
    return {
        **_accuracy([bool(x) for x in outcome]), "referential": _accuracy(referential),
        **{name: {key: _accuracy(flags) for key, flags in sorted(g.items())} for name, g in groups.items()},
        "results": [bool(x) for x in outcome],
    }  # fmt: skip


def score_pronoun_items(model, tokenizer, items: Sequence[Mapping], context: str = "document", seed: int = 0,
                        batch_size: int = 32) -> dict:  # fmt: skip
    """Accuracy of ``model`` on pronoun items: an item is right when its reference scores strictly higher than every
    variant (:func:`~hf_syntax_mt.evaluation.contrastive.score_contrastive`).

    Args:
        context: ``"document"`` (the item's previous sentences), ``"random"`` (the context of an item of another
            document, seeded by ``seed``) or ``"none"``. A model without document context ignores it.

    Returns:
        ``{"context", "accuracy", "n", "correct", ...}`` with the groups of :func:`pronoun_breakdown` (by pronoun, by
        ``noun_in_context``, by corpus, by kind, and the referential items by antecedent distance);
        ``results[i]`` is item ``i``'s outcome (bool).
    """
    from .contrastive import score_contrastive

    if context not in ("document", "random", "none"):
        raise UserError(f"context must be 'document', 'random' or 'none', got {context!r}")
    items = check_sequence(items, "items", "pronoun items (dicts, as load_pronoun_items returns)")
    for idx, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise UserTypeError(f"item {idx} must be a dict (a line of load_pronoun_items), got {type(item).__name__}")
        check_pronoun_item(item, f"item {idx} ({item.get('id', 'no id')})")
    if context == "document":
        contexts = [list(item["context"]) for item in items]
    elif context == "random":
        contexts = _random_item_contexts(items, seed)
    else:
        contexts = [[] for _ in items]
    examples, owner = [], []
    for idx, (item, ctx) in enumerate(zip(items, contexts, strict=True)):
        for variant in variant_references(item):
            examples.append({"source": item["source"], "correct": item["reference"], "contrastive": variant,
                             "context": ctx})  # fmt: skip
            owner.append(idx)
    scored = score_contrastive(model, tokenizer, examples, batch_size=batch_size)["results"] if examples else []
    outcome = [True] * len(items)
    for idx, result in zip(owner, scored, strict=True):
        outcome[idx] = outcome[idx] and result["correct"]
    return {"context": context, **pronoun_breakdown(items, outcome)}
