"""bench/sass_mix.py: the instruction mix of cuobjdump's SASS listing, by function and opcode
(modifiers and predicates stripped), and the command's refusals."""

import subprocess
import sys

import pytest

from conftest import NEEDS_NVCC, ROOT

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


DWCONV = "kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_3x3_stride1_tile8x16_t4x4_c32_s3_tma_cta128"
REFUSALS = [
    # the kernel glob, the fake cuobjdump's script ("": none given), the one line it says ({fake}: its path)
    pytest.param("no_such_kernel_*", "exit 0", "no kernel of the catalog matches no_such_kernel_*", id="no kernel"),
    pytest.param("*", "", "no cuobjdump on PATH: give --cuobjdump (CUDA's toolkit, or pip's nvidia-cuda-cuobjdump)",
                 id="no cuobjdump"),
    # a cuobjdump without nvdisasm beside it or on PATH exits 1 so (the kernel compiled first)
    pytest.param(DWCONV, "echo \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2; exit 1",
                 f"{DWCONV}: {{fake}} failed: cuobjdump fatal   : Could not find executable file 'nvdisasm'",
                 id="cuobjdump fails", marks=NEEDS_NVCC),
]


@pytest.mark.parametrize("pattern, script, message", REFUSALS)
def test_a_bad_glob_or_disassembler_is_refused_in_one_line(tmp_path, pattern, script, message):
    fake = tmp_path / "cuobjdump"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_mix.py"), pattern,
                          "--cuobjdump", str(fake) if script else ""], capture_output=True, text=True, timeout=600)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.strip() == message.replace("{fake}", str(fake)), out.stderr
