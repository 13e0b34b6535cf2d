"""Rendering: golden sources, determinism, strict templates, and the kernel hash."""

import json
from pathlib import Path

import pytest

from conftest import ROOT
from kernelgen import render
from kernelgen.arch import parse_arch
from kernelgen.errors import TemplateError
from kernelgen.variables import default_cutlass_root
from kernelgen.plan import make_plan
from kernelgen.signature import cutlass_version, kernel_hash, project_headers
from kernelgen.specs import load_catalog

GOLDEN = Path(__file__).parent / "golden"
TEMPLATES = ROOT / "kernel_specs" / "templates"
CATALOG = {k.name: k for k in load_catalog(ROOT / "kernel_specs" / "families")}
GOLDEN_KERNELS = [
    "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_64x128",
]
RESIDENT_GOLDEN = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x232_w56_rows4_halo"


@pytest.mark.parametrize("name", [*GOLDEN_KERNELS, RESIDENT_GOLDEN])
def test_kernel_source_matches_golden(name):
    text = render.kernel_source(render.lookup(TEMPLATES), CATALOG[name])
    assert text == (GOLDEN / f"{name}.cu").read_text()


def test_manifest_matches_golden():
    text = render.manifest_source(render.lookup(TEMPLATES), list(reversed(GOLDEN_KERNELS)))
    assert text == (GOLDEN / "manifest.cu").read_text()


def test_a_void_source_renders_no_c_operand_and_the_same_output():
    with_c = CATALOG[GOLDEN_KERNELS[1]]
    void = CATALOG[with_c.name.replace("_f32_f16_f16nhwc_", "_f32_void_f16nhwc_")]
    text = render.kernel_source(render.lookup(TEMPLATES), void)
    c_line = "    void, cutlass::layout::RowMajor, 128 / cute::sizeof_bits_v<cutlass::half_t>,\n"
    d_line = "    cutlass::half_t, cutlass::layout::RowMajor, 128 / cute::sizeof_bits_v<cutlass::half_t>,\n"
    assert c_line + d_line in text
    assert text.replace(void.name, with_c.name).replace(c_line, d_line).replace(void.family, with_c.family) == \
        render.kernel_source(render.lookup(TEMPLATES), with_c)


def test_store_stages_build_the_epilogue_with_that_many_stores_in_flight():
    kernel = next(k for k in CATALOG.values() if getattr(k, "store_stages", None) == 8)
    text = render.kernel_source(render.lookup(TEMPLATES), kernel)
    assert '#include "epilogue_sm90.h"' in text and "collective::CollectiveBuilder" not in text
    assert f"{kernel.name}_epilogue = typename kernelgen::Sm90TmaEpilogue<" in text
    assert "    cute::Shape<cute::_64, cute::_32>,\n" in text
    assert "    cutlass::epilogue::TmaWarpSpecialized, 8\n  >::CollectiveOp;" in text


@pytest.mark.parametrize("plain", [
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_64x32x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_64x64x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_64x192x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma"
    "_transposed",
])
def test_a_dependent_launch_kernel_turns_on_grid_dependency_control_before_any_header(plain):
    pdl = CATALOG[plain.replace("_epi_tma", "_epi_tma_pdl")]
    templates = render.lookup(TEMPLATES)
    text, plain_text = render.kernel_source(templates, pdl), render.kernel_source(templates, CATALOG[plain])
    lines = text.splitlines()
    assert lines[1] == "#define CUTLASS_ENABLE_GDC_FOR_SM90" and lines[2].startswith("#include ")
    assert '#include "dependent_launch.h"' in text
    wrapped = f"using {pdl.name} = kernelgen::DependentLaunch<cutlass::gemm::device::GemmUniversalAdapter<{pdl.name}_base>>;"
    assert wrapped in text
    # otherwise the same kernel
    assert "CUTLASS_ENABLE_GDC" not in plain_text and "DependentLaunch" not in plain_text
    same = (text.replace(pdl.name, plain).replace("#define CUTLASS_ENABLE_GDC_FOR_SM90\n", "")
            .replace('#include "dependent_launch.h"\n', "").replace(wrapped.replace(pdl.name, plain),
                                                                    f"using {plain} = cutlass::gemm::device::GemmUniversalAdapter<{plain}_base>;"))
    assert same == plain_text


def test_rendering_is_deterministic():
    kernel = CATALOG[GOLDEN_KERNELS[1]]
    assert render.kernel_source(render.lookup(TEMPLATES), kernel) == \
        render.kernel_source(render.lookup(TEMPLATES), kernel)


