// Fixed-base MSMs in G1 and G2 over tables of precomputed multiples of the
// SRS bases: cuzk's own Pippenger (fixed_msm.cuh), on sppark's field and
// curve arithmetic. Everything runs on the caller's stream.
#include "common.cuh"
#include <ff/bls12-381-fp2.hpp>
#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>
#include <cub/device/device_radix_sort.cuh>
#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <vector>

// A table of one query's bases (mirrors Rust's `ops::TableRef`): `base` are
// the `ntab` points resident with the SRS; `extra` holds copies 1..copies-1,
// copy t (at (t-1)*ntab) being 2^(window*t) times the bases.
struct cuzk_msm_table {
    const void* base;
    const void* extra;
    uint64_t ntab;
    uint32_t window;
    uint32_t copies;
};

// Mirrors Rust's `cuzk_kernels::MsmTuning`: the launch shape, chosen there.
struct cuzk_msm_tuning {
    uint32_t threads_per_sm; // level-0 accumulation threads per SM
    uint32_t edge_seg;       // slots per segment above level 0
    uint32_t reduce_per_sm;  // bucket-reduction threads per SM (at most)
    uint32_t block;          // threads per block: level 0's 64 or 128, the ones' sums' 64, 128 or 256
    uint32_t ahead;          // level 0 prefetches the point this many entries ahead (0: none)
    cuzk_add_form add;       // level 0's and the ones' additions: inlined, looped or fused
    bool pairs;              // level 0 in affine pairs (measured slower)
    bool profile;            // each phase's device time to stderr
    bool runs_added;         // runs added into their buckets in place (the earlier way)
    bool chunk_terms;        // chunks of terms over every window, never of windows
    bool ones_sppark;        // the ones' sums on sppark's batch addition (Rust reads it)
};

// Mirrors Rust's `cuzk_kernels::FixedMsmArgs`: sum(bases[i_k] * scalars[j_k])
// for k < n over `table`, i_k = base_idx[k] (or base_off + k when null), j_k
// = scalar_idx[k] (or k); `max_entries` bounds the pairs sorted at once (0:
// 2^28).
struct cuzk_fixed_msm_args {
    cuzk_msm_table table;
    uint64_t base_off;
    const uint32_t* base_idx;
    const fr_t* scalars;
    const uint32_t* scalar_idx;
    uint64_t n;
    uint64_t max_entries;
    cuzk_scalar_form form;
    cuzk_msm_tuning tuning;
};
static_assert(sizeof(cuzk_msm_tuning) == 32, "MsmTuning's size");
static_assert(offsetof(cuzk_msm_tuning, ahead) == 16, "MsmTuning's layout");
static_assert(offsetof(cuzk_msm_tuning, add) == 20, "MsmTuning's layout");
static_assert(sizeof(cuzk_fixed_msm_args) == 120, "FixedMsmArgs' size");
static_assert(offsetof(cuzk_fixed_msm_args, form) == 80, "FixedMsmArgs' layout");
static_assert(offsetof(cuzk_fixed_msm_args, tuning) == 84, "FixedMsmArgs' layout");

// With tuning.profile, the device time of each phase of a fixed-base MSM
// (CUDA events on its stream), summed over chunks and printed to stderr.
class phase_clock {
    cudaStream_t s;
    bool on;
    std::vector<std::pair<const char*, cudaEvent_t>> marks;
    int regs = -1, warps = 0;
    size_t local = 0;
public:
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    phase_clock(cudaStream_t stream, bool profile) : s(stream), on(profile)
    {   mark("start");   }
    void mark(const char* phase)
    {
        if (!on)
            return;
        cudaEvent_t e;
        CUDA_OK(cudaEventCreate(&e));
        CUDA_OK(cudaEventRecord(e, s));
        marks.emplace_back(phase, e);
    }
    // Level 0's registers, local memory a thread and warps resident an SM,
    // printed with the phases: ptxas' register choice for it has swung
    // between 140 and 210 with unrelated edits (14 warps or 8), so every
    // timing says which it ran at.
    void level0(const void* kernel, int blocks, uint32_t threads)
    {
        cudaFuncAttributes attr;
        if (on && cudaFuncGetAttributes(&attr, kernel) == cudaSuccess) {
            regs = attr.numRegs;
            local = attr.localSizeBytes;
            warps = blocks * (int)threads / 32;
        }
    }
    // After the stream is synchronised.
    void print(size_t n)
    {
        if (!on)
            return;
        std::vector<std::pair<const char*, float>> sums;
        for (size_t i = 1; i < marks.size(); i++) {
            float ms = 0;
            cudaEventElapsedTime(&ms, marks[i - 1].second, marks[i].second);
            auto it = std::find_if(sums.begin(), sums.end(),
                                   [&](auto& p) { return !strcmp(p.first, marks[i].first); });
            if (it == sums.end())
                sums.emplace_back(marks[i].first, ms);
            else
                it->second += ms;
        }
        fprintf(stderr, "fixed msm n=%zu:", n);
        for (auto& p : sums)
            fprintf(stderr, " %s %.2f ms", p.first, p.second);
        fprintf(stderr, " | wall %.2f ms", std::chrono::duration<double, std::milli>(
                                               std::chrono::steady_clock::now() - t0).count());
        if (regs >= 0)
            fprintf(stderr, " | level 0: %d registers, %zu bytes local, %d warps an SM", regs, local,
                    warps);
        fprintf(stderr, "\n");
    }
    ~phase_clock()
    {   for (auto& m : marks) cudaEventDestroy(m.second);   }
};

