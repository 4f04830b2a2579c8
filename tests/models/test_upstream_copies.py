"""Every copy of upstream code in the package is marked ("Copied from <upstream name>", or "Rewritten from" where the
same computation is written differently) and checked against the installed release, so that a new transformers or
CTranslate2 cannot drift it silently (STYLE.md, 10): the layers' forward bodies statement by statement (their ASTs,
less the additions each marker names), the fp16 clamp by its effect next to `MarianEncoderLayer`, and the one-step
decoder by its logits next to `MarianMTModel`."""

import ast
import difflib
import inspect
import re
import textwrap
from pathlib import Path

import pytest
import torch
from tiny_config import EOS, PAD, TINY
from transformers import MarianConfig, MarianMTModel
from transformers.models.marian import modeling_marian

from hf_syntax_mt import SyntaxMTConfig
from hf_syntax_mt.decoding.marian_step import MarianDecoderStep, memory_mask
from hf_syntax_mt.modeling_layers import SyntaxMTDecoderLayer, SyntaxMTEncoderLayer

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"(?:Copied|Rewritten) from `?([A-Za-z_][\w.]*)")
MARIAN = "transformers.models.marian.modeling_marian."
#: every marked copy -> the test that checks it against the installed release
CHECKS = {
    MARIAN + "MarianAttention.forward": (
        "tests/models/test_transformers_compat.py",
        "test_the_attentions_projection_and_cache_update_are_the_installed_marians",
    ),
    MARIAN + "MarianEncoderLayer.forward": (
        "tests/models/test_upstream_copies.py", "test_the_layer_bodies_are_the_installed_marians",
    ),
    MARIAN + "MarianDecoderLayer.forward": (
        "tests/models/test_upstream_copies.py", "test_the_layer_bodies_are_the_installed_marians",
    ),
    MARIAN + "MarianDecoder.forward": (
        "tests/models/test_upstream_copies.py", "test_the_decoder_step_gives_the_installed_marians_logits",
    ),
    "ctranslate2.converters.transformers.BartLoader.get_model_spec": (
        "tests/models/test_export_equivalence.py",
        "test_the_loaders_copy_of_ctranslate2_matches_the_installed_release",
    ),
}  # fmt: skip
#: the sublayer loop both layers add after their self-attention block (document context)
SUBLAYER_LOOP = """
for method in self.sublayer_methods if layer_states else ():
    hidden_states = method.sublayer(self, hidden_states, layer_states)
"""
#: ours -> upstream: the marked copy, what it adds (statements, keyword arguments) and the names it spells otherwise
LAYERS = {
    "encoder": (SyntaxMTEncoderLayer.forward, modeling_marian.MarianEncoderLayer.forward, [SUBLAYER_LOOP],
                {"method_inputs"}),
    "decoder": (SyntaxMTDecoderLayer.forward, modeling_marian.MarianDecoderLayer.forward, [SUBLAYER_LOOP], set()),
}  # fmt: skip
#: transformers 5.24 renamed the decoding cache `past_key_values` -> `cache`; the copies use the old name
RENAMES = {"cache": "past_key_values"}


def test_every_marked_copy_has_its_check():
    """The markers in the package are exactly the checked copies, and each check is a test that exists."""
    found = {}
    for path in sorted((ROOT / "src" / "hf_syntax_mt").rglob("*.py")):
        for match in MARKER.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(match.group(1), []).append(path.relative_to(ROOT).as_posix())
    assert set(found) == set(CHECKS), {"marked, unchecked": set(found) - set(CHECKS),
                                       "checked, unmarked": set(CHECKS) - set(found)}  # fmt: skip
    for target, (test_file, test_name) in CHECKS.items():
        assert f"def {test_name}(" in (ROOT / test_file).read_text(encoding="utf-8"), (target, test_file, test_name)


class _Normalise(ast.NodeTransformer):
    """Drop keyword arguments named in `drop`; rename names and keyword arguments by `renames`."""

    def __init__(self, drop=(), renames=None):
        self.drop, self.renames = set(drop), renames or {}

    def visit_keyword(self, node):
        if node.arg in self.drop:
            return None
        node.arg = self.renames.get(node.arg, node.arg)
        return self.generic_visit(node)

    def visit_Name(self, node):
        node.id = self.renames.get(node.id, node.id)
        return node


