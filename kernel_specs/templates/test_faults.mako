## A naive direct convolution with an injected fault, for testing the tool itself.
## Inputs: name, v (fault: 0 none, 1 wrong_scale, 2 illegal_address, 3 hang).
// Test-only kernel with fault ${v["fault"]}: ${name}
namespace ${name}_detail {
__global__ void kernel(kernelgen::Conv2dProblem p, int P, int Q, const __half* x, const __half* w, __half* y) {
    size_t total = size_t(p.n) * P * Q * p.k;
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
% if v["fault"] == 2:
    if (i == 0) *reinterpret_cast<volatile float*>(16) = 1.0f;  // illegal address
% elif v["fault"] == 3:
    long long start = clock64();
    while (clock64() - start < 120000000000ll) {  // about a minute at 2 GHz
      __nanosleep(1000000);
    }
% endif
    for (; i < total; i += size_t(gridDim.x) * blockDim.x) {
      int k = int(i % p.k), q = int(i / p.k % Q), pp = int(i / p.k / Q % P), n = int(i / p.k / Q / P);
      float acc = 0.0f;
      for (int r = 0; r < p.r; ++r) {
        int h = pp * p.stride_h - p.pad_h + r * p.dilation_h;
        for (int s = 0; s < p.s; ++s) {
          int ww = q * p.stride_w - p.pad_w + s * p.dilation_w;
          if (h < 0 || h >= p.h || ww < 0 || ww >= p.w) continue;
          for (int c = 0; c < p.c; ++c) {
            acc += __half2float(x[((size_t(n) * p.h + h) * p.w + ww) * p.c + c]) *
                   __half2float(w[((size_t(k) * p.r + r) * p.s + s) * p.c + c]);
          }
        }
      }
% if v["fault"] == 1:
      acc *= 2.0f;  // wrong epilogue scale
% endif
      y[i] = __float2half_rn(acc);
    }
}
}  // namespace ${name}_detail

struct ${name} {
  static std::string can_implement(const kernelgen::Conv2dProblem&) { return {}; }

  static void launch(const kernelgen::Conv2dProblem& p, const kernelgen::Conv2dBinding& b, cudaStream_t stream) {
    size_t total = p.output_elements();
    int blocks = int(total / 256 + 1 < 4096 ? total / 256 + 1 : 4096);
    ${name}_detail::kernel<<<blocks, 256, 0, stream>>>(p, p.p(), p.q(), static_cast<const __half*>(b.x),
                                       static_cast<const __half*>(b.w), static_cast<__half*>(b.y));
  }
};
