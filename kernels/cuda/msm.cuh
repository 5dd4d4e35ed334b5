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

// sum(points[idx[k]]) for k < n: the terms whose scalar is one, by sppark's
// batch addition (no scalar arithmetic at all), on the caller's stream.
extern "C" RustError CUZK_FN(sum)(int device, void* stream, const affine_t* d_points,
                                  const uint32_t* d_idx, size_t n, point_t* out)
{
    CUZK_TRY
    out->inf();
    if (n == 0)
        return RustError{cudaSuccess};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = as_stream_t(stream);
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
    CUZK_CATCH
}

