// Reduction: sum (b+1)*bucket[b] over chunks of buckets, then per group.
// Part of the fixed-base MSM of one group (fixed_msm.cuh includes it inside
// the group's namespace, after the types it names).

// partials[g*parts + p] = sum over b in chunk p of group g of (b+1)*bucket[b]
// (bucket b holds the digit b+1): running sums from the top of the chunk give
// sum (b-lo+1)*bucket[b]; lo times the chunk's plain sum makes up the rest.
__launch_bounds__(256) __global__
void fm_reduce(bucket_h* partials, const bucket_h* buckets, uint32_t nb, uint32_t groups,
               uint32_t parts)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = lane_group();
    if (t >= groups * parts)
        return;
    const uint32_t g = t / parts, p = t % parts, len = nb / parts, lo = p * len;
    const bucket_h* row = buckets + (size_t)g * nb;
    bucket_t run, sum;
    run.inf();
    sum.inf();
    #pragma unroll 1
    for (uint32_t b = lo + len; b-- > lo;) {
        bucket_t x = row[b];
        run.add(x);
        sum.add(run);
    }
    bucket_t m;
    m.inf();
    #pragma unroll 1
    for (int bit = lo ? 31 - __clz(lo) : -1; bit >= 0; bit--) {
        bucket_t d = m;
        m.add(d);
        if ((lo >> bit) & 1)
            m.add(run);
    }
    sum.add(m);
    partials[t] = sum;
#endif
}

// out[g*gridDim.x + b] = sum of in[g*count + b*per_block ...] (up to
// per_block of group g's values), block (b, g) of 128 lane groups: serial
// sums per lane, then a tree in shared memory.
__launch_bounds__(256) __global__
void fm_collect(bucket_h* out, const bucket_h* in, uint32_t count, uint32_t per_block)
{
#ifdef __CUDA_ARCH__
    // Raw storage: the field types' constructors rule out typed __shared__ arrays.
    __shared__ uint4 raw[128 * sizeof(bucket_h) / sizeof(uint4)];
    bucket_h* sh = reinterpret_cast<bucket_h*>(raw);
    const uint32_t lt = threadIdx.x / DEGREE, nl = blockDim.x / DEGREE;
    const uint32_t b = blockIdx.x, g = blockIdx.y;
    const uint32_t end = min((b + 1) * per_block, count);
    bucket_t acc;
    acc.inf();
    for (uint32_t p = b * per_block + lt; p < end; p += nl) {
        bucket_t x = in[(size_t)g * count + p];
        acc.add(x);
    }
    sh[lt] = acc;
    __syncthreads();
    for (uint32_t s = nl / 2; s; s >>= 1) {
        if (lt < s) {
            bucket_t a = sh[lt];
            bucket_t c = sh[lt + s];
            a.add(c);
            sh[lt] = a;
        }
        __syncthreads();
    }
    if (lt == 0)
        out[(size_t)g * gridDim.x + b] = sh[0];
#endif
}
