## The C++ type of one matrix-vector kernel (profiler/gemv.h): D (m x n) = A (m x k) B^T, m <= max_m.
## Inputs: name (the procedural name), v (max_m, rows, threads, unroll; type where not Gemv).
// Matrix-vector GEMM, m <= ${v["max_m"]}, ${v["rows"]} output columns per CTA of ${v["threads"]} threads, ${v["unroll"]} chunks of each B row in flight: ${name}
using ${name} = kernelgen::${v.get("type", "Gemv")}<${v["max_m"]}, ${v["rows"]}, ${v["threads"]}, ${v["unroll"]}>;
