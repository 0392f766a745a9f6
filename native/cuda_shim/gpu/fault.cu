// The faulting tenant: after DELAY seconds, a kernel writes through a wild pointer.
// `fault DELAY` -> "fault <CUDA error>" (exit 2 when the fault was reported, as expected).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cuda_runtime.h>

__global__ void wild_write(int *p) { p[threadIdx.x * 4096] = 42; }

int main(int argc, char **argv) {
    double delay = argc > 1 ? atof(argv[1]) : 3.0;
    int *scratch = nullptr;
    if (cudaMalloc(&scratch, 4096) != cudaSuccess) { printf("fault setup failed\n"); return 1; }
    printf("started fault\n");
    fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    // far past any allocation: an address no one mapped
    int *wild = reinterpret_cast<int *>(0x7ff000000000ULL);
    wild_write<<<1, 32>>>(wild);
    cudaError_t err = cudaDeviceSynchronize();
    printf("fault %s\n", cudaGetErrorString(err));
    fflush(stdout);
    return err == cudaSuccess ? 0 : 2;
}
