// Many multiples of one fixed point, for a Groth16 setup's generators:
// out[k] = scalars[k]·G from a table of signed-digit multiples
// d·2^(window·j)·G, d in 1..=2^(window-1), built on the host
// (stages::setup::FixedBase). One scalar per lane group (G2's field
// elements span two lanes); results made affine on the device, one field
// inversion per lane group.
#include "common.cuh"
#include <ff/bls12-381-fp2.hpp>
#include <ec/xyzz_t.hpp>
#include <algorithm>
#include <cstddef>
#include <stdexcept>

// Mirrors Rust's `cuzk_kernels::FixedBaseArgs`.
struct cuzk_fixed_base_args {
    const void* table;   // affine points: `windows` rows of 2^(window-1)
    const fr_t* scalars; // Montgomery form
    void* out;           // affine points, one per scalar
    void* xyzz;          // scratch: an XYZZ point per scalar
    void* prefix;        // scratch: a field element per scalar
    uint64_t n;
    uint32_t window;
    uint32_t windows;
};
// The layout Rust's repr(C) struct has (checked there too).
static_assert(sizeof(cuzk_fixed_base_args) == 56, "FixedBaseArgs' size");
static_assert(offsetof(cuzk_fixed_base_args, prefix) == 32, "FixedBaseArgs' layout");
static_assert(offsetof(cuzk_fixed_base_args, window) == 48, "FixedBaseArgs' layout");

// Each lane group multiplies its scalars k = first, first + stride, ... and
// then makes its own results affine with one field inversion (Montgomery's
// trick over its ZZZs: prefix products forward, inverses backward), so the
// host receives affine points and normalises nothing. Every lane runs the
// same number of rounds and the same field operations (the G2 field's lane
// shuffles want the pair together); past the end it redoes the last scalar
// and stores nothing. A point at infinity (ZZZ = 0) counts as one in the
// products and comes out as (0, 0), blst's affine infinity.
template<class field_t, class bucket_t, class affine_t>
__launch_bounds__(256) __global__
void fb_mul(typename affine_t::mem_t* out, typename bucket_t::mem_t* xyzz,
            typename field_t::mem_t* prefix, const typename affine_t::mem_t* table,
            const fr_t* scalars, uint64_t n, uint32_t window, uint32_t windows)
{
#ifdef __CUDA_ARCH__
    typedef typename field_t::mem_t field_h;
    typedef typename bucket_t::mem_t bucket_h;
    constexpr uint32_t DEGREE = bucket_t::degree;
    const uint32_t half = 1u << (window - 1), full = 1u << window, mask = full - 1;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x / DEGREE;
    const uint64_t first = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / DEGREE;
    const uint64_t rounds = (n + stride - 1) / stride;
    field_t run = field_t::one();
    #pragma unroll 1
    for (uint64_t r = 0; r < rounds; r++) {
        const uint64_t k = first + r * stride;
        fr_t s = scalars[k < n ? k : n - 1];
        s.from();
        uint32_t words[9];
        for (int i = 0; i < 8; i++)
            words[i] = s[i];
        words[8] = 0;
        bucket_t acc;
        acc.inf();
        uint32_t carry = 0;
        #pragma unroll 1
        for (uint32_t w = 0; w < windows; w++) {
            const uint32_t bit = w * window, word = bit / 32;
            const uint64_t v = ((uint64_t)words[word + 1] << 32 | words[word]) >> (bit % 32);
            const uint32_t raw = ((uint32_t)v & mask) + carry;
            // Above half the digit is raw - 2^window, borrowing from the next window.
            carry = raw > half;
            const uint32_t mag = carry ? full - raw : raw;
            if (mag != 0) {
                affine_t p = table[(size_t)w * half + mag - 1];
                acc.add(p, carry != 0);
            }
        }
        // ZZZ through a local memory form (fields X, Y, ZZZ, ZZ; a G2 lane
        // converts its own half only, so the store below is the point's).
        bucket_h m;
        m = acc;
        field_t zzz = reinterpret_cast<const field_h*>(&m)[2];
        const bool inf = zzz.is_zero();
        field_t factor = field_t::one();
        if (k < n && !inf)
            factor = zzz;
        run *= factor;
        if (k < n) {
            xyzz[k] = acc;
            prefix[k] = run;
        }
    }
    // 1 / (the product of every factor so far), walked back one point a round.
    field_t inv = run.reciprocal();
    #pragma unroll 1
    for (uint64_t r = rounds; r-- > 0;) {
        const uint64_t k = first + r * stride;
        const uint64_t at = k < n ? k : n - 1;
        const field_h* p = reinterpret_cast<const field_h*>(&xyzz[at]);
        field_t X = p[0], Y = p[1], zzz = p[2], zz = p[3];
        field_t before = field_t::one();
        if (r > 0) {
            const uint64_t j = k - stride;
            before = prefix[j < n ? j : n - 1];
        }
        const bool inf = zzz.is_zero();
        field_t zi = inv * before;          // 1/ZZZ
        field_t factor = field_t::one();
        if (k < n && !inf)
            factor = zzz;
        inv *= factor;
        field_t x = zi * zz;                // 1/Z
        x = x^2;
        x *= X;
        field_t y = zi * Y;
        if (k < n) {
            field_h* o = reinterpret_cast<field_h*>(&out[k]);
            if (inf) {
                x.zero();
                y.zero();
            }
            o[0] = x;
            o[1] = y;
        }
    }
#endif
}

template<class field_t, class bucket_t, class affine_t>
static RustError fixed_base_mul(int device, void* stream, const cuzk_fixed_base_args* a)
{
    CUZK_TRY
    if (a->n == 0)
        return RustError{cudaSuccess};
    if (a->window < 2 || a->window > 16 || a->windows != (256 + a->window - 1) / a->window)
        throw std::invalid_argument("fixed-base table: a window of 2 to 16 bits, covering 256 bits");
    CUZK_CHECK(cudaSetDevice(device));
    cudaStream_t s = as_stream(stream);
    int sms = 0;
    CUZK_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const uint64_t lanes = a->n * bucket_t::degree;
    const uint32_t blocks = (uint32_t)std::min<uint64_t>((lanes + 255) / 256, (uint64_t)sms * 8);
    fb_mul<field_t, bucket_t, affine_t><<<blocks, 256, 0, s>>>(
        (typename affine_t::mem_t*)a->out, (typename bucket_t::mem_t*)a->xyzz,
        (typename field_t::mem_t*)a->prefix, (const typename affine_t::mem_t*)a->table,
        a->scalars, a->n, a->window, a->windows);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CATCH
}

extern "C" RustError cuzk_g1_fixed_base_mul(int device, void* stream, const cuzk_fixed_base_args* args)
{   return fixed_base_mul<fp_t, xyzz_t<fp_t>, xyzz_t<fp_t>::affine_t>(device, stream, args);   }

extern "C" RustError cuzk_g2_fixed_base_mul(int device, void* stream, const cuzk_fixed_base_args* args)
{   return fixed_base_mul<fp2_t, xyzz_t<fp2_t>, xyzz_t<fp2_t>::affine_t>(device, stream, args);   }
