"""`benchmarks/speed/compare_attention.py`: it refuses trees that differ beyond the attention's file, and the baseline's
model is a copy whose attention modules run the baseline's class, with the same parameters and logits."""

import shutil
import sys
from pathlib import Path

import torch
from tiny_config import PAD, TINY

from hf_syntax_mt import SyntaxMTConfig, SyntaxMTForConditionalGeneration
from hf_syntax_mt.modeling_layers import SyntaxMTAttention

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.speed import compare_attention  # noqa: E402


def baseline_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "base"
    shutil.copytree(compare_attention.ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_only_the_attention_file_may_differ(tmp_path):
    tree = baseline_tree(tmp_path)
    assert compare_attention.other_differences(tree) == []
    layers = tree / compare_attention.LAYERS
    layers.write_text(layers.read_text() + "\n# the baseline's change\n")
    assert compare_attention.other_differences(tree) == []
    errors = tree / "src/hf_syntax_mt/errors.py"
    errors.write_text(errors.read_text() + "\n# another change\n")
    assert compare_attention.other_differences(tree) == ["src/hf_syntax_mt/errors.py"]


def test_the_baseline_copy_runs_the_baseline_class_with_the_same_weights(tmp_path):
    tree = baseline_tree(tmp_path)
    layers = tree / compare_attention.LAYERS
    layers.write_text(
        layers.read_text().replace(
            "class SyntaxMTAttention(MarianAttention):",
            "class SyntaxMTAttention(MarianAttention):\n    BASELINE = True\n",
            1,
        )
    )
    cls = compare_attention.baseline_attention(tree)
    assert cls is not SyntaxMTAttention and cls.BASELINE
    torch.manual_seed(0)
    model = SyntaxMTForConditionalGeneration(SyntaxMTConfig(**TINY, encoder_pascal_heads=[2, 0])).eval()
    copy = compare_attention.with_attention(model, cls)
    attentions = [m for m in copy.modules() if isinstance(m, (cls, SyntaxMTAttention))]
    assert attentions and all(type(m) is cls for m in attentions)
    assert all(type(m) is SyntaxMTAttention for m in model.modules() if isinstance(m, (cls, SyntaxMTAttention)))
    ids = torch.tensor([[5, 6, 7, 2], [8, 9, 2, PAD]])
    batch = dict(input_ids=ids, attention_mask=(ids != PAD).long(), parent_positions=torch.tensor([[1.0, 1, 1, 3], [0, 0, 2, 0]]),
                 decoder_input_ids=torch.full((2, 3), PAD))  # fmt: skip
    with torch.no_grad():
        torch.testing.assert_close(copy(**batch).logits, model(**batch).logits)
