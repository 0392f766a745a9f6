/* DLC's CUDA driver-API interposer: memory limits at allocation for GPU shares without MPS.
 *
 * Loaded into every process of a share's container through /etc/ld.so.preload (bind-mounted
 * read-only by the executor; see docs/sharing.md), it wraps the driver entry points that
 * allocate or free device memory and the ones that report it:
 *
 *   cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemAllocAsync(_ptsz),
 *   cuMemAllocFromPoolAsync(_ptsz), cuMemCreate (VMM), cuMemFree_v2, cuMemFreeAsync(_ptsz),
 *   cuMemRelease, cuMemGetInfo_v2, cuCtxCreate_v2/_v3/_v4, cuDevicePrimaryCtxRetain.
 *
 * How callers reach the driver, and how each way gets the wrappers:
 *   - linked against libcuda: the preloaded definitions below come first in symbol lookup;
 *   - dlopen("libcuda.so.1") + dlsym: dlsym itself is wrapped and hands out the wrappers;
 *   - cuGetProcAddress / cuGetProcAddress_v2 (how libcudart 11.3+ and PyTorch get every driver
 *     function): wrapped; the pointer the driver returns is swapped for the wrapper, matched
 *     by address and, failing that, by name and the requested CUDA version.
 *
 * Each allocation is counted against the share of its GPU across all the container's
 * processes (account.c) BEFORE the driver is called; past the share the caller gets
 * CUDA_ERROR_OUT_OF_MEMORY, the driver's own out-of-memory error. A context is counted once
 * per process and GPU at a fixed size (context_mib): its real footprint is not observable
 * from here. cuMemGetInfo reports total = the share and free = min(driver's free, share -
 * counted use), so frameworks size their caches to the share.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"

#if defined(__x86_64__)
/* bind to the oldest versions so the library loads into images with an older glibc than the
 * build host's (dlopen/dlvsym moved into libc with new default versions in glibc 2.34) */
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlvsym,dlvsym@GLIBC_2.2.5");
#endif

#define EXPORT __attribute__((visibility("default")))

enum {
    F_ALLOC, F_PITCH, F_MANAGED, F_ASYNC, F_ASYNC_PTSZ, F_POOL, F_POOL_PTSZ, F_CREATE,
    F_FREE, F_FREE_ASYNC, F_FREE_ASYNC_PTSZ, F_RELEASE, F_GETINFO,
    F_CTX2, F_CTX3, F_CTX4, F_RETAIN, F_GETPROC, F_GETPROC2, F_CTXDEV, F_COUNT
};
enum { K_PTR = 0, K_HANDLE = 1 };

typedef struct {
    const char *name;
    void *wrapper; /* NULL: used, not wrapped */
    void *real;
} Hook;

static Hook hooks[F_COUNT];
static ShimConfig config;
static int ready;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char ctx_counted[SHIM_MAX_DEV];
static void *(*next_dlsym)(void *, const char *);

/* ---- finding the real functions ----------------------------------------------------------- */

