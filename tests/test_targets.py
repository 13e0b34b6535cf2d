"""GPU targets: one table of architectures, read by ARCH=, the families' shared-memory and
cluster checks and the header; the kernel templates' CUTLASS arch tags agree with it."""

import re
from dataclasses import replace

import pytest

from conftest import ROOT, sm80_family, sm90_conv_family
from kernelgen import render
from kernelgen.arch import parse_arch
from kernelgen.errors import KernelgenError, SpecError
from kernelgen.specs import load_catalog, load_family
from kernelgen.targets import DEFAULT_ARCH, TARGETS
from test_specs import family

CATALOG = load_catalog(ROOT / "kernel_specs" / "families")
TEMPLATES = render.lookup(ROOT / "kernel_specs" / "templates")


def test_the_table_holds_each_architecture_once_with_its_limits():
    assert [(t.sm, t.suffix, t.shared_memory, t.max_cluster_ctas, t.cutlass_tag) for t in TARGETS.values()] == [
        (75, "", 65536, 1, "cutlass::arch::Sm75"),
        (80, "", 166912, 1, "cutlass::arch::Sm80"),
        (90, "a", 232448, 8, "cutlass::arch::Sm90"),
    ]
    assert all(sm == t.sm for sm, t in TARGETS.items())
    assert str(parse_arch(DEFAULT_ARCH)) == "90a"
    assert {k.arch for k in CATALOG} <= set(TARGETS), "every kernel's architecture has a row"


@pytest.mark.parametrize("text, number, specific", [("75", 75, False), ("80", 80, False), ("86", 86, False),
                                                    ("90", 90, False), ("90a", 90, True), (" 90a ", 90, True)])
def test_arch_reads_the_suffix_from_the_table(text, number, specific):
    arch = parse_arch(text)
    assert (arch.number, arch.specific) == (number, specific)
    assert str(arch) == text.strip()


@pytest.mark.parametrize("text, message", [
    ("80a", "ARCH='80a': sm_80 has no arch-specific target 'a' known here (known: 90a;"),
    ("100a", "ARCH='100a': sm_100 has no arch-specific target 'a' known here (known: 90a;"),
    ("86a", "ARCH='86a': sm_86 has no arch-specific target 'a' known here"),
])
def test_an_arch_specific_target_the_table_does_not_hold_is_refused(text, message):
    with pytest.raises(KernelgenError) as error:
        parse_arch(text)
    assert str(error.value).startswith(message)


def test_every_kernel_names_the_cutlass_arch_tag_of_its_architecture():
    tagged = 0
    for kernel in CATALOG:
        tags = set(re.findall(r"cutlass::arch::Sm\d+", render.kernel_source(TEMPLATES, kernel)))
        assert tags <= {TARGETS[kernel.arch].cutlass_tag}, (kernel.name, tags)
        tagged += bool(tags)
    assert tagged >= 100  # the CUTLASS-built families name one; this project's own kernels need none


CLUSTERED = sm90_conv_family(clusters="[[2, 2, 1]]")


@pytest.mark.parametrize("change, spec, message", [
    ({"max_cluster_ctas": 2}, CLUSTERED, "cluster 2x2 holds 4 CTAs; SM90 allows at most 2 portably"),
    ({"shared_memory": 96 * 1024}, CLUSTERED.replace("[[2, 2, 1]]", "[[1, 1, 1]]") + "stages = 4\n",
     "4 stages of a 128x128x64 tile need 131072 bytes of shared memory, more than SM90's 98304"),
    ({"tile_k": (128, 32)}, CLUSTERED.replace("[[2, 2, 1]]", "[[1, 1, 1]]"),
     "tile K 64 is not a multiple of 128 elements and 32 bytes"),
], ids=["largest cluster", "shared memory", "tile K"])
def test_the_sm90_checks_read_the_table(tmp_path, monkeypatch, change, spec, message):
    path = family(tmp_path, spec)
    assert load_family(path)  # as the table stands, the spec is fine
    monkeypatch.setitem(TARGETS, 90, replace(TARGETS[90], **change))
    with pytest.raises(SpecError, match=re.escape(message)):
        load_family(path)


@pytest.mark.parametrize("arch, limit", [(80, 166912), (75, 65536)])
def test_a_2x_family_is_checked_against_the_shared_memory_of_its_own_architecture(tmp_path, arch, limit):
    stages = 2 if arch == 75 else 10
    spec = sm80_family(f"threadblock = [256, 128, 64], warps = [4, 2, 1], stages = {stages}")
    if arch == 75:
        spec = spec.replace('iterator = "optimized"', 'arch = 75\niterator = "few_channels"').replace(
            "[16, 8, 16]", "[16, 8, 8]").replace("alignments = [8]", "alignments = [4]")
    need = stages * (256 + 128) * 64 * 2
    with pytest.raises(SpecError, match=re.escape(f"need {need} bytes of shared memory, more than "
                                                  f"SM{arch}'s {limit}")):
        load_family(family(tmp_path, spec))


def test_the_sm90_families_name_the_schedules_of_the_sm90_row():
    schedules = TARGETS[90].schedules
    gemm = [k for k in CATALOG if k.family.startswith("gemm") and k.arch == 90]  # (gemm_thin: plain CUDA)
    assert {k.schedule for k in gemm} <= set(schedules["gemm"]) and {k.scheduler for k in gemm} <= \
        set(schedules["tile_scheduler"])
    for kernel in gemm[:3]:
        assert schedules["gemm"][kernel.schedule][0] in render.kernel_source(TEMPLATES, kernel)
    assert not any(t.schedules for sm, t in TARGETS.items() if sm != 90), "the 2.x families need none"
