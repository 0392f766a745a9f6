/* DLC CUDA driver-API interposer: shared declarations.
 *
 * No CUDA header is needed: the few driver types are declared here with the driver's ABI
 * (all handles are pointers or 64-bit integers; CUresult is an int enum).
 */
#ifndef DLC_CUDA_SHIM_H
#define DLC_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUmemoryPool;

/* The leading fields of CUmemAllocationProp (cuMemCreate): only the location is read. */
typedef struct {
    int type;
    int requestedHandleTypes;
    int locationType; /* CUmemLocationType: 1 = device */
    int locationId;
} ShimAllocProp;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NOT_FOUND 500
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2ULL

#define SHIM_MAX_DEV 64
#define SHIM_UNLIMITED UINT64_MAX

/* ---- configuration (config.c) ---- */
typedef struct {
    int loaded;                         /* a config file was read */
    char state_file[512];               /* shared accounting file ("" = per process) */
    uint64_t context_bytes;             /* counted once per process and GPU with a context */
    uint64_t limit[SHIM_MAX_DEV];       /* bytes per device ordinal; SHIM_UNLIMITED = none */
    int debug;
} ShimConfig;

/* The fixed path the executor mounts read-only; env DLC_SHIM_CONFIG only when it is absent. */
#define SHIM_CONFIG_PATH "/etc/dlc/cuda-shim.conf"

void shim_config_load(ShimConfig *cfg);
void shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- accounting across the container's processes (account.c) ---- */
/* Reserve `bytes` on device `dev` for this process; CUDA_ERROR_OUT_OF_MEMORY past the limit. */
CUresult shim_reserve(int dev, uint64_t bytes, const char *what);
void shim_unreserve(int dev, uint64_t bytes);
/* Bytes counted on `dev` by all live processes (dead ones reclaimed first). */
uint64_t shim_used(int dev);
uint64_t shim_limit(int dev);
void shim_account_init(const ShimConfig *cfg);
void shim_account_after_fork(void);

/* ---- per-process allocation map (allocmap.c) ---- */
void shim_map_put(uint64_t key, int kind, uint64_t bytes, int dev);
int shim_map_take(uint64_t key, int kind, uint64_t *bytes, int *dev); /* 1 if found */
void shim_map_clear(void);

#endif
