"""Depthwise kernels for channel counts the 16-byte kernels cannot take (site_scons/kernelgen/families/
depthwise_narrow.py, profiler/depthwise_narrow.h): the spec refuses what the family cannot build,
naming file, entry and key; names say every parameter that changes the code; ``serves`` refuses
what can_implement refuses (groups != C, the compiled filter, C not a multiple of the vector) and
takes any stride, padding and dilation; a layer of 58 channels, which no other depthwise kernel
serves, gets candidates; one kernel compiles for sm_90a through the rendering; every kernel's work
items, run on the CPU, compute small odd layers; and on a GPU every kernel verifies on those layers
where it says it serves them and reports the others unsupported."""

import subprocess

import pytest

from conftest import ROOT, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates, render
from kernelgen.cost_model import load_model, serves
from kernelgen.errors import SpecError
from kernelgen.families.depthwise_narrow import DepthwiseNarrow
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family

SPEC = ROOT / "kernel_specs" / "families" / "depthwise_narrow.toml"
TEMPLATES = ROOT / "kernel_specs" / "templates"
FIRST = "{ filter = 3, vector = 2, columns = 2 }"
FAMILY = f"""\
kind = "depthwise_narrow"
description = "test"
element = "f16"
accumulator = "f32"
output = "f16"
kernels = [
  {FIRST},
]
"""


def family(tmp_path, entry, text=FAMILY):
    path = tmp_path / "family.toml"
    path.write_text(text.replace(FIRST, entry))
    return path


