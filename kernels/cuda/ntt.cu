// The Groth16 quotient on the device, with sppark's NTT:
//   a, b, c (evaluations over the domain, natural order)
//   -> inverse NTT to coefficients (bit-reversed)
//   -> forward coset NTT to evaluations on g·<ω> (natural)
//   -> a := (a·b − c) · 1/Z(g)   (Z is constant on the coset)
//   -> inverse coset NTT: H's coefficients, natural order, left in a.
// Everything stays in device memory; the H MSM reads it from there.
#include "common.cuh"
#include <ntt/ntt.cuh>
#include <stdexcept>

__global__ void quotient_pointwise(fr_t* a, const fr_t* b, const fr_t* c,
                                   fr_t z_inv, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x) {
        fr_t x = a[i];
        x *= b[i];
        x -= c[i];
        a[i] = x * z_inv;
    }
}

// What `pointwise` does: a := a·b, or a := (a − b)·z_inv.
enum cuzk_pointwise_op : uint32_t { CUZK_POINTWISE_MUL = 0, CUZK_POINTWISE_SUB_SCALE = 1 };

__global__ void pointwise(fr_t* a, const fr_t* b, uint32_t op, fr_t z_inv, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x) {
        fr_t x = a[i];
        if (op == CUZK_POINTWISE_MUL) {
            x *= b[i];
        } else {
            x -= b[i];
            x *= z_inv;
        }
        a[i] = x;
    }
}

class Quotient : public NTT {
public:
    static void run(stream_t& stream, fr_t* a, fr_t* b, fr_t* c,
                    uint32_t lg, const fr_t& z_inv)
    {
        for (fr_t* x : {a, b, c}) {
            NTT_internal(x, lg, InputOutputOrder::NR, Direction::inverse,
                         Type::standard, stream);
            NTT_internal(x, lg, InputOutputOrder::RN, Direction::forward,
                         Type::coset, stream);
        }
        size_t n = (size_t)1 << lg;
        quotient_pointwise<<<stream.sm_count() * 4, 256, 0, stream>>>(a, b, c, z_inv, n);
        CUDA_OK(cudaGetLastError());
        NTT_internal(a, lg, InputOutputOrder::NN, Direction::inverse,
                     Type::coset, stream);
    }

    // The same quotient through two buffers (cards too small for three):
    // each of a, b, c to the coset in turn, combined as it arrives.
    static void to_coset(stream_t& stream, fr_t* x, uint32_t lg)
    {
        NTT_internal(x, lg, InputOutputOrder::NR, Direction::inverse,
                     Type::standard, stream);
        NTT_internal(x, lg, InputOutputOrder::RN, Direction::forward,
                     Type::coset, stream);
    }

    static void from_coset(stream_t& stream, fr_t* x, uint32_t lg)
    {
        NTT_internal(x, lg, InputOutputOrder::NN, Direction::inverse,
                     Type::coset, stream);
    }

    static void plain(stream_t& stream, fr_t* x, uint32_t lg, bool inverse, bool coset)
    {
        NTT_internal(x, lg, InputOutputOrder::NN,
                     inverse ? Direction::inverse : Direction::forward,
                     coset ? Type::coset : Type::standard, stream);
    }
};

extern "C" {

// On the caller's stream; returns once the work is queued.
RustError cuzk_quotient(int device, void* stream, fr_t* d_a, fr_t* d_b, fr_t* d_c,
                        uint32_t lg, const fr_t* z_inv)
{
    CUZK_TRY
    select_gpu(device).select();
    Quotient::run(as_stream_t(stream), d_a, d_b, d_c, lg, *z_inv);
    CUZK_CATCH
}

// Evaluations over the domain to evaluations on the coset, in place (natural
// order); queued on the caller's stream.
RustError cuzk_to_coset(int device, void* stream, fr_t* d_x, uint32_t lg)
{
    CUZK_TRY
    select_gpu(device).select();
    Quotient::to_coset(as_stream_t(stream), d_x, lg);
    CUZK_CATCH
}

// Coset evaluations to coefficients, in place (natural order); queued.
RustError cuzk_from_coset(int device, void* stream, fr_t* d_x, uint32_t lg)
{
    CUZK_TRY
    select_gpu(device).select();
    Quotient::from_coset(as_stream_t(stream), d_x, lg);
    CUZK_CATCH
}

// a := a·b or a := (a − b)·z_inv over n elements (`op`, cuzk_pointwise_op); queued.
RustError cuzk_pointwise(int device, void* stream, fr_t* d_a, const fr_t* d_b, uint32_t op,
                         const fr_t* z_inv, size_t n)
{
    CUZK_TRY
    if (op > CUZK_POINTWISE_SUB_SCALE)
        throw std::invalid_argument("pointwise: an unknown operation");
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    pointwise<<<s.sm_count() * 4, 256, 0, s>>>(d_a, d_b, op, *z_inv, n);
    CUDA_OK(cudaGetLastError());
    CUZK_CATCH
}

// A plain (or coset) NTT of device data in natural order, for tests.
RustError cuzk_ntt(int device, void* stream, fr_t* d_x, uint32_t lg, bool inverse, bool coset)
{
    CUZK_TRY
    select_gpu(device).select();
    Quotient::plain(as_stream_t(stream), d_x, lg, inverse, coset);
    CUZK_CATCH
}
}
