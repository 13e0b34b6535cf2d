"""swap(model, ext, example): the model with every convolution and linear chain the header covers
run by one fused call of the extension (best_conv), the rest left to PyTorch.

A chain is what the importer records (kernelgen.importer.Chains) and a fused kernel computes: a
Conv2d (grouped and depthwise ones too), then in this order a BatchNorm2d in eval mode (folded into
the filter and a bias, as the convolution's own bias is), a residual add, an activation (ReLU,
SiLU, GELU of erf (nn.GELU(), which the fused kernels compute in its tanh form: within 4.8e-4, and
within 1.5e-3 relative to max(1, |y|) in the fp16x2 arithmetic of the kernels of fp16 output, docs/kernels.md),
Hardswish, Sigmoid); a step joins the chain only where the value before it has no
other use. A chain is swapped when ``ext.kernel_for`` names a kernel for it (its problem and
epilogue, shapes taken from running ``example`` through the model once): the header's chosen kernel
where it was profiled, a fallback kernel of the same epilogue where not; where no kernel takes even
the bias (the depthwise and grouped kernels write a bare result), the convolution is swapped with
its batch norm folded in and the bias and the activation that follows it added after the call in
one pass (``ext.bias_activation_``; an extension without it: the convolution alone, its own bias
added after it by PyTorch, its batch norm left to PyTorch). A Linear layer's chain (its bias,
a residual add, an activation; Dropout in eval mode and Identity passed over) is swapped likewise
for one call of ``ext.linear`` (best_kernels::gemm, the input's leading dimensions its rows). An
nn.MultiheadAttention's self-attention (batch first, no mask, its weights unused, as ViT's) runs its
two projections through ``ext.linear`` around PyTorch's scaled_dot_product_attention, the output
projection taking the chain after the attention (a dropout in eval mode, the residual add). A
Conv3d of a 1 x R x S or R x 1 x 1 filter (a (2+1)-D video network's) and its chain (a BatchNorm3d
in eval mode, ...) run so too, as ``ext.conv2d`` on the 2-D view of the NDHWC memory that the
importer writes its line as (``FusedConv2d``'s ``view``). Everything else stays PyTorch's.

    swapped, report = swap(model, best_conv, x)    # report: what was swapped, by epilogue, and what not

For torch.compile, swap through ``compilable(best_conv)``: the extension's calls as PyTorch custom
operators, which Dynamo records as opaque calls of known output shape, so that Inductor compiles
what is left to PyTorch around them (the bias and activation after a kernel that takes none among it):

    swapped, _ = swap(model, compilable(best_conv), x)
    compiled = torch.compile(swapped, mode="max-autotune-no-cudagraphs")
"""

import copy
import itertools
import operator
from collections import Counter
from typing import List, Optional

import sys
from pathlib import Path

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "site_scons"))
from kernelgen.folds import per_channel, permutation  # noqa: E402 (the importer's rules, shared)
from kernelgen.importer import PAD_TO, Call, as_conv2d, conv3d_view, padded_to  # noqa: E402

ACTIVATION_MODULES = {torch.nn.ReLU: "relu", torch.nn.SiLU: "silu", torch.nn.Hardswish: "hardswish",
                      torch.nn.Sigmoid: "sigmoid"}
ACTIVATION_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", F.silu: "silu", F.hardswish: "hardswish",
                        torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.gelu: "gelu"}
ADDS = (operator.add, torch.add, operator.iadd)


ACTIVATIONS = {"relu": F.relu, "silu": F.silu, "gelu": F.gelu, "hardswish": F.hardswish, "sigmoid": torch.sigmoid}


def _two(value) -> List[int]:
    value = [value] * 2 if isinstance(value, int) else list(value)
    return value * 2 if len(value) == 1 else value


_namespaces = itertools.count()


