// mma.sync m16n8k16 (fp16 in, fp32 sums) on the CPU as the PTX ISA places its operands in a warp's
// registers, and the operands the CPU models of the tensor-core kernels fill them with: small
// integers (every sum exact in float). Included by tests/depthwise_mma_model.cu and
// tests/gemv_mma_model.cu, compiled with nvcc.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

namespace mma_sync_model {

inline float value(unsigned seed, size_t i) { return float(int((i * 2654435761u + seed) % 7u) - 3); }
inline uint16_t bits(float f) {
  const __half h = __float2half(f);
  return *reinterpret_cast<const uint16_t*>(&h);
}
inline float from_bits(uint32_t b) {
  const uint16_t u = uint16_t(b);
  return __half2float(*reinterpret_cast<const __half*>(&u));
}

// D (16x8) += A (16x16) B (16x8) of one warp, from each lane's registers as the PTX ISA places them.
inline void mma(float (&d)[32][4], const uint32_t (&a)[32][4], const uint32_t (&b)[32][2]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = from_bits(a[lane][0] >> (16 * h));
      A[g + 8][2 * t + h] = from_bits(a[lane][1] >> (16 * h));
      A[g][2 * t + 8 + h] = from_bits(a[lane][2] >> (16 * h));
      A[g + 8][2 * t + 8 + h] = from_bits(a[lane][3] >> (16 * h));
      B[2 * t + h][g] = from_bits(b[lane][0] >> (16 * h));
      B[2 * t + 8 + h][g] = from_bits(b[lane][1] >> (16 * h));
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
      float sum = 0;
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      d[lane][e] += sum;
    }
  }
}

}  // namespace mma_sync_model
