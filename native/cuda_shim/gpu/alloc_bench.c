/* Allocation latency through the driver API: `alloc_bench N MIB` -> one JSON line.
 * Reaches libcuda by dlopen+dlsym (what the shim's dlsym hook serves), so it builds with gcc
 * and no CUDA headers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    size_t bytes = (size_t)(argc > 2 ? atoi(argv[2]) : 2) << 20;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { printf("{\"error\": \"no libcuda.so.1\"}\n"); return 1; }
    CUresult (*init)(unsigned) = dlsym(h, "cuInit");
    CUresult (*dev_get)(int *, int) = dlsym(h, "cuDeviceGet");
    CUresult (*retain)(void **, int) = dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(void *) = dlsym(h, "cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = dlsym(h, "cuMemAlloc_v2");
    CUresult (*release)(CUdeviceptr) = dlsym(h, "cuMemFree_v2");
    int dev = 0;
    void *ctx = NULL;
    CUresult r = init(0);
    if (!r) r = dev_get(&dev, 0);
    if (!r) r = retain(&ctx, dev);
    if (!r) r = set_current(ctx);
    if (r) { printf("{\"error\": \"context: CUresult %d\"}\n", r); return 1; }
    CUdeviceptr p;
    for (int i = 0; i < 50; i++) { alloc(&p, bytes); release(p); } /* warm up */
    double t0 = now();
    for (int i = 0; i < n; i++) {
        r = alloc(&p, bytes);
        if (r) { printf("{\"error\": \"cuMemAlloc: CUresult %d\"}\n", r); return 1; }
        release(p);
    }
    double us = (now() - t0) / n * 1e6;
    printf("{\"pairs\": %d, \"mib\": %zu, \"us_per_alloc_free\": %.3f}\n", n, bytes >> 20, us);
    return 0;
}
