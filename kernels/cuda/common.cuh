// Shared declarations of cuzk's kernels: field and curve types from sppark's
// BLS12-381 templates, and the C ABI status every entry point returns.
#ifndef CUZK_COMMON_CUH
#define CUZK_COMMON_CUH

#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <string>

#include <ff/bls12-381.hpp>
#include <util/exception.cuh>
#include <util/rusterror.h>
#include <util/gpu_t.cuh>

// Entry points return RustError by value: code 0 is success; otherwise the
// message (strdup'ed, freed by Rust) says what failed.
#define CUZK_TRY try {
#define CUZK_CATCH                                                           \
    } catch (const cuda_error& e) {                                          \
        return RustError{e.code(), e.what()};                                \
    } catch (const std::exception& e) {                                      \
        return RustError{-1, e.what()};                                      \
    }                                                                        \
    return RustError{cudaSuccess};

#define CUZK_CHECK(expr) CUDA_OK(expr)

// A caller's stream (a device lease's): a sppark stream_t of our own, made by
// cuzk_stream_create, so sppark's NTT runs on it directly.
static inline stream_t& as_stream_t(void* s) { return *reinterpret_cast<stream_t*>(s); }
static inline cudaStream_t as_stream(void* s) { return (cudaStream_t)as_stream_t(s); }

// The block size a tuned kernel runs at: the one of 64, 128 and 256 threads
// (the sizes its launches instantiate) at or below `asked`, 64 below that.
static inline uint32_t block_size(uint32_t asked)
{   return asked >= 256 ? 256 : asked >= 128 ? 128 : 64;   }

// sppark's msm_t runs on the device's shared streams (gpu_t's zero and
// flip-flop streams), not on the caller's: order them after the work already
// on the caller's stream. This sharing is why graphs declare a per-device
// lock around device work that runs MSMs.
static inline void shared_streams_after(void* ours, const gpu_t& gpu)
{
    event_t ev;
    ev.record(as_stream(ours));
    for (size_t i = 0; i < gpu_t::FLIP_FLOP; i++)
        ev.wait(gpu[i]);
    ev.wait(gpu);
}

// Scratch device memory ordered on a stream (no device-wide sync to free it).
template<class T> class stream_buf {
    T* ptr = nullptr;
    cudaStream_t s;
public:
    stream_buf(size_t n, cudaStream_t stream) : s(stream)
    {   if (n) CUDA_OK(cudaMallocAsync(&ptr, n * sizeof(T), s));   }
    ~stream_buf()
    {   if (ptr) (void)cudaFreeAsync(ptr, s);   }
    stream_buf(const stream_buf&) = delete;
    stream_buf& operator=(const stream_buf&) = delete;
    inline operator T*() const { return ptr; }
};

// How the scalars an MSM reads are encoded. Mirrors Rust's
// `cuzk_kernels::ScalarForm` (a u32 across the boundary).
enum cuzk_scalar_form : uint32_t { CUZK_CANONICAL = 0, CUZK_MONTGOMERY = 1 };

// How an accumulation kernel adds a point into an XYZZ sum. Mirrors Rust's
// `cuzk_kernels::AddForm` (a u32 across the boundary). Inlined: sppark's
// `add`, straight-line (level 0's G1 kernel is then 7,672 sm_90 instructions,
// 123 KB: the mixed addition's ~2,900 multiply-adds, then its rarely taken
// doubling branch's ~1,800). Looped: sppark's `uadd`,
// one multiplication site run in a loop, which the instruction cache holds;
// measured 3-7% slower (H100, level 0 and the chain), kept for timing.
enum cuzk_add_form : uint32_t { CUZK_ADD_INLINED = 0, CUZK_ADD_LOOPED = 1 };

// acc += p (negated where `neg`) in the form `ADD` names.
template<cuzk_add_form ADD, class bucket_t, class affine_t>
__device__ __forceinline__ void add_in(bucket_t& acc, const affine_t& p, bool neg = false)
{
    if constexpr (ADD == CUZK_ADD_LOOPED)
        acc.uadd(p, neg);
    else
        acc.add(p, neg);
}

// acc += q, both XYZZ sums, in the form `ADD` names.
template<cuzk_add_form ADD, class bucket_t>
__device__ __forceinline__ void add_sum(bucket_t& acc, const bucket_t& q)
{
    if constexpr (ADD == CUZK_ADD_LOOPED)
        acc.uadd(q);
    else
        acc.add(q);
}

#endif
