// Mixed-addition rate on one GPU (a research probe for #27, not part of the
// build): sppark's XYZZ += affine (8M + 2S, G1 BLS12-381), one running sum a
// thread as level 0 keeps one, in 64-thread blocks filling the SMs as level 0
// does, with the points
//   regs:     two points held in registers (the arithmetic alone);
//   regs x2:  two running sums a thread, interleaved (independent work for
//             the scheduler within a warp, at the cost of registers);
//   random:   read from 2^26 points (6 GiB) at random, as level 0 reads the
//             points of a dense 2^26 MSM;
//   random+1: the same with the next point loaded before the current one is
//             added;
// each in as many registers as ptxas takes, and bounded to leave room for
// level 0's 14 warps an SM (@14w; ptxas then takes 128 and spills a little).
// Level 0 at dense 2^26 (window 20) takes 113 SM-clocks an addition (H100,
// 376.9 ms for 872 M); the standalone multiplication 7.2 and squaring 6.2
// (scripts/imad_rate.cu), so 70 for 8M + 2S.
// Build (from the repository root, CUDA on PATH):
//   nvcc -O3 -gencode arch=compute_90,code=sm_90 -DFEATURE_BLS12_381 \
//     -I<sppark>/sppark -I<blst>/blst/src -I<blst>/blst/bindings \
//     -o .carry/madd_rate scripts/madd_rate.cu
// and run .carry/madd_rate on the GPU machine.
#include <cstdio>
#include <cstdint>
#include <ff/bls12-381.hpp>
#include <ec/xyzz_t.hpp>

typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef affine_t::mem_t affine_h;
typedef bucket_t::mem_t bucket_h;

constexpr int ITERS = 512;
constexpr uint64_t NPTS = 1ull << 26;

__device__ __forceinline__ uint32_t mix(uint32_t x)
{
    x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16;
    return x;
}

// Distinct pseudo-random coordinates below p (the top limb kept small), so
// every addition takes the general path.
__global__ void fill(uint32_t* words, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        words[i] = (i % 12 == 11) ? (mix((uint32_t)i) & 0x0fffffff) : mix((uint32_t)i * 2654435761u + 7);
}

enum mode { REGS, REGS_X2, RANDOM, RANDOM_AHEAD };

// MINB: blocks an SM the registers must leave room for (7: level 0's 14
// warps; 1: as many registers as ptxas likes).
template<mode M, int MINB>
__launch_bounds__(64, MINB) __global__ void madd(bucket_h* out, const affine_h* pts, uint32_t seed)
{
    const uint32_t t = threadIdx.x + blockIdx.x * blockDim.x;
    const uint32_t mask = (uint32_t)(NPTS - 1);
    bucket_t acc, acc2;
    acc.inf();
    acc2.inf();
    if constexpr (M == REGS || M == REGS_X2) {
        affine_t p0 = pts[mix(t) & mask], p1 = pts[mix(t + seed) & mask];
        #pragma unroll 1
        for (int i = 0; i < ITERS; i += 2) {
            acc.add(p0);
            if constexpr (M == REGS_X2)
                acc2.add(p1);
            acc.add(p1);
            if constexpr (M == REGS_X2)
                acc2.add(p0);
        }
    } else if constexpr (M == RANDOM) {
        #pragma unroll 1
        for (int i = 0; i < ITERS; i++) {
            affine_t p = pts[mix(t * ITERS + i + seed) & mask];
            acc.add(p);
        }
    } else {
        affine_t next = pts[mix(t * ITERS + seed) & mask];
        #pragma unroll 1
        for (int i = 0; i < ITERS; i++) {
            affine_t p = next;
            next = pts[mix(t * ITERS + i + 1 + seed) & mask];
            acc.add(p);
        }
    }
    if constexpr (M == REGS_X2)
        acc.add(acc2);
    out[t] = acc;
}

int main()
{
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
    int clk = 0; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    const int sms = p.multiProcessorCount;
    printf("%s: %d SMs, %.0f MHz\n", p.name, sms, clk / 1e3);
    affine_h* pts; bucket_h* out;
    if (cudaMalloc(&pts, NPTS * sizeof(affine_h)) != cudaSuccess) { printf("no room for the points\n"); return 1; }
    cudaMalloc(&out, (size_t)sms * 2 * 2048 * sizeof(bucket_h));
    fill<<<sms * 8, 256>>>((uint32_t*)pts, NPTS * sizeof(affine_h) / 4);
    struct way { const char* name; void (*kernel)(bucket_h*, const affine_h*, uint32_t); int per; };
    const way ways[] = {
        {"regs", madd<REGS, 1>, 1},           {"regs@14w", madd<REGS, 7>, 1},
        {"regs x2", madd<REGS_X2, 1>, 2},     {"random", madd<RANDOM, 1>, 1},
        {"random@14w", madd<RANDOM, 7>, 1},   {"random+1", madd<RANDOM_AHEAD, 1>, 1},
        {"random+1@14w", madd<RANDOM_AHEAD, 7>, 1},
    };
    for (const way& w : ways) {
        cudaFuncAttributes a; cudaFuncGetAttributes(&a, w.kernel);
        int held = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, w.kernel, 64, 0);
        for (int waves : {1, 2}) {
            const int blocks = sms * held * waves;
            cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
            w.kernel<<<blocks, 64>>>(out, pts, 1);
            cudaEventRecord(e0);
            for (int r = 0; r < 3; r++)
                w.kernel<<<blocks, 64>>>(out, pts, 2 + r);
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1);
            const double adds = 3.0 * blocks * 64 * ITERS * w.per;
            printf("%-13s %3d registers, %4zu B local, %2d warps an SM, %d wave(s): %.2f G additions/s, %.1f SM-clocks an addition\n",
                   w.name, a.numRegs, a.localSizeBytes, held * 2, waves, adds / ms / 1e6,
                   (ms * 1e-3) * sms * (clk * 1e3) / adds);
        }
    }
    cudaError_t err = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(err));
    return 0;
}