// Windows of `c` bits covering 256 bits: a scalar below 2^255 then never
// carries out of its top signed digit.
static inline uint32_t windows_of(uint32_t c) { return (256 + c - 1) / c; }

// Signed digits of every scalar in windows [w0, w1), one (bucket key, table
// entry) pair per window: key g*2^(c-1) + |d|-1 for window w = g*copies + t,
// entry t*ntab + point with the sign in bit 31; zero digits get `sentinel`,
// the largest key, so they sort last. `nonzero` counts the others. The
// windows below w0 are walked for their carries, not stored.
__launch_bounds__(256) __global__
void fm_digits(uint32_t* keys, uint32_t* vals, uint32_t* nonzero, const fr_t* scalars,
               const uint32_t* scalar_idx, const uint32_t* base_idx, uint64_t base_off,
               uint32_t n, bool mont, uint32_t c, uint32_t w0, uint32_t w1, uint32_t copies,
               uint64_t ntab, uint32_t sentinel)
{
#ifdef __CUDA_ARCH__
    const uint32_t half = 1u << (c - 1), full = 1u << c, mask = full - 1;
    uint32_t count = 0;
    for (uint32_t k = threadIdx.x + blockIdx.x * blockDim.x; k < n;
         k += blockDim.x * gridDim.x) {
        fr_t s = scalars[scalar_idx ? scalar_idx[k] : k];
        if (mont)
            s.from();
        uint32_t words[9];
        for (int i = 0; i < 8; i++)
            words[i] = s[i];
        words[8] = 0;
        const uint64_t point = base_idx ? base_idx[k] : base_off + k;
        uint32_t carry = 0;
        for (uint32_t w = 0; w < w1; w++) {
            const uint32_t bit = w * c, word = bit / 32;
            const uint64_t v = ((uint64_t)words[word + 1] << 32 | words[word]) >> (bit % 32);
            const uint32_t raw = ((uint32_t)v & mask) + carry;
            // Above half the digit is raw - 2^c, borrowing from the next window.
            carry = raw > half;
            if (w < w0)
                continue;
            const uint32_t mag = carry ? full - raw : raw;
            uint32_t key = sentinel, val = 0;
            if (mag != 0) {
                key = (w / copies) * half + mag - 1;
                val = (uint32_t)((w % copies) * ntab + point) | (carry << 31);
                count++;
            }
            keys[(size_t)(w - w0) * n + k] = key;
            vals[(size_t)(w - w0) * n + k] = val;
        }
    }
#if __CUDA_ARCH__ >= 800
    count = __reduce_add_sync(0xffffffff, count);
#else
    // Turing has no warp-reduce instruction.
    for (int d = 16; d > 0; d /= 2)
        count += __shfl_xor_sync(0xffffffff, count, d);
#endif
    if ((threadIdx.x & 31) == 0 && count)
        atomicAdd(nonzero, count);
#endif
}

namespace fixed_g1 {
typedef fp_t field_t;
typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
#define CUZK_FN(name) cuzk_g1_##name
#include "fixed_msm.cuh"
#undef CUZK_FN
}

namespace fixed_g2 {
typedef fp2_t field_t;
typedef jacobian_t<fp2_t> point_t;
typedef xyzz_t<fp2_t> bucket_t;
typedef bucket_t::affine_t affine_t;
#define CUZK_FN(name) cuzk_g2_##name
#include "fixed_msm.cuh"
#undef CUZK_FN
}