static void *real_dlsym(void *handle, const char *name) {
    if (next_dlsym == NULL) {
        next_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (next_dlsym == NULL)
            next_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return next_dlsym ? next_dlsym(handle, name) : NULL;
}

static void *cuda_library(void) {
    static void *handle;
    if (handle == NULL) {
        handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (handle == NULL) handle = dlopen("libcuda.so.1", RTLD_NOW);
    }
    return handle;
}

static void *real_of(int f) {
    if (hooks[f].real == NULL) {
        void *lib = cuda_library();
        if (lib != NULL) hooks[f].real = real_dlsym(lib, hooks[f].name);
    }
    return hooks[f].real;
}

static void load(void) {
    pthread_mutex_lock(&init_lock);
    if (!ready) {
        shim_config_load(&config);
        shim_account_init(&config);
        ready = 1;
    }
    pthread_mutex_unlock(&init_lock);
}

static inline int enforcing(void) {
    if (!ready) load();
    return config.loaded;
}

static int current_device(void) {
    CUresult (*get)(CUdevice *) = (CUresult(*)(CUdevice *))real_of(F_CTXDEV);
    CUdevice dev = -1;
    if (get == NULL || get(&dev) != CUDA_SUCCESS) return -1; /* no context: the driver fails it */
    return dev;
}

/* Count `bytes` on `dev` once the driver said yes; give the reservation back if it said no. */
static CUresult settle(CUresult r, int dev, uint64_t bytes, uint64_t key, int kind) {
    if (r == CUDA_SUCCESS)
        shim_map_put(key, kind, bytes, dev);
    else
        shim_unreserve(dev, bytes);
    return r;
}

static void released(CUresult r, uint64_t key, int kind) {
    uint64_t bytes;
    int dev;
    if (r == CUDA_SUCCESS && shim_map_take(key, kind, &bytes, &dev)) shim_unreserve(dev, bytes);
}

#define REAL(f, type)                                   \
    __typeof__(type) real = (__typeof__(type))real_of(f); \
    if (real == NULL) return CUDA_ERROR_NOT_INITIALIZED

/* ---- allocation -------------------------------------------------------------------------- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    REAL(F_ALLOC, CUresult(*)(CUdeviceptr *, size_t));
    if (!enforcing()) return real(dptr, bytes);
    int dev = current_device();
    CUresult r = shim_reserve(dev, bytes, "cuMemAlloc");
    if (r != CUDA_SUCCESS) return r;
    r = real(dptr, bytes);
    return settle(r, dev, bytes, r == CUDA_SUCCESS ? *dptr : 0, K_PTR);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int element) {
    typedef CUresult (*Free)(CUdeviceptr);
    REAL(F_PITCH, CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int));
    if (!enforcing()) return real(dptr, pitch, width, height, element);
    int dev = current_device();
    uint64_t guess = (uint64_t)((width + 511) & ~(size_t)511) * height; /* the driver's pitch */
    CUresult r = shim_reserve(dev, guess, "cuMemAllocPitch");
    if (r != CUDA_SUCCESS) return r;
    r = real(dptr, pitch, width, height, element);
    if (r != CUDA_SUCCESS) return settle(r, dev, guess, 0, K_PTR);
    uint64_t bytes = (uint64_t)*pitch * height;
    if (bytes > guess && shim_reserve(dev, bytes - guess, "cuMemAllocPitch") != CUDA_SUCCESS) {
        Free free_it = (Free)real_of(F_FREE);
        if (free_it) free_it(*dptr);
        shim_unreserve(dev, guess);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (bytes < guess) shim_unreserve(dev, guess - bytes);
    shim_map_put(*dptr, K_PTR, bytes, dev);
    return r;
}

/* Managed memory may live on the host too; it is counted against the current GPU in full. */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) {
    REAL(F_MANAGED, CUresult(*)(CUdeviceptr *, size_t, unsigned int));
    if (!enforcing()) return real(dptr, bytes, flags);
    int dev = current_device();
    CUresult r = shim_reserve(dev, bytes, "cuMemAllocManaged");
    if (r != CUDA_SUCCESS) return r;
    r = real(dptr, bytes, flags);
    return settle(r, dev, bytes, r == CUDA_SUCCESS ? *dptr : 0, K_PTR);
}