class compilable:  # noqa: N801 (used as a function: compilable(best_conv))
    """``ext`` with ``conv2d`` and ``linear`` registered as PyTorch custom operators (a namespace of
    their own a wrapper, ``best_conv<n>``), their output's shape and layout (channels_last for
    conv2d, contiguous for linear) declared for tracing; ``kernel_for``, ``linear_kernel_for`` and the
    rest passed through (a swap through it folds as one through ``ext``; the bias and activation after
    a kernel that takes none are PyTorch's ops there, which its compiler fuses with what follows)."""

    def __init__(self, ext):
        self.ext = ext
        namespace = f"best_conv{next(_namespaces)}"

        @torch.library.custom_op(f"{namespace}::conv2d", mutates_args=())
        def conv2d(x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int], dilation: List[int],
                   bias: Optional[torch.Tensor], residual: Optional[torch.Tensor], activation: str,
                   groups: int) -> torch.Tensor:
            return ext.conv2d(x, w, stride, padding, dilation, bias=bias, residual=residual, activation=activation,
                              groups=groups)

        @conv2d.register_fake
        def _(x, w, stride, padding, dilation, bias, residual, activation, groups):
            extents = [(x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
                       for i in range(2)]
            return x.new_empty((x.shape[0], w.shape[0], *extents)).contiguous(memory_format=torch.channels_last)

        @torch.library.custom_op(f"{namespace}::linear", mutates_args=())
        def linear(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor],
                   activation: str) -> torch.Tensor:
            return ext.linear(x, w, bias=bias, residual=residual, activation=activation)

        @linear.register_fake
        def _(x, w, bias, residual, activation):
            return x.new_empty((*x.shape[:-1], w.shape[0]))

        self._conv2d, self._linear = conv2d, linear

    # The bias and activation after a kernel that takes none: PyTorch's ops here (_After), for the
    # compiler to fuse, not the extension's one pass, which it could not look into.
    bias_activation_ = None

    def conv2d(self, x, w, stride=1, padding=0, dilation=1, bias=None, residual=None, activation="none", groups=1):
        return self._conv2d(x, w, _two(stride), _two(padding), _two(dilation), bias, residual, activation, groups)

    def linear(self, x, w, bias=None, residual=None, activation="none"):
        return self._linear(x, w, bias, residual, activation)

    def __getattr__(self, name):
        return getattr(self.ext, name)


class _After(torch.nn.Module):
    """What follows a layer's call where its kernel takes no bias: activation(y + bias_after), the
    bias one value a channel (``channel_dim`` of y), in one pass of ``ext.bias_activation_`` where
    the extension has it (``one_pass``, decided once), else PyTorch's ops (and through ``compilable``,
    for its compiler to fuse)."""

    def __init__(self, ext, bias_after, after_activation: str):
        super().__init__()
        self.ext, self.after_activation = ext, after_activation
        self.one_pass = getattr(ext, "bias_activation_", None) is not None
        self.register_buffer("bias_after", bias_after)

    def _after(self, y, channel_dim):
        if self.bias_after is None:
            return y
        if self.one_pass:
            return self.ext.bias_activation_(y, self.bias_after, self.after_activation)
        shape = [1] * y.dim()
        shape[channel_dim] = -1
        y = y + self.bias_after.view(shape)
        return y if self.after_activation == "none" else ACTIVATIONS[self.after_activation](y)


def _as_2d(x, view: str):
    """A 5-D tensor (N, C, T, H, W) as the 4-D one of its NDHWC memory (channels_last): "frames",
    (N*T, C, H, W); "time", (N, C, T, H*W) (kernelgen.importer.as_conv2d)."""
    n, c, t, h, w = x.shape
    rows = x.contiguous(memory_format=torch.channels_last_3d).permute(0, 2, 3, 4, 1)  # N T H W C, as stored
    return (rows.reshape(n * t, h, w, c) if view == "frames" else rows.reshape(n, t, h * w, c)).permute(0, 3, 1, 2)


def _as_3d(y, n: int, h: int, w: int, view: str):
    """``_as_2d`` undone on a convolution's output (``h``, ``w``: the input's, for "time")."""
    rows = y.permute(0, 2, 3, 1)  # N' P Q K, as stored
    rows = rows.reshape(n, -1, *rows.shape[1:]) if view == "frames" else rows.reshape(n, rows.shape[1], h, w, -1)
    return rows.permute(0, 4, 1, 2, 3)


