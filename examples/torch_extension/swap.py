"""swap(model, ext, example): the model with every convolution chain the header covers run by one
fused call of the extension (best_conv), the rest left to PyTorch.

A chain is what the importer records (kernelgen.importer.Chains) and a fused kernel computes: a
Conv2d (grouped and depthwise ones too), then in this order a BatchNorm2d in eval mode (folded into
the filter and a bias, as the convolution's own bias is), a residual add, an activation (ReLU,
SiLU, GELU of erf, Hardswish, Sigmoid); a step joins the chain only where the value before it has no
other use. A chain is swapped when ``ext.kernel_for`` names a kernel for it (its problem and
epilogue, shapes taken from running ``example`` through the model once): the header's chosen kernel
where it was profiled, a fallback kernel of the same epilogue where not; where no kernel takes even
the bias (the depthwise and grouped kernels write a bare result), the convolution alone is swapped,
its own bias added after it and its batch norm left to PyTorch. Linear layers and everything else
stay PyTorch's.

    swapped, report = swap(model, best_conv, x)    # report: what was swapped, by epilogue, and what not
"""

import copy
import operator
from collections import Counter

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

ACTIVATION_MODULES = {torch.nn.ReLU: "relu", torch.nn.SiLU: "silu", torch.nn.Hardswish: "hardswish",
                      torch.nn.Sigmoid: "sigmoid"}
ACTIVATION_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", F.silu: "silu", F.hardswish: "hardswish",
                        torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.gelu: "gelu"}
ADDS = (operator.add, torch.add, operator.iadd)


class FusedConv2d(torch.nn.Module):
    """One fused call of ``ext.conv2d``: activation(conv(x, weight) + bias + residual); with
    ``bias_after``, that bias added by PyTorch after the call (a kernel that takes no bias)."""

    def __init__(self, ext, weight, bias, stride, padding, dilation, activation: str, groups: int = 1,
                 bias_after=None):
        super().__init__()
        self.ext, self.stride, self.padding, self.dilation, self.activation = ext, stride, padding, dilation, activation
        self.groups = groups
        self.register_buffer("weight", weight.contiguous(memory_format=torch.channels_last))
        self.register_buffer("bias", bias)
        self.register_buffer("bias_after", None if bias_after is None else bias_after.view(1, -1, 1, 1))

    def forward(self, x, residual=None):
        cl = torch.channels_last
        y = self.ext.conv2d(x.contiguous(memory_format=cl), self.weight, self.stride, self.padding, self.dilation,
                            bias=self.bias, residual=None if residual is None else residual.contiguous(memory_format=cl),
                            activation=self.activation, groups=self.groups)
        return y if self.bias_after is None else y + self.bias_after


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


def _chain(gm, conv_node):
    """(the batch norm node or None, [(step, node, residual node or None, activation)]) after a conv:
    the steps that may follow it, in order, each ("add", ...) or ("act", ...)."""
    value, bn, steps = conv_node, None, []
    shape = tuple(conv_node.meta["tensor_meta"].shape)
    nxt = _only_user(value)
    if nxt is not None and _module(gm, nxt, torch.nn.BatchNorm2d) and not gm.get_submodule(nxt.target).training \
            and gm.get_submodule(nxt.target).track_running_stats:
        bn, value = nxt, nxt
        nxt = _only_user(value)
    if nxt is not None and (other := _residual(nxt, value, shape)) is not None:
        steps.append(("add", nxt, other, "none"))
        value, nxt = nxt, _only_user(nxt)
    if nxt is not None and (act := _activation(gm, nxt)) is not None:
        steps.append(("act", nxt, None, act))
    return bn, steps


