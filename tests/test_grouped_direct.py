"""Grouped kernels of any number of channels a group (site_scons/kernelgen/families/grouped_direct.py,
profiler/grouped_direct.h): the spec refuses what the family cannot build, naming file, entry and
key; names say every parameter that changes the code; ``serves`` refuses what can_implement refuses
(groups that do not divide C and K, the compiled filter, K/groups not a multiple of the vector) and
takes any channels a group, stride, padding and dilation; RegNet's layers of 48 and 56 channels a
group, which no other kernel serves, get candidates; one kernel compiles for sm_90a through the
rendering; every kernel's work items, run on the CPU, compute small odd layers; and on a GPU every
kernel verifies on those layers where it says it serves them and reports the others unsupported."""

import subprocess

import pytest

from conftest import ROOT, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates, render
from kernelgen.cost_model import load_model, serves
from kernelgen.errors import SpecError
from kernelgen.families.grouped_direct import GroupedDirect
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family

SPEC = ROOT / "kernel_specs" / "families" / "grouped_direct.toml"
TEMPLATES = ROOT / "kernel_specs" / "templates"
FIRST = "{ filter = 3, vector = 2, columns = 4 }"
FAMILY = f"""\
kind = "grouped_direct"
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
    ("{ filter = 4, vector = 2, columns = 2 }", "filter", "4 is not one of 1, 3, 5, 7"),
    ("{ filter = 3, vector = 8, columns = 2 }", "vector", "8 is not one of 1, 2, 4"),
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
    kernels = [GroupedDirect("t", f, v, q, element=e) for f in (1, 3, 5, 7) for v in (1, 2, 4) for q in (1, 2, 4, 8)
               for e in ("f16", "bf16")]
    assert len({k.name for k in kernels}) == len(kernels)
    templates = render.lookup(TEMPLATES)
    types = {render.type_definition(templates, k).replace(k.name, "NAME") for k in kernels}
    assert len(types) == len(kernels), "two names of one type"
    assert GroupedDirect("t", 5, 2, 4).name == "kernelgen_sm80_simt_gconv_direct_f16nhwc_f16nhwc_f32_f16nhwc_5x5_v2_q4"


def conv(c=448, groups=8, k=None, r=3, stride=1, dilation=1, pad=1):
    return Conv2dProblem(2, 14, 14, c, c if k is None else k, r, r, pad, pad, stride, stride, dilation, dilation,
                         groups=groups)


def test_serves_takes_any_channels_a_group_stride_padding_or_dilation():
    four, one = GroupedDirect("t", 3, 4, 2), GroupedDirect("t", 3, 1, 4)
    for layer in (conv(), conv(c=336, groups=7), conv(stride=2), conv(dilation=2, pad=2), conv(pad=0),
                  conv(c=96, groups=96, k=384)):  # a depthwise layer's channel multiplier 4
        assert serves(four, layer) is None and serves(one, layer) is None, layer
    assert serves(four, conv(c=54, groups=9)) == "K / groups must be a multiple of 4"  # 6 a group
    assert serves(one, conv(c=54, groups=9)) is None
    assert serves(four, conv(r=5, pad=2)) == "built for 3x3 filters"
    assert serves(four, conv(c=448, groups=6)) == "needs groups (at least 2) dividing C and K"
    assert "not for conv2d_fprop" in serves(four, conv(groups=1))


def test_regnets_layers_of_48_and_56_channels_a_group_get_candidates_of_the_family_alone():
    """RegNetX-3.2GF's 48 and RegNetY-8GF's 56 channels a group: no tensor-core grouped kernel
    serves them, the committed spec's direct kernels do, and the build measures them (a family the
    model has no rows of is measured in full)."""
    everything = load_catalog(ROOT / "kernel_specs" / "families")
    for c, groups in ((432, 9), (448, 8)):
        layer = Conv2dProblem(32, 28, 28, c, c, 3, 3, 1, 1, 1, 1, groups=groups)
        served = [k for k in everything if serves(k, layer) is None]
        assert served and all(isinstance(k, GroupedDirect) for k in served)
        assert {(k.vector, k.columns) for k in served} == {(4, 2), (2, 4), (1, 4)}
        assert all(candidates.unfitted(load_model("nvidia_h200"), k) for k in served)


@requires_nvcc
def test_one_kernel_compiles_for_sm90a_through_the_rendering(tmp_path):
    from header_builds import MEASURED_FLAGS
    from kernelgen.variables import default_cutlass_root

    k = next(k for k in load_family(SPEC) if (k.filter, k.vector) == (3, 4))
    source = tmp_path / "kernel.cu"
    source.write_text(render.kernel_source(render.lookup(TEMPLATES), k))
    cutlass = default_cutlass_root()
    out = subprocess.run(["nvcc", *MEASURED_FLAGS, "-c", f"-I{ROOT / 'profiler'}", "-isystem", f"{cutlass}/include",
                          "-o", str(tmp_path / "kernel.o"), str(source)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]


# Small odd grouped layers: 48, 56 and 6 channels a group, odd channels a group, a depthwise layer and
# its channel multiplier 2, partial output columns, stride 2, dilation 2, no padding and padding
# wider than the filter's reach, one image row, a 1x1 grouped layer.
LAYERS = [
    "n=2 h=13 w=17 c=96 k=96 r=3 s=3 pad=1 stride=1 groups=2",
    "n=2 h=15 w=14 c=112 k=112 r=3 s=3 pad=1 stride=2 groups=2",
    "n=1 h=9 w=11 c=54 k=54 r=3 s=3 pad=2 stride=1 dilation=2 groups=9",
    "n=1 h=7 w=9 c=15 k=15 r=3 s=3 pad=1 stride=1 groups=3",
    "n=2 h=6 w=5 c=24 k=48 r=3 s=3 pad=3 stride=1 groups=24",
    "n=1 h=12 w=13 c=40 k=40 r=3 s=3 pad=0 stride=2 groups=40",
    "n=1 h=1 w=33 c=64 k=64 r=3 s=3 pad=1 stride=1 groups=4",
    "n=2 h=8 w=8 c=32 k=64 r=1 s=1 pad=0 stride=1 groups=4",
]


@requires_gpu
def test_each_kernel_verifies_on_small_odd_layers_or_refuses_them(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC)}
    for problem, frame in profile_layers(tmp_path, LAYERS, "kernelgen_sm80_simt_gconv_direct_*"):
        assert_served_rows_verify(problem, frame, kernels)


# The CPU check: each committed kernel's work item (grouped_direct::item, the code the GPU kernel
# runs for each of its items) run over every item of the layers above on the host, against a direct
# sum in double, from the same fp16 operands.
CPU_CHECK = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "grouped_direct.h"

using kernelgen::Conv2dProblem;

template <int R, int V, int TQ>
int check(const Conv2dProblem& p, int groups, const char* kernel) {
  if (p.r != R || (p.k / groups) % V) return 0;  // not served
  const int P = p.p(), Q = p.q(), gc = p.c / groups, gk = p.k / groups;
  std::vector<__half> x(size_t(p.n) * p.h * p.w * p.c), w(size_t(p.k) * R * R * gc), y(size_t(p.n) * P * Q * p.k);
  unsigned state = 12345u + p.c;
  auto next = [&] { state = state * 1664525u + 1013904223u; return float(int(state >> 9) % 2001 - 1000) / 1000.0f; };
  for (auto& v : x) v = __float2half_rn(next());
  for (auto& v : w) v = __float2half_rn(next());
  for (auto& v : y) v = __float2half_rn(1e4f);  // every output must be written
  const kernelgen::grouped_direct::Shape shape{P, Q, groups};
  const long long items = (long long)p.n * P * ((Q + TQ - 1) / TQ) * (p.k / V);
  for (long long i = 0; i < items; ++i)
    kernelgen::grouped_direct::item<__half, R, R, V, TQ>(p, shape, i, x.data(), w.data(), y.data());
  double worst = 0;
  for (int n = 0; n < p.n; ++n)
    for (int op = 0; op < P; ++op)
      for (int oq = 0; oq < Q; ++oq)
        for (int k = 0; k < p.k; ++k) {
          double sum = 0;
          const int c0 = (k / gk) * gc;
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s)
              for (int ci = 0; ci < gc; ++ci) {
                const int h = op * p.stride_h - p.pad_h + r * p.dilation_h, col = oq * p.stride_w - p.pad_w + s * p.dilation_w;
                if (h < 0 || h >= p.h || col < 0 || col >= p.w) continue;
                sum += double(__half2float(x[((size_t(n) * p.h + h) * p.w + col) * p.c + c0 + ci])) *
                       __half2float(w[((size_t(k) * R + r) * R + s) * gc + ci]);
              }
          const double got = __half2float(y[((size_t(n) * P + op) * Q + oq) * p.k + k]);
          worst = std::fmax(worst, std::fabs(got - sum) / (1.0 + std::fabs(sum)));
        }
  std::printf("%s %d %d %d %d %d %d %g\n", kernel, p.n, p.h, p.w, p.c, p.k, groups, worst);
  return worst > 2e-3;
}
"""