class FusedConv2d(_After):
    """One fused call of ``ext.conv2d``: activation(conv(x, weight) + bias + residual); with
    ``bias_after``, after_activation(that + bias_after) after the call (a kernel that takes no bias).
    With ``view``, a Conv3d of a 1 x R x S or R x 1 x 1 filter: the call on the 2-D view of the
    input's (and the residual's) NDHWC memory that the importer writes its line as ("frames" or
    "time", ``_as_2d``), the result viewed back; the weight, stride, padding and dilation the 2-D ones."""

    def __init__(self, ext, weight, bias, stride, padding, dilation, activation: str, groups: int = 1,
                 bias_after=None, after_activation: str = "none", view=None):
        super().__init__(ext, bias_after, after_activation)
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.activation, self.groups, self.view = activation, groups, view
        self.register_buffer("weight", weight.contiguous(memory_format=torch.channels_last))
        self.register_buffer("bias", bias)

    def forward(self, x, residual=None):
        cl = torch.channels_last
        flat = (lambda t: t.contiguous(memory_format=cl)) if self.view is None else (lambda t: _as_2d(t, self.view))
        y = self.ext.conv2d(flat(x), self.weight, self.stride, self.padding, self.dilation, bias=self.bias,
                            residual=None if residual is None else flat(residual), activation=self.activation,
                            groups=self.groups)
        y = self._after(y, 1)
        return y if self.view is None else _as_3d(y, x.shape[0], x.shape[3], x.shape[4], self.view)


class FusedLinear(_After):
    """One fused call of ``ext.linear``: activation(x @ weight.T + bias + residual); with
    ``bias_after``, after_activation(that + bias_after) after the call; with ``dims``, the result
    permuted so (a view), the residual given in that order and put back in the product's first."""

    def __init__(self, ext, weight, bias, activation: str, bias_after=None, after_activation: str = "none",
                 dims=None):
        super().__init__(ext, bias_after, after_activation)
        self.activation, self.dims = activation, None if dims is None else tuple(dims)
        self.undo = None if dims is None else tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
        self.register_buffer("weight", weight.contiguous())
        self.register_buffer("bias", bias)

    def forward(self, x, residual=None):
        if residual is not None and self.undo is not None:
            residual = residual.permute(self.undo)
        y = self.ext.linear(x.contiguous(), self.weight, bias=self.bias,
                            residual=None if residual is None else residual.contiguous(), activation=self.activation)
        y = self._after(y, -1)
        return y if self.dims is None else y.permute(self.dims)