def test_an_undefined_template_name_fails_naming_template_and_kernel(tmp_path):
    for template in TEMPLATES.glob("*.mako"):
        (tmp_path / template.name).write_text(template.read_text())
    broken = tmp_path / "conv2d_fprop_2x.mako"
    broken.write_text(broken.read_text().replace('${v["stages"]}', '${v["stages"]} ${stage_count}'))
    kernel = CATALOG[GOLDEN_KERNELS[0]]
    with pytest.raises(TemplateError, match=f"conv2d_fprop_2x.mako failed for kernel {kernel.name}.*stage_count"):
        render.kernel_source(render.lookup(tmp_path), kernel)


def test_write_generated_replaces_atomically_with_unix_newlines(tmp_path):
    target = tmp_path / "sub" / "file.cu"
    render.write_generated(target, "a\nb\n")
    render.write_generated(target, "c\n")
    assert target.read_bytes() == b"c\n"
    assert [p.name for p in target.parent.iterdir()] == ["file.cu"]
    assert target.stat().st_mode & 0o644 == 0o644


def test_kernel_hash_covers_source_headers_flags_and_cutlass():
    base = kernel_hash("src", {"a.h": "x"}, ["-O3"], "4.2.0")
    assert base == kernel_hash("src", {"a.h": "x"}, ["-O3"], "4.2.0")
    assert len({base, kernel_hash("src2", {"a.h": "x"}, ["-O3"], "4.2.0"),
                kernel_hash("src", {"a.h": "y"}, ["-O3"], "4.2.0"),
                kernel_hash("src", {"a.h": "x"}, ["-O2"], "4.2.0"),
                kernel_hash("src", {"a.h": "x"}, ["-O3"], "4.3.0")}) == 5


def test_project_headers_follow_includes_transitively():
    source = render.kernel_source(render.lookup(TEMPLATES), CATALOG[GOLDEN_KERNELS[0]])
    headers = project_headers(source, ROOT / "profiler")
    assert sorted(headers) == ["adapter_common.h", "conv2d_adapter_2x.h", "operation.h"]


def test_plan_hashes_change_only_for_the_kernel_whose_source_changed(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "fam.toml").write_text((ROOT / "kernel_specs" / "families" / "conv2d_fprop_sm80.toml").read_text())
    include = Path(default_cutlass_root()) / "include"
    assert cutlass_version(include) == "4.2.0"
    args = (TEMPLATES, ROOT / "profiler", "*", parse_arch("90a"), ["-O3"], include)
    before = make_plan(specs, *args)
    text = (specs / "fam.toml").read_text()
    (specs / "fam.toml").write_text(text.replace("[ 64,  64, 32], warps = [2, 2, 1], stages = 10",
                                                 "[ 64,  64, 32], warps = [2, 2, 1], stages = 9"))
    after = make_plan(specs, *args)
    changed = {n for n in before.hashes if before.hashes[n] != after.hashes.get(n)}
    assert changed == {n for n in before.hashes if "_64x64_32x10_" in n} and len(changed) == 3
    assert len(after.kernels) == len(before.kernels) == 30


@pytest.mark.parametrize("specs", ["kernel_specs/families", "tests/specs"])
def test_every_spec_directory_makes_a_plan_whose_manifest_names_each_kernels_op_and_element(specs):
    include = Path(default_cutlass_root()) / "include"
    plan = make_plan(ROOT / specs, TEMPLATES, ROOT / "profiler", "*", parse_arch("90a"), ["-O3"], include)
    kernels = json.loads(plan.manifest_json)["kernels"]
    assert len(kernels) == len(plan.kernels) > 0
    assert {(k["op"], k["element"]) for k in kernels.values()} == {("conv2d_fprop", "f16")} | (
        {("gemm", "f16"), ("conv2d_fprop", "bf16"), ("gemm", "bf16"), ("conv2d_fprop_grouped", "f16"),
         ("conv2d_fprop_grouped", "bf16")} if specs == "kernel_specs/families" else set())


def test_what_is_kept_by_identity_is_made_once_for_the_same_objects_and_again_for_equal_others():
    """kept.ByIdentity (a kernel's source, a descriptor's model attributes and terms): the same
    objects take the value made first; an equal but other object has its own; a full store drops
    all it holds."""
    from kernelgen.kept import ByIdentity
    made = []
    def make(a, b):
        made.append((a, b))
        return len(made)
    store, first, second = ByIdentity(2), [1], [2]
    assert store.get(make, first, second) == store.get(make, first, second) == 1
    assert store.get(make, [1], second) == 2, "an equal list is another object"
    assert store.get(make, second, first) == 3 and len(store.values) == 1, "full at two: emptied first"
    assert store.get(make, first, second) == 4
