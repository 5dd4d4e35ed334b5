// Why a kernel's warps wait, from CUPTI's PC sampling (a research tool for
// #27, not part of the build; the GPU machine has no Nsight Compute). The
// driver loads it into any CUDA program named by CUDA_INJECTION64_PATH; it
// samples every SM's warps while the program runs (continuous mode, kernels
// not serialized, so they run as they would) and, at exit, prints each
// kernel's samples by stall reason, largest first:
//   selected         the warp issued (the share of samples that do work);
//   wait             a fixed-latency dependency (an IMAD's result);
//   long_scoreboard  a global-memory load's result (the point reads);
//   math_pipe_throttle  the pipe (IMAD) is busy with other warps' work;
//   not_selected     ready, but another warp issued (enough warps);
//   no_instructions  the instruction cache missed; dispatch_stall, ...
// The "_not_issued" reasons count the same states in cycles that issued
// nothing. Every PC of the kernels named by CUZK_STALLS_MATCH (a substring
// of the mangled name, default fm_accumulate) goes to CUZK_STALLS_CSV
// (function,pc,reason,samples) to be joined with the SASS offline
// (cuobjdump -sass; PCs are byte offsets in the function); the modules that
// hold such kernels go to the directory CUZK_STALLS_CUBINS, if set.
// Knobs: CUZK_STALLS_PERIOD (2^N cycles between samples an SM, 5..31;
// CUPTI's default if unset), CUZK_STALLS_TOP (reasons a kernel, default 10).
// Build (from the repository root; CUPTI's headers and library from PyPI's
// nvidia-cuda-cupti 13.0, which matches the toolkit's 13.0):
//   pip download --no-deps "nvidia-cuda-cupti==13.0.*" -d /tmp/cupti && unzip -d /tmp/cupti /tmp/cupti/*.whl
//   g++ -O2 -shared -fPIC -o .carry/libcuzk_stalls.so scripts/stalls.cpp
//     -I.cuda/nvidia/cu13/include -I/tmp/cupti/nvidia/cu13/include
//     -L/tmp/cupti/nvidia/cu13/lib -l:libcupti.so.13 -Wl,-rpath,'$ORIGIN'
//   (one line)
//   cp /tmp/cupti/nvidia/cu13/lib/libcupti.so.13 .carry/
// and run a program with CUDA_INJECTION64_PATH=$PWD/.carry/libcuzk_stalls.so.
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

std::recursive_mutex mu; // CUPTI may call back from inside its own calls
bool enabled = false;           // sampling on for `ctx`
CUcontext ctx = nullptr;        // the one context sampled (the bench's)
std::vector<std::string> names; // stall reason names, by position
std::vector<uint32_t> indices;  // CUPTI's index of each position
CUpti_PCSamplingData config_buf{}, drain_buf{};
uint64_t total = 0, dropped = 0, other_kernels = 0;
bool hw_full = false;

// Samples by reason position, per kernel (mangled name), and per PC of the
// kernels that CUZK_STALLS_MATCH names.
std::map<std::string, std::vector<uint64_t>> by_kernel;
std::map<std::pair<std::string, uint64_t>, std::vector<uint64_t>> by_pc;

const char* env_or(const char* k, const char* d)
{
    const char* v = getenv(k);
    return v && *v ? v : d;
}

bool ok(CUptiResult r, const char* what)
{
    if (r == CUPTI_SUCCESS)
        return true;
    const char* s = "?";
    cuptiGetResultString(r, &s);
    fprintf(stderr, "stalls: %s failed: %s\n", what, s);
    return false;
}
#define OK(call) ok((call), #call)

void alloc_pcs(CUpti_PCSamplingData& b, size_t n)
{
    b.size = sizeof(CUpti_PCSamplingData);
    b.collectNumPcs = n;
    b.pPcData = (CUpti_PCSamplingPCData*)calloc(n, sizeof(CUpti_PCSamplingPCData));
    for (size_t i = 0; i < n; i++) {
        b.pPcData[i].size = sizeof(CUpti_PCSamplingPCData);
        b.pPcData[i].stallReason =
            (CUpti_PCSamplingStallReason*)calloc(names.size(), sizeof(CUpti_PCSamplingStallReason));
    }
}

size_t position(uint32_t index)
{
    for (size_t i = 0; i < indices.size(); i++)
        if (indices[i] == index)
            return i;
    return 0;
}

