// MSM entry points for one group, on sppark's msm_t and batch addition.
// Included by msm.cu once per group inside a namespace that defines point_t,
// bucket_t, affine_t and scalar_t, with CUZK_FN(name) naming the exports.
//
// All pointers are device pointers: SRS points resident on the device,
// scalars uploaded (or produced by the NTT) there, index lists from prep_msm.

typedef msm_t<bucket_t, point_t, affine_t, scalar_t> msm_type;

// sppark's msm_t, after the work queued on the caller's stream (it runs on
// the device's shared streams and returns when its result is on the host).
static void dense_msm(int device, void* stream, const affine_t* d_points,
                      const scalar_t* d_scalars, size_t n, cuzk_scalar_form form, point_t* out)
{
    out->inf();
    if (n == 0)
        return;
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    shared_streams_after(stream, gpu);
    msm_type msm{nullptr, n, sizeof(affine_t), device};
    dev_ptr_t<affine_t> points{const_cast<affine_t*>(d_points), n};
    dev_ptr_t<scalar_t> scalars{const_cast<scalar_t*>(d_scalars), n};
    RustError err = msm.invoke(*out, points, n, scalars, form == CUZK_MONTGOMERY);
    if (err.code != cudaSuccess)
        throw cuda_error{err.code, err.message ? err.message : "msm failed"};
}

// sum(points[i] * scalars[i]) for i < n.
extern "C" RustError CUZK_FN(msm)(int device, void* stream, const affine_t* d_points,
                                  const scalar_t* d_scalars, size_t n, cuzk_scalar_form form, point_t* out)
{
    CUZK_TRY
    dense_msm(device, stream, d_points, d_scalars, n, form, out);
    CUZK_CATCH
}

// sum(points[base_idx[k]] * scalars[scalar_idx[k]]) for k < n: the tail MSM
// over prep_msm's packed significant terms, gathered on the caller's stream.
extern "C" RustError CUZK_FN(msm_gathered)(int device, void* stream, const affine_t* d_points,
                                           const uint32_t* d_base_idx,
                                           const scalar_t* d_scalars, const uint32_t* d_scalar_idx,
                                           size_t n, cuzk_scalar_form form, point_t* out)
{
    CUZK_TRY
    out->inf();
    if (n == 0)
        return RustError{cudaSuccess};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = as_stream_t(stream);
    stream_buf<affine_t::mem_t> pts{n, s};
    stream_buf<scalar_t> sc{n, s};
    gather(s, (affine_t::mem_t*)pts, reinterpret_cast<const affine_t::mem_t*>(d_points),
           d_base_idx, n);
    gather(s, (scalar_t*)sc, d_scalars, d_scalar_idx, n);
    dense_msm(device, stream, reinterpret_cast<const affine_t*>((affine_t::mem_t*)pts),
              (scalar_t*)sc, n, form, out);
    CUZK_CATCH
}

// One fold of the ones' sum: each lane group adds a strided share of its
// inputs (the points idx[k] from the list, or the partial sums of the fold
// before) into an XYZZ accumulator; then the block's lane groups join
// theirs through shared memory, halving, and lane group 0 stores the
// block's sum in out[blockIdx.x]. Additions take the form `ADD` names.
template<int THREADS, bool FROM_POINTS, cuzk_add_form ADD>
__launch_bounds__(THREADS) __global__
void ones_fold(bucket_t::mem_t* out, const affine_t::mem_t* points, const uint32_t* idx,
               const bucket_t::mem_t* parts, size_t n)
{
#ifdef __CUDA_ARCH__
    constexpr uint32_t DEGREE = bucket_t::degree;
    constexpr uint32_t LANES = THREADS / DEGREE;   // lane groups a block
    static_assert((LANES & (LANES - 1)) == 0, "a power of two");
    __shared__ bucket_t::mem_t share[LANES];
    const uint32_t lg = threadIdx.x / DEGREE;
    const size_t stride = (size_t)gridDim.x * LANES;
    bucket_t acc;
    acc.inf();
    #pragma unroll 1
    for (size_t k = (size_t)blockIdx.x * LANES + lg; k < n; k += stride) {
        if constexpr (FROM_POINTS) {
            affine_t p = points[idx[k]];
            add_in<ADD>(acc, p);
        } else {
            bucket_t q = parts[k];
            add_sum<ADD>(acc, q);
        }
    }
    #pragma unroll 1
    for (uint32_t half = LANES / 2; half > 0; half /= 2) {
        if (lg >= half && lg < 2 * half)
            share[lg - half] = acc;
        __syncthreads();
        if (lg < half) {
            bucket_t q = share[lg];
            add_sum<ADD>(acc, q);
        }
        __syncthreads();
    }
    if (lg == 0)
        out[blockIdx.x] = acc;
#endif
}

