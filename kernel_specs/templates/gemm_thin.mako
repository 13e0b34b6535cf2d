## The C++ type of one thin GEMM kernel (profiler/gemm_thin.h): D (m x n) = A (m x k) B^T, k <= k_max, n <= n_max.
## Inputs: name (the procedural name), v (k_max, n_max, rows, threads).
// Thin GEMM, k <= ${v["k_max"]}, n <= ${v["n_max"]}, blocks of ${v["threads"]} x ${v["rows"]} rows a CTA: ${name}
using ${name} = kernelgen::GemmThin<${v["k_max"]}, ${v["n_max"]}, ${v["rows"]}, ${v["threads"]}>;
