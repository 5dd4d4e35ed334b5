// Shared declarations of cuzk's kernels: field and curve types from sppark's
// BLS12-381 templates, and the C ABI status every entry point returns.
#ifndef CUZK_COMMON_CUH
#define CUZK_COMMON_CUH

#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <string>

#include <ff/bls12-381.hpp>
#include <ec/affine_t.hpp>
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
// Fused: the inlined addition with two of its products under one reduction
// (add_fused), in G1; G2 adds inlined.
enum cuzk_add_form : uint32_t {
    CUZK_ADD_INLINED = 0, CUZK_ADD_LOOPED = 1, CUZK_ADD_FUSED = 2
};

// The field of an affine point type (sppark's Affine_t does not name it).
template<class affine_t> struct field_of;
template<class F, class H, const H* a4> struct field_of<Affine_t<F, H, a4>> { using type = F; };

#ifdef __CUDA_ARCH__
// acc += p (negated where `neg`): sppark's mixed addition (xyzz_t::add,
// add-2008-s: 8M + 2S) with Y3 = R*(Q - X3) - Y1*PPP computed as one dot
// product, its two products summed before one Montgomery reduction
// (sppark's mont_t::dot_product), instead of two multiplications reduced
// apart: ~144 of the ~2,900 multiply-adds an addition fewer. The rare cases
// (X1 == X2: a doubling or a cancellation) take sppark's add. xyzz_t's and
// Affine_t's fields are private, so the sums are copied member for member
// into structs of the same layout (memcpy: register moves once compiled).
// For a field of degree 1 (G1); G2's multiplies across a pair of lanes and
// adds with sppark's add.
template<class bucket_t, class affine_t>
__device__ __forceinline__ void add_fused(bucket_t& acc, const affine_t& p, bool neg)
{
    using field_t = typename field_of<affine_t>::type;
    if constexpr (field_t::degree != 1) {
        acc.add(p, neg);
    } else {
        struct xyzz { field_t X, Y, ZZZ, ZZ; };   // xyzz_t's members, in order
        struct xy { field_t X, Y; };              // Affine_t's
        static_assert(sizeof(xyzz) == sizeof(bucket_t) && sizeof(xy) == sizeof(affine_t),
                      "sppark's point layouts");
        xyzz a;
        xy q;
        memcpy(&a, &acc, sizeof a);
        memcpy(&q, &p, sizeof q);
        if (q.X.is_zero(q.Y))               // p at infinity
            return;
        if (a.ZZZ.is_zero(a.ZZ)) {          // acc at infinity: acc = ±p
            a.X = q.X;
            a.Y = q.Y;
            a.ZZZ = a.ZZ = field_t::one();
            a.ZZZ.cneg(neg);
            memcpy(&acc, &a, sizeof a);
            return;
        }
        field_t R = q.Y * a.ZZZ;            // S2 = Y2*ZZZ1
        R.cneg(neg);
        R -= a.Y;                           // R = S2 - Y1
        field_t P = q.X * a.ZZ;             // U2 = X2*ZZ1
        P -= a.X;                           // P = U2 - X1
        if (P.is_zero()) {                  // X1 == X2: sppark's doubling or infinity
            acc.add(p, neg);
            return;
        }
        field_t PP = P^2;
        field_t PPP = P * PP;
        a.ZZ *= PP;                         // ZZ3 = ZZ1*PP
        a.ZZZ *= PPP;                       // ZZZ3 = ZZZ1*PPP
        field_t Q = PP * a.X;               // Q = X1*PP
        a.X = R^2;
        a.X -= PPP;
        a.X -= Q;
        a.X -= Q;                           // X3 = R^2 - PPP - 2Q
        Q -= a.X;                           // Q - X3
        a.Y.cneg(true);                     // -Y1
        a.Y = field_t::dot_product(R, Q, a.Y, PPP);   // Y3 = R*(Q - X3) - Y1*PPP
        memcpy(&acc, &a, sizeof a);
    }
}
#endif

// acc += p (negated where `neg`) in the form `ADD` names.
template<cuzk_add_form ADD, class bucket_t, class affine_t>
__device__ __forceinline__ void add_in(bucket_t& acc, const affine_t& p, bool neg = false)
{
    if constexpr (ADD == CUZK_ADD_LOOPED)
        acc.uadd(p, neg);
    else if constexpr (ADD == CUZK_ADD_FUSED)
        add_fused(acc, p, neg);
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
