// prep_msm on the device: the assignment to canonical form in place, and one
// MSM query's index lists from it (stages/src/prep.rs does the same on the
// host). A query's candidates are its selected inputs, then its selected aux
// variables, in order; candidate k's base index is k. Each is a zero (skipped),
// a one (its base goes to `ones`, for batch addition) or significant (base and
// variable to `sig_base`, `sig_scalar`, for the tail MSM). Positions come from
// one inclusive scan over the candidates' three counters, so the lists are in
// the host's order, and the totals come back to the host.
#include "common.cuh"
#include <cub/device/device_scan.cuh>
#include <stdexcept>
#include <cstddef>

// Counters of one scan: selected candidates, ones, significant.
struct prep_counts {
    uint32_t sel, ones, sig;
};

struct prep_sum {
    __device__ __forceinline__ prep_counts operator()(const prep_counts& a,
                                                      const prep_counts& b) const
    {   return prep_counts{a.sel + b.sel, a.ones + b.ones, a.sig + b.sig};   }
};

// How a part (inputs or aux) of a query selects its variables.
enum prep_mode : uint32_t { PREP_NONE = 0, PREP_ALL = 1, PREP_BITMAP = 2 };

struct prep_query {
    const fr_t* z;          // canonical
    uint32_t n_inputs, n;   // n = inputs + aux
    uint32_t input_mode, aux_mode;
    const uint64_t* input_bits;
    const uint64_t* aux_bits;
};

__device__ __forceinline__ bool prep_bit(const uint64_t* bits, uint32_t i)
{   return (bits[i >> 6] >> (i & 63)) & 1;   }

__device__ __forceinline__ bool prep_selected(const prep_query& q, uint32_t v)
{
    bool input = v < q.n_inputs;
    uint32_t mode = input ? q.input_mode : q.aux_mode;
    if (mode == PREP_NONE)
        return false;
    if (mode == PREP_ALL)
        return true;
    return input ? prep_bit(q.input_bits, v) : prep_bit(q.aux_bits, v - q.n_inputs);
}

// 0 = zero, 1 = one, 2 = significant, from the canonical limbs.
__device__ __forceinline__ uint32_t prep_class(const fr_t* z, uint32_t v)
{
    const uint64_t* l = reinterpret_cast<const uint64_t*>(&z[v]);
    uint64_t high = l[1] | l[2] | l[3];
    if (high == 0 && l[0] == 0)
        return 0;
    if (high == 0 && l[0] == 1)
        return 1;
    return 2;
}

struct prep_flags {
    prep_query q;
    __device__ __forceinline__ prep_counts operator()(uint32_t v) const
    {
        if (!prep_selected(q, v))
            return prep_counts{0, 0, 0};
        uint32_t c = prep_class(q.z, v);
        return prep_counts{1, c == 1, c == 2};
    }
};

__global__ void prep_flag(prep_query q, prep_counts* out)
{
    prep_flags f{q};
    for (uint32_t v = threadIdx.x + blockIdx.x * blockDim.x; v < q.n;
         v += blockDim.x * gridDim.x)
        out[v] = f(v);
}

// Scatters each selected candidate to its list, from the inclusive scan.
__global__ void prep_scatter(prep_query q, const prep_counts* incl,
                             uint32_t* ones, uint32_t* sig_base, uint32_t* sig_scalar)
{
    for (uint32_t v = threadIdx.x + blockIdx.x * blockDim.x; v < q.n;
         v += blockDim.x * gridDim.x) {
        if (!prep_selected(q, v))
            continue;
        prep_counts at = incl[v];
        uint32_t base = at.sel - 1;
        switch (prep_class(q.z, v)) {
        case 1:
            ones[at.ones - 1] = base;
            break;
        case 2:
            sig_base[at.sig - 1] = base;
            sig_scalar[at.sig - 1] = v;
            break;
        default:
            break;
        }
    }
}

__global__ void from_montgomery(fr_t* z, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x) {
        fr_t x = z[i];
        x.from();
        z[i] = x;
    }
}

