// Shared declarations of cuzk's kernels: field and curve types from sppark's
// BLS12-381 templates, and the C ABI status every entry point returns.
#ifndef CUZK_COMMON_CUH
#define CUZK_COMMON_CUH

#include <cuda_runtime.h>
#include <cstdint>
#include <cstring>
#include <string>

#include <ff/bls12-381.hpp>
#include <util/exception.cuh>
#include <util/rusterror.h>
#include <util/gpu_t.cuh>

// Entry points return RustError by value: code 0 is success; otherwise the
// message (strdup'ed, freed by Rust) says what failed.
#define CUZK_TRY try {
#define CUZK_CATCH                                                           \
    } catch (const cuda_error& e) {                                          \
        return RustError{e.code(), e.what()};                                \
    } catch (const std::exception& e) {                                      \
        return RustError{-1, e.what()};                                      \
    }                                                                        \
    return RustError{cudaSuccess};

#define CUZK_CHECK(expr) CUDA_OK(expr)

static inline cudaStream_t as_stream(void* s) { return reinterpret_cast<cudaStream_t>(s); }

#endif
