// Pre-compiled constraints on the device: a = A·z, b = B·z, c = C·z from the
// recorded matrices (CSR, narrow column indices, coefficient codes by class;
// see stages/src/pce/matrix.rs for the encoding), straight into the NTT's
// input buffers, with every row checked, a·b = c.
//
// z arrives in canonical form (prep_msm converted it for the MSMs). Read as
// Montgomery limbs, a canonical value x is the field element x·R⁻¹; the
// evaluation is linear, so each row's sum is (A·z)·R⁻¹, whose limbs are the
// canonical A·z, and one conversion per row (`to()`) gives the Montgomery
// value the NTT takes. No Montgomery copy of z is made.
#include "common.cuh"
#include <cstddef>

// Codes (matrix.rs): 0 = +1, 1 = −1, 1 + k = +2^k and 256 + k = −2^k for
// k in 1..=255, TABLE + i = table[i].
#define PCE_MINUS_ONE 1u
#define PCE_NEG_POW 256u
#define PCE_TABLE 512u
// Exponent gaps up to this are doublings; longer ones one multiplication.
#define PCE_DOUBLINGS 6u

struct pce_matrix {
    const uint32_t* row_ptr;
    const uint32_t* cols;
    const void* codes;   // uint16_t, or uint32_t when `wide`
};

// x·2^k, by doublings or, for a long gap, by the table of powers of two.
__device__ __forceinline__ void pce_shift(fr_t& x, uint32_t k, const fr_t* pow2)
{
    if (k <= PCE_DOUBLINGS)
        x <<= k;
    else
        x *= pow2[k];
}

// One row's Σ coeff·z[col]: ±1 terms first, then powers of two by falling
// exponent (Horner), then table coefficients, as the recording orders them.
template<bool WIDE>
__device__ fr_t pce_row(const pce_matrix& m, uint32_t r, const fr_t* z,
                        const fr_t* table, const fr_t* pow2)
{
    fr_t acc, horner;
    acc.zero();
    horner.zero();
    uint32_t exp = 0;
    const uint32_t end = m.row_ptr[r + 1];
    for (uint32_t t = m.row_ptr[r]; t < end; t++) {
        const fr_t v = z[m.cols[t]];
        const uint32_t code = WIDE ? ((const uint32_t*)m.codes)[t]
                                   : (uint32_t)((const uint16_t*)m.codes)[t];
        if (code == 0) {
            acc += v;
        } else if (code == PCE_MINUS_ONE) {
            acc -= v;
        } else if (code < PCE_TABLE) {
            const bool neg = code > PCE_NEG_POW;
            const uint32_t k = neg ? code - PCE_NEG_POW : code - 1;
            pce_shift(horner, exp - min(k, exp), pow2);
            exp = k;
            if (neg)
                horner -= v;
            else
                horner += v;
        } else {
            acc += v * table[code - PCE_TABLE];
        }
    }
    pce_shift(horner, exp, pow2);
    return acc + horner;
}

// Rows [0, constraints) from the matrices; then one row per public input
// (a = input, b = c = 0, as bellperson's prover adds them); zero up to n.
template<bool WIDE>
__global__ void pce_eval(pce_matrix ma, pce_matrix mb, pce_matrix mc,
                         const fr_t* z, const fr_t* table, const fr_t* pow2,
                         uint32_t constraints, uint32_t n_inputs, size_t n,
                         fr_t* a, fr_t* b, fr_t* c, uint32_t* first_bad)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x) {
        fr_t va, vb, vc;
        if (i < constraints) {
            const uint32_t r = (uint32_t)i;
            va = pce_row<WIDE>(ma, r, z, table, pow2);
            vb = pce_row<WIDE>(mb, r, z, table, pow2);
            vc = pce_row<WIDE>(mc, r, z, table, pow2);
            va.to();
            vb.to();
            vc.to();
            if (!(va * vb - vc).is_zero())
                atomicMin(first_bad, r);
        } else if (i < (size_t)constraints + n_inputs) {
            va = z[i - constraints];
            va.to();
            vb.zero();
            vc.zero();
        } else {
            va.zero();
            vb.zero();
            vc.zero();
        }
        a[i] = va;
        b[i] = vb;
        c[i] = vc;
    }
}

// Mirrors Rust's `cuzk_kernels::PceEvalArgs`.
struct cuzk_pce_eval_args {
    pce_matrix matrices[3];
    uint32_t wide;          // codes are uint32_t, else uint16_t
    uint32_t constraints;
    uint32_t n_inputs;
    uint64_t n;
    const fr_t* table;
    const fr_t* pow2;
    const fr_t* z;          // canonical
    fr_t* a;
    fr_t* b;
    fr_t* c;
};
// The layout Rust's repr(C) struct has (checked there too).
static_assert(sizeof(cuzk_pce_eval_args) == 144, "PceEvalArgs' size");
static_assert(offsetof(cuzk_pce_eval_args, wide) == 72, "PceEvalArgs' layout");
static_assert(offsetof(cuzk_pce_eval_args, n) == 88, "PceEvalArgs' layout");
static_assert(offsetof(cuzk_pce_eval_args, c) == 136, "PceEvalArgs' layout");

extern "C" {

// a, b, c (n = the domain's size) on the caller's stream from canonical z;
// returns once they are computed, with the first constraint a·b ≠ c in
// `first_bad` (UINT32_MAX if every one holds).
RustError cuzk_pce_eval(int device, void* stream, const cuzk_pce_eval_args* a, uint32_t* first_bad)
{
    CUZK_TRY
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    const pce_matrix* m = a->matrices;
    const fr_t *z = a->z, *table = a->table, *pow2 = a->pow2;
    const uint32_t constraints = a->constraints, n_inputs = a->n_inputs;
    const size_t n = a->n;
    stream_buf<uint32_t> bad(1, s);
    CUZK_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(uint32_t), s));
    const int threads = 256;
    const int blocks = s.sm_count() * 8;
    if (a->wide)
        pce_eval<true><<<blocks, threads, 0, s>>>(m[0], m[1], m[2], z, table, pow2,
                                                  constraints, n_inputs, n, a->a, a->b, a->c, bad);
    else
        pce_eval<false><<<blocks, threads, 0, s>>>(m[0], m[1], m[2], z, table, pow2,
                                                   constraints, n_inputs, n, a->a, a->b, a->c, bad);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CHECK(cudaMemcpyAsync(first_bad, bad, sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    CUZK_CHECK(cudaStreamSynchronize(s));
    CUZK_CATCH
}
}
