// Index lists (prep_msm's ones and significant terms, ascending) cut into
// the ranges of SRS points streamed through a device chunk: where each
// chunk's terms start in a list, and the list's indices made relative to
// the chunk while its MSMs run.
#include "common.cuh"
#include <algorithm>

// out[j] = the first position in list[0..n) holding an index >= values[j].
__global__ void lower_bounds(const uint32_t* list, uint64_t n, const uint32_t* values,
                             uint32_t m, uint64_t* out)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m)
        return;
    uint32_t v = values[j];
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (list[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    out[j] = lo;
}

// list[k] += delta (mod 2^32) for k < n.
__global__ void shift_indices(uint32_t* list, uint64_t n, uint32_t delta)
{
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (uint64_t)gridDim.x * blockDim.x)
        list[k] += delta;
}

extern "C" {

// On the caller's stream; returns once `out` is written to the device.
RustError cuzk_lower_bounds(int device, void* stream, const uint32_t* d_list, uint64_t n,
                            const uint32_t* d_values, uint32_t m, uint64_t* d_out)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    if (m == 0)
        return RustError{cudaSuccess};
    lower_bounds<<<(m + 127) / 128, 128, 0, as_stream(stream)>>>(d_list, n, d_values, m, d_out);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CATCH
}

// On the caller's stream; returns once queued.
RustError cuzk_shift_indices(int device, void* stream, uint32_t* d_list, uint64_t n,
                             uint32_t delta)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    if (n == 0)
        return RustError{cudaSuccess};
    uint32_t blocks = (uint32_t)std::min<uint64_t>((n + 255) / 256, 4096);
    shift_indices<<<blocks, 256, 0, as_stream(stream)>>>(d_list, n, delta);
    CUZK_CHECK(cudaGetLastError());
    CUZK_CATCH
}

}