static CUresult alloc_async(int f, CUdeviceptr *dptr, size_t bytes, CUstream stream) {
    REAL(f, CUresult(*)(CUdeviceptr *, size_t, CUstream));
    if (!enforcing()) return real(dptr, bytes, stream);
    int dev = current_device();
    CUresult r = shim_reserve(dev, bytes, "cuMemAllocAsync");
    if (r != CUDA_SUCCESS) return r;
    r = real(dptr, bytes, stream);
    return settle(r, dev, bytes, r == CUDA_SUCCESS ? *dptr : 0, K_PTR);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream) {
    return alloc_async(F_ASYNC, dptr, bytes, stream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream) {
    return alloc_async(F_ASYNC_PTSZ, dptr, bytes, stream);
}

static CUresult alloc_pool(int f, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                           CUstream stream) {
    REAL(f, CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream));
    if (!enforcing()) return real(dptr, bytes, pool, stream);
    int dev = current_device();
    CUresult r = shim_reserve(dev, bytes, "cuMemAllocFromPoolAsync");
    if (r != CUDA_SUCCESS) return r;
    r = real(dptr, bytes, pool, stream);
    return settle(r, dev, bytes, r == CUDA_SUCCESS ? *dptr : 0, K_PTR);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                        CUstream stream) {
    return alloc_pool(F_POOL, dptr, bytes, pool, stream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream stream) {
    return alloc_pool(F_POOL_PTSZ, dptr, bytes, pool, stream);
}

/* VMM: physical memory is made here (cuMemMap only maps it), so this is what counts. */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t bytes,
                            const ShimAllocProp *prop, unsigned long long flags) {
    REAL(F_CREATE, CUresult(*)(CUmemGenericAllocationHandle *, size_t, const ShimAllocProp *,
                               unsigned long long));
    if (!enforcing()) return real(handle, bytes, prop, flags);
    int dev = -1;
    if (prop != NULL && prop->locationType == CU_MEM_LOCATION_TYPE_DEVICE) dev = prop->locationId;
    CUresult r = shim_reserve(dev, bytes, "cuMemCreate");
    if (r != CUDA_SUCCESS) return r;
    r = real(handle, bytes, prop, flags);
    return settle(r, dev, bytes, r == CUDA_SUCCESS ? *handle : 0, K_HANDLE);
}

/* ---- freeing ----------------------------------------------------------------------------- */

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    REAL(F_FREE, CUresult(*)(CUdeviceptr));
    CUresult r = real(dptr);
    if (enforcing()) released(r, dptr, K_PTR);
    return r;
}

/* Given back when enqueued, not when the stream reaches it; a pool may also keep the memory
 * reserved past its release threshold: cuMemGetInfo's min() with the driver covers both. */
static CUresult free_async(int f, CUdeviceptr dptr, CUstream stream) {
    REAL(f, CUresult(*)(CUdeviceptr, CUstream));
    CUresult r = real(dptr, stream);
    if (enforcing()) released(r, dptr, K_PTR);
    return r;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    return free_async(F_FREE_ASYNC, dptr, stream);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
    return free_async(F_FREE_ASYNC_PTSZ, dptr, stream);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    REAL(F_RELEASE, CUresult(*)(CUmemGenericAllocationHandle));
    CUresult r = real(handle);
    if (enforcing()) released(r, handle, K_HANDLE);
    return r;
}

/* ---- reporting --------------------------------------------------------------------------- */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    REAL(F_GETINFO, CUresult(*)(size_t *, size_t *));
    CUresult r = real(free_bytes, total_bytes);
    if (r != CUDA_SUCCESS || !enforcing()) return r;
    int dev = current_device();
    uint64_t limit = shim_limit(dev);
    if (limit == SHIM_UNLIMITED) return r;
    uint64_t used = shim_used(dev);
    uint64_t left = used >= limit ? 0 : limit - used;
    if (free_bytes != NULL && *free_bytes > left) *free_bytes = (size_t)left;
    if (total_bytes != NULL && *total_bytes > limit) *total_bytes = (size_t)limit;
    return r;
}

/* ---- contexts ---------------------------------------------------------------------------- */

/* Count this process's context on `dev` once (the primary context is retained many times). */
static CUresult context_reserve(int dev, int *counted_now) {
    *counted_now = 0;
    if (!enforcing() || dev < 0 || dev >= SHIM_MAX_DEV || config.context_bytes == 0)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&ctx_lock);
    CUresult r = CUDA_SUCCESS;
    if (!ctx_counted[dev]) {
        r = shim_reserve(dev, config.context_bytes, "context creation");
        if (r == CUDA_SUCCESS) ctx_counted[dev] = *counted_now = 1;
    }
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

