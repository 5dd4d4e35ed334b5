// MSM entry points for one group, on sppark's msm_t and batch addition.
// Included by msm.cu once per group inside a namespace that defines point_t,
// bucket_t, affine_t and scalar_t, with CUZK_FN(name) naming the exports.
//
// All pointers are device pointers: SRS points resident on the device,
// scalars uploaded (or produced by the NTT) there, index lists from prep_msm.

typedef msm_t<bucket_t, point_t, affine_t, scalar_t> msm_type;

static void dense_msm(int device, const affine_t* d_points, const scalar_t* d_scalars,
                      size_t n, bool mont, point_t* out)
{
    out->inf();
    if (n == 0)
        return;
    msm_type msm{nullptr, n, sizeof(affine_t), device};
    dev_ptr_t<affine_t> points{const_cast<affine_t*>(d_points), n};
    dev_ptr_t<scalar_t> scalars{const_cast<scalar_t*>(d_scalars), n};
    RustError err = msm.invoke(*out, points, n, scalars, mont);
    if (err.code != cudaSuccess)
        throw cuda_error{err.code, err.message ? err.message : "msm failed"};
}

// sum(points[i] * scalars[i]) for i < n.
extern "C" RustError CUZK_FN(msm)(int device, const affine_t* d_points, const scalar_t* d_scalars,
                       size_t n, bool mont, point_t* out)
{
    CUZK_TRY
    dense_msm(device, d_points, d_scalars, n, mont, out);
    CUZK_CATCH
}

// sum(points[base_idx[k]] * scalars[scalar_idx[k]]) for k < n: the tail MSM
// over prep_msm's packed significant terms, gathered on the device.
extern "C" RustError CUZK_FN(msm_gathered)(int device, const affine_t* d_points, const uint32_t* d_base_idx,
                                const scalar_t* d_scalars, const uint32_t* d_scalar_idx,
                                size_t n, bool mont, point_t* out)
{
    CUZK_TRY
    out->inf();
    if (n == 0)
        return RustError{cudaSuccess};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = gpu[0];
    dev_ptr_t<affine_t::mem_t> pts{n, s};
    dev_ptr_t<scalar_t> sc{n, s};
    gather(s, &pts[0], reinterpret_cast<const affine_t::mem_t*>(d_points), d_base_idx, n);
    gather(s, &sc[0], d_scalars, d_scalar_idx, n);
    s.sync();
    dense_msm(device, reinterpret_cast<const affine_t*>(&pts[0]), &sc[0], n, mont, out);
    s.sync();
    CUZK_CATCH
}

// sum(points[idx[k]]) for k < n: the terms whose scalar is one, by sppark's
// batch addition (no scalar arithmetic at all).
extern "C" RustError CUZK_FN(sum)(int device, const affine_t* d_points, const uint32_t* d_idx,
                       size_t n, point_t* out)
{
    CUZK_TRY
    out->inf();
    if (n == 0)
        return RustError{cudaSuccess};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = gpu[0];
    size_t nparts = gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ;
    dev_ptr_t<bucket_t::mem_t> d_parts{nparts, s};
    dev_ptr_t<uint32_t> d_n{1, s};
    uint32_t count = (uint32_t)n;
    s.HtoD(&d_n[0], &count, 1);
    batch_addition<bucket_t><<<gpu.sm_count(), BATCH_ADD_BLOCK_SIZE, 0, s>>>(
        &d_parts[0], (const affine_t::mem_t*)d_points, n, d_idx, d_n[0]);
    CUDA_OK(cudaGetLastError());
    std::vector<bucket_t> parts(nparts);
    s.DtoH(&parts[0], &d_parts[0], nparts);
    s.sync();
    point_t total = sum_up(parts);
    *out = total;
    CUZK_CATCH
}

// sppark's own mult_pippenger on host points and scalars (uploaded every
// call): the reference the benchmark compares the engine's MSM with.
extern "C" RustError CUZK_FN(sppark_mult_pippenger)(int device, const affine_t* h_points,
                                                    const scalar_t* h_scalars, size_t n,
                                                    bool mont, point_t* out)
{
    CUZK_TRY
    select_gpu(device).select();
    RustError e = mult_pippenger<bucket_t>(out, h_points, n, h_scalars, mont);
    if (e.code != cudaSuccess)
        return e;
    CUZK_CATCH
}
