/* Test client for the shim: reaches the (stub) driver one of several ways, then runs line
 * commands from stdin and answers one line each on stdout.
 *
 *   client MODE      MODE: direct (linked against libcuda), dlsym (dlopen + dlsym),
 *                    getproc (cuGetProcAddress, CUDA 11.0 style), getproc2 (cuGetProcAddress
 *                    fetched through itself at 12.8: _v2, per-thread-stream variants),
 *                    rtldnext (dlsym(RTLD_NEXT, ...) from the program)
 *   ctx | retain     create a context on device 0 / retain and set the primary one
 *   alloc KIND MIB   KIND: mem pitch managed async pool vmm  -> "ok ID" | "err CODE"
 *   free ID          -> "ok" | "err CODE"
 *   info             -> "info FREE_MIB TOTAL_MIB" | "err CODE"
 *   burst N MIB      N allocations of MIB at once -> "granted K"
 *   quit
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long u64;

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(int *, int);
CUresult cuCtxCreate_v2(void **, unsigned int, int);
CUresult cuCtxSetCurrent(void *);
CUresult cuDevicePrimaryCtxRetain(void **, int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, void *);
CUresult cuMemCreate(u64 *, size_t, const void *, u64);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFreeAsync(CUdeviceptr, void *);
CUresult cuMemRelease(u64);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuGetProcAddress(const char *, void **, int, u64);

static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(int *, int);
    void *ctx_create; /* signature by ctx_version */
    int ctx_version;
    CUresult (*set_current)(void *);
    CUresult (*retain)(void **, int);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*async)(CUdeviceptr *, size_t, void *);
    CUresult (*pool)(CUdeviceptr *, size_t, void *, void *);
    CUresult (*create)(u64 *, size_t, const void *, u64);
    CUresult (*free_)(CUdeviceptr);
    CUresult (*free_async)(CUdeviceptr, void *);
    CUresult (*release)(u64);
    CUresult (*info)(size_t *, size_t *);
} api;

static void direct(void) {
    api.init = cuInit; api.device_get = cuDeviceGet; api.ctx_create = (void *)cuCtxCreate_v2;
    api.ctx_version = 2; api.set_current = cuCtxSetCurrent; api.retain = cuDevicePrimaryCtxRetain;
    api.alloc = cuMemAlloc_v2; api.pitch = cuMemAllocPitch_v2; api.managed = cuMemAllocManaged;
    api.async = cuMemAllocAsync; api.pool = cuMemAllocFromPoolAsync; api.create = cuMemCreate;
    api.free_ = cuMemFree_v2; api.free_async = cuMemFreeAsync; api.release = cuMemRelease;
    api.info = cuMemGetInfo_v2;
}

static void by_dlsym(void *h) {
    api.init = dlsym(h, "cuInit"); api.device_get = dlsym(h, "cuDeviceGet");
    api.ctx_create = dlsym(h, "cuCtxCreate_v2"); api.ctx_version = 2;
    api.set_current = dlsym(h, "cuCtxSetCurrent"); api.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    api.alloc = dlsym(h, "cuMemAlloc_v2"); api.pitch = dlsym(h, "cuMemAllocPitch_v2");
    api.managed = dlsym(h, "cuMemAllocManaged"); api.async = dlsym(h, "cuMemAllocAsync");
    api.pool = dlsym(h, "cuMemAllocFromPoolAsync"); api.create = dlsym(h, "cuMemCreate");
    api.free_ = dlsym(h, "cuMemFree_v2"); api.free_async = dlsym(h, "cuMemFreeAsync");
    api.release = dlsym(h, "cuMemRelease"); api.info = dlsym(h, "cuMemGetInfo_v2");
}

typedef CUresult (*GetProc1)(const char *, void **, int, u64);
typedef CUresult (*GetProc2)(const char *, void **, int, u64, int *);
static GetProc1 gp1;
static GetProc2 gp2;
static int gp_version;
static u64 gp_flags;

static void *gp(const char *name) {
    void *fn = NULL;
    int status = 0;
    CUresult r = gp2 ? gp2(name, &fn, gp_version, gp_flags, &status) : gp1(name, &fn, gp_version, gp_flags);
    if (r != 0) fn = NULL;
    return fn;
}

static void by_getproc(void) {
    api.init = gp("cuInit"); api.device_get = gp("cuDeviceGet");
    api.ctx_create = gp("cuCtxCreate");
    api.ctx_version = gp_version >= 12050 ? 4 : gp_version >= 11040 ? 3 : 2;
    api.set_current = gp("cuCtxSetCurrent"); api.retain = gp("cuDevicePrimaryCtxRetain");
    api.alloc = gp("cuMemAlloc"); api.pitch = gp("cuMemAllocPitch");
    api.managed = gp("cuMemAllocManaged"); api.async = gp("cuMemAllocAsync");
    api.pool = gp("cuMemAllocFromPoolAsync"); api.create = gp("cuMemCreate");
    api.free_ = gp("cuMemFree"); api.free_async = gp("cuMemFreeAsync");
    api.release = gp("cuMemRelease"); api.info = gp("cuMemGetInfo");
}