static CUresult context_settle(CUresult r, int dev, int counted_now) {
    if (r != CUDA_SUCCESS && counted_now) {
        pthread_mutex_lock(&ctx_lock);
        ctx_counted[dev] = 0;
        pthread_mutex_unlock(&ctx_lock);
        shim_unreserve(dev, config.context_bytes);
    }
    return r;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    REAL(F_CTX2, CUresult(*)(CUcontext *, unsigned int, CUdevice));
    int now;
    CUresult r = context_reserve(dev, &now);
    return r != CUDA_SUCCESS ? r : context_settle(real(pctx, flags, dev), dev, now);
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *params, int count, unsigned int flags,
                               CUdevice dev) {
    REAL(F_CTX3, CUresult(*)(CUcontext *, void *, int, unsigned int, CUdevice));
    int now;
    CUresult r = context_reserve(dev, &now);
    return r != CUDA_SUCCESS ? r : context_settle(real(pctx, params, count, flags, dev), dev, now);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev) {
    REAL(F_CTX4, CUresult(*)(CUcontext *, void *, unsigned int, CUdevice));
    int now;
    CUresult r = context_reserve(dev, &now);
    return r != CUDA_SUCCESS ? r : context_settle(real(pctx, params, flags, dev), dev, now);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    REAL(F_RETAIN, CUresult(*)(CUcontext *, CUdevice));
    int now;
    CUresult r = context_reserve(dev, &now);
    return r != CUDA_SUCCESS ? r : context_settle(real(pctx, dev), dev, now);
}

/* ---- handing out the wrappers ------------------------------------------------------------ */

/* The wrapper cuGetProcAddress(symbol, cudaVersion, flags) should hand out, by name: the
 * driver picks the ABI version of a symbol from the caller's CUDA version. */
static int by_name(const char *symbol, int version, cuuint64_t flags) {
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    static const struct { const char *name; int f, f_ptsz, since; } table[] = {
        {"cuMemAlloc", F_ALLOC, F_ALLOC, 3020},
        {"cuMemAllocPitch", F_PITCH, F_PITCH, 3020},
        {"cuMemAllocManaged", F_MANAGED, F_MANAGED, 0},
        {"cuMemAllocAsync", F_ASYNC, F_ASYNC_PTSZ, 0},
        {"cuMemAllocFromPoolAsync", F_POOL, F_POOL_PTSZ, 0},
        {"cuMemCreate", F_CREATE, F_CREATE, 0},
        {"cuMemFree", F_FREE, F_FREE, 3020},
        {"cuMemFreeAsync", F_FREE_ASYNC, F_FREE_ASYNC_PTSZ, 0},
        {"cuMemRelease", F_RELEASE, F_RELEASE, 0},
        {"cuMemGetInfo", F_GETINFO, F_GETINFO, 3020},
        {"cuDevicePrimaryCtxRetain", F_RETAIN, F_RETAIN, 0},
    };
    if (strcmp(symbol, "cuCtxCreate") == 0)
        return version >= 12050 ? F_CTX4 : version >= 11040 ? F_CTX3 : version >= 3020 ? F_CTX2 : -1;
    if (strcmp(symbol, "cuGetProcAddress") == 0) return version >= 12000 ? F_GETPROC2 : F_GETPROC;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(symbol, table[i].name) == 0)
            return version >= table[i].since ? (ptsz ? table[i].f_ptsz : table[i].f) : -1;
    return -1;
}

static void trace(const char *how, const char *symbol, int version, int f) {
    if (enforcing() && config.debug >= 2)
        shim_log("%s(%s, %d) -> %s", how, symbol ? symbol : "?", version,
                 f >= 0 ? hooks[f].name : "not wrapped");
}

static void *substitute(const char *symbol, void *fn, int version, cuuint64_t flags) {
    if (fn == NULL) return fn;
    for (int f = 0; f < F_COUNT; f++) {
        if (hooks[f].wrapper == NULL) continue;
        if (hooks[f].wrapper == fn || real_of(f) == fn) {
            trace("cuGetProcAddress", symbol, version, f);
            return hooks[f].wrapper;
        }
    }
    int f = symbol ? by_name(symbol, version, flags) : -1;
    trace("cuGetProcAddress", symbol, version, f);
    if (f < 0) return fn;
    if (hooks[f].real == NULL) hooks[f].real = fn; /* the driver does not export it */
    return hooks[f].wrapper;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    REAL(F_GETPROC, CUresult(*)(const char *, void **, int, cuuint64_t));
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn != NULL) *pfn = substitute(symbol, *pfn, version, flags);
    return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    int *status) {
    REAL(F_GETPROC2, CUresult(*)(const char *, void **, int, cuuint64_t, int *));
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn != NULL) *pfn = substitute(symbol, *pfn, version, flags);
    return r;
}