// The ones' sum in blocks of THREADS: as many blocks as the SMs hold at
// once (fewer threads a block, more warps an SM for the addition's
// registers) over the list, then one block over their sums.
template<int THREADS, cuzk_add_form ADD>
static void ones_sum(stream_t& s, uint32_t sms, const affine_t* d_points, const uint32_t* d_idx,
                     size_t n, point_t* out)
{
    constexpr uint32_t LANES = THREADS / bucket_t::degree;
    int held = 0;
    CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, ones_fold<THREADS, true, ADD>,
                                                          THREADS, 0));
    const size_t blocks = std::min<size_t>((size_t)sms * std::max(1, held), (n + LANES - 1) / LANES);
    stream_buf<bucket_t::mem_t> parts{blocks + 1, s};
    bucket_t::mem_t* total = (bucket_t::mem_t*)parts + blocks;
    ones_fold<THREADS, true, ADD><<<(uint32_t)blocks, THREADS, 0, s>>>(
        parts, (const affine_t::mem_t*)d_points, d_idx, nullptr, n);
    CUDA_OK(cudaGetLastError());
    ones_fold<THREADS, false, ADD><<<1, THREADS, 0, s>>>(total, nullptr, nullptr, parts, blocks);
    CUDA_OK(cudaGetLastError());
    bucket_t sum;
    s.DtoH(&sum, total, 1);
    s.sync();
    *out = sum;
}

// sum(points[idx[k]]) for k < n: the terms whose scalar is one (no scalar
// arithmetic at all), on the caller's stream. `block` is the threads a block
// (64, 128 or 256), adding in the form `add` names; 0 runs sppark's batch
// addition instead (one 256-thread block an SM, the earlier way), kept for
// side-by-side timing. On an H100
// over a PoRep partition's ones, blocks of 64 against sppark's: G1 26.16 ms
// against 27.75 (64 M ones), G2 22.17 against 25.12 (16 M).
extern "C" RustError CUZK_FN(sum)(int device, void* stream, const affine_t* d_points,
                                  const uint32_t* d_idx, size_t n, uint32_t block,
                                  cuzk_add_form add, point_t* out)
{
    CUZK_TRY
    out->inf();
    if (n == 0)
        return RustError{cudaSuccess};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = as_stream_t(stream);
    if (add > CUZK_ADD_FUSED)
        throw std::invalid_argument("ones' sum: an unknown addition form");
    if (block > 0) {
        const uint32_t b = block_size(block);
        constexpr cuzk_add_form I = CUZK_ADD_INLINED, L = CUZK_ADD_LOOPED, F = CUZK_ADD_FUSED;
        const auto fold = add == L   ? (b == 256   ? ones_sum<256, L>
                                        : b == 128 ? ones_sum<128, L>
                                                   : ones_sum<64, L>)
                          : add == F ? (b == 256   ? ones_sum<256, F>
                                        : b == 128 ? ones_sum<128, F>
                                                   : ones_sum<64, F>)
                                     : (b == 256   ? ones_sum<256, I>
                                        : b == 128 ? ones_sum<128, I>
                                                   : ones_sum<64, I>);
        fold(s, gpu.sm_count(), d_points, d_idx, n, out);
    } else {
        size_t nparts = gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ;
        stream_buf<bucket_t::mem_t> d_parts{nparts, s};
        stream_buf<uint32_t> d_n{1, s};
        uint32_t count = (uint32_t)n;
        s.HtoD((uint32_t*)d_n, &count, 1);
        batch_addition<bucket_t><<<gpu.sm_count(), BATCH_ADD_BLOCK_SIZE, 0, s>>>(
            (bucket_t::mem_t*)d_parts, (const affine_t::mem_t*)d_points, n, d_idx,
            ((uint32_t*)d_n)[0]);
        CUDA_OK(cudaGetLastError());
        std::vector<bucket_t> parts(nparts);
        s.DtoH(&parts[0], (bucket_t::mem_t*)d_parts, nparts);
        s.sync();
        point_t total = sum_up(parts);
        *out = total;
    }
    CUZK_CATCH
}