extern "C" {

// Montgomery to canonical form in place, on the caller's stream.
RustError cuzk_to_canonical(int device, void* stream, fr_t* z, size_t n)
{
    CUZK_TRY
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    if (n)
        from_montgomery<<<s.sm_count() * 4, 256, 0, s>>>(z, n);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CATCH
}

// Mirrors Rust's `cuzk_kernels::PrepQueryArgs`.
struct cuzk_prep_query_args {
    const fr_t* z;          // canonical
    uint32_t n_inputs, n;   // n = inputs + aux
    uint32_t input_mode, aux_mode;
    const uint64_t* input_bits;
    const uint64_t* aux_bits;
    uint32_t scatter;
    uint32_t* ones;
    uint32_t* sig_base;
    uint32_t* sig_scalar;
    void* scratch;
    uint64_t scratch_bytes;
};
// The layout Rust's repr(C) struct has (checked there too).
static_assert(sizeof(cuzk_prep_query_args) == 88, "PrepQueryArgs' size");
static_assert(offsetof(cuzk_prep_query_args, input_bits) == 24, "PrepQueryArgs' layout");
static_assert(offsetof(cuzk_prep_query_args, ones) == 48, "PrepQueryArgs' layout");
static_assert(offsetof(cuzk_prep_query_args, scratch_bytes) == 80, "PrepQueryArgs' layout");

// One query's lists (written only if `scatter`), on the caller's stream;
// returns, synchronised, with the totals: counts[0] selected, [1] ones,
// [2] significant. The scan's counters (24 bytes a variable) go into
// `scratch` when it holds them (a buffer the partition fills later, so the
// device needs no memory beyond the partition's own), else are allocated.
RustError cuzk_prep_query(int device, void* stream, const cuzk_prep_query_args* a,
                          uint32_t* counts)
{
    CUZK_TRY
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    counts[0] = counts[1] = counts[2] = 0;
    const uint32_t n = a->n;
    if (n == 0)
        return RustError{cudaSuccess};
    if (a->input_mode > PREP_BITMAP || a->aux_mode > PREP_BITMAP)
        throw std::invalid_argument("prep_query: a selection mode of 0, 1 or 2");
    prep_query q{a->z, a->n_inputs, n, a->input_mode, a->aux_mode, a->input_bits, a->aux_bits};
    void* scratch = a->scratch;
    const size_t scratch_bytes = a->scratch_bytes;
    size_t temp_bytes = 0;
    CUZK_CHECK(cub::DeviceScan::InclusiveScan(nullptr, temp_bytes, (const prep_counts*)nullptr,
                                              (prep_counts*)nullptr, prep_sum{}, (int)n, s));
    const size_t counters = (n * sizeof(prep_counts) + 255) & ~size_t(255);
    const size_t need = 2 * counters + temp_bytes;
    const bool carve = scratch != nullptr && scratch_bytes >= need;
    stream_buf<uint8_t> own(carve ? 0 : need, s);
    uint8_t* base = carve ? (uint8_t*)scratch : (uint8_t*)own;
    prep_counts* flags = (prep_counts*)base;
    prep_counts* incl = (prep_counts*)(base + counters);
    uint8_t* temp = base + 2 * counters;
    const int blocks = s.sm_count() * 4;
    prep_flag<<<blocks, 256, 0, s>>>(q, flags);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CHECK(cub::DeviceScan::InclusiveScan(temp, temp_bytes, (const prep_counts*)flags,
                                              incl, prep_sum{}, (int)n, s));
    if (a->scatter) {
        prep_scatter<<<blocks, 256, 0, s>>>(q, incl, a->ones, a->sig_base, a->sig_scalar);
        CUZK_CHECK(cudaGetLastError());
    }
    prep_counts total;
    CUZK_CHECK(cudaMemcpyAsync(&total, (prep_counts*)incl + (n - 1), sizeof(total),
                               cudaMemcpyDeviceToHost, s));
    CUZK_CHECK(cudaStreamSynchronize(s));
    counts[0] = total.sel;
    counts[1] = total.ones;
    counts[2] = total.sig;
    CUZK_CATCH
}
}