static int hooked_name(const char *name) {
    if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
    for (int f = 0; f < F_COUNT; f++)
        if (hooks[f].wrapper != NULL && strcmp(name, hooks[f].name) == 0) return f;
    return -1;
}

/* dlsym(handle of libcuda, "cuMemAlloc_v2") would find the driver's own function: hand out
 * the wrapper instead. Any other name is passed on as a tail call, so glibc still sees the
 * caller's return address (it decides what RTLD_NEXT means from it): the Makefile builds
 * with -O2 -foptimize-sibling-calls, and tests/native/test_cuda_shim.py checks RTLD_NEXT. */
EXPORT void *dlsym(void *handle, const char *name) {
    int f = hooked_name(name);
    if (f < 0) return real_dlsym(handle, name);
    void *fn = real_dlsym(handle, name);
    trace("dlsym", name, 0, fn ? f : -1);
    if (fn == NULL || fn == hooks[f].wrapper) return fn;
    if (hooks[f].real == NULL) hooks[f].real = fn;
    return hooks[f].wrapper;
}

/* ---- setup ------------------------------------------------------------------------------- */

static void after_fork(void) {
    pthread_mutex_init(&init_lock, NULL);
    pthread_mutex_init(&ctx_lock, NULL);
    memset(ctx_counted, 0, sizeof ctx_counted);
    shim_map_clear();
    shim_account_after_fork();
}

__attribute__((constructor)) static void shim_setup(void) {
    static const Hook table[F_COUNT] = {
        [F_ALLOC] = {"cuMemAlloc_v2", (void *)cuMemAlloc_v2, NULL},
        [F_PITCH] = {"cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2, NULL},
        [F_MANAGED] = {"cuMemAllocManaged", (void *)cuMemAllocManaged, NULL},
        [F_ASYNC] = {"cuMemAllocAsync", (void *)cuMemAllocAsync, NULL},
        [F_ASYNC_PTSZ] = {"cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz, NULL},
        [F_POOL] = {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync, NULL},
        [F_POOL_PTSZ] = {"cuMemAllocFromPoolAsync_ptsz", (void *)cuMemAllocFromPoolAsync_ptsz,
                         NULL},
        [F_CREATE] = {"cuMemCreate", (void *)cuMemCreate, NULL},
        [F_FREE] = {"cuMemFree_v2", (void *)cuMemFree_v2, NULL},
        [F_FREE_ASYNC] = {"cuMemFreeAsync", (void *)cuMemFreeAsync, NULL},
        [F_FREE_ASYNC_PTSZ] = {"cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz, NULL},
        [F_RELEASE] = {"cuMemRelease", (void *)cuMemRelease, NULL},
        [F_GETINFO] = {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2, NULL},
        [F_CTX2] = {"cuCtxCreate_v2", (void *)cuCtxCreate_v2, NULL},
        [F_CTX3] = {"cuCtxCreate_v3", (void *)cuCtxCreate_v3, NULL},
        [F_CTX4] = {"cuCtxCreate_v4", (void *)cuCtxCreate_v4, NULL},
        [F_RETAIN] = {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain, NULL},
        [F_GETPROC] = {"cuGetProcAddress", (void *)cuGetProcAddress, NULL},
        [F_GETPROC2] = {"cuGetProcAddress_v2", (void *)cuGetProcAddress_v2, NULL},
        [F_CTXDEV] = {"cuCtxGetDevice", NULL, NULL},
    };
    memcpy(hooks, table, sizeof hooks);
    pthread_atfork(NULL, NULL, after_fork);
}
