/* A stand-in CUDA driver (libcuda.so.1) for testing the shim without a GPU.
 *
 * It hands out fake device addresses (nothing is backed: tests allocate GiB) from a GPU of
 * STUB_CUDA_TOTAL_MIB MiB (default 16384) per process, refuses past it with
 * CUDA_ERROR_OUT_OF_MEMORY like the driver, and resolves cuGetProcAddress by name and CUDA
 * version the way the driver does (cuMemAlloc at 3020+ is cuMemAlloc_v2, cuCtxCreate at
 * 12050+ is cuCtxCreate_v4, the per-thread-stream flag picks the _ptsz variants).
 * STUB_CUDA_CALLS=1 prints each allocation call it receives to stderr.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef void *CUcontext;
typedef void *CUstream;

#define EXPORT __attribute__((visibility("default")))
#define MAX_ALLOC 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int current = -1;
static unsigned long long next_address = 0x7f0000000000ULL, used;
static struct { unsigned long long key, bytes; } live[MAX_ALLOC];
static int contexts[8];

static unsigned long long total(void) {
    const char *mib = getenv("STUB_CUDA_TOTAL_MIB");
    return (mib ? strtoull(mib, NULL, 10) : 16384ULL) << 20;
}

static void trace(const char *what, unsigned long long bytes) {
    const char *on = getenv("STUB_CUDA_CALLS");
    if (on && *on == '1') fprintf(stderr, "stub: %s %llu\n", what, bytes);
}

static CUresult take(unsigned long long *key, size_t bytes, int new_key, const char *what) {
    trace(what, bytes);
    if (current < 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    pthread_mutex_lock(&lock);
    CUresult r = 2;
    if (used + bytes <= total()) {
        for (int i = 0; i < MAX_ALLOC; i++) {
            if (live[i].key) continue;
            if (new_key) {
                *key = next_address;
                next_address += (bytes + 0xfffff) & ~0xfffffULL;
                next_address += 0x100000;
            }
            live[i].key = *key;
            live[i].bytes = bytes;
            used += bytes;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult give(unsigned long long key) {
    pthread_mutex_lock(&lock);
    CUresult r = 1; /* CUDA_ERROR_INVALID_VALUE */
    for (int i = 0; i < MAX_ALLOC; i++) {
        if (live[i].key == key) {
            used -= live[i].bytes;
            live[i].key = 0;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (ordinal < 0 || ordinal >= 8) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}
static CUresult make_ctx(CUcontext *ctx, CUdevice dev) {
    if (dev < 0 || dev >= 8) return 101;
    *ctx = &contexts[dev];
    current = dev;
    return 0;
}
EXPORT CUresult cuCtxCreate_v2(CUcontext *c, unsigned int f, CUdevice d) { (void)f; return make_ctx(c, d); }
EXPORT CUresult cuCtxCreate_v3(CUcontext *c, void *p, int n, unsigned int f, CUdevice d) {
    (void)p; (void)n; (void)f; return make_ctx(c, d);
}
EXPORT CUresult cuCtxCreate_v4(CUcontext *c, void *p, unsigned int f, CUdevice d) {
    (void)p; (void)f; return make_ctx(c, d);
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    if (d < 0 || d >= 8) return 101;
    *c = &contexts[d];
    return 0;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
    current = c ? (int)((int *)c - contexts) : -1;
    return 0;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
    if (current < 0) return 201;
    *dev = current;
    return 0;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t b) { return take(p, b, 1, "cuMemAlloc_v2"); }
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e) {
    (void)e;
    *pitch = (w + 511) & ~(size_t)511;
    return take(p, *pitch * h, 1, "cuMemAllocPitch_v2");
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t b, unsigned f) {
    (void)f; return take(p, b, 1, "cuMemAllocManaged");
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t b, CUstream s) {
    (void)s; return take(p, b, 1, "cuMemAllocAsync");
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t b, CUstream s) {
    (void)s; return take(p, b, 1, "cuMemAllocAsync_ptsz");
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t b, void *pool, CUstream s) {
    (void)pool; (void)s; return take(p, b, 1, "cuMemAllocFromPoolAsync");
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t b, void *pool, CUstream s) {
    (void)pool; (void)s; return take(p, b, 1, "cuMemAllocFromPoolAsync_ptsz");
}
EXPORT CUresult cuMemCreate(unsigned long long *h, size_t b, const void *prop, unsigned long long f) {
    (void)prop; (void)f; return take(h, b, 1, "cuMemCreate");
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return give(p); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return give(p); }
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { (void)s; return give(p); }
EXPORT CUresult cuMemRelease(unsigned long long h) { return give(h); }
EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (current < 0) return 201;
    pthread_mutex_lock(&lock);
    *free_bytes = total() - used;
    *total_bytes = total();
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

static void *resolve(const char *s, int v, cuuint64_t flags) {
    int ptsz = (flags & 2) != 0;
    if (!strcmp(s, "cuInit")) return (void *)cuInit;
    if (!strcmp(s, "cuDeviceGet")) return (void *)cuDeviceGet;
    if (!strcmp(s, "cuDeviceGetCount")) return (void *)cuDeviceGetCount;
    if (!strcmp(s, "cuCtxSetCurrent")) return (void *)cuCtxSetCurrent;
    if (!strcmp(s, "cuCtxGetDevice")) return (void *)cuCtxGetDevice;
    if (!strcmp(s, "cuDevicePrimaryCtxRetain")) return (void *)cuDevicePrimaryCtxRetain;
    if (!strcmp(s, "cuCtxCreate"))
        return v >= 12050 ? (void *)cuCtxCreate_v4 : v >= 11040 ? (void *)cuCtxCreate_v3
                                                                : (void *)cuCtxCreate_v2;
    if (!strcmp(s, "cuMemAlloc")) return (void *)cuMemAlloc_v2;
    if (!strcmp(s, "cuMemAllocPitch")) return (void *)cuMemAllocPitch_v2;
    if (!strcmp(s, "cuMemAllocManaged")) return (void *)cuMemAllocManaged;
    if (!strcmp(s, "cuMemAllocAsync")) return ptsz ? (void *)cuMemAllocAsync_ptsz : (void *)cuMemAllocAsync;
    if (!strcmp(s, "cuMemAllocFromPoolAsync"))
        return ptsz ? (void *)cuMemAllocFromPoolAsync_ptsz : (void *)cuMemAllocFromPoolAsync;
    if (!strcmp(s, "cuMemCreate")) return (void *)cuMemCreate;
    if (!strcmp(s, "cuMemFree")) return (void *)cuMemFree_v2;
    if (!strcmp(s, "cuMemFreeAsync")) return ptsz ? (void *)cuMemFreeAsync_ptsz : (void *)cuMemFreeAsync;
    if (!strcmp(s, "cuMemRelease")) return (void *)cuMemRelease;
    if (!strcmp(s, "cuMemGetInfo")) return (void *)cuMemGetInfo_v2;
    if (!strcmp(s, "cuGetProcAddress")) return (void *)cuGetProcAddress;
    return NULL;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    int *status);

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    if (!strcmp(symbol, "cuGetProcAddress") && version >= 12000) {
        *pfn = (void *)cuGetProcAddress_v2;
        return 0;
    }
    *pfn = resolve(symbol, version, flags);
    return *pfn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    int *status) {
    CUresult r = cuGetProcAddress(symbol, pfn, version, flags);
    if (status) *status = r == 0 ? 0 : 1;
    return r;
}
