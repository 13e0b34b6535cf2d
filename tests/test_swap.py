"""examples/torch_extension/swap.py on the CPU, with an extension that computes what best_conv's
fused call computes with PyTorch's ops: every convolution chain it covers (batch norm folded,
residual add, activation) becomes one call, the swapped model computes what the model does, and a
chain it does not cover, or a value with another use, stays PyTorch's."""

import operator
import sys

import pytest

from conftest import ROOT

torch = pytest.importorskip("torch", reason="needs PyTorch (pip install torch): the module swap is PyTorch code")
F = torch.nn.functional
sys.path.insert(0, str(ROOT / "examples" / "torch_extension"))
from swap import FusedConv2d, compilable, swap  # noqa: E402


class Extension:
    """best_conv's interface: conv2d(x, w, stride, padding, dilation, bias=, residual=, activation=,
    groups=) and kernel_for(...), on any device; ``covers(epilogue)`` says which chains of one group
    the header holds, ``grouped(epilogue)`` which of several (as the header's depthwise and grouped
    kernels: none of an epilogue)."""

    def __init__(self, covers=lambda epilogue: True, grouped=lambda epilogue: epilogue == ""):
        self.covers, self.grouped, self.calls = covers, grouped, []

    def kernel_for(self, x, w, stride, padding, dilation, bias=False, residual=False, activation="none", groups=1):
        steps = (["bias"] if bias else []) + (["add"] if residual else []) + ([activation] if activation != "none" else [])
        return "kernel" if (self.covers if groups == 1 else self.grouped)("+".join(steps)) else None

    def conv2d(self, x, w, stride=1, padding=0, dilation=1, bias=None, residual=None, activation="none", groups=1):
        self.calls.append((tuple(w.shape), bias is not None, residual is not None, activation, groups))
        return self._epilogue(F.conv2d(x, w, bias, stride, padding, dilation, groups), residual, activation)


class LinearExtension(Extension):
    """And best_conv's linear(x, w, bias=, residual=, activation=) and linear_kernel_for(...):
    ``linears(epilogue)`` says which of their chains the header holds."""

    def __init__(self, linears=lambda epilogue: True, **kwargs):
        super().__init__(**kwargs)
        self.linears = linears

    def linear_kernel_for(self, x, w, bias=False, residual=False, activation="none"):
        assert x.is_contiguous() and w.is_contiguous() and x.shape[-1] == w.shape[1]
        steps = (["bias"] if bias else []) + (["add"] if residual else []) + ([activation] if activation != "none" else [])
        return "kernel" if self.linears("+".join(steps)) else None

    def linear(self, x, w, bias=None, residual=None, activation="none"):
        assert x.is_contiguous() and w.is_contiguous()
        self.calls.append((tuple(w.shape), bias is not None, residual is not None, activation, "linear"))
        return self._epilogue(F.linear(x, w, bias), residual, activation)


def _epilogue(y, residual, activation):
    y = y + residual if residual is not None else y
    return y if activation == "none" else torch.sigmoid(y) if activation == "sigmoid" else getattr(F, activation)(y)


Extension._epilogue = staticmethod(_epilogue)


