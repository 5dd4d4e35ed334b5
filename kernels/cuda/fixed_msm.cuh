// The fixed-base MSM of one group. Included by fixed_msm.cu once per group
// inside a namespace defining field_t, point_t, bucket_t and affine_t, with
// CUZK_FN(name) naming the exports.
//
// With a table of `copies` multiples of every base (copy t = 2^(c*t) * base)
// the windows of all copies share one set of 2^(c-1) signed buckets, so a
// wide window costs one bucket reduction instead of one per window:
//   1. digits: every scalar's signed c-bit digits as (bucket, entry) pairs;
//   2. sort the pairs by bucket (cub radix sort);
//   3. accumulate: fixed-length segments of the sorted pairs, one thread
//      each; runs inside a segment are stored in their bucket (zeroed for
//      the chunk of scalars: no addition where a run ends), runs across
//      segment edges go to two slots per segment, which the same kernel
//      reduces again until one segment is left (no host synchronisation, and
//      no bucket, however full, sits on one thread); a later chunk's buckets
//      then join the total one by one (fm_merge) where chunks split the
//      terms rather than the windows; fm_accumulate_pairs is a
//      level 0 that first sums neighbours of a run in pairs, in affine
//      coordinates (opt-in: measured slower);
//   4. reduce: sum (b+1)*bucket[b] over chunks of buckets in parallel, then
//      per group in one block; the host joins the groups (Horner, c*copies
//      doublings each) when the table has fewer copies than windows.
// Large MSMs run in chunks of digits into the same buckets, bounding the
// scratch memory: whole groups of windows over every scalar where a group
// fits (nothing to merge), else chunks of scalars. Field elements of G2
// span two lanes (degree 2), so every kernel works in lane groups of
// `DEGREE` threads that follow one path.
//
// By concern: fixed_msm_table.cuh (tables of multiples),
// fixed_msm_accumulate.cuh (buckets from sorted pairs), fixed_msm_reduce.cuh
// (buckets to a point); the entry points below run them in order.

typedef affine_t::mem_t affine_h;
typedef bucket_t::mem_t bucket_h;
typedef field_t::mem_t field_h;
static constexpr uint32_t DEGREE = bucket_t::degree;

#include "fixed_msm_table.cuh"
#include "fixed_msm_accumulate.cuh"
#include "fixed_msm_reduce.cuh"

static inline uint32_t blocks_for(size_t lanes, uint32_t threads)
{   return (uint32_t)((lanes * DEGREE + threads - 1) / threads);   }

// Table copies 1..copies-1 of `n` bases into `extra`, each from the one before.
extern "C" RustError CUZK_FN(msm_table_build)(int device, void* stream, const affine_t* points,
                                              size_t n, uint32_t window, uint32_t copies,
                                              affine_t* extra)
{
    CUZK_TRY
    if (n == 0 || copies < 2)
        return RustError{cudaSuccess};
    if (window < 2 || window > 24)
        throw std::invalid_argument("MSM table window must be 2..24 bits");
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    const affine_h* in = reinterpret_cast<const affine_h*>(points);
    affine_h* out = reinterpret_cast<affine_h*>(extra);
    for (uint32_t t = 1; t < copies; t++) {
        fm_table_double<<<s.sm_count() * 4, 256, 0, s>>>(out, in, n, window);
        CUDA_OK(cudaGetLastError());
        in = out;
        out += n;
    }
    CUZK_CATCH
}