class FusedSelfAttention(torch.nn.Module):
    """nn.MultiheadAttention's self-attention (batch first, no mask, its weights not asked for) as two
    calls of ``ext.linear`` around PyTorch's scaled_dot_product_attention: the input projection (its
    bias), and the output projection with its epilogue (its bias, the residual add after the
    attention, an activation)."""

    def __init__(self, ext, mha, activation: str = "none"):
        super().__init__()
        self.ext, self.heads, self.activation = ext, mha.num_heads, activation
        detached = lambda t: None if t is None else t.detach()  # noqa: E731
        self.register_buffer("in_weight", mha.in_proj_weight.detach().contiguous())
        self.register_buffer("in_bias", detached(mha.in_proj_bias))
        self.register_buffer("out_weight", mha.out_proj.weight.detach().contiguous())
        self.register_buffer("out_bias", detached(mha.out_proj.bias))

    def forward(self, x, residual=None):
        n, length, embed = x.shape
        qkv = self.ext.linear(x.contiguous(), self.in_weight, bias=self.in_bias)
        q, k, v = qkv.view(n, length, 3, self.heads, embed // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, length, embed)
        return self.ext.linear(a, self.out_weight, bias=self.out_bias,
                               residual=None if residual is None else residual.contiguous(), activation=self.activation)


def _module(gm, node, kinds):
    return node.op == "call_module" and isinstance(gm.get_submodule(node.target), kinds)


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _activation(gm, node):
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        if isinstance(module, torch.nn.GELU):
            return "gelu" if module.approximate == "none" else None
        return ACTIVATION_MODULES.get(type(module))
    if node.op == "call_function" and node.target in ACTIVATION_FUNCTIONS:
        if node.target is F.gelu and node.kwargs.get("approximate", "none") != "none":
            return None
        return ACTIVATION_FUNCTIONS[node.target]
    if node.op == "call_method" and node.target in ("relu", "sigmoid"):
        return node.target
    return None


def _residual(node, value, shape):
    """The other operand of ``node`` when it adds a tensor of ``shape`` to ``value``, else None."""
    if node.op == "call_function" and node.target in ADDS and len(node.args) == 2 and not node.kwargs:
        other = node.args[1] if node.args[0] is value else node.args[0] if node.args[1] is value else None
    elif node.op == "call_method" and node.target in ("add", "add_") and len(node.args) == 2 and not node.kwargs:
        other = node.args[1] if node.args[0] is value else None
    else:
        return None
    meta = getattr(other, "meta", {}).get("tensor_meta") if isinstance(other, torch.fx.Node) else None
    return other if meta is not None and tuple(meta.shape) == shape else None


def _passthrough(gm, node) -> bool:
    """Whether ``node`` passes its input on unchanged: an Identity, a Dropout in eval mode, or
    torchvision's stochastic depth (a function call in the traced graph) in eval mode."""
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "stochastic_depth" \
            and getattr(node.target, "__module__", "").startswith("torchvision."):
        training = node.kwargs.get("training", node.args[3] if len(node.args) > 3 else True)
        return training is False
    if node.op != "call_module":
        return False
    module = gm.get_submodule(node.target)
    return isinstance(module, torch.nn.Identity) or (isinstance(module, torch.nn.Dropout) and not module.training)


PERMUTES = (torch.permute,)
MULTIPLIES = (operator.mul, torch.mul, operator.imul)


def _permutation(node, value, rank: int):
    """The dimensions of ``node`` when it permutes ``value`` (torch.permute, Tensor.permute; of
    ``rank`` dimensions), else None."""
    if (node.op == "call_function" and node.target in PERMUTES or node.op == "call_method"
            and node.target == "permute") and node.args and node.args[0] is value:
        return permutation(tuple(node.args[1:]), dict(node.kwargs), rank)
    return None


def _scale(gm, node, value, shape, axis):
    """The factors (one a channel, fp32) of ``node`` when it multiplies ``value`` (of ``shape``, its
    channels along ``axis``) by a parameter or buffer that varies along the channels only, else None."""
    if not (node.op == "call_function" and node.target in MULTIPLIES or node.op == "call_method"
            and node.target in ("mul", "mul_")) or len(node.args) != 2 or node.kwargs:
        return None
    other = node.args[1] if node.args[0] is value else node.args[0] if node.args[1] is value else None
    if not isinstance(other, torch.fx.Node) or other.op != "get_attr":
        return None
    factor = operator.attrgetter(other.target)(gm)
    if not isinstance(factor, torch.Tensor) or not per_channel(shape, tuple(factor.shape), axis):
        return None
    return factor.detach().float().reshape(-1).expand(shape[axis]).clone()


def _chain(gm, first, norm: bool, views: bool = True, norms=(torch.nn.BatchNorm2d,)):
    """(the batch norm node or None, [(step, node, residual node or None, activation)]) after a
    layer (a batch norm only where ``norm``): the steps that may follow it, in order, each ("add",
    ...), ("act", ...) or ("pass", ...) (a node that passes its input on, as a Dropout in eval mode).
    After a linear layer (``norm`` false), before its add and activation: ("perm", node, dims, ...),
    a permutation of the value's dimensions, and ("scale", node, factors, ...), a product with a
    parameter that varies along the channels only (ConvNeXt's layer scale), which fold into the
    layer's weight and bias."""
    value, bn, steps = first, None, []
    shape = tuple(first.meta["tensor_meta"].shape)
    nxt = _only_user(value)
    if norm and nxt is not None and _module(gm, nxt, norms) and not gm.get_submodule(nxt.target).training \
            and gm.get_submodule(nxt.target).track_running_stats:
        bn, value = nxt, nxt
        nxt = _only_user(value)

    def passing():
        nonlocal value, nxt
        while nxt is not None and _passthrough(gm, nxt):
            steps.append(("pass", nxt, None, "none"))
            value, nxt = nxt, _only_user(nxt)

    passing()
    axis = len(shape) - 1
    while views and not norm and nxt is not None:
        if (dims := _permutation(nxt, value, len(shape))) is not None:
            steps.append(("perm", nxt, dims, "none"))
            shape, axis = tuple(shape[d] for d in dims), dims.index(axis)
        elif (factors := _scale(gm, nxt, value, shape, axis)) is not None:
            steps.append(("scale", nxt, factors, "none"))
        else:
            break
        value, nxt = nxt, _only_user(nxt)
        passing()
    if nxt is not None and (other := _residual(nxt, value, shape)) is not None:
        steps.append(("add", nxt, other, "none"))
        value, nxt = nxt, _only_user(nxt)
        passing()
    if nxt is not None and (act := _activation(gm, nxt)) is not None:
        steps.append(("act", nxt, None, act))
        value, nxt = nxt, _only_user(nxt)
        passing()
    return bn, steps


def _folded(conv, bn):
    """(weight, bias) of ``conv`` with ``bn`` (eval) folded in, in fp32, then the weight's dtype; the
    bias None where neither has one."""
    weight = conv.weight.detach().float()
    bias = conv.bias.detach().float() if conv.bias is not None else None
    if bn is not None:
        scale = bn.weight.detach().float() / torch.sqrt(bn.running_var.float() + bn.eps)
        weight = weight * scale.view(-1, *[1] * (weight.dim() - 1))
        bias = (bias if bias is not None else torch.zeros_like(scale)) * scale + bn.bias.detach().float() \
            - bn.running_mean.float() * scale
    dtype = conv.weight.dtype
    return weight.to(dtype), None if bias is None else bias.to(dtype)


def _epilogue(bias, residual, activation) -> str:
    steps = (["bias"] if bias is not None else []) + (["add"] if residual is not None else []) + \
        ([activation] if activation != "none" else [])
    return "+".join(steps) or "none"


def _parts(steps) -> tuple:
    """(the residual node or None, the activation) of a chain's ``steps``."""
    return (next((other for step, _, other, _ in steps if step == "add"), None),
            next((act for step, _, _, act in steps if step == "act"), "none"))


def _longest_covered(steps, bias, covers):
    """(kept, residual, activation) of the longest start of ``steps`` that ``covers(bias, residual,
    activation)`` holds, or None."""
    for kept in range(len(steps), -1, -1):
        residual, activation = _parts(steps[:kept])
        if covers(bias, residual, activation):
            return kept, residual, activation
    return None


def _whole(bias, steps) -> str:
    return _epilogue(bias, *_parts(steps))


def _replace(gm, nodes, name, module, args):
    """Runs ``module`` on ``args`` in place of ``nodes`` (the first the layer, the last the chain's
    end); the new node."""
    gm.add_submodule(name, module)
    last = nodes[-1]
    with gm.graph.inserting_after(last):
        fused = gm.graph.call_module(name, args)
    fused.meta = dict(last.meta)  # its shape, for the chains after it
    last.replace_all_uses_with(fused)
    for dead in reversed(nodes):
        gm.graph.erase_node(dead)
    return fused


def _after_steps(steps) -> tuple:
    """(steps taken, activation) of what a bias added after the layer can take with it: the first
    activation, where no residual add comes before it."""
    for i, (step, _, _, activation) in enumerate(steps):
        if step == "act":
            return i + 1, activation
        if step != "pass":
            break
    return 0, "none"


def _swapped(bias, residual, activation, bias_after, after_activation) -> str:
    """The report's name of a swapped chain: the kernel's epilogue, and what follows its call."""
    after = f"+after:{_epilogue(bias_after, None, after_activation)}" if bias_after is not None else ""
    return _epilogue(bias, residual, activation) + after


def _swap_conv(gm, node, ext):
    """The epilogue ``node``'s chain was swapped with, or (None, why it was left)."""
    conv = gm.get_submodule(node.target)
    if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
        return None, "a padding mode or string padding the extension does not take"
    shape, geometry, view, flat_weight, norms = (tuple(node.args[0].meta["tensor_meta"].shape),
                                                 (conv.stride, conv.padding, conv.dilation), None, tuple(conv.weight.shape),
                                                 (torch.nn.BatchNorm2d,))
    if isinstance(conv, torch.nn.Conv3d):  # as the 2-D convolution of its memory, where it is one
        call = Call("conv3d", shape, flat_weight, tuple(conv.stride), tuple(conv.padding), tuple(conv.dilation),
                    conv.groups)
        view, flat = conv3d_view(call), as_conv2d(call)
        if flat is None:
            return None, "a 3-D filter that is no 2-D one of the same memory (1xRxS or Rx1x1)"
        shape, geometry, flat_weight, norms = flat.input, (flat.stride, flat.padding, flat.dilation), flat.weight, \
            (torch.nn.BatchNorm3d,)
    bn, steps = _chain(gm, node, norm=True, norms=norms)
    weight, bias = _folded(conv, None if bn is None else gm.get_submodule(bn.target))
    weight = weight.reshape(flat_weight)
    probe = torch.empty(shape, dtype=weight.dtype, device=weight.device).contiguous(memory_format=torch.channels_last)

    def covers(w, bias, residual, activation):
        return ext.kernel_for(probe, w.contiguous(memory_format=torch.channels_last), *geometry,
                              bias=bias is not None, residual=residual is not None,
                              activation=activation, groups=conv.groups) is not None

    # channels no multiple of 8 that one convolution alone reads: padded, where the header has the
    # padded pair's kernels for the whole chain (kernelgen.importer.pad_channels, PAD=1)
    padded = _padded(gm, node, conv, bn, steps, weight, bias, covers, hasattr(ext, "bias_activation_"))
    after = (None, "none")
    if padded is not None:
        weight, bias, following, after = padded
        found = (len(steps), None, _parts(steps)[1] if after[0] is None else "none")
    else:  # the whole chain, else the longest start of it the header covers (the rest stays PyTorch's)
        found = _longest_covered(steps, bias, lambda *e: covers(weight, *e))
    if found is None:
        if bias is None or not covers(weight, None, None, "none"):
            return None, f"no kernel of the header for it (epilogue {_whole(bias, steps)})"
        if hasattr(ext, "bias_activation_"):
            # no kernel takes the bias: the convolution (its batch norm folded in), then the bias
            # and the activation after it in one pass
            kept, after_activation = _after_steps(steps)
            after, bias, found = (bias, after_activation), None, (kept, None, "none")
        else:  # the convolution alone, its own bias added after it, its batch norm left to PyTorch
            weight, bias, bn, found = conv.weight.detach().reshape(flat_weight), None, None, (0, None, "none")
            after = (None if conv.bias is None else conv.bias.detach(), "none")
    kept, residual, activation = found
    nodes = [node] + ([bn] if bn is not None else []) + [n for _, n, _, _ in steps[:kept]]
    module = FusedConv2d(ext, weight, bias, *geometry, activation, conv.groups, *after, view=view)
    fused = _replace(gm, nodes, f"fused_{node.target.replace('.', '_')}", module,
                     (node.args[0],) + ((residual,) if residual is not None else ()))
    if padded is not None:  # the next convolution reads the padded channels, its weights for them zero
        _widen_input(gm.get_submodule(following.target), weight.shape[0])
        meta = fused.meta["tensor_meta"]
        fused.meta["tensor_meta"] = meta._replace(shape=torch.Size((meta.shape[0], weight.shape[0], *meta.shape[2:])))
        return _swapped(bias, residual, activation, *after) + f"+padded:{conv.out_channels}->{weight.shape[0]}", None
    return _swapped(bias, residual, activation, *after), None


def _padded(gm, node, conv, bn, steps, weight, bias, covers, one_pass: bool):
    """(weight, bias, the next convolution's node, (bias after, activation after)) with the output
    channels padded to a multiple of PAD_TO (zero filters, zero biases), where ``conv``'s are none,
    its chain (``bn``, ``steps``) has no residual add and ends in a convolution of the same kind that
    alone reads it (a module the model calls once), neither grouped, and the header has a kernel for
    the padded layer and its whole chain, or (``one_pass``: the extension's bias_activation_) for the
    padded layer alone, the bias and the chain's activation then following it in one pass; else None."""
    channels = conv.out_channels
    if channels % PAD_TO == 0 or conv.groups != 1 or _parts(steps)[0] is not None:
        return None
    end = ([node] + ([bn] if bn is not None else []) + [n for _, n, _, _ in steps])[-1]
    consumer = _only_user(end)
    if consumer is None or not _module(gm, consumer, type(conv)) or consumer.args[0] is not end:
        return None
    following = gm.get_submodule(consumer.target)
    if following.groups != 1 or following.in_channels != channels or \
            sum(n.op == "call_module" and n.target == consumer.target for n in gm.graph.nodes) > 1:
        return None  # (a module called twice would see the padded channels in both places)
    wide = padded_to(channels)
    weight = torch.cat([weight, weight.new_zeros((wide - channels, *weight.shape[1:]))])
    bias = None if bias is None else torch.cat([bias, bias.new_zeros(wide - channels)])
    if covers(weight, bias, None, _parts(steps)[1]):
        return weight, bias, consumer, (None, "none")
    kept, activation = _after_steps(steps)
    if one_pass and bias is not None and kept == len(steps) and covers(weight, None, None, "none"):
        return weight, None, consumer, (bias, activation)  # (a first layer's kernels take no epilogue)
    return None


def _widen_input(conv, channels: int) -> None:
    """``conv`` (a module of the traced copy) taking ``channels`` input channels, its weights for
    the new ones zero."""
    weight = conv.weight.detach()
    wide = weight.new_zeros((weight.shape[0], channels, *weight.shape[2:]))
    wide[:, :weight.shape[1]] = weight
    conv.weight = torch.nn.Parameter(wide, requires_grad=False)
    conv.in_channels = channels


def _linear_covers(ext, probe, weight):
    """covers(bias, residual, activation): whether the header has a kernel for ``probe`` times
    ``weight`` with that epilogue."""
    def covers(bias, residual, activation):
        return ext.linear_kernel_for(probe, weight, bias=bias is not None, residual=residual is not None,
                                     activation=activation) is not None
    return covers


def _swap_linear(gm, node, ext):
    """As _swap_conv, for a Linear layer and best_conv.linear."""
    linear = gm.get_submodule(node.target)
    _, steps = _chain(gm, node, norm=False)
    weight = linear.weight.detach().contiguous()
    bias = None if linear.bias is None else linear.bias.detach()
    x_meta = node.args[0].meta["tensor_meta"]
    probe = torch.empty(tuple(x_meta.shape), dtype=weight.dtype, device=weight.device)
    covers = _linear_covers(ext, probe, weight)
    after, found = (None, "none"), _longest_covered(steps, bias, covers)
    if found is None:
        if bias is None or not covers(None, None, "none"):
            return None, f"no kernel of the header for it (epilogue {_whole(bias, steps)})"
        # the product alone, then its bias (and, in one pass where the extension has it, the activation)
        kept, after_activation = _after_steps(steps) if hasattr(ext, "bias_activation_") else (0, "none")
        after, bias, found = (bias, after_activation), None, (kept, None, "none")
    kept, residual, activation = found
    dims = None
    for step, _, what, _ in steps[:kept]:  # the permutations and scales taken, folded
        if step == "perm":
            dims = what if dims is None else [dims[d] for d in what]
        elif step == "scale":
            weight = (weight.float() * what.view(-1, 1)).to(weight.dtype)
            bias, after = (None if bias is None else (bias.float() * what).to(bias.dtype),
                           (None if after[0] is None else (after[0].float() * what).to(after[0].dtype), after[1]))
    nodes = [node] + [n for _, n, _, _ in steps[:kept]]
    _replace(gm, nodes, f"fused_{node.target.replace('.', '_')}",
             FusedLinear(ext, weight, bias, activation, *after, dims=dims),
             (node.args[0],) + ((residual,) if residual is not None else ()))
    return _swapped(bias, residual, activation, *after), None


def _swap_attention(gm, node, ext):
    """As _swap_linear, for an nn.MultiheadAttention's self-attention: its two projections through
    ``ext.linear`` (FusedSelfAttention), the output projection's chain (a dropout in eval mode, the
    residual add, an activation) in its epilogue. Returns the two projections' epilogues, or (None,
    why it was left)."""
    mha = gm.get_submodule(node.target)
    getitems = [u for u in node.users if u.op == "call_function" and u.target is operator.getitem]
    first = next((u for u in getitems if u.args[1] == 0), None)
    if (len(node.args) != 3 or not node.args[0] is node.args[1] is node.args[2] or set(node.kwargs) - {"need_weights"}
            or len(getitems) != len(node.users) or first is None
            or any(u is not first and u.users for u in getitems)):
        return None, "not a self-attention whose weights and masks go unused"
    if not (mha.batch_first and mha._qkv_same_embed_dim and mha.bias_k is None and not mha.add_zero_attn
            and not mha.training):
        return None, "an attention not batch first, with key and value of other sizes or added biases, or training"
    x_meta = node.args[0].meta["tensor_meta"]
    weight, out_weight = mha.in_proj_weight.detach().contiguous(), mha.out_proj.weight.detach().contiguous()
    probe = torch.empty(tuple(x_meta.shape), dtype=weight.dtype, device=weight.device)
    in_bias, out_bias = mha.in_proj_bias, mha.out_proj.bias
    if not _linear_covers(ext, probe, weight)(in_bias, None, "none"):
        return None, f"no kernel of the header for its input projection (epilogue {_epilogue(in_bias, None, 'none')})"
    _, steps = _chain(gm, first, norm=False, views=False)
    found = _longest_covered(steps, out_bias, _linear_covers(ext, probe, out_weight))
    if found is None:
        return None, f"no kernel of the header for its output projection (epilogue {_whole(out_bias, steps)})"
    kept, residual, activation = found
    nodes = [node] + [u for u in getitems if u is not first] + [first] + [n for _, n, _, _ in steps[:kept]]
    _replace(gm, nodes, f"fused_{node.target.replace('.', '_')}", FusedSelfAttention(ext, mha, activation),
             (node.args[0],) + ((residual,) if residual is not None else ()))
    return (_epilogue(in_bias, None, "none"), _epilogue(out_bias, residual, activation)), None


def swap(model, ext, example):
    """(a torch.fx.GraphModule running ``model``'s covered chains through ``ext``, report): the
    report counts the swapped chains by epilogue (``...+after:bias+silu``: a bias and activation
    after the call, its kernel taking none), the convolutions' in "swapped", the linear layers' in "linear" (where
    ``ext`` has ``linear``; a self-attention's two projections among them, the attentions swapped
    in "attention"), and names those left to PyTorch, with why ("left", "linear_left").
    ``example``: the model's input, or a tuple of its inputs. ``model`` is not changed."""
    gm = torch.fx.symbolic_trace(copy.deepcopy(model))
    ShapeProp(gm).propagate(*(example if isinstance(example, tuple) else (example,)))
    report = {"swapped": Counter(), "left": [], "linear": Counter(), "linear_left": [], "attention": 0}
    linears = hasattr(ext, "linear_kernel_for")
    for node in list(gm.graph.nodes):
        if _module(gm, node, (torch.nn.Conv2d, torch.nn.Conv3d)):
            counts, lefts, (epilogue, why) = report["swapped"], report["left"], _swap_conv(gm, node, ext)
        elif linears and _module(gm, node, torch.nn.Linear):
            counts, lefts, (epilogue, why) = report["linear"], report["linear_left"], _swap_linear(gm, node, ext)
        elif linears and _module(gm, node, torch.nn.MultiheadAttention):
            counts, lefts, (epilogue, why) = report["linear"], report["linear_left"], _swap_attention(gm, node, ext)
            if epilogue is not None:  # its two projections
                report["attention"] += 1
                counts[epilogue[0]] += 1
                epilogue = epilogue[1]
        else:
            continue
        if epilogue is None:
            lefts.append((node.target, why))
        else:
            counts[epilogue] += 1
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm, {key: dict(value) if isinstance(value, Counter) else value for key, value in report.items()}
