// A co-tenant for the blast-radius check: runs short kernels back to back for SECONDS and
// says how it ended. `tenant SECONDS LABEL`
//   stdout: "alive LABEL N" about every 0.5 s, then "done LABEL N" (exit 0), or
//           "error LABEL <CUDA error>" (exit 1) the moment a launch or a sync fails.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void spin(float *data, int rounds) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = data[i];
    for (int r = 0; r < rounds; r++) x = x * 0.999f + 0.001f;
    data[i] = x;
}

static int check(cudaError_t err, const char *label) {
    if (err == cudaSuccess) return 0;
    printf("error %s %s\n", label, cudaGetErrorString(err));
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    const char *label = argc > 2 ? argv[2] : "tenant";
    const int n = 1 << 20;
    float *data = nullptr;
    if (check(cudaMalloc(&data, n * sizeof(float)), label)) return 1;
    if (check(cudaMemset(data, 0, n * sizeof(float)), label)) return 1;
    printf("started %s\n", label);
    fflush(stdout);
    auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    long iters = 0;
    for (;;) {
        spin<<<n / 256, 256>>>(data, 2000);
        if (check(cudaGetLastError(), label) || check(cudaDeviceSynchronize(), label)) return 1;
        iters++;
        auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last).count() > 0.5) {
            printf("alive %s %ld\n", label, iters);
            fflush(stdout);
            last = now;
        }
        if (std::chrono::duration<double>(now - t0).count() > seconds) break;
    }
    printf("done %s %ld\n", label, iters);
    return 0;
}
