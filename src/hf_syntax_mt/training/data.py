"""Where `scripts/train.py`'s data comes from: every split read from local files (line-aligned text, TSV, JSONL,
CoNLL-U sources and targets, document ids) or a `datasets` name, limited by ``max_*_samples``, and the source parser
for raw text. Errors name the file, line and field. Used by `hf_syntax_mt.training.script` (its `DataArguments`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..data.readers import _require_nonempty, read_jsonl, read_tsv
from ..errors import UserError
from ..run_requirements import SPLITS, parser_flags, parser_problem  # noqa: F401  (SPLITS importable here)

if TYPE_CHECKING:
    from .script_args import DataArguments


def load_split(data_args: DataArguments, split: str):
    """The raw ``Dataset`` of one split, with a ``doc_id`` column when ``--{split}_docid_file`` is given and a
    ``target_parse`` column when ``--{split}_target_conllu`` is given."""
    ds = _load_split_rows(data_args, split)
    target_conllu = getattr(data_args, f"{split}_target_conllu")
    if target_conllu:
        if ds is None:
            raise UserError(f"--{split}_target_conllu needs the {split} split's source data")
        ds = _add_target_parses(ds, target_conllu, split)
    docid_file = getattr(data_args, f"{split}_docid_file")
    if docid_file:
        from ..data.documents import read_doc_ids

        if ds is None:
            raise UserError(f"--{split}_docid_file needs the {split} split's data files")
        _require_nonempty(docid_file)
        described = next(getattr(data_args, f"{split}_{k}") for k in ("source_conllu", "source_file", "file")
                          if getattr(data_args, f"{split}_{k}"))  # fmt: skip
        ds = ds.add_column("doc_id", read_doc_ids(docid_file, len(ds), described))
    alignment_file = getattr(data_args, f"{split}_alignment_file", None)
    if alignment_file:
        from ..data.readers import read_lines

        if ds is None:
            raise UserError(f"--{split}_alignment_file needs the {split} split's data files")
        _require_nonempty(alignment_file)
        lines = read_lines(alignment_file)
        if len(lines) != len(ds):
            raise UserError(f"--{split}_alignment_file {alignment_file} has {len(lines)} lines but the {split} split "
                             f"has {len(ds)} pairs: give one Pharaoh line per pair (empty: no link).")  # fmt: skip
        from ..alignment.targets import check_alignment_lines

        lines = check_alignment_lines(lines, ds["source"], ds["target"], alignment_file,
                                      one_indexed=getattr(data_args, "alignment_one_indexed", False))  # fmt: skip
        ds = ds.add_column("alignment", lines)
    return ds


def _add_target_parses(ds, path: str, split: str):
    """Add the ``target_parse`` column from a CoNLL-U file, checked line by line against the split's targets."""
    from ..data.parsers import read_conllu

    _require_nonempty(path)
    parses = read_conllu(path)
    if len(parses) != len(ds):
        raise UserError(f"--{split}_target_conllu {path} has {len(parses)} sentences but the {split} split has "
                         f"{len(ds)} rows")  # fmt: skip
    targets = ds["target"]
    for k, (parse, target) in enumerate(zip(parses, targets, strict=True)):
        if target is not None and parse.text.split() != target.split():
            raise UserError(f"--{split}_target_conllu {path}: sentence {k + 1} is {parse.text[:60]!r} but target "
                             f"line {k + 1} is {target[:60]!r}: the files are not line aligned")  # fmt: skip
    return ds.add_column("target_parse", [p.to_dict() for p in parses])


def _load_split_rows(data_args: DataArguments, split: str):
    """The raw ``Dataset`` of one split (columns ``source``, ``target`` and, for CoNLL-U sources, ``source_parse``),
    or ``None`` when the split is not given."""
    from datasets import Dataset

    from ..data.preprocess import load_parallel_files, read_parallel_conllu

    file = getattr(data_args, f"{split}_file")
    src = getattr(data_args, f"{split}_source_file")
    tgt = getattr(data_args, f"{split}_target_file")
    conllu = getattr(data_args, f"{split}_source_conllu")
    given = [name for name, v in (("file", file), ("source_file", src), ("source_conllu", conllu)) if v]
    if len(given) > 1:
        raise UserError(f"give one source for the {split} split, got {' and '.join(f'--{split}_{g}' for g in given)}")
    if not tgt and getattr(data_args, f"{split}_target_conllu") and (conllu or src):
        from datasets import Dataset

        from ..data.parsers import read_conllu

        tgt_lines = [s.text for s in read_conllu(getattr(data_args, f"{split}_target_conllu"))]
        if conllu:
            sources = read_conllu(conllu)
            rows = {"source": [s.text for s in sources], "source_parse": [s.to_dict() for s in sources]}
        else:
            from ..data.readers import read_lines

            rows = {"source": read_lines(src)}
        if len(rows["source"]) != len(tgt_lines):
            raise UserError(f"the {split} source has {len(rows['source'])} rows but "
                             f"--{split}_target_conllu has {len(tgt_lines)} sentences")  # fmt: skip
        return Dataset.from_dict({**rows, "target": tgt_lines})
    if conllu:
        if not tgt:
            raise UserError(f"--{split}_source_conllu needs --{split}_target_file (or --{split}_target_conllu)")
        _require_nonempty(conllu)
        _require_nonempty(tgt)
        return read_parallel_conllu(conllu, tgt)
    if src or (tgt and not file):
        if not (src and tgt):
            raise UserError(f"--{split}_source_file and --{split}_target_file go together")
        _require_nonempty(src)
        _require_nonempty(tgt)
        return load_parallel_files(src, tgt)
    if file:
        name = file[:-3] if file.endswith(".gz") else file
        if name.endswith(".tsv"):
            return Dataset.from_dict(read_tsv(file))
        if name.endswith((".jsonl", ".json")):
            return Dataset.from_dict(read_jsonl(file, data_args.source_lang, data_args.target_lang))
        raise UserError(f"--{split}_file {file}: unknown format (use .tsv, .jsonl or .json, optionally .gz)")
    return None