@requires_nvcc
def test_each_kernels_work_items_compute_the_layers_on_the_cpu(tmp_path):
    """Every committed kernel's items (the GPU kernel's code, run on the host), over every item of
    each small odd layer it serves, give each output within fp16 rounding of a direct sum: so the
    groups' channels, the padding, stride and dilation, the partial column tiles and the output
    channels a thread computes are right before any GPU runs them."""
    from kernelgen.workloads import parse_workloads

    kernels = list(load_family(SPEC))
    problems = parse_workloads("".join(f"conv2d_fprop {line}\n" for line in LAYERS))
    calls = []
    for problem in problems:
        c = problem.as_conv()
        fields = (c.n, c.h, c.w, c.c, c.k, c.r, c.s, c.pad_h, c.pad_w, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w)
        for k in kernels:
            calls.append(f"  bad += check<{k.filter}, {k.vector}, {k.columns}>(Conv2dProblem{{{', '.join(map(str, fields))}}}, "
                         f"{c.groups}, \"{k.name}\");")
    source = tmp_path / "cpu_check.cu"
    source.write_text(CPU_CHECK + "int main() {\n  int bad = 0;\n" + "\n".join(calls) + "\n  return bad;\n}\n")
    binary = tmp_path / "cpu_check"
    out = subprocess.run(["nvcc", "-std=c++17", "-O2", f"-I{ROOT / 'profiler'}", "-o", str(binary), str(source)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600)
    checked = run.stdout.splitlines()
    served = sum(serves(k, problem) is None for problem in problems for k in kernels)
    assert run.returncode == 0 and len(checked) == served >= 15, run.stdout[-5000:] + run.stderr[-2000:]
