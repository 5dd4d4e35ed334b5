// Tables of multiples: lane groups, XYZZ doubling, 2^c times every base.
// Part of the fixed-base MSM of one group (fixed_msm.cuh includes it inside
// the group's namespace, after the types it names).

#ifdef __CUDA_ARCH__
__device__ __forceinline__ uint32_t lane_group()
{   return (threadIdx.x + blockIdx.x * blockDim.x) / DEGREE;   }
__device__ __forceinline__ uint32_t lane_groups()
{   return gridDim.x * blockDim.x / DEGREE;   }

// A point in XYZZ coordinates with its fields in reach (sppark's keeps them
// private), for building tables.
struct xyzz_pt {
    field_t X, Y, ZZ, ZZZ;

    // dbl-2008-s-1 (a = 0); the point at infinity (ZZ = ZZZ = 0) stays there.
    __device__ __forceinline__ void dbl()
    {
        field_t U = Y + Y;
        field_t V = U^2;
        field_t W = U * V;
        field_t S = X * V;
        field_t M = X^2;
        M = M + M + M;
        X = M^2;
        X -= S;
        X -= S;
        S -= X;
        S *= M;
        Y = S - Y * W;
        ZZ *= V;
        ZZZ *= W;
    }
};
#endif

// out[i] = 2^c * in[i], affine, for i < n. Every lane runs the same number of
// rounds (the tail recomputes the last point without storing it): the field
// inversion pairs lanes up.
__launch_bounds__(256) __global__
void fm_table_double(affine_h* out, const affine_h* in, size_t n, uint32_t c)
{
#ifdef __CUDA_ARCH__
    const size_t stride = lane_groups();
    const size_t rounds = (n + stride - 1) / stride;
    for (size_t r = 0; r < rounds; r++) {
        const size_t i = lane_group() + r * stride;
        const field_h* f = reinterpret_cast<const field_h*>(&in[i < n ? i : n - 1]);
        xyzz_pt p;
        p.X = f[0];
        p.Y = f[1];
        const bool inf = p.X.is_zero() & p.Y.is_zero();
        p.ZZ = field_t::one(inf);
        p.ZZZ = p.ZZ;
        for (uint32_t k = 0; k < c; k++)
            p.dbl();
        field_t zi = p.ZZZ.reciprocal();    // zero at infinity
        field_t x = zi * p.ZZ;              // 1/Z
        x = x^2;
        x *= p.X;
        field_t y = zi * p.Y;
        if (i < n) {
            field_h* o = reinterpret_cast<field_h*>(&out[i]);
            o[0] = x;
            o[1] = y;
        }
    }
#endif
}