class Block(torch.nn.Module):
    """A residual block as torchvision's: conv-bn-relu, conv-bn, a downsampling conv-bn, add, relu;
    and a SiLU head whose input is also returned (two uses: not fused past the batch norm)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16)
        self.conv2, self.bn2 = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16)
        self.down = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1, bias=False), torch.nn.BatchNorm2d(16))
        self.relu = torch.nn.ReLU()
        self.head, self.act = torch.nn.Conv2d(16, 8, 1), torch.nn.SiLU()
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.down(x)
        out = self.relu(out)
        head = self.head(out)
        return self.depthwise(self.act(head)), head


def trained(model):
    """``model`` in eval mode with batch norm statistics that are not the identity."""
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
            m.running_mean.uniform_(-0.5, 0.5), m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5), m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def test_every_covered_chain_is_one_call_and_the_swapped_model_computes_the_same():
    model, x = trained(Block()), torch.randn(2, 8, 12, 12)
    ext = Extension()
    swapped, report = swap(model, ext, x)
    assert report["swapped"] == {"bias+relu": 1, "bias+add+relu": 1, "bias": 2, "none+after:bias": 1}, \
        "a depthwise convolution with a bias of its own, which no depthwise kernel takes: added after it"
    assert report["left"] == []
    assert sum(isinstance(m, FusedConv2d) for m in swapped.modules()) == 5
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in swapped.modules()), "batch norms folded"
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    for e, g in zip(expected, got):
        assert torch.allclose(e, g, atol=1e-5, rtol=1e-5)
    assert (16, 16, 3, 3) in [c[0] for c in ext.calls if c[2] and c[3] == "relu"], "conv2 + bn2 + add + relu"
    assert any(c[0] == (8, 16, 1, 1) and c[1] and not c[2] and c[3] == "none" for c in ext.calls), \
        "the head's SiLU stays PyTorch's: its input is returned too"


def test_a_chain_the_header_does_not_cover_stays_pytorchs():
    model, x = trained(Block()), torch.randn(2, 8, 12, 12)
    swapped, report = swap(model, Extension(covers=lambda e: e not in ("bias+add+relu", "bias+add")), x)
    assert report["swapped"] == {"bias+relu": 1, "bias": 3, "none+after:bias": 1}, \
        "conv2 and its batch norm: the start of its chain"
    with torch.no_grad():
        assert all(torch.allclose(e, g, atol=1e-5) for e, g in zip(model(x), swapped(x)))
    none = Extension(covers=lambda e: e == "bias+relu", grouped=lambda e: False)
    swapped, report = swap(model, none, x)
    assert report["swapped"] == {"bias+relu": 1}
    assert ("depthwise", "no kernel of the header for it (epilogue bias)") in report["left"]
    assert ("conv2", "no kernel of the header for it (epilogue bias+add+relu)") in report["left"]
    assert ("head", "no kernel of the header for it (epilogue bias)") in report["left"]
    with torch.no_grad():
        assert all(torch.allclose(e, g, atol=1e-5) for e, g in zip(model(x), swapped(x)))
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in swapped.modules()), "conv2's batch norm is PyTorch's"


def test_a_torchvision_resnet_is_swapped_whole():
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    model, x = trained(torchvision.models.resnet18(weights=None)), torch.randn(1, 3, 64, 64)
    swapped, report = swap(model, Extension(), x)
    assert report["swapped"] == {"bias+relu": 9, "bias+add+relu": 8, "bias": 3} and report["left"] == []
    with torch.no_grad():
        assert torch.allclose(model(x), swapped(x), atol=1e-4, rtol=1e-4)


class Mobile(torch.nn.Module):
    """An inverted residual block's start: a depthwise convolution, a batch norm, SiLU."""

    def __init__(self):
        super().__init__()
        self.depthwise, self.bn = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), torch.nn.BatchNorm2d(16)
        self.grouped = torch.nn.Conv2d(16, 32, 1, groups=4, bias=False)

    def forward(self, x):
        return self.grouped(F.silu(self.bn(self.depthwise(x))))


def test_a_grouped_convolution_no_kernel_of_an_epilogue_takes_is_swapped_alone_and_its_batch_norm_stays():
    model, x = trained(Mobile()), torch.randn(2, 16, 10, 10)
    ext = Extension()
    swapped, report = swap(model, ext, x)
    assert (report["swapped"], report["left"]) == ({"none": 2}, [])
    assert ext.calls == [], "swapping runs nothing"
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    assert torch.allclose(expected, got, atol=1e-5, rtol=1e-5)
    assert sorted((c[0], c[4]) for c in ext.calls) == [((16, 1, 3, 3), 16), ((32, 4, 1, 1), 4)]
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in swapped.modules()) == 1, "the batch norm is PyTorch's"
    # where a kernel takes the epilogue, the batch norm is folded into it as for one group
    folded = Extension(grouped=lambda epilogue: True)
    swapped, report = swap(model, folded, x)
    assert report["swapped"] == {"bias+silu": 1, "none": 1}
    with torch.no_grad():
        assert torch.allclose(model(x), swapped(x), atol=1e-5, rtol=1e-5)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in swapped.modules())


