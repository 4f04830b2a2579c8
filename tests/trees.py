"""Tree helpers for the tests: the slow, obviously-correct computations the methods are checked against."""

from __future__ import annotations

from collections import deque


def bfs_distance(heads: list[int], a: int, b: int) -> int:
    """Edges between words a and b (0-based) of the tree `heads` (1-based, 0 = root), by breadth-first search over
    undirected edges."""
    neighbours = {w: set() for w in range(len(heads))}
    for w, h in enumerate(heads):
        if h:
            neighbours[w].add(h - 1)
            neighbours[h - 1].add(w)
    seen, todo = {a: 0}, deque([a])
    while todo:
        w = todo.popleft()
        for v in neighbours[w]:
            if v not in seen:
                seen[v] = seen[w] + 1
                todo.append(v)
    return seen[b]


def chain_sentence(text: str):
    """A chain tree over the whitespace words of ``text``: word i depends on word i-1, the first is the root."""
    from hf_syntax_mt.data.parsed import ParsedSentence

    words = text.split()
    return ParsedSentence(words, list(range(len(words))), ["dep"] * len(words), ["X"] * len(words), text=text)