def _statements(function, after_marker: str | None = None) -> list[ast.stmt]:
    """The body of `function` (its docstring left out), or its statements below the line holding `after_marker`."""
    source = textwrap.dedent(inspect.getsource(function))
    body = ast.parse(source).body[0].body
    if after_marker is not None:
        line = next(i for i, text in enumerate(source.splitlines(), 1) if after_marker in text)
        return [s for s in body if s.lineno > line]
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def _text(statements: list[ast.stmt]) -> str:
    return ast.unparse(ast.Module(body=statements, type_ignores=[]))


@pytest.mark.parametrize("side", sorted(LAYERS))
def test_the_layer_bodies_are_the_installed_marians(side):
    """Our layer's statements below its marker, less the additions the marker names, are the installed
    `Marian*Layer.forward`'s body statement by statement (ASTs: formatting and comments aside), the fp16 clamp of the
    encoder layer included."""
    ours_fn, upstream_fn, added, keywords = LAYERS[side]
    marker = f"Copied from {MARIAN}{upstream_fn.__qualname__}"
    assert marker in inspect.getsource(ours_fn)
    additions = {_text(ast.parse(textwrap.dedent(a)).body) for a in added}
    ours = [s for s in _statements(ours_fn, marker) if _text([s]) not in additions]
    assert len(ours) == len(_statements(ours_fn, marker)) - len(additions), "an addition the marker names is missing"
    ours = [_Normalise(drop=keywords).visit(s) for s in ours]
    upstream = [_Normalise(renames=RENAMES).visit(s) for s in _statements(inspect.unwrap(upstream_fn))]
    if side == "encoder":
        assert "torch.float16" in _text(upstream)  # the clamp is among the compared statements
    diff = "\n".join(difflib.unified_diff(_text(upstream).splitlines(), _text(ours).splitlines(), "upstream", "ours"))
    assert ast.dump(ast.Module(body=ours, type_ignores=[])) == ast.dump(ast.Module(body=upstream, type_ignores=[])), (
        diff
    )


def test_the_encoder_layer_clamps_an_fp16_overflow_as_marian():
    """An fp16 layer whose output overflows (a final layer norm scaled to 6e4) comes out clamped to +-(max - 1000) (in
    fp16: 64512), finite, exactly as `MarianEncoderLayer` with the same weights gives it."""
    config = SyntaxMTConfig(**TINY)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    ours = SyntaxMTEncoderLayer(config, 0).eval()
    theirs = modeling_marian.MarianEncoderLayer(MarianConfig(**TINY, attn_implementation="eager"), 0).eval()
    with torch.no_grad():
        ours.final_layer_norm.weight.fill_(6e4)
        ours.final_layer_norm.bias.fill_(6e4)
        theirs.load_state_dict(ours.state_dict())
        ours, theirs = ours.half(), theirs.half()
        hidden = torch.randn(2, 5, TINY["d_model"]).half()
        unclamped = ours.final_layer_norm(torch.randn(2, 5, TINY["d_model"]).half())
        got, expected = ours(hidden, None), theirs(hidden, None)
    assert not torch.isfinite(unclamped).all()  # the layer norm alone overflows
    clamp = torch.tensor(torch.finfo(torch.float16).max - 1000, dtype=torch.float16).item()  # 64504 -> 64512
    assert torch.isfinite(got).all() and got.max().item() == clamp
    assert torch.equal(got, expected)


def test_the_decoder_step_gives_the_installed_marians_logits():
    """`MarianDecoderStep` (rewritten for one step) gives the installed `MarianMTModel`'s last-position logits over
    the same prefix at each of 4 greedy steps, for a batch with a padded source."""
    torch.manual_seed(0)
    marian = MarianMTModel(MarianConfig(**TINY)).eval()
    ids = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    mask = (ids != PAD).long()
    step = MarianDecoderStep(marian).eval()
    with torch.no_grad():
        memory = marian.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state  # (N, S, D)
        cross, source_mask = step.cross_cache(memory), memory_mask(mask, memory)
        past = step.empty_past(2, memory)
        prefix = torch.full((2, 1), marian.config.decoder_start_token_id)
        for position in range(4):
            logits, past = step(prefix[:, -1:], torch.tensor([position]), source_mask, cross, past)  # (N, V)
            expected = marian(encoder_outputs=(memory,), attention_mask=mask, decoder_input_ids=prefix).logits[:, -1]
            torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)
            prefix = torch.cat([prefix, logits.argmax(-1, keepdim=True)], dim=1)
