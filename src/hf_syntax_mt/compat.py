"""What differs between the releases of transformers and torch the package supports, in one place: the version
floors and transformers' upper bound (checked at `import hf_syntax_mt`), and the models' `forward` signatures, which show the decoding cache under
the installed transformers' name (`cache` from 5.24 on, `past_key_values` before) and annotate `**kwargs` as
transformers' own models do. Keep `MIN_VERSIONS` and `MAX_VERSIONS` equal to the bounds of `pyproject.toml` (a test compares them)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from importlib import metadata

from .errors import DependencyVersionError

# the lowest releases the suite passes on. transformers 5.0-5.3: configs are not dataclasses yet; 5.4-5.16 pass the
# fast subset but a resumed training run no longer equals the uninterrupted one (tests/training/test_resume.py).
# CI's floors environment (`make test-floors`) runs transformers 5.17.0 with torch 2.13.0; torch 2.6.0 was checked by
# hand (2.4.1 cannot resume a Trainer checkpoint: transformers refuses torch.load below 2.6, CVE-2025-32434)
MIN_VERSIONS = {"transformers": "5.17.0", "torch": "2.6.0"}
# the first release that is refused (pyproject's upper bound, `transformers<6`): a major release may remove what the
# package builds on (Marian's classes, the Trainer's hooks), so it is refused until the suite passes on it
MAX_VERSIONS = {"transformers": "6"}


def check_versions(installed=metadata.version) -> None:
    """Raise one `DependencyVersionError` (an `ImportError`) naming the release to install when transformers or
    torch is older than the floor, or transformers is at or past its upper bound (before anything else is imported,
    so that no deeper error hides it). `installed(name)` gives a version."""
    from packaging.version import Version

    for name, floor in MIN_VERSIONS.items():
        try:
            found = installed(name)
        except metadata.PackageNotFoundError:
            continue  # not installed: the import that needs it says so
        release, ceiling = Version(found).release, MAX_VERSIONS.get(name)  # release: ignores 2.13.0+cpu, 5.25.0.dev0
        bound = f"{name}>={floor}" + (f",<{ceiling}" if ceiling else "")
        if release < Version(floor).release:
            raise DependencyVersionError(
                f"hf-syntax-mt needs {name} {floor} or newer, but {name} {found} is installed: pip install '{bound}'"
            )
        if ceiling is not None and release >= Version(ceiling).release:
            raise DependencyVersionError(
                f"hf-syntax-mt supports {name} below {ceiling} (the suite has not run on {name} {ceiling}), but {name} "
                f"{found} is installed: pip install '{bound}'"
            )


check_versions()


def legacy_cache_warning(cls_name: str, past_key_values, cache_name: str) -> None:
    """The models take the cache under either name; from transformers 5.24 on, `past_key_values` gives a
    `FutureWarning` (transformers' own models log a warning once)."""
    if cache_name == "cache" and past_key_values is not None:
        warnings.warn(
            f"`past_key_values` is deprecated for `{cls_name}.forward` (transformers 5.24 renamed it). Use `cache` "
            "instead.",
            FutureWarning,
            stacklevel=3,
        )


def legacy_checkpointing(model, flag: bool) -> None:
    """Honour the legacy `config.gradient_checkpointing=True` that Marian's own encoder and decoder consumed (and
    deleted from the config) before ours replaced them, as `post_init` does for Marian's models."""
    if flag:
        model.config.gradient_checkpointing = True
        model._backward_compatibility_gradient_checkpointing()  # enables it and deletes the flag again


def checkpoint_keyword_tensors(checkpoint_function):
    """Wrap the checkpoint function `gradient_checkpointing_enable` gives each layer, so that tensors which require
    gradients and reach a layer as *keyword* arguments are checkpoint inputs too.

    transformers' `GradientCheckpointingLayer` binds a layer's keyword arguments into a `functools.partial` and passes
    only the positional ones to the checkpoint. Under `use_reentrant=True` the recomputation then reads a keyword
    tensor with its autograd history attached, and each layer's replayed backward walks that history on its own: the
    document model's context keys and values (one context encoder, read by every layer) are walked twice, "Trying to
    backward through the graph a second time". Passed positionally, they are detached inside the
    checkpoint and their gradients come back through it, summed by autograd as for any input. A function that is not
    transformers' `functools.partial` (something wrapped it) is checkpointed without reentrance, which needs no
    lifting."""
    import functools

    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    @functools.wraps(checkpoint_function)
    def run(function, *args, **kwargs):
        if not isinstance(function, functools.partial):
            # wrapped (a test's mock, a profiler): its keyword tensors cannot be seen, so they cannot be lifted.
            # The non-reentrant checkpoint keeps any tensor the function closes over correct (saved-tensor hooks,
            # no replayed graph), with the same gradients: used for this call whatever was asked
            return checkpoint_function(function, *args, **{**kwargs, "use_reentrant": False})
        # into dicts, lists and tuples only: any other object (a decoding cache, the attention record) stays itself
        leaves, spec = tree_flatten(function.keywords, is_leaf=lambda x: not isinstance(x, (dict, list, tuple)))
        lifted = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor) and leaf.requires_grad]
        if not lifted:
            return checkpoint_function(function, *args, **kwargs)
        n = len(args)

        def layer(*inputs):
            values = list(leaves)
            for i, tensor in zip(lifted, inputs[n:], strict=True):
                values[i] = tensor
            return function.func(*function.args, *inputs[:n], **tree_unflatten(values, spec))

        return checkpoint_function(layer, *args, *(leaves[i] for i in lifted), **kwargs)

    return run