// Adds the records in `b` to the totals and empties it.
void take(CUpti_PCSamplingData& b)
{
    static const std::string match = env_or("CUZK_STALLS_MATCH", "fm_accumulate");
    total += b.totalSamples;
    dropped += b.droppedSamples;
    other_kernels += b.nonUsrKernelsTotalSamples;
    hw_full |= b.hardwareBufferFull != 0;
    for (size_t i = 0; i < b.totalNumPcs; i++) {
        const CUpti_PCSamplingPCData& pc = b.pPcData[i];
        const std::string fn = pc.functionName ? pc.functionName : "?";
        auto& k = by_kernel[fn];
        k.resize(names.size());
        const bool keep = fn.find(match) != std::string::npos;
        std::vector<uint64_t>* p = nullptr;
        if (keep) {
            p = &by_pc[{fn, pc.pcOffset}];
            p->resize(names.size());
        }
        for (size_t r = 0; r < pc.stallReasonCount; r++) {
            const size_t at = position(pc.stallReason[r].pcSamplingStallReasonIndex);
            k[at] += pc.stallReason[r].samples;
            if (p)
                (*p)[at] += pc.stallReason[r].samples;
        }
    }
    b.totalNumPcs = 0;
}

// Moves what CUPTI holds for `c` into the totals.
void drain(CUcontext c)
{
    CUpti_PCSamplingGetDataParams g{};
    g.size = CUpti_PCSamplingGetDataParamsSize;
    g.ctx = c;
    g.pcSamplingData = &drain_buf;
    for (int guard = 0; guard < 100000; guard++) {
        if (!OK(cuptiPCSamplingGetData(&g))) {
            hw_full |= drain_buf.hardwareBufferFull != 0;
            return;
        }
        const bool more = drain_buf.remainingNumPcs > 0;
        take(drain_buf);
        if (!more)
            break;
    }
    take(config_buf); // records CUPTI put in the configured buffer itself
}

void enable(CUcontext c)
{
    CUpti_PCSamplingEnableParams e{};
    e.size = CUpti_PCSamplingEnableParamsSize;
    e.ctx = c;
    if (!OK(cuptiPCSamplingEnable(&e)))
        return;
    size_t n = 0;
    CUpti_PCSamplingGetNumStallReasonsParams np{};
    np.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    np.ctx = c;
    np.numStallReasons = &n;
    if (!OK(cuptiPCSamplingGetNumStallReasons(&np)))
        return;
    std::vector<char*> raw(n);
    for (auto& s : raw)
        s = (char*)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
    indices.assign(n, 0);
    CUpti_PCSamplingGetStallReasonsParams sp{};
    sp.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    sp.ctx = c;
    sp.numStallReasons = n;
    sp.stallReasonIndex = indices.data();
    sp.stallReasons = raw.data();
    if (!OK(cuptiPCSamplingGetStallReasons(&sp)))
        return;
    names.clear();
    for (auto s : raw)
        names.push_back(s);
    alloc_pcs(config_buf, 20000);
    alloc_pcs(drain_buf, 20000);

    std::vector<CUpti_PCSamplingConfigurationInfo> cfg;
    CUpti_PCSamplingConfigurationInfo a{};
    a.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    a.attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    cfg.push_back(a);
    a = {};
    a.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    a.attributeData.stallReasonData.stallReasonCount = n;
    a.attributeData.stallReasonData.pStallReasonIndex = indices.data();
    cfg.push_back(a);
    a = {};
    a.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
    a.attributeData.scratchBufferSizeData.scratchBufferSize = 256 << 20; // ~1.4 M PC-reasons
    cfg.push_back(a);
    a = {};
    a.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    a.attributeData.samplingDataBufferData.samplingDataBuffer = &config_buf;
    cfg.push_back(a);
    if (const char* p = getenv("CUZK_STALLS_PERIOD")) {
        a = {};
        a.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
        a.attributeData.samplingPeriodData.samplingPeriod = (uint32_t)atoi(p);
        cfg.push_back(a);
    }
    CUpti_PCSamplingConfigurationInfoParams cp{};
    cp.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    cp.ctx = c;
    cp.numAttributes = cfg.size();
    cp.pPCSamplingConfigurationInfo = cfg.data();
    if (!OK(cuptiPCSamplingSetConfigurationAttribute(&cp))) {
        for (auto& x : cfg)
            if (x.attributeStatus != CUPTI_SUCCESS)
                fprintf(stderr, "stalls: attribute %d refused\n", (int)x.attributeType);
        return;
    }
    ctx = c;
    enabled = true;
    fprintf(stderr, "stalls: sampling %zu stall reasons\n", n);
}

void disable()
{
    if (!enabled)
        return;
    drain(ctx);
    CUpti_PCSamplingDisableParams d{};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = ctx;
    OK(cuptiPCSamplingDisable(&d));
    take(config_buf); // disabling flushes the last records there
    enabled = false;
}

std::string short_reason(const std::string& s)
{
    for (const char* p : {"smsp__pcsamp_warps_issue_stalled_", "smsp__pcsamp_"})
        if (s.rfind(p, 0) == 0)
            return s.substr(strlen(p));
    return s;
}