class Mlp(torch.nn.Module):
    """A transformer block's MLP as torchvision's: Linear, GELU, Dropout, Linear, Dropout, the
    residual added; and a head of no bias whose input is also returned."""

    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Dropout(0.1),
                                       torch.nn.Linear(64, 16), torch.nn.Dropout(0.1))
        self.head = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        y = x + self.mlp(x)
        return self.head(y), y


def test_linear_chains_are_one_call_each_through_dropouts_in_eval_mode():
    model, x = Mlp().eval(), torch.randn(2, 5, 16)
    ext = LinearExtension()
    swapped, report = swap(model, ext, x)
    assert report["linear"] == {"bias+gelu": 1, "bias+add": 1, "none": 1} and report["linear_left"] == []
    assert not any(isinstance(m, (torch.nn.Linear, torch.nn.Dropout, torch.nn.GELU)) for m in swapped.modules())
    with torch.no_grad():
        for e, g in zip(model(x), swapped(x)):
            assert torch.allclose(e, g, atol=1e-5, rtol=1e-5)
    assert sorted(c[:4] for c in ext.calls) == [((8, 16), False, False, "none"), ((16, 64), True, True, "none"),
                                                ((64, 16), True, False, "gelu")]
    # a header without the fused chains: the bias alone, else the product alone and PyTorch's bias
    partial = LinearExtension(linears=lambda e: e in ("bias", ""))
    swapped, report = swap(model, partial, x)
    assert report["linear"] == {"bias": 2, "none": 1}
    with torch.no_grad():
        assert all(torch.allclose(e, g, atol=1e-5) for e, g in zip(model(x), swapped(x)))
    bare = LinearExtension(linears=lambda e: e == "")
    swapped, report = swap(model, bare, x)
    assert report["linear"] == {"none+after:bias": 2, "none": 1}
    with torch.no_grad():
        assert all(torch.allclose(e, g, atol=1e-5) for e, g in zip(model(x), swapped(x)))
    none = LinearExtension(linears=lambda e: False)
    _, report = swap(model, none, x)
    assert report["linear"] == {} and [t for t, _ in report["linear_left"]] == ["mlp.0", "mlp.3", "head"]
    _, report = swap(model, Extension(), x)
    assert "linear" not in report or report["linear"] == {}, "an extension without linear leaves them all"


def test_a_torchvision_vision_transformer_and_convnext_are_swapped():
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    for name, size, linears in (("vit_b_16", 224, {"bias+gelu": 12, "bias+add": 24, "bias": 13}),
                                ("convnext_tiny", 64, {"bias+gelu": 18, "bias+add": 18, "bias": 1})):
        torch.manual_seed(0)
        model, x = trained(torchvision.models.get_model(name, weights=None, num_classes=10)), torch.randn(1, 3, size, size)
        for name_, parameter in model.named_parameters():  # layer scales of 1e-6 would hide a wrong fold
            if name_.endswith("layer_scale"):
                parameter.data.uniform_(0.5, 1.5)
        swapped, report = swap(model, LinearExtension(), x)
        assert report["linear"] == linears and report["linear_left"] == [], name
        assert report["attention"] == (12 if name == "vit_b_16" else 0) and not any(
            isinstance(m, torch.nn.MultiheadAttention) for m in swapped.modules()), name
        with torch.no_grad():
            expected, got = model(x), swapped(x)
        assert torch.allclose(expected, got, atol=1e-4, rtol=1e-4), name


class ScaledBlock(torch.nn.Module):
    """ConvNeXt's block end, channels last: a linear layer, the permutation to channels first, a
    layer scale (or a factor along the image's rows, ``rows``: no fold), stochastic depth, the add."""

    def __init__(self, rows=False):
        super().__init__()
        self.linear = torch.nn.Linear(32, 16)
        self.scale = torch.nn.Parameter(torch.rand(1, 6, 1) + 0.5 if rows else torch.rand(16, 1, 1) + 0.5)
        torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
        self.depth = torchvision.ops.StochasticDepth(0.1, "row")

    def forward(self, x, skip):
        return self.depth(self.scale * self.linear(x).permute(0, 3, 1, 2)) + skip


