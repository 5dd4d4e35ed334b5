// Integer multiply throughput on one GPU (a research probe for #27, not part
// of the build): thread-operations a clock an SM for mad.lo, mad.hi, the
// carry-chained lo/hi pairs sppark's multiplication uses, and mad.wide
// (32x32 -> 64, accumulated); then sppark's BLS12-381 field multiplication
// and squaring, a second each. ptxas hoists mad.wide's product out of its
// four repeats (same operands; seen in the SASS), so that line is void.
// Build (from the repository root, CUDA on PATH):
//   nvcc -O3 -gencode arch=compute_90,code=sm_90 -DFEATURE_BLS12_381 \
//     -I<sppark>/sppark -I<blst>/blst/src -I<blst>/blst/bindings \
//     -o .carry/imad_rate scripts/imad_rate.cu
// and run .carry/imad_rate on the GPU machine.
#include <cstdio>
#include <cstdint>
#include <ff/bls12-381.hpp>

constexpr int CHAINS = 8, ITERS = 4096;

template<int KIND>
__global__ void rate(uint32_t* out, long long* cycles, uint32_t seed)
{
    uint32_t a[CHAINS], b[CHAINS];
    uint64_t w[CHAINS];
    uint32_t h[CHAINS];
    for (int c = 0; c < CHAINS; c++) {
        a[c] = seed + threadIdx.x * 7 + c;
        b[c] = seed ^ (c * 0x9e3779b9u);
        w[c] = a[c];
        h[c] = b[c] + 1;
    }
    long long t0 = clock64();
    #pragma unroll 1
    for (int i = 0; i < ITERS; i++) {
        #pragma unroll
        for (int c = 0; c < CHAINS; c++) {
            if (KIND == 0)       // mad.lo: 4 a chain
                asm volatile("mad.lo.u32 %0, %0, %1, %0; mad.lo.u32 %0, %0, %1, %0;"
                             "mad.lo.u32 %0, %0, %1, %0; mad.lo.u32 %0, %0, %1, %0;" : "+r"(a[c]) : "r"(b[c]));
            else if (KIND == 1)  // mad.hi
                asm volatile("mad.hi.u32 %0, %0, %1, %0; mad.hi.u32 %0, %0, %1, %0;"
                             "mad.hi.u32 %0, %0, %1, %0; mad.hi.u32 %0, %0, %1, %0;" : "+r"(a[c]) : "r"(b[c]));
            else if (KIND == 2)  // carry-chained lo/hi pairs, as sppark's rows
                asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                             "madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.u32 %1, %2, %3, %1;" : "+r"(a[c]), "+r"(h[c]) : "r"(b[c]), "r"(a[c ^ 1]));
            else                 // mad.wide: 32x32 -> 64 accumulated
                asm volatile("mad.wide.u32 %0, %1, %2, %0; mad.wide.u32 %0, %1, %2, %0;"
                             "mad.wide.u32 %0, %1, %2, %0; mad.wide.u32 %0, %1, %2, %0;" : "+l"(w[c]) : "r"(a[c]), "r"(b[c]));
        }
    }
    long long t1 = clock64();
    uint32_t x = 0;
    for (int c = 0; c < CHAINS; c++) x ^= a[c] ^ b[c] ^ h[c] ^ (uint32_t)w[c] ^ (uint32_t)(w[c] >> 32);
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template<int SQR>
__global__ void field(fp_t* out, long long* cycles, uint32_t seed)
{
    fp_t x[4];
    for (int c = 0; c < 4; c++) { x[c] = fp_t::one(); for (int k = 0; k < 3; k++) x[c] += x[c]; }
    fp_t y = x[0] + x[1];
    long long t0 = clock64();
    #pragma unroll 1
    for (int i = 0; i < 256; i++) {
        #pragma unroll
        for (int c = 0; c < 4; c++) x[c] = SQR ? (x[c]^2) : x[c] * y;
    }
    long long t1 = clock64();
    out[blockIdx.x * blockDim.x + threadIdx.x] = x[0] + x[1] + x[2] + x[3];
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

int main()
{
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0); int clk = 0; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    int sms = p.multiProcessorCount;
    printf("%s: %d SMs\n", p.name, sms);
    uint32_t* out; long long* cyc; fp_t* fo;
    cudaMalloc(&out, 64u << 20); cudaMalloc(&cyc, 1 << 20); cudaMalloc(&fo, 256u << 20);
    const char* names[4] = {"mad.lo.u32", "mad.hi.u32", "mad.lo.cc/madc.hi.cc chain", "mad.wide.u32"};
    for (int threads : {256, 512, 1024}) {
        int blocks = sms * (2048 / threads);
        for (int k = 0; k < 4; k++) {
            cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
            auto go = [&] {
                if (k == 0) rate<0><<<blocks, threads>>>(out, cyc, 1);
                if (k == 1) rate<1><<<blocks, threads>>>(out, cyc, 1);
                if (k == 2) rate<2><<<blocks, threads>>>(out, cyc, 1);
                if (k == 3) rate<3><<<blocks, threads>>>(out, cyc, 1);
            };
            go(); cudaDeviceSynchronize();
            cudaEventRecord(e0); go(); cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1);
            double ops = (double)blocks * threads * ITERS * CHAINS * 4;
            printf("%-28s threads %4d: %.3f ms, %.2f T thread-ops/s, %.1f ops a clock an SM at %.0f MHz\n",
                   names[k], threads, ms, ops / ms / 1e9, ops / (ms * 1e-3) / sms / (clk * 1e3), clk / 1e3);
        }
    }
    for (int sqr = 0; sqr < 2; sqr++) for (int threads : {256, 512}) {
        int blocks = sms * 8;
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        auto go = [&] { if (sqr) field<1><<<blocks, threads>>>(fo, cyc, 1); else field<0><<<blocks, threads>>>(fo, cyc, 1); };
        go(); cudaDeviceSynchronize();
        cudaEventRecord(e0); go(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        double ops = (double)blocks * threads * 256 * 4;
        printf("fp_t %s threads %d: %.3f ms, %.1f G/s\n", sqr ? "sqr" : "mul", threads, ms, ops / ms / 1e6);
    }
    cudaError_t err = cudaGetLastError();
    printf("status: %s\n", cudaGetErrorString(err));
    return 0;
}
