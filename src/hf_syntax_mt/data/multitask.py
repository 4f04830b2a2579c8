"""Multi-task parse + translate (Currey & Heafield 2019; the PASCAL paper's "+ MULTI-TASK" baseline).

One model learns to translate and to emit the linearised dependency parse of its source, the task chosen by a
task token. The token starts the *target* (as mBART's language tokens), so the source side, its parse and every
syntax column stay exactly as for translation; `generate()` forces the translate token unless told otherwise.

    tokenizer, model = ..., ...
    add_task_tokens(tokenizer, model)                       # adds <2trans>, <2parse>; sets config.task_token_ids
    data = multitask_dataset(data, parse_column="source_parse")   # each row twice: translate and parse
    # ... SyntaxMTPreprocessor / Trainer as usual ...
    parse_ids = model.generate(**inputs, forced_bos_token_id=model.config.task_token_ids["parse"])
    heads, deprels, words = delinearize(tokenizer.decode(parse_ids[0], skip_special_tokens=True))

The linearisation keeps the words in surface order and brackets each subtree with its relation:
"the cat sat" (det, nsubj, root) -> ``(root (nsubj (det the) cat) sat)``.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from .parsed import ParsedSentence

__all__ = ["TASK_TOKENS", "add_task_tokens", "delinearize", "linearize_parse", "multitask_dataset"]

TASK_TOKENS = {"translate": "<2trans>", "parse": "<2parse>"}
_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


def _escape(word: str) -> str:
    for char, escaped in _ESCAPES.items():
        word = word.replace(char, escaped)
    return word.replace(" ", "_")


def _unescape(word: str) -> str:
    for char, escaped in _ESCAPES.items():
        word = word.replace(escaped, char)
    return word


def linearize_parse(parse: ParsedSentence) -> str:
    """The bracketed linearisation of a dependency tree, words in surface order (module docstring)."""
    n = len(parse.words)
    if n == 0:
        return ""
    children: list[list[int]] = [[] for _ in range(n + 1)]  # 0 = the virtual root
    for w, h in enumerate(parse.heads):
        children[h].append(w + 1)

    def visit(w: int) -> str:
        left = [visit(c) for c in children[w] if c < w]
        right = [visit(c) for c in children[w] if c > w]
        rel = (parse.deprels[w - 1] if parse.deprels else "dep") or "dep"
        return "(" + " ".join([rel, *left, _escape(parse.words[w - 1]), *right]) + ")"

    return " ".join(visit(r) for r in children[0])


def delinearize(text: str) -> tuple[list[int], list[str], list[str]]:
    """Read a linearised parse back: ``(heads, deprels, words)`` with UD heads (1-based, 0 = root).

    Raises ``ValueError`` naming the position of unbalanced brackets or a subtree without a word (a model's output
    may be malformed; catch the error to count it as a parse failure)."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    heads: list[int] = []
    deprels: list[str] = []
    words: list[str] = []
    # stack of open subtrees: [relation, index of its word (1-based) or None, children waiting for the word]
    stack: list[list[Any]] = []
    expect_rel = False
    for k, tok in enumerate(tokens):
        if tok == "(":
            stack.append([None, None, []])
            expect_rel = True
        elif tok == ")":
            if not stack:
                raise UserError(f"unbalanced ')' at token {k} of {text!r}")
            rel, word, waiting = stack.pop()
            if word is None:
                raise UserError(f"subtree ending at token {k} has no word in {text!r}")
            deprels[word - 1] = rel
            for child in waiting:
                heads[child - 1] = word
            if stack:
                parent = stack[-1]
                if parent[1] is None:
                    parent[2].append(word)
                else:
                    heads[word - 1] = parent[1]
            else:
                heads[word - 1] = 0
        elif expect_rel:
            stack[-1][0] = tok
            expect_rel = False
        else:
            if not stack or stack[-1][1] is not None:
                raise UserError(f"token {k} ({tok!r}) is outside a subtree or a second word in one: {text!r}")
            words.append(_unescape(tok))
            heads.append(0)
            deprels.append("")
            stack[-1][1] = len(words)
    if stack:
        raise UserError(f"{len(stack)} unclosed '(' in {text!r}")
    return heads, deprels, words


def add_task_tokens(tokenizer, model=None, tokens: dict[str, str] | None = None) -> dict[str, int]:
    """Add the task tokens to `tokenizer` as special tokens; with `model`, resize its embeddings and set
    `model.config.task_token_ids`. Returns ``{"translate": id, "parse": id}``."""
    tokens = tokens or TASK_TOKENS
    tokenizer.add_special_tokens({"additional_special_tokens": list(tokens.values())})
    ids = {task: tokenizer.convert_tokens_to_ids(tok) for task, tok in tokens.items()}
    if model is not None:
        if len(tokenizer) > model.config.vocab_size:
            model.resize_token_embeddings(len(tokenizer))
        model.config.task_token_ids = ids
    return ids


def multitask_dataset(
    dataset,
    parse_column: str = "source_parse",
    target_column: str = "target",
    tokens: dict[str, str] | None = None,
):
    """Each row twice: once to translate (target ``"<2trans> " + target``) and once to parse (target
    ``"<2parse> " + linearised source parse``), shuffled together by the Trainer's sampler.

    Args:
        dataset: a ``datasets.Dataset`` with the target text and the source parse (parse dicts, as
            ``read_parallel_conllu`` or ``gold_parses`` write them).
    """
    from datasets import concatenate_datasets

    tokens = tokens or TASK_TOKENS
    if parse_column not in dataset.column_names:  # the parsing task's supervision: named, with how to make it
        raise UserError(
            f"multitask_dataset needs the source parses in column {parse_column!r}; got {dataset.column_names}: read "
            "them with read_parallel_conllu, or parse the sources (hf_syntax_mt.data.preprocess.parse_texts)"
        )

    def translate(batch):
        return {target_column: [f"{tokens['translate']} {t or ''}".rstrip() for t in batch[target_column]]}

    def parse(batch):
        return {
            target_column: [
                f"{tokens['parse']} {linearize_parse(ParsedSentence.from_dict(p))}".rstrip()
                for p in batch[parse_column]
            ]
        }

    return concatenate_datasets(
        [
            dataset.map(translate, batched=True, desc="Translation task"),
            dataset.map(parse, batched=True, desc="Parsing task"),
        ]
    )