class ScaledResidual(ScaledBlock):
    """ScaledBlock on one input, channels first, as ConvNeXt's block: x permuted to channels last into
    the linear layer, its result permuted back, scaled, and added to x."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1), x)


def test_a_layer_scale_after_a_permutation_folds_into_the_linear_layer_and_the_add_is_its_epilogue():
    model = ScaledBlock().eval()
    x, skip = torch.randn(2, 6, 5, 32), torch.randn(2, 16, 6, 5).contiguous(memory_format=torch.channels_last)
    for linears, expected in ((lambda e: True, {"bias+add": 1}), (lambda e: e == "bias", {"bias": 1})):
        ext = LinearExtension(linears=linears)
        swapped, report = swap(model, ext, (x, skip))
        assert report["linear"] == expected and report["linear_left"] == []
        with torch.no_grad():
            assert torch.allclose(model(x, skip), swapped(x, skip), atol=1e-5)
    # the header's bias+add kernel gets the residual in the product's order, the permutation and scale
    # taken (no mul or permute left in the graph)
    assert not [n for n in swap(model, LinearExtension(), (x, skip))[0].graph.nodes
                if n.op == "call_function" and n.target in (torch.permute, operator.mul, operator.add)]
    rows = ScaledBlock(rows=True).eval()
    swapped, report = swap(rows, LinearExtension(), (x, skip))
    assert report["linear"] == {"bias": 1}, "a factor that varies along the rows does not fold"
    with torch.no_grad():
        assert torch.allclose(rows(x, skip), swapped(x, skip), atol=1e-5)


class PassExtension(LinearExtension):
    """And best_conv's bias_activation_(y, bias, activation): one pass after a kernel of no epilogue."""

    def bias_activation_(self, y, bias, activation="none"):
        shape = [1] * y.dim()
        shape[1 if y.dim() == 4 else -1] = -1
        self.calls.append(((bias.shape[0],), True, False, activation, "after"))
        return _epilogue(y + bias.view(shape), None, activation)


def test_where_no_kernel_takes_the_bias_the_batch_norm_is_folded_and_bias_and_activation_follow_in_one_pass():
    model, x = trained(Mobile()), torch.randn(2, 16, 10, 10)
    ext = PassExtension()
    swapped, report = swap(model, ext, x)
    assert (report["swapped"], report["left"]) == ({"none+after:bias+silu": 1, "none": 1}, [])
    assert not any(isinstance(m, (torch.nn.BatchNorm2d, torch.nn.SiLU)) for m in swapped.modules())
    with torch.no_grad():
        assert torch.allclose(model(x), swapped(x), atol=1e-5, rtol=1e-5)
    assert [c for c in ext.calls if c[4] == "after"] == [((16,), True, False, "silu", "after")]
    # a linear layer whose kernel takes no bias: the bias and the GELU after it, in one pass
    mlp, rows = Mlp().eval(), torch.randn(2, 5, 16)
    bare = PassExtension(linears=lambda e: e == "")
    swapped, report = swap(mlp, bare, rows)
    assert report["linear"] == {"none+after:bias+gelu": 1, "none+after:bias": 1, "none": 1}
    with torch.no_grad():
        assert all(torch.allclose(e, g, atol=1e-5) for e, g in zip(mlp(rows), swapped(rows)))


class Encoder(torch.nn.Module):
    """ViT's encoder block's first half: layer norm, self-attention, dropout, the residual add; with
    ``weights``, the attention's weights are returned too (so it stays PyTorch's)."""

    def __init__(self, weights=False):
        super().__init__()
        self.norm, self.weights = torch.nn.LayerNorm(16), weights
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        n = self.norm(x)
        y, w = self.attention(n, n, n, need_weights=self.weights)
        out = self.dropout(y) + x
        return (out, w) if self.weights else out