static CUresult make_context(void) {
    int dev = 0;
    void *ctx = NULL;
    CUresult r = api.init(0);
    if (r == 0) r = api.device_get(&dev, 0);
    if (r != 0) return r;
    if (api.ctx_version == 4) return ((CUresult(*)(void **, void *, unsigned, int))api.ctx_create)(&ctx, NULL, 0, dev);
    if (api.ctx_version == 3)
        return ((CUresult(*)(void **, void *, int, unsigned, int))api.ctx_create)(&ctx, NULL, 0, 0, dev);
    return ((CUresult(*)(void **, unsigned, int))api.ctx_create)(&ctx, 0, dev);
}

#define MAX_IDS 4096
static struct { u64 key; int vmm, async; } held[MAX_IDS];
static int n_held;

static CUresult alloc(const char *kind, size_t bytes, int *id) {
    u64 key = 0;
    size_t pitch = 0;
    CUresult r;
    int vmm = 0, async = 0;
    if (!strcmp(kind, "mem")) r = api.alloc(&key, bytes);
    else if (!strcmp(kind, "pitch")) r = api.pitch(&key, &pitch, bytes >> 10, 1024, 4);
    else if (!strcmp(kind, "managed")) r = api.managed(&key, bytes, 1);
    else if (!strcmp(kind, "async")) { r = api.async(&key, bytes, NULL); async = 1; }
    else if (!strcmp(kind, "pool")) { r = api.pool(&key, bytes, NULL, NULL); async = 1; }
    else if (!strcmp(kind, "vmm")) {
        int prop[8] = {1, 0, 1, 0}; /* pinned, no handle type, device 0 */
        r = api.create(&key, bytes, prop, 0);
        vmm = 1;
    } else return 1;
    if (r == 0) {
        held[n_held].key = key; held[n_held].vmm = vmm; held[n_held].async = async;
        *id = n_held++;
    }
    return r;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "direct";
    if (!strcmp(mode, "direct")) direct();
    else if (!strcmp(mode, "rtldnext")) {
        direct();
        api.alloc = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
        api.info = dlsym(RTLD_NEXT, "cuMemGetInfo_v2");
    } else {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) { printf("fatal %s\n", dlerror()); return 2; }
        if (!strcmp(mode, "dlsym")) by_dlsym(h);
        else if (!strcmp(mode, "getproc")) {
            gp1 = (GetProc1)dlsym(h, "cuGetProcAddress"); gp_version = 11000;
            by_getproc();
        } else if (!strcmp(mode, "getproc2")) {
            gp1 = (GetProc1)dlsym(h, "cuGetProcAddress"); gp_version = 12080; gp_flags = 2;
            void *fn = NULL;
            if (gp1("cuGetProcAddress", &fn, 12000, 0) != 0) { printf("fatal no v2\n"); return 2; }
            gp2 = (GetProc2)fn;
            by_getproc();
        } else { printf("fatal mode\n"); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    char line[256], kind[32];
    while (fgets(line, sizeof line, stdin)) {
        unsigned long long mib = 0;
        int id = 0;
        CUresult r;
        if (!strncmp(line, "ctx", 3)) {
            r = make_context();
            printf(r ? "err %d\n" : "ok\n", r);
        } else if (!strncmp(line, "retain", 6)) {
            void *ctx = NULL;
            api.init(0);
            r = api.retain(&ctx, 0);
            if (r == 0) r = api.set_current(ctx);
            printf(r ? "err %d\n" : "ok\n", r);
        } else if (sscanf(line, "alloc %31s %llu", kind, &mib) == 2) {
            r = alloc(kind, (size_t)mib << 20, &id);
            if (r) printf("err %d\n", r); else printf("ok %d\n", id);
        } else if (sscanf(line, "free %d", &id) == 1 && id >= 0 && id < n_held) {
            r = held[id].vmm ? api.release(held[id].key)
                : held[id].async ? api.free_async(held[id].key, NULL) : api.free_(held[id].key);
            printf(r ? "err %d\n" : "ok\n", r);
        } else if (sscanf(line, "burst %d %llu", &id, &mib) == 2) {
            /* id allocations of mib MiB as fast as possible: how many the shim granted */
            int granted = 0;
            for (int i = 0; i < id; i++) {
                int ignored;
                if (alloc("mem", (size_t)mib << 20, &ignored) == 0) granted++;
            }
            printf("granted %d\n", granted);
        } else if (!strncmp(line, "info", 4)) {
            size_t f = 0, t = 0;
            r = api.info(&f, &t);
            if (r) printf("err %d\n", r); else printf("info %zu %zu\n", f >> 20, t >> 20);
        } else if (!strncmp(line, "quit", 4)) {
            break;
        } else {
            printf("bad %s", line);
        }
    }
    return 0;
}
