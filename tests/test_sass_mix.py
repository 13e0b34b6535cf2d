"""bench/sass_mix.py: the instruction mix of cuobjdump's SASS listing, by function and opcode
(modifiers and predicates stripped), and the command's refusals."""

import subprocess
import sys

from conftest import ROOT, requires_nvcc

sys.path.insert(0, str(ROOT / "bench"))
from sass_mix import instruction_mix  # noqa: E402

LISTING = """
	code for sm_90a
		Function : _Z3onePf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
        /*0010*/                   FFMA R2, R3, R4, R2 ;                      /* 0x0000000403027223 */
        /*0020*/               @P0 FFMA.FTZ R2, R3, R4, R2 ;                  /* 0x0000000403020223 */
        /*0030*/              @!P1 HFMA2.MMA R5, -RZ, RZ, 0, 0 ;             /* 0x00000000ff057435 */
        /*0040*/                   EXIT ;                                     /* 0x000000000000794d */
		..........

		Function : _Z3twoPf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED"
        /*0000*/                   HFMA2 R0, R1, R2, R0 ;                     /* 0x0000000201007231 */
        /*0010*/             @!UP0 LDS.U16 R3, [R4] ;                          /* 0x0000000004037984 */
        /*0020*/                   BRA 0x20;                                  /* 0xfffffffc00fc7947 */
"""


def test_the_mix_counts_each_functions_opcodes_without_modifiers_or_predicates():
    mix = instruction_mix(LISTING)
    assert list(mix) == ["_Z3onePf", "_Z3twoPf"]
    assert dict(mix["_Z3onePf"]) == {"LDC": 1, "FFMA": 2, "HFMA2": 1, "EXIT": 1}
    assert dict(mix["_Z3twoPf"]) == {"HFMA2": 1, "LDS": 1, "BRA": 1}
    assert instruction_mix("no functions here") == {}


def test_a_glob_of_no_kernel_and_no_disassembler_are_refused_in_one_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, str(ROOT / "bench" / "sass_mix.py"), *args], capture_output=True,
                              text=True, timeout=300)
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    none = run("no_such_kernel_*", "--cuobjdump", str(fake))
    assert none.returncode != 0 and none.stderr.strip() == "no kernel of the catalog matches no_such_kernel_*"
    missing = run("*", "--cuobjdump", "")
    assert missing.returncode != 0 and "no cuobjdump on PATH" in missing.stderr and missing.stderr.count("\n") == 1


@requires_nvcc
def test_a_disassembler_that_fails_is_named_in_one_line(tmp_path):
    """A cuobjdump that cannot disassemble (one without nvdisasm beside it or on PATH exits 1 so)."""
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\necho \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    name = "kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_3x3_stride1_tile8x16_t4x4_c32_s3_tma_cta128"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_mix.py"), name, "--cuobjdump", str(fake)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.strip() == f"{name}: {fake} failed: cuobjdump fatal   : Could not find executable file 'nvdisasm'"