def test_through_compilable_torch_compile_traces_one_graph_with_the_calls_opaque():
    """torch.compile of a model swapped through compilable(ext): one graph (fullgraph), each fused call
    one custom operator in it whose declared output (shape and channels_last layout) is what the call
    returns, the bias and activation after a kernel of no epilogue PyTorch's ops in it, and the
    compiled model computes what the model does."""
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return torch._dynamo.backends.common.aot_autograd(fw_compiler=lambda g, _: g)(gm, inputs)

    torch._dynamo.reset()
    for model, x in ((trained(Block()), torch.randn(2, 8, 12, 12)), (trained(Mobile()), torch.randn(2, 16, 10, 10)),
                     (Mlp().eval(), torch.randn(2, 5, 16)), (Encoder().eval(), torch.randn(2, 5, 16)),
                     (ScaledResidual().eval(), torch.randn(2, 16, 6, 5).contiguous(memory_format=torch.channels_last))):
        ext = PassExtension()
        swapped, report = swap(model, compilable(ext), x)
        with torch.no_grad():
            expected = model(x)
            got = torch.compile(swapped, backend=backend, fullgraph=True)(x)
        for e, g in zip(*((expected, got) if isinstance(got, tuple) else ((expected,), (got,)))):
            assert torch.allclose(e, g, atol=1e-5, rtol=1e-5)
        calls = [n for n in graphs[-1].graph.nodes if n.op == "call_function" and "best_conv" in str(n.target)]
        assert len(calls) == sum(report["swapped"].values()) + sum(report["linear"].values()) > 0
        assert ext.calls and all(c[4] != "after" for c in ext.calls), "the pass after a bare kernel: PyTorch's ops"
    assert compilable(ext).kernel_for == ext.kernel_for


def test_run_models_breakdown_ranks_kernels_by_time_a_pass_and_sums_the_rest(monkeypatch):
    """run_model.py --breakdown's table (kernel_table), from the profiler's (name, launches, us) rows
    over 4 passes; a name in two rows is one kernel."""
    run_model = _run_model(monkeypatch)
    rows = run_model.kernel_table([("gemm", 8, 400.0), ("conv", 4, 1000.0), ("add", 12, 60.0), ("gemm", 4, 200.0),
                                   ("copy", 4, 40.0)], replays=4, top=2)
    assert rows == [("conv", 1.0, 0.25), ("gemm", 3.0, 0.15), ("(the other 2)", 4.0, 0.025)]
    assert run_model.kernel_table([("conv", 4, 1000.0)], replays=4, top=3) == [("conv", 1.0, 0.25)]


def _run_model(monkeypatch):
    import types
    monkeypatch.setitem(sys.modules, "best_conv", types.SimpleNamespace(element=lambda: "f16"))
    monkeypatch.delitem(sys.modules, "run_model", raising=False)
    import run_model
    return run_model