@pytest.mark.parametrize("entry, key, message", [
    ("{ filter = 4, vector = 2, columns = 2 }", "filter", "4 is not one of 3, 5, 7"),
    ("{ filter = 3, vector = 4, columns = 2 }", "vector", "4 is not one of 1, 2"),
    ("{ filter = 3, vector = 2, columns = 9 }", "columns", "9 is outside [1, 8]"),
    ("{ filter = 3, vector = 2 }", "columns", "missing"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    path = family(tmp_path, entry)
    with pytest.raises(SpecError) as caught:
        load_family(path)
    error = caught.value
    assert (error.path, error.entry, error.key) == (path, "kernels[0]", key)
    assert message in str(error) and str(path) in str(error) and "\n" not in str(error)


def test_names_are_unique_and_say_every_parameter():
    kernels = [DepthwiseNarrow("t", f, v, q, element=e) for f in (3, 5, 7) for v in (1, 2) for q in (1, 2, 4, 8)
               for e in ("f16", "bf16")]
    assert len({k.name for k in kernels}) == len(kernels)
    templates = render.lookup(TEMPLATES)
    types = {render.type_definition(templates, k).replace(k.name, "NAME") for k in kernels}
    assert len(types) == len(kernels), "two names of one type"
    assert DepthwiseNarrow("t", 5, 2, 4).name == "kernelgen_sm80_simt_dwconv_narrow_f16nhwc_f16nhwc_f32_f16nhwc_5x5_v2_q4"


def conv(c=58, r=3, stride=1, dilation=1, groups=None, k=None, pad=1):
    return Conv2dProblem(2, 14, 14, c, c if k is None else k, r, r, pad, pad, stride, stride, dilation, dilation,
                         groups=c if groups is None else groups)


def test_serves_takes_what_the_16_byte_kernels_cannot_and_any_stride_padding_or_dilation():
    pair, single = DepthwiseNarrow("t", 3, 2, 2), DepthwiseNarrow("t", 3, 1, 4)
    assert serves(pair, conv()) is None and serves(single, conv()) is None
    assert serves(pair, conv(c=27)) == "C must be a multiple of 2" and serves(single, conv(c=27)) is None
    for layer in (conv(stride=2), conv(dilation=3, pad=3), conv(pad=0), conv(c=64)):
        assert serves(pair, layer) is None
    assert serves(pair, conv(r=5, pad=2)) == "built for 3x3 filters"
    assert serves(pair, conv(groups=29)) == serves(pair, conv(k=116)) == "a depthwise kernel: needs groups = C = K"
    assert "not for conv2d_fprop" in serves(pair, conv(groups=1))


def test_a_layer_of_58_channels_gets_candidates_of_the_narrow_family():
    """ShuffleNetV2's depthwise layers (58 and 116 channels): no 16-byte kernel serves them, the
    committed spec's narrow kernels do (and the direct grouped kernel of one output channel a
    thread), and the build measures them (a family the model has no rows
    of is measured in full)."""
    everything = load_catalog(ROOT / "kernel_specs" / "families")
    layer = Conv2dProblem(32, 28, 28, 58, 58, 3, 3, 1, 1, 1, 1, groups=58)
    served = [k for k in everything if serves(k, layer) is None]
    assert {type(k).__name__ for k in served} == {"DepthwiseNarrow", "GroupedDirect"}  # and the grouped ones of any groups
    assert {(k.vector, k.columns) for k in served if isinstance(k, DepthwiseNarrow)} == {(2, 2), (2, 4), (1, 4)}
    assert all(candidates.unfitted(load_model("nvidia_h200"), k) for k in served)


@requires_nvcc
def test_one_kernel_compiles_for_sm90a_through_the_rendering(tmp_path):
    from header_builds import MEASURED_FLAGS
    from kernelgen.variables import default_cutlass_root

    k = next(k for k in load_family(SPEC) if (k.filter, k.vector) == (3, 2))
    source = tmp_path / "kernel.cu"
    source.write_text(render.kernel_source(render.lookup(TEMPLATES), k))
    cutlass = default_cutlass_root()
    out = subprocess.run(["nvcc", *MEASURED_FLAGS, "-c", f"-I{ROOT / 'profiler'}", "-isystem", f"{cutlass}/include",
                          "-o", str(tmp_path / "kernel.o"), str(source)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]


# Small odd depthwise layers: C of 58 and 116 (two channels a thread), odd C (one), partial output
# columns, stride 2, dilation 2, no padding and padding wider than the filter's reach, one image row,
# and a C the 16-byte kernels take too.
LAYERS = [
    "n=3 h=13 w=17 c=58 k=58 r=3 s=3 pad=1 stride=1 groups=58",
    "n=2 h=15 w=14 c=116 k=116 r=3 s=3 pad=1 stride=2 groups=116",
    "n=1 h=9 w=11 c=27 k=27 r=3 s=3 pad=2 stride=1 dilation=2 groups=27",
    "n=2 h=11 w=7 c=30 k=30 r=5 s=5 pad=2 stride=1 groups=30",
    "n=1 h=12 w=13 c=21 k=21 r=5 s=5 pad=0 stride=2 groups=21",
    "n=2 h=7 w=9 c=22 k=22 r=7 s=7 pad=3 stride=1 groups=22",
    "n=1 h=1 w=33 c=10 k=10 r=3 s=3 pad=1 stride=1 groups=10",
    "n=2 h=6 w=5 c=6 k=6 r=3 s=3 pad=3 stride=1 groups=6",
    "n=4 h=28 w=28 c=232 k=232 r=3 s=3 pad=1 stride=1 groups=232",
]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm80_simt_dwconv_narrow_*"):
        assert_served_rows_verify(problem, frame, kernels)


# The CPU check: each committed kernel's work item (depthwise_narrow::item, the code the GPU kernel
# runs for each of its items) run over every item of the layers above on the host, against a
# direct sum in double, from the same fp16 operands.
CPU_CHECK = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "depthwise_narrow.h"

using kernelgen::Conv2dProblem;

template <int R, int V, int TQ>
int check(const Conv2dProblem& p, const char* kernel) {
  if (p.r != R || p.c % V) return 0;  // not served
  const int P = p.p(), Q = p.q();
  std::vector<__half> x(size_t(p.n) * p.h * p.w * p.c), w(size_t(p.c) * R * R), y(size_t(p.n) * P * Q * p.c);
  unsigned state = 12345u + p.c;
  auto next = [&] { state = state * 1664525u + 1013904223u; return float(int(state >> 9) % 2001 - 1000) / 1000.0f; };
  for (auto& v : x) v = __float2half_rn(next());
  for (auto& v : w) v = __float2half_rn(next());
  for (auto& v : y) v = __float2half_rn(1e4f);  // every output must be written
  const long long items = (long long)p.n * P * ((Q + TQ - 1) / TQ) * (p.c / V);
  for (long long i = 0; i < items; ++i) kernelgen::depthwise_narrow::item<__half, R, R, V, TQ>(p, P, Q, i, x.data(), w.data(), y.data());
  double worst = 0;
  for (int n = 0; n < p.n; ++n)
    for (int op = 0; op < P; ++op)
      for (int oq = 0; oq < Q; ++oq)
        for (int c = 0; c < p.c; ++c) {
          double sum = 0;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) {
              const int h = op * p.stride_h - p.pad_h + r * p.dilation_h, col = oq * p.stride_w - p.pad_w + s * p.dilation_w;
              if (h < 0 || h >= p.h || col < 0 || col >= p.w) continue;
              sum += double(__half2float(x[((size_t(n) * p.h + h) * p.w + col) * p.c + c])) *
                     __half2float(w[(size_t(c) * R + r) * R + s]);
            }
          const double got = __half2float(y[((size_t(n) * P + op) * Q + oq) * p.c + c]);
          worst = std::fmax(worst, std::fabs(got - sum) / (1.0 + std::fabs(sum)));
        }
  std::printf("%s %d %d %d %d %d %g\n", kernel, p.n, p.h, p.w, p.c, p.r, worst);
  return worst > 2e-3;
}
"""


@requires_nvcc
def test_each_kernels_work_items_compute_the_layers_on_the_cpu(tmp_path):
    """Every committed kernel's items (the GPU kernel's code, run on the host), over every item of
    each small odd layer it serves, give each output within fp16 rounding of a direct sum: so the
    indexing, the padding, stride and dilation, the partial column tiles and the 4-byte pairs are
    right before any GPU runs them."""
    from kernelgen.workloads import parse_workloads

    kernels = [k for k in load_family(SPEC)]
    problems = parse_workloads("".join(f"conv2d_fprop {line}\n" for line in LAYERS))
    calls = []
    for problem in problems:
        c = problem.as_conv()
        fields = (c.n, c.h, c.w, c.c, c.k, c.r, c.s, c.pad_h, c.pad_w, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w)
        for k in kernels:
            calls.append(f"  bad += check<{k.filter}, {k.vector}, {k.columns}>(Conv2dProblem{{{', '.join(map(str, fields))}}}, "
                         f"\"{k.name}\");")
    source = tmp_path / "cpu_check.cu"
    source.write_text(CPU_CHECK + "int main() {\n  int bad = 0;\n" + "\n".join(calls) + "\n  return bad;\n}\n")
    binary = tmp_path / "cpu_check"
    out = subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'profiler'}", "-o", str(binary), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600)
    checked = run.stdout.splitlines()
    served = sum(serves(k, problem) is None for problem in problems for k in kernels)
    assert run.returncode == 0 and len(checked) == served >= 20, run.stdout[-5000:] + run.stderr[-2000:]