def _folded(conv, bn):
    """(weight, bias) of ``conv`` with ``bn`` (eval) folded in, in fp32, then the weight's dtype; the
    bias None where neither has one."""
    weight = conv.weight.detach().float()
    bias = conv.bias.detach().float() if conv.bias is not None else None
    if bn is not None:
        scale = bn.weight.detach().float() / torch.sqrt(bn.running_var.float() + bn.eps)
        weight = weight * scale.view(-1, 1, 1, 1)
        bias = (bias if bias is not None else torch.zeros_like(scale)) * scale + bn.bias.detach().float() \
            - bn.running_mean.float() * scale
    dtype = conv.weight.dtype
    return weight.to(dtype), None if bias is None else bias.to(dtype)


def _epilogue(bias, residual, activation) -> str:
    steps = (["bias"] if bias is not None else []) + (["add"] if residual is not None else []) + \
        ([activation] if activation != "none" else [])
    return "+".join(steps) or "none"


def swap(model, ext, example):
    """(a torch.fx.GraphModule running ``model``'s covered chains through ``ext``, report): the
    report counts the swapped chains by epilogue (``...+pytorch_bias``: the convolution's own bias added by
    PyTorch after the call) and names the convolutions left to PyTorch, with why.
    ``model`` is not changed."""
    gm = torch.fx.symbolic_trace(copy.deepcopy(model))
    ShapeProp(gm).propagate(example)
    swapped, left = Counter(), []
    for node in list(gm.graph.nodes):
        if not _module(gm, node, torch.nn.Conv2d):
            continue
        conv = gm.get_submodule(node.target)
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            left.append((node.target, "a padding mode or string padding the extension does not take"))
            continue
        bn, steps = _chain(gm, node)
        weight, bias = _folded(conv, None if bn is None else gm.get_submodule(bn.target))
        x_meta = node.args[0].meta["tensor_meta"]
        probe = torch.empty(tuple(x_meta.shape), dtype=weight.dtype, device=weight.device).contiguous(
            memory_format=torch.channels_last)

        def covers(w, bias, residual, activation):
            return ext.kernel_for(probe, w.contiguous(memory_format=torch.channels_last), conv.stride, conv.padding,
                                  conv.dilation, bias=bias is not None, residual=residual is not None,
                                  activation=activation, groups=conv.groups) is not None

        # the whole chain, else the longest start of it the header covers (the rest stays PyTorch's)
        bias_after = None
        for kept in range(len(steps), -1, -1):
            residual = next((other for step, _, other, _ in steps[:kept] if step == "add"), None)
            activation = next((act for step, _, _, act in steps[:kept] if step == "act"), "none")
            if covers(weight, bias, residual, activation):
                break
        else:
            if bias is not None and covers(conv.weight, None, None, "none"):
                # no kernel takes the bias: the convolution alone, its own bias added after it, its
                # batch norm left to PyTorch
                weight, bias, bn, kept, residual, activation = conv.weight.detach(), None, None, 0, None, "none"
                bias_after = None if conv.bias is None else conv.bias.detach()
            else:
                whole = _epilogue(bias, next((o for s, _, o, _ in steps if s == "add"), None),
                                  next((a for s, _, _, a in steps if s == "act"), "none"))
                left.append((node.target, f"no kernel of the header for it (epilogue {whole})"))
                continue
        nodes = [node] + ([bn] if bn is not None else []) + [n for _, n, _, _ in steps[:kept]]
        epilogue = _epilogue(bias, residual, activation) + ("+pytorch_bias" if bias_after is not None else "")
        name = f"fused_{node.target.replace('.', '_')}"
        gm.add_submodule(name, FusedConv2d(ext, weight, bias, conv.stride, conv.padding, conv.dilation, activation,
                                           conv.groups, bias_after))
        last = nodes[-1]
        with gm.graph.inserting_after(last):
            fused = gm.graph.call_module(name, (node.args[0],) + ((residual,) if residual is not None else ()))
        fused.meta = dict(last.meta)  # its shape, for the chains after it
        last.replace_all_uses_with(fused)
        for dead in reversed(nodes):
            gm.graph.erase_node(dead)
        swapped[epilogue] += 1
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm, {"swapped": dict(swapped), "left": left}