@pytest.mark.parametrize("argv, message", [
    (["--input", "3x0x224"], "--input '3x0x224': expected CxHxW, three positive integers"),
    (["--input", "3x224"], "--input '3x224': expected CxHxW or CxTxHxW"),
    (["--input", "3x2x2x2x2"], "--input '3x2x2x2x2': expected CxHxW, three positive integers"),
    (["--input", "3x224x2147483648"], "must each be at most 2147483647"),
    (["--input", "3x224x22$(reboot)"], "--input '3x224x22$(reboot)': expected CxHxW, three positive integers"),
    (["--batch", "0"], "--batch must be at least 1, got 0"),
    (["--size", "-3"], "--size must be at least 1, got -3"),
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--breakdown", "-1"], "--breakdown must be 0 or more, got -1"),
    (["--compile", "all"], "argument --compile: invalid choice: 'all'"),
    (["--batch", "many"], "argument --batch: invalid int value: 'many'"),
])
def test_run_models_bad_arguments_end_in_one_line_naming_the_option(monkeypatch, capsys, argv, message):
    run_model = _run_model(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        run_model.parse_args(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after argparse's usage lines
    assert exit_.value.code == 2 and ": error: " in error and message in error, error


def test_run_models_input_is_its_shape(monkeypatch):
    run_model = _run_model(monkeypatch)
    assert run_model.parse_args(["--input", "3x16x112x112"])[1] == (3, 16, 112, 112)
    assert run_model.parse_args(["--size", "299"])[1] == (3, 299, 299)


def test_run_model_varies_every_parameter_of_one_value_and_no_other(monkeypatch):
    """An untrained model's zero biases and classifier, its tiny layer scales and its norms' ones
    and zeros are drawn again (else ViT's output is all zeros and a dropped bias goes unseen); a
    parameter already varied is left as it is."""
    run_model = _run_model(monkeypatch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.LayerNorm(8),
                                torch.nn.Linear(8, 6))
    model[0].bias.data.zero_()
    model[3].weight.data.zero_()
    model.register_parameter("scale", torch.nn.Parameter(torch.full((8, 1, 1), 1e-6)))
    model.register_parameter("negative", torch.nn.Parameter(torch.full((5,), -2.0)))
    conv_weight = model[0].weight.detach().clone()
    assert run_model.varied(model) is model
    assert torch.equal(model[0].weight, conv_weight)
    for p in model.parameters():
        assert p.unique().numel() == p.numel(), p.shape
    assert model[0].bias.abs().max() < 0.1 and model[3].weight.abs().max() < 0.1
    assert 0.5 <= model.scale.min() and model.scale.max() < 1.0
    assert -2.4 <= model.negative.min() and model.negative.max() <= -1.6
    assert 0.8 <= model[1].weight.min() and model[2].weight.max() <= 1.2
    assert model[1].running_mean.abs().max() > 0 and model[1].running_var.min() >= 0.8
    with pytest.raises(ValueError, match="all zeros"):
        run_model.relative_error(torch.ones(3), torch.zeros(3))
    assert run_model.relative_error(torch.tensor([1.5, -2.0]), torch.tensor([1.0, -4.0])) == 0.5


def test_a_self_attentions_projections_are_two_linear_calls_the_residual_add_in_the_second():
    torch.manual_seed(0)
    model, x = Encoder().eval(), torch.randn(2, 5, 16)
    for linears, expected in ((lambda e: True, {"bias": 1, "bias+add": 1}), (lambda e: e == "bias", {"bias": 2})):
        ext = LinearExtension(linears=linears)
        swapped, report = swap(model, ext, x)
        assert report["linear"] == expected and report["attention"] == 1 and report["linear_left"] == []
        with torch.no_grad():
            assert torch.allclose(model(x), swapped(x), atol=1e-5)
        assert [c[:3] for c in ext.calls] == [((48, 16), True, False), ((16, 16), True, "bias+add" in expected)]
    _, report = swap(model, LinearExtension(linears=lambda e: e == ""), x)
    assert report["attention"] == 0 and [t for t, _ in report["linear_left"]] == ["attention"]
    weights = Encoder(weights=True).eval()
    swapped, report = swap(weights, LinearExtension(), x)
    assert report["attention"] == 0 and "weights" in dict(report["linear_left"])["attention"]
    with torch.no_grad():
        assert all(torch.allclose(e, g) for e, g in zip(weights(x), swapped(x)))


class Video(torch.nn.Module):
    """A (2+1)-D block as R(2+1)D's: a spatial 1x3x3 convolution (strided), batch norm, ReLU, a
    temporal 3x1x1 one (strided, with a bias) and the block's input (downsampled by a full 3x3x3
    convolution) added, then a ReLU."""

    def __init__(self):
        super().__init__()
        self.spatial = torch.nn.Conv3d(3, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=False)
        self.bn, self.relu = torch.nn.BatchNorm3d(8), torch.nn.ReLU()
        self.temporal = torch.nn.Conv3d(8, 16, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.full = torch.nn.Conv3d(3, 16, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.temporal(self.relu(self.bn(self.spatial(x)))) + self.full(x))


class ChannelsLast(Extension):
    """Extension, and its conv2d's operands in the layout best_conv takes (channels_last)."""

    def conv2d(self, x, w, *args, residual=None, **kwargs):
        cl = torch.channels_last
        assert x.is_contiguous(memory_format=cl) and w.is_contiguous(memory_format=cl)
        assert residual is None or residual.is_contiguous(memory_format=cl)
        return super().conv2d(x, w, *args, residual=residual, **kwargs)


def test_a_factorized_3d_convolution_chain_is_one_call_on_the_2d_view_of_its_memory():
    """The 1x3x3 and 3x1x1 convolutions and their chains (the batch norm folded, the ReLU; the
    residual add and ReLU) run as ext.conv2d on N*T frames and on N images of T x (H*W) pixels
    (kernelgen.importer.as_conv2d), the residual viewed so too, the swapped model computing what the
    model does; the 3x3x3 one stays PyTorch's."""
    model, x = trained(Video()), torch.randn(2, 3, 6, 10, 12)
    ext = ChannelsLast()
    swapped, report = swap(model, ext, x)
    assert report["swapped"] == {"bias+relu": 1, "bias+add+relu": 1}
    assert report["left"] == [("full", "a 3-D filter that is no 2-D one of the same memory (1xRxS or Rx1x1)")]
    assert sorted(m.view for m in swapped.modules() if isinstance(m, FusedConv2d)) == ["frames", "time"]
    assert not any(isinstance(m, torch.nn.BatchNorm3d) for m in swapped.modules()), "the batch norm folded"
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert [c[:4] for c in ext.calls] == [((8, 3, 3, 3), True, False, "relu"), ((16, 8, 3, 1), True, True, "relu")]
    _, report = swap(model, Extension(covers=lambda e: False), x)
    assert report["swapped"] == {} and [why for _, why in report["left"]][:2] == \
        ["no kernel of the header for it (epilogue bias+relu)", "no kernel of the header for it (epilogue bias+add+relu)"]


class OddVideo(Video):
    """Video with 5 mid channels (R(2+1)D's 45, 921: no multiple of 8) between the spatial and
    temporal convolutions."""

    def __init__(self):
        super().__init__()
        self.spatial = torch.nn.Conv3d(8, 5, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=False)
        self.bn = torch.nn.BatchNorm3d(5)
        self.temporal = torch.nn.Conv3d(5, 16, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.full = torch.nn.Conv3d(8, 16, 3, stride=2, padding=1)


class Aligned(ChannelsLast):
    """ChannelsLast whose header, as a real one's fused kernels, has no kernel for channel counts
    no multiple of 8."""

    def kernel_for(self, x, w, *args, **kwargs):
        return super().kernel_for(x, w, *args, **kwargs) if w.shape[0] % 8 == 0 and w.shape[1] % 8 == 0 else None


def test_channels_no_multiple_of_8_between_two_convolutions_are_padded_where_the_header_has_the_padded_pair():
    """5 mid channels: the spatial convolution runs with 8 (3 zero filters and zero biases) and its
    whole chain, the temporal one reads 8 (its weights for the 3 new ones zero; kernelgen.importer.
    pad_channels writes the same lines), and the swapped model computes what the model does; a
    header without the padded kernels leaves both as they were."""
    model, x = trained(OddVideo()), torch.randn(2, 8, 6, 10, 12)
    ext = Aligned()
    swapped, report = swap(model, ext, x)
    assert report["swapped"] == {"bias+relu+padded:5->8": 1, "bias+add+relu": 1}, report
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert [c[:4] for c in ext.calls] == [((8, 8, 3, 3), True, False, "relu"), ((16, 8, 3, 1), True, True, "relu")]
    assert model.temporal.weight.shape[1] == 5, "the model is not changed"
    _, report = swap(model, Aligned(covers=lambda e: e != "bias+relu"), x)
    assert report["swapped"] == {}, "without the padded spatial kernel nothing is padded, nor swapped (5 channels)"


class AlignedPass(Aligned, PassExtension):
    """Aligned, and bias_activation_ after a kernel of no epilogue."""


def test_a_padded_layer_whose_kernels_take_no_bias_runs_its_bias_and_activation_after_it_in_one_pass():
    """The header has the padded spatial layer's kernel of no epilogue only (as a first layer's
    few-channels kernels): the spatial convolution still runs padded, its folded bias (3 zeros
    after it) and ReLU in one pass over the 8 channels; without bias_activation_ it is not padded."""
    model, x = trained(OddVideo()), torch.randn(2, 8, 6, 10, 12)
    ext = AlignedPass(covers=lambda e: e in ("", "bias+add+relu"))
    swapped, report = swap(model, ext, x)
    assert report["swapped"] == {"none+after:bias+relu+padded:5->8": 1, "bias+add+relu": 1}, report
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert [c[:5] for c in ext.calls] == [((8, 8, 3, 3), False, False, "none", 1), ((8,), True, False, "relu", "after"),
                                          ((16, 8, 3, 1), True, True, "relu", 1)]
    _, report = swap(model, Aligned(covers=lambda e: e in ("", "bias+add+relu")), x)
    assert not any("padded" in key for key in report["swapped"]), report


class AlignedOrFew(ChannelsLast):
    """ChannelsLast whose header has kernels for channel counts that are multiples of 8, and for
    input channels of 4 or fewer (a network's first layer)."""

    def kernel_for(self, x, w, *args, **kwargs):
        fits = w.shape[0] % 8 == 0 and (w.shape[1] % 8 == 0 or w.shape[1] <= 4)
        return super().kernel_for(x, w, *args, **kwargs) if fits else None


def test_r2plus1d_18_is_padded_where_scons_workloads_pad_1_pads_it():
    """torchvision's R(2+1)D-18 whole: swap pads the 7 pairs kernelgen.importer.pad_channels pads
    (45 -> 48 once, 230 -> 232, 460 -> 464 and 921 -> 928 twice each; tests/test_importer.py), every
    (2+1)-D convolution is swapped, and the swapped model computes what the model does."""
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    model, x = trained(torchvision.models.get_model("r2plus1d_18", weights=None)), torch.randn(1, 3, 4, 32, 32)
    swapped, report = swap(model, AlignedOrFew(), x)
    padded = sorted(key.split("padded:")[1] for key, n in report["swapped"].items() if "padded:" in key for _ in range(n))
    assert padded == ["230->232", "230->232", "45->48", "460->464", "460->464", "921->928", "921->928"], report
    assert sum(report["swapped"].values()) == 34 and [t for t, _ in report["left"]] == [
        "layer2.0.downsample.0", "layer3.0.downsample.0", "layer4.0.downsample.0"]
    with torch.no_grad():
        expected, got = model(x), swapped(x)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


class AlignedOrFewBare(AlignedOrFew, PassExtension):
    """AlignedOrFew whose kernels for 4 or fewer input channels take no epilogue (as the
    few-channels families'), with bias_activation_."""

    def kernel_for(self, x, w, *args, bias=False, residual=False, activation="none", **kwargs):
        if w.shape[1] <= 4 and (bias or residual or activation != "none"):
            return None
        return super().kernel_for(x, w, *args, bias=bias, residual=residual, activation=activation, **kwargs)


def test_r2plus1d_18s_stem_is_padded_where_its_kernels_take_no_epilogue():
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    model, x = trained(torchvision.models.get_model("r2plus1d_18", weights=None)), torch.randn(1, 3, 4, 32, 32)
    swapped, report = swap(model, AlignedOrFewBare(), x)
    assert report["swapped"].get("none+after:bias+relu+padded:45->48") == 1, report
    assert sum(report["swapped"].values()) == 34
    with torch.no_grad():
        assert torch.allclose(swapped(x), model(x), atol=1e-4, rtol=1e-4)


class SharedTemporal(OddVideo):
    """OddVideo whose temporal convolution is called twice, the second time on a 5-channel input
    of its own: padding its input channels would break that call."""

    def forward(self, x, other):
        return torch.relu(self.temporal(self.relu(self.bn(self.spatial(x)))) + self.full(x)) + self.temporal(other)


def test_a_convolution_module_called_twice_is_not_padded():
    model, x = trained(SharedTemporal()), (torch.randn(2, 8, 6, 10, 12), torch.randn(2, 5, 6, 5, 6))
    swapped, report = swap(model, Aligned(), x)
    assert not any("padded" in key for key in report["swapped"]), report
    with torch.no_grad():
        assert torch.allclose(swapped(*x), model(*x), atol=1e-5, rtol=1e-5)
