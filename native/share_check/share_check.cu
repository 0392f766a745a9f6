// share_check: the CUDA client that DLC's GPU check (`make gpu-check`) runs to see what a
// GPU-sharing mechanism really enforces. It never changes GPU settings (compute mode, MIG).
//
//   share_check alloc MIB [--chunk MIB] [--hold SECONDS]
//       allocate MIB of device memory in chunks (default 256 MiB) until done or refused,
//       print {"mode":"alloc","pid":..,"asked_mib":..,"got_mib":..,"refused":bool,...},
//       then keep the memory for --hold seconds (so that NVML readings can be taken).
//   share_check sms [--blocks N]
//       launch N blocks (default 16 x SM count) that each record the SM they ran on, print
//       {"mode":"sms","sm_count":..,"sms_used":..}: under an MPS active-thread percentage the
//       blocks land on a subset of the SMs.
// Exit codes: 0 done (a refused allocation is a result, not an error), 1 CUDA error, 2 usage.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

__global__ void record_sm(unsigned* sm_of_block, long long spin_cycles) {
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_of_block[blockIdx.x] = sm;
    // Stay resident a little so that the blocks spread over every SM they may use.
    long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
}

int fail(const char* call, cudaError_t err) {
  std::printf("{\"error\": \"%s: %s\"}\n", call, cudaGetErrorString(err));
  return 1;
}

int usage() {
  std::fprintf(stderr, "usage: share_check alloc MIB [--chunk MIB] [--hold S] | sms [--blocks N]\n");
  return 2;
}

int run_alloc(long long asked, long long chunk, int hold_s) {
  std::vector<void*> blocks;
  long long got = 0;
  cudaError_t refused = cudaSuccess;
  while (got < asked) {
    long long take = asked - got < chunk ? asked - got : chunk;
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, static_cast<size_t>(take) << 20);
    if (err != cudaSuccess && err != cudaErrorMemoryAllocation) return fail("cudaMalloc", err);
    if (err != cudaSuccess) {  // out of memory, or an MPS pinned-memory limit reached
      refused = err;
      (void)cudaGetLastError();
      break;
    }
    // Touch the memory so it is really backed, not just reserved.
    err = cudaMemset(p, 0xA5, static_cast<size_t>(take) << 20);
    if (err != cudaSuccess) return fail("cudaMemset", err);
    blocks.push_back(p);
    got += take;
  }
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
  if (err != cudaSuccess) return fail("cudaMemGetInfo", err);
  std::printf(
      "{\"mode\": \"alloc\", \"pid\": %d, \"asked_mib\": %lld, \"got_mib\": %lld, "
      "\"refused\": %s, \"refusal\": \"%s\", \"visible_total_mib\": %zu, "
      "\"visible_free_mib\": %zu}\n",
      static_cast<int>(getpid()), asked, got, refused != cudaSuccess ? "true" : "false",
      refused != cudaSuccess ? cudaGetErrorName(refused) : "", total_b >> 20, free_b >> 20);
  std::fflush(stdout);
  if (hold_s > 0) sleep(static_cast<unsigned>(hold_s));
  for (void* p : blocks) (void)cudaFree(p);
  return 0;
}

int run_sms(int blocks) {
  cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) return fail("cudaGetDeviceProperties", err);
  if (blocks <= 0) blocks = 16 * prop.multiProcessorCount;
  unsigned* d_sm = nullptr;
  err = cudaMalloc(&d_sm, sizeof(unsigned) * blocks);
  if (err != cudaSuccess) return fail("cudaMalloc", err);
  // ~0.2 ms per block at ~1.8 GHz: long enough to fill every usable SM.
  record_sm<<<blocks, 32>>>(d_sm, 400000);
  err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return fail("record_sm", err);
  std::vector<unsigned> sm(blocks);
  err = cudaMemcpy(sm.data(), d_sm, sizeof(unsigned) * blocks, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return fail("cudaMemcpy", err);
  std::set<unsigned> used(sm.begin(), sm.end());
  std::printf("{\"mode\": \"sms\", \"pid\": %d, \"sm_count\": %d, \"blocks\": %d, \"sms_used\": %zu}\n",
              static_cast<int>(getpid()), prop.multiProcessorCount, blocks, used.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string mode = argv[1];
  long long chunk = 256;
  int hold_s = 0;
  int blocks = 0;
  long long asked = 0;
  int i = 2;
  if (mode == "alloc") {
    if (argc < 3) return usage();
    asked = std::atoll(argv[2]);
    if (asked <= 0) return usage();
    i = 3;
  } else if (mode != "sms") {
    return usage();
  }
  for (; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--chunk") {
      chunk = std::atoll(argv[i + 1]);
    } else if (flag == "--hold") {
      hold_s = std::atoi(argv[i + 1]);
    } else if (flag == "--blocks") {
      blocks = std::atoi(argv[i + 1]);
    } else {
      return usage();
    }
  }
  if (i != argc || chunk <= 0) return usage();
  return mode == "alloc" ? run_alloc(asked, chunk, hold_s) : run_sms(blocks);
}