def show_in_signature(function, names, cache_name: str) -> None:
    """Set `function.__signature__`: the decoding cache under `cache_name`, `names` as keyword-only parameters
    (the registered methods' inputs: the Trainer keeps only the columns that `forward` names, `generate()` checks
    its keyword arguments against it), and `**kwargs` annotated with `Unpack[TransformersKwargs]` (transformers'
    tests read the attention outputs' support from it). The function itself takes either cache name."""
    from transformers.processing_utils import Unpack
    from transformers.utils import TransformersKwargs

    base = getattr(function, "_base_signature", None) or inspect.signature(inspect.unwrap(function))
    function._base_signature = base
    params = []
    for p in base.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        params.append(p.replace(name=cache_name) if p.name == "past_key_values" else p)
    present = {p.name for p in params}
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names if n not in present]
    var = inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD, annotation=Unpack[TransformersKwargs])
    function.__signature__ = base.replace(parameters=[*params, *extra, var])


@functools.cache
def _sdpa_priority() -> bool:
    from packaging.version import Version
    from torch.nn.attention import sdpa_kernel

    has_flag = "set_priority" in inspect.signature(sdpa_kernel).parameters
    return has_flag and Version(metadata.version("torch")).release >= (2, 7)


def sdpa_backends(backends):
    """`torch.nn.attention.sdpa_kernel(backends)` with the list's order as the priority (`set_priority=True`) where
    torch has it and `torch.compile` honours it (2.7 on; 2.6 has the flag but compiled code fails with it, pytorch
    #149725: there the list only restricts, and the default order already puts the memory-efficient kernel before
    the math one); `backends=None`: no choice (a null context)."""
    if backends is None:
        return contextlib.nullcontext()
    from torch.nn.attention import sdpa_kernel

    return sdpa_kernel(backends, set_priority=True) if _sdpa_priority() else sdpa_kernel(backends)


#: keyword arguments a model's `forward` takes beyond its signature: transformers' own (`TransformersKwargs`, the flash
#: kernels' `FlashAttentionKwargs`, ``return_dict``, the cache under either name, ``cache_position``) and the spine's
#: (the attention record the translation model hands its base model)
_PASSED_THROUGH = ("return_dict", "cache", "past_key_values", "cache_position", "attention_record")


def refuse_unknown_keywords(function, kwargs: dict, declared) -> None:
    """Raise `UserTypeError` (a `TypeError`, as Python's own) for the first of ``kwargs`` that neither ``function``'s
    shown signature, ``declared`` (the registered methods' inputs and supervision) nor transformers passes: a typo
    (``parent_postions=``) was silently dropped. The message names the closest known name (`difflib`)."""
    from transformers.modeling_flash_attention_utils import FlashAttentionKwargs
    from transformers.utils import TransformersKwargs

    from .errors import UserTypeError
    from .suggest import closest

    known = {*TransformersKwargs.__annotations__, *FlashAttentionKwargs.__annotations__, *_PASSED_THROUGH, *declared}
    unknown = [name for name in kwargs if name not in known]
    if not unknown:
        return
    shown = [n for n in inspect.signature(function).parameters if n not in ("self", "kwargs")]
    names = sorted({*shown, *declared})
    close = closest(unknown[0], names)
    hint = f"did you mean {close}=?" if close else f"the inputs are {', '.join(names)}"
    raise UserTypeError(f"{function.__qualname__}() got an unexpected keyword argument {unknown[0]}=: no argument of "
                        f"forward and no registered method's input has that name; {hint}")  # fmt: skip
