// MSMs in G1 and G2 on sppark's Pippenger, in one translation unit (sppark's
// sort kernel may be defined only once per binary). Templates are left to
// implicit instantiation so both groups can share the headers.
#include "common.cuh"
#include <ff/bls12-381-fp2.hpp>
#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

#define SPPARK_DONT_INSTANTIATE_TEMPLATES
#include <msm/pippenger.cuh>

// out[i] = in[idx[i]] for elements of BYTES bytes, copied as 16-byte words:
// element types' register forms may be split across threads (Fp2 is), their
// memory forms are plain bytes.
template<size_t BYTES>
__global__ void gather_words(uint4* out, const uint4* in, const uint32_t* idx, size_t n)
{
    static_assert(BYTES % sizeof(uint4) == 0, "16-byte multiples");
    constexpr size_t W = BYTES / sizeof(uint4);
    for (size_t t = threadIdx.x + (size_t)blockIdx.x * blockDim.x; t < n * W;
         t += (size_t)blockDim.x * gridDim.x)
        out[t] = in[(size_t)idx[t / W] * W + t % W];
}

template<class T>
static void gather(const stream_t& s, T* out, const T* in, const uint32_t* idx, size_t n)
{
    gather_words<sizeof(T)><<<s.sm_count() * 4, 256, 0, s>>>(
        reinterpret_cast<uint4*>(out), reinterpret_cast<const uint4*>(in), idx, n);
    CUDA_OK(cudaGetLastError());
}

namespace g1 {
typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef fr_t scalar_t;
#define CUZK_FN(name) cuzk_g1_##name
#include "msm.cuh"
#undef CUZK_FN
}

namespace g2 {
typedef jacobian_t<fp2_t> point_t;
typedef xyzz_t<fp2_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef fr_t scalar_t;
#define CUZK_FN(name) cuzk_g2_##name
#include "msm.cuh"
#undef CUZK_FN
}