std::string demangled(const std::string& s)
{
    int st = 0;
    char* d = abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &st);
    std::string r = st == 0 && d ? d : s;
    free(d);
    return r.size() > 150 ? r.substr(0, 150) + "..." : r;
}

void report()
{
    std::lock_guard<std::recursive_mutex> g(mu);
    disable();
    const int top = atoi(env_or("CUZK_STALLS_TOP", "10"));
    fprintf(stderr, "stalls: %llu samples, %llu dropped, %llu in kernels not the program's%s\n",
            (unsigned long long)total, (unsigned long long)dropped,
            (unsigned long long)other_kernels, hw_full ? ", HARDWARE BUFFER FULL" : "");
    std::vector<std::pair<uint64_t, std::string>> order;
    for (auto& [fn, v] : by_kernel) {
        uint64_t all = 0;
        for (size_t r = 0; r < v.size(); r++)
            if (names[r].find("not_issued") == std::string::npos)
                all += v[r];
        order.push_back({all, fn});
    }
    std::sort(order.rbegin(), order.rend());
    for (auto& [all, fn] : order) {
        if (all == 0)
            continue;
        fprintf(stderr, "stalls: %s: %llu samples (%.1f%%)\n", demangled(fn).c_str(),
                (unsigned long long)all, total ? 100.0 * all / total : 0.0);
        const auto& v = by_kernel[fn];
        std::vector<std::pair<uint64_t, size_t>> rs;
        for (size_t r = 0; r < v.size(); r++)
            if (v[r])
                rs.push_back({v[r], r});
        std::sort(rs.rbegin(), rs.rend());
        for (int i = 0; i < (int)rs.size() && i < top; i++)
            fprintf(stderr, "stalls:     %-40s %6.2f%%\n", short_reason(names[rs[i].second]).c_str(),
                    100.0 * rs[i].first / all);
    }
    if (const char* path = getenv("CUZK_STALLS_CSV")) {
        if (FILE* f = fopen(path, "w")) {
            fprintf(f, "function,pc,reason,samples\n");
            for (auto& [key, v] : by_pc)
                for (size_t r = 0; r < v.size(); r++)
                    if (v[r])
                        fprintf(f, "%s,%llu,%s,%llu\n", key.first.c_str(),
                                (unsigned long long)key.second, short_reason(names[r]).c_str(),
                                (unsigned long long)v[r]);
            fclose(f);
        }
    }
}

// The modules whose code holds CUZK_STALLS_MATCH go to CUZK_STALLS_CUBINS
// (a directory), so the PCs join with the SASS of exactly what ran.
void keep_cubin(const CUpti_ModuleResourceData* m)
{
    const char* dir = getenv("CUZK_STALLS_CUBINS");
    if (!dir || !m || !m->pCubin || !m->cubinSize)
        return;
    const std::string match = env_or("CUZK_STALLS_MATCH", "fm_accumulate");
    const char* end = m->pCubin + m->cubinSize;
    if (std::search(m->pCubin, end, match.begin(), match.end()) == end)
        return;
    const std::string path = std::string(dir) + "/module" + std::to_string(m->moduleId) + ".cubin";
    if (FILE* f = fopen(path.c_str(), "wb")) {
        fwrite(m->pCubin, 1, m->cubinSize, f);
        fclose(f);
        fprintf(stderr, "stalls: kept %s (%zu bytes)\n", path.c_str(), m->cubinSize);
    }
}

void CUPTIAPI on_event(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data)
{
    std::lock_guard<std::recursive_mutex> g(mu);
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        const auto* r = (const CUpti_ResourceData*)data;
        if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && !enabled && !ctx)
            enable(r->context);
        else if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED && enabled && r->context == ctx) {
            drain(ctx); // a new module starts a new range of PCs
            keep_cubin((const CUpti_ModuleResourceData*)r->resourceDescriptor);
        }
        else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && enabled && r->context == ctx)
            disable();
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const auto* cb = (const CUpti_CallbackData*)data;
        // Keep CUPTI's buffers from filling: drain once they hold many PCs.
        if (cb->callbackSite == CUPTI_API_EXIT && enabled && cb->context == ctx &&
            config_buf.remainingNumPcs >= 5000)
            drain(ctx);
    }
}

} // namespace

extern "C" int InitializeInjection()
{
    CUpti_SubscriberHandle sub;
    if (!OK(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_event, nullptr)))
        return 0;
    for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_MODULE_LOADED,
                                CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING})
        OK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id));
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel})
        OK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id));
    atexit(report);
    fprintf(stderr, "stalls: injected\n");
    return 1;
}
