// Device memory, streams, events and host page-locking, for the Rust side to
// decide when to allocate, upload, compute and download, on which stream.
#include "common.cuh"

extern "C" {

RustError cuzk_device_select(int device)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CATCH
}

RustError cuzk_mem_info(int device, size_t* free_bytes, size_t* total_bytes)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    CUZK_CATCH
}

RustError cuzk_alloc(int device, size_t bytes, void** out)
{
    CUZK_TRY
    *out = nullptr;
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaMalloc(out, bytes ? bytes : 1));
    CUZK_CATCH
}

RustError cuzk_free(int device, void* ptr)
{
    CUZK_TRY
    if (ptr) {
        CUZK_CHECK(cudaSetDevice(device));
        CUZK_CHECK(cudaFree(ptr));
    }
    CUZK_CATCH
}

// A non-blocking stream, as sppark's stream_t (see as_stream_t).
RustError cuzk_stream_create(int device, void** out)
{
    CUZK_TRY
    *out = nullptr;
    CUZK_CHECK(cudaSetDevice(device));
    *out = new stream_t(device);
    CUZK_CATCH
}

RustError cuzk_stream_destroy(int device, void* stream)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    delete &as_stream_t(stream);
    CUZK_CATCH
}

RustError cuzk_stream_sync(int device, void* stream)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaStreamSynchronize(as_stream(stream)));
    CUZK_CATCH
}

RustError cuzk_htod(int device, void* stream, void* dst, const void* src, size_t bytes)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)));
    CUZK_CATCH
}

RustError cuzk_dtoh(int device, void* stream, void* dst, const void* src, size_t bytes)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)));
    CUZK_CATCH
}

// Events with timing, so stage times measure device work.
RustError cuzk_event_create(int device, void** out)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    cudaEvent_t e;
    CUZK_CHECK(cudaEventCreate(&e));
    *out = e;
    CUZK_CATCH
}

RustError cuzk_event_record(int device, void* event, void* stream)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaEventRecord(reinterpret_cast<cudaEvent_t>(event), as_stream(stream)));
    CUZK_CATCH
}

RustError cuzk_event_elapsed_ms(int device, void* start, void* end, float* ms)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(end)));
    CUZK_CHECK(cudaEventElapsedTime(ms, reinterpret_cast<cudaEvent_t>(start),
                                    reinterpret_cast<cudaEvent_t>(end)));
    CUZK_CATCH
}

RustError cuzk_event_destroy(int device, void* event)
{
    CUZK_TRY
    CUZK_CHECK(cudaSetDevice(device));
    CUZK_CHECK(cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event)));
    CUZK_CATCH
}

// Page-locks host memory (the arenas) so uploads from it are DMA transfers.
RustError cuzk_host_register(void* ptr, size_t bytes)
{
    CUZK_TRY
    CUZK_CHECK(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable));
    CUZK_CATCH
}

RustError cuzk_host_unregister(void* ptr)
{
    CUZK_TRY
    CUZK_CHECK(cudaHostUnregister(ptr));
    CUZK_CATCH
}

}