class _TranslationColumns:
    """`{"translation": {src: ..., tgt: ...}}` rows -> `source`/`target` columns (picklable for `num_proc`)."""

    def __init__(self, source_lang: str, target_lang: str):
        self.source_lang, self.target_lang = source_lang, target_lang

    def __call__(self, batch: dict) -> dict:
        pairs = batch["translation"]
        return {"source": [t[self.source_lang] for t in pairs], "target": [t[self.target_lang] for t in pairs]}


def _from_hub_dataset(data_args: DataArguments):
    """`load_dataset(name, config)` -> a dict of splits with ``source``/``target`` columns."""
    from datasets import load_dataset

    raw = load_dataset(data_args.dataset_name, data_args.dataset_config_name)
    out = {}
    for split in SPLITS:
        name = split if split in raw else ("valid" if split == "validation" and "valid" in raw else None)
        if name is None:
            continue
        ds = raw[name]
        if "translation" in ds.column_names:
            src, tgt = data_args.source_lang, data_args.target_lang
            if not (src and tgt):
                raise UserError(f"{data_args.dataset_name} has a 'translation' column: give --source_lang and "
                                 "--target_lang")  # fmt: skip
            ds = ds.map(_TranslationColumns(src, tgt), batched=True, remove_columns=ds.column_names,
                        desc=f"{split}: translation pairs")  # fmt: skip
        elif not {"source", "target"} <= set(ds.column_names):
            raise UserError(f"{data_args.dataset_name}[{name}] has columns {ds.column_names}: need 'translation' or "
                             "'source' and 'target'")  # fmt: skip
        out[split] = ds
    return out


def load_raw_datasets(data_args: DataArguments) -> dict:
    """Every given split as a raw ``Dataset``, limited by ``max_*_samples``."""
    if data_args.dataset_name:
        raw = _from_hub_dataset(data_args)
    else:
        raw = {s: ds for s in SPLITS if (ds := load_split(data_args, s)) is not None}
    if "train" not in raw:
        raise UserError("no training data: give --train_file, --train_source_file/--train_target_file, "
                         "--train_source_conllu/--train_target_file or --dataset_name")  # fmt: skip
    limits = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples,
              "test": data_args.max_predict_samples}  # fmt: skip
    for split, limit in limits.items():
        if split in raw and limit is not None:
            raw[split] = raw[split].select(range(min(limit, len(raw[split]))))
    for split, ds in raw.items():
        if len(ds) == 0:
            raise UserError(f"the {split} split is empty")
    return raw


def build_parser(data_args: DataArguments, side: str = "source"):
    """The `Parser` of one side's raw text (``side``: ``"source"``, flags ``--parser``/``--parser_model``, or
    ``"target"``, ``--target_parser``/``--target_parser_model``); None when none is asked for (``auto``, ``none``).
    With ``--parser_cache_dir`` it is a `CachedParser` (each parser's parses keyed by its signature)."""
    from ..data.parsers import CachedParser, get_parser

    flag, model_flag = parser_flags(side)
    backend, model = getattr(data_args, flag), getattr(data_args, model_flag)
    if backend in ("auto", "none"):
        return None
    if problem := parser_problem(backend, model, side):
        raise UserError(problem)
    if backend == "conllu":
        parser = get_parser("conllu", path=model.split(","))
    elif backend == "spacy":
        parser = get_parser("spacy", model=model)
    else:
        parser = get_parser("stanza", lang=model)
    return CachedParser(parser, data_args.parser_cache_dir) if data_args.parser_cache_dir else parser