// The fixed-base MSM `a` describes (cuzk_fixed_msm_args), on the caller's
// stream, returning with the result on the host.
extern "C" RustError CUZK_FN(msm_fixed)(int device, void* stream,
                                        const cuzk_fixed_msm_args* a, point_t* out)
{
    CUZK_TRY
    out->inf();
    const size_t n = a->n;
    if (n == 0)
        return RustError{cudaSuccess};
    if (a->form > CUZK_MONTGOMERY)
        throw std::invalid_argument("MSM scalars: an unknown form");
    if (a->tuning.add > CUZK_ADD_FUSED)
        throw std::invalid_argument("MSM tuning: an unknown addition form");
    const cuzk_msm_table* tab = &a->table;
    const uint64_t base_off = a->base_off;
    const uint32_t* base_idx = a->base_idx;
    const fr_t* scalars = a->scalars;
    const uint32_t* scalar_idx = a->scalar_idx;
    const bool mont = a->form == CUZK_MONTGOMERY;
    size_t max_entries = a->max_entries;
    const uint32_t c = tab->window, nwin = windows_of(c);
    const uint32_t copies = std::max(1u, std::min(tab->copies, nwin));
    if (c < 2 || c > 24)
        throw std::invalid_argument("MSM table window must be 2..24 bits");
    if ((uint64_t)copies * tab->ntab >= (1ull << 31))
        throw std::invalid_argument("MSM table too large for 31-bit entries");
    const uint32_t groups = (nwin + copies - 1) / copies, nb = 1u << (c - 1);
    const uint32_t sentinel = groups * nb;
    const int key_bits = 32 - __builtin_clz(sentinel);
    // tuning.pairs: level 0 adds entries in pairs (fm_accumulate_pairs),
    // measured slower with runs stored too (H100, G1 dense 2^26 at window
    // 20: 520 ms against 430; G1 2^24 table: 123 against 104), so not the
    // default. Its scratch is about half an element and an index per
    // entry, so G2's chunk is then half G1's.
    const bool pairs = a->tuning.pairs;
    if (max_entries == 0 || max_entries > (1u << 30))
        max_entries = (1u << 28) / (pairs ? DEGREE : 1);
    // Chunks of digits: whole groups of windows over every term where one
    // group's digits fit, so every bucket is complete within its chunk and
    // its runs are stored straight into it; else chunks of terms over every
    // window, each later chunk's buckets joined to the total (fm_merge).
    const bool by_groups = !a->tuning.chunk_terms && (size_t)n * copies <= max_entries;
    const uint32_t group_step =
        by_groups ? (uint32_t)std::min<size_t>(groups, max_entries / ((size_t)n * copies)) : groups;
    const size_t chunk = by_groups ? n : std::min(n, std::max<size_t>(1, max_entries / nwin));
    const size_t cap = chunk * std::min(nwin, group_step * copies);

    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = as_stream_t(stream);
    const uint32_t sms = s.sm_count();

    // Level 0's blocks are `tuning.block` threads, 64 or 128 (256 asked:
    // 128; runs added: 128), on one kernel with no register bound: the
    // block size picks the warps an SM holds at the registers it has (as
    // built whole-program, kernels/build.rs: G1's addition 134, so 14 warps
    // in blocks of 64 and 12 in 128; G2's 166, 12 in either). ptxas'
    // choice is not stable (as relocatable device code, 210: 8 warps, every
    // measurement before session 45), so the profile prints the registers
    // and warps each MSM ran at. Blocks of 64 won 4-5% on the tables' MSMs
    // at 8 warps by their smaller waves (H100, session 43). A forced
    // register bound (384-thread blocks, 168 registers) lost on an H200; a
    // bound of 144 spills ~100 bytes a thread.
    // Segments come in whole waves of the blocks an SM holds, as near
    // `tuning.threads_per_sm` as whole waves go, so no SM idles through a
    // last partial wave. The levels above reduce the segments' slots
    // `tuning.edge_seg` at a time (on an H200, 4 beat 16 and 64).
    const bool stored = !a->tuning.runs_added;
    const uint32_t block0 =
        stored ? std::min<uint32_t>(block_size(a->tuning.block), FM_BLOCK_MAX) : FM_BLOCK_MAX;
    const cuzk_add_form add = a->tuning.add;
    // Each accumulation level's kernel, with runs ending as `stored` says and
    // level 0's additions in the form the tuning names (inlined where runs
    // are added, the earlier way).
    constexpr cuzk_add_form L = CUZK_ADD_LOOPED, F = CUZK_ADD_FUSED;
    const auto accumulate_table = !stored   ? fm_accumulate<FROM_TABLE, RUNS_ADDED>
                                  : add == L ? fm_accumulate<FROM_TABLE, RUNS_STORED, L>
                                  : add == F ? fm_accumulate<FROM_TABLE, RUNS_STORED, F>
                                             : fm_accumulate<FROM_TABLE, RUNS_STORED>;
    const auto accumulate_edges = stored ? fm_accumulate<FROM_PARTIALS, RUNS_STORED>
                                         : fm_accumulate<FROM_PARTIALS, RUNS_ADDED>;
    const auto accumulate_pairs = stored ? fm_accumulate_pairs<RUNS_STORED, 256>
                                         : fm_accumulate_pairs<RUNS_ADDED, 256>;
    int held = 0;
    CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&held, accumulate_table, block0, 0));
    const uint32_t resident = (uint32_t)std::max(1, held) * block0;
    const uint32_t waves = std::max(1u, (std::max(1u, a->tuning.threads_per_sm) + resident / 2) / resident);
    const uint32_t target = sms * waves * resident / DEGREE;
    const uint32_t seg0 = std::max<uint32_t>(8, (uint32_t)((cap + target - 1) / target));
    const uint32_t seg_up = std::max(2u, a->tuning.edge_seg);
    const uint32_t nseg0 = (uint32_t)((cap + seg0 - 1) / seg0);
    const uint32_t nseg1 = (2 * nseg0 + seg_up - 1) / seg_up;

    phase_clock clock{s, a->tuning.profile};
    if (!pairs)
        clock.level0((const void*)accumulate_table, held, block0);
    stream_buf<bucket_h> buckets{(size_t)sentinel + 1, s};
    const size_t bucket_bytes = ((size_t)sentinel + 1) * sizeof(bucket_h);
    CUDA_OK(cudaMemsetAsync((bucket_h*)buckets, 0, bucket_bytes, s));
    // Runs are stored into buckets zeroed for their chunk (fm_runs): the
    // first chunk's are the buckets themselves; each later chunk's go to
    // `fresh`, then join the buckets one by one (fm_merge). With
    // tuning.runs_added every run is added in place as before.
    stream_buf<bucket_h> fresh{stored && chunk < n ? (size_t)sentinel + 1 : 0, s};
    stream_buf<uint32_t> k0{cap, s}, k1{cap, s}, v0{cap, s}, v1{cap, s}, nz{1, s};
    stream_buf<uint32_t> slot_k[2] = {{2 * (size_t)nseg0, s}, {2 * (size_t)nseg1, s}};
    stream_buf<bucket_h> slot_v[2] = {{2 * (size_t)nseg0, s}, {2 * (size_t)nseg1, s}};
    size_t temp_bytes = 0;
    {
        cub::DoubleBuffer<uint32_t> dk{k0, k1}, dv{v0, v1};
        CUDA_OK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, dk, dv, (int)cap, 0,
                                                key_bits, (cudaStream_t)s));
    }
    stream_buf<uint8_t> temp{temp_bytes, s};
    // Pair scratch: seg0/2 elements per level-0 lane group, laid out
    // element-major (see fm_accumulate_pairs).
    const uint32_t pair_stride = blocks_for(nseg0, 256) * 256 / DEGREE;
    const size_t pair_elems = pairs ? (size_t)(seg0 / 2) * pair_stride : 0;
    stream_buf<field_h> prefix{pair_elems, s};
    stream_buf<uint32_t> pair_at{pair_elems, s};
    const affine_h* base = reinterpret_cast<const affine_h*>(tab->base);
    const affine_h* extra = reinterpret_cast<const affine_h*>(tab->extra);
    clock.mark("alloc");

    // Chunks of terms, or of groups of windows: one of the two loops runs once.
    for (size_t off = 0; off < n; off += chunk)
    for (uint32_t g0 = 0; g0 < groups; g0 += group_step) {
        const uint32_t m = (uint32_t)std::min(chunk, n - off);
        const uint32_t w0 = g0 * copies, w1 = std::min(nwin, (g0 + group_step) * copies);
        const size_t entries = (size_t)m * (w1 - w0);
        bucket_h* into = stored && off > 0 ? (bucket_h*)fresh : (bucket_h*)buckets;
        if (into != (bucket_h*)buckets)
            CUDA_OK(cudaMemsetAsync(into, 0, bucket_bytes, s));
        CUDA_OK(cudaMemsetAsync((uint32_t*)nz, 0, sizeof(uint32_t), s));
        fm_digits<<<std::min<uint32_t>((m + 255) / 256, sms * 16), 256, 0, s>>>(
            k0, v0, nz, scalar_idx ? scalars : scalars + off,
            scalar_idx ? scalar_idx + off : nullptr, base_idx ? base_idx + off : nullptr,
            base_off + off, m, mont, c, w0, w1, copies, tab->ntab, sentinel);
        CUDA_OK(cudaGetLastError());
        clock.mark("digits");
        cub::DoubleBuffer<uint32_t> dk{k0, k1}, dv{v0, v1};
        CUDA_OK(cub::DeviceRadixSort::SortPairs((uint8_t*)temp, temp_bytes, dk, dv,
                                                (int)entries, 0, key_bits, (cudaStream_t)s));
        clock.mark("sort");
        uint32_t nseg = (uint32_t)((entries + seg0 - 1) / seg0);
        if (pairs)
            accumulate_pairs<<<blocks_for(nseg, 256), 256, 0, s>>>(
                into, slot_k[0], slot_v[0], dk.Current(), dv.Current(), nz, seg0, nseg,
                base, extra, tab->ntab, sentinel, prefix, pair_at,
                blocks_for(nseg, 256) * 256 / DEGREE);
        else
            accumulate_table<<<blocks_for(nseg, block0), block0, 0, s>>>(
                into, slot_k[0], slot_v[0], dk.Current(), dv.Current(), nullptr, nz, 0,
                seg0, nseg, base, extra, tab->ntab, sentinel, a->tuning.ahead);
        CUDA_OK(cudaGetLastError());
        clock.mark("accumulate");
        // Reduce the edge slots, level by level, until one segment holds them.
        for (int from = 0; nseg > 1; from ^= 1) {
            const uint32_t count = 2 * nseg;
            nseg = (count + seg_up - 1) / seg_up;
            accumulate_edges<<<blocks_for(nseg, FM_BLOCK_MAX), FM_BLOCK_MAX, 0, s>>>(
                into, slot_k[from ^ 1], slot_v[from ^ 1], slot_k[from], nullptr,
                slot_v[from], nullptr, count, seg_up, nseg, nullptr, nullptr, 0, sentinel, 0);
            CUDA_OK(cudaGetLastError());
        }
        clock.mark("edges");
        if (into != (bucket_h*)buckets) {
            fm_merge<<<blocks_for(sentinel, 256), 256, 0, s>>>(buckets, into, sentinel);
            CUDA_OK(cudaGetLastError());
            clock.mark("merge");
        }
    }

    // Enough chunks of buckets to fill the device (tuning.reduce_per_sm
    // threads an SM at most), each long enough (32 buckets) that the
    // multiplication by its start stays a small part.
    const size_t reduce_lanes = (size_t)sms * std::max(1u, a->tuning.reduce_per_sm) / DEGREE;
    uint32_t parts = 1;
    while (parts < nb && nb / (parts * 2) >= 32 && (size_t)groups * parts * 2 <= reduce_lanes)
        parts *= 2;
    const uint32_t per_block = 512, blocks = (parts + per_block - 1) / per_block;
    stream_buf<bucket_h> partials{(size_t)groups * parts, s}, mid{(size_t)groups * blocks, s},
        sums{groups, s};
    fm_reduce<<<blocks_for((size_t)groups * parts, 256), 256, 0, s>>>(partials, buckets, nb,
                                                                      groups, parts);
    CUDA_OK(cudaGetLastError());
    clock.mark("reduce");
    // Partials to one block's worth per group, then to one point per group.
    fm_collect<<<dim3(blocks, groups), 128 * DEGREE, 0, s>>>(mid, partials, parts, per_block);
    CUDA_OK(cudaGetLastError());
    fm_collect<<<dim3(1, groups), 128 * DEGREE, 0, s>>>(sums, mid, blocks, blocks);
    CUDA_OK(cudaGetLastError());
    std::vector<bucket_t> res(groups);
    CUDA_OK(cudaMemcpyAsync(res.data(), (bucket_h*)sums, groups * sizeof(bucket_h),
                            cudaMemcpyDeviceToHost, s));
    clock.mark("collect");
    s.sync();
    clock.print(n);

    // Group g's windows start at bit c*copies*g.
    bucket_t acc = res[groups - 1];
    for (int g = (int)groups - 2; g >= 0; g--) {
        for (uint32_t i = 0; i < c * copies; i++) {
            bucket_t d = acc;
            acc.add(d);
        }
        acc.add(res[g]);
    }
    *out = acc;
    CUZK_CATCH
}
