// dlc-p2p-probe: measure GPU-to-GPU copy bandwidth and latency per ordered pair.
//
// For every ordered pair (src, dst) of the chosen GPUs it reports whether CUDA
// allows peer access, then times cudaMemcpyPeerAsync with peer access disabled
// (the driver stages the copy through host memory) and enabled (direct P2P over
// NVLink or PCIe): one-way and two-way bandwidth for a large transfer, and the
// latency of small transfers. Times come from CUDA events after a warm-up; each
// figure is the median of --repeats runs. Output: one JSON document on stdout
// (schema in README.md), or readable matrices with --table.
//
// Exit codes: 0 ok, 1 a CUDA call failed, 2 usage error, 3 no CUDA device,
// 4 no NVIDIA driver or a driver too old for this CUDA runtime. Every failure
// prints a one-line JSON error on stdout.

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <exception>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef PROBE_ARCHS
#define PROBE_ARCHS "unknown"
#endif

namespace {

constexpr int kSchemaVersion = 1;
constexpr const char* kToolVersion = "1.1.0";

enum ExitCode { kOk = 0, kCudaFailed = 1, kUsage = 2, kNoDevice = 3, kNoDriver = 4 };

// Everything that ends the run early; main() turns it into the JSON error line.
struct ProbeFailure {
  int exit_code;
  std::string kind;
  std::string message;
  std::string call;
  std::string file;
  int line;
  std::string cuda_error;
};

ProbeFailure usage_failure(const std::string& message) {
  return ProbeFailure{kUsage, "usage", message, "", "", 0, ""};
}

// Which exit code a failing CUDA call maps to. The "no driver" family is what the
// runtime returns when libcuda.so is missing, is a stub, or is older than the runtime.
int classify(cudaError_t err, std::string* kind) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
      *kind = "no_device";
      return kNoDevice;
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorCallRequiresNewerDriver:
      *kind = "no_driver";
      return kNoDriver;
    default:
      *kind = "cuda_error";
      return kCudaFailed;
  }
}

[[noreturn]] void fail_cuda(cudaError_t err, const char* call, const char* file, int line) {
  ProbeFailure f;
  f.exit_code = classify(err, &f.kind);
  f.message = std::string(call) + " failed: " + cudaGetErrorString(err);
  f.call = call;
  f.file = file;
  f.line = line;
  f.cuda_error = cudaGetErrorName(err);
  throw f;
}

#define CUDA_CHECK(call)                                              \
  do {                                                                \
    cudaError_t probe_err_ = (call);                                  \
    if (probe_err_ != cudaSuccess) {                                  \
      fail_cuda(probe_err_, #call, __FILE__, __LINE__);               \
    }                                                                 \
  } while (0)

// ---------------------------------------------------------------- options

struct Options {
  std::vector<int> gpus;  // empty: all
  size_t size = size_t{64} << 20;
  int iters = 20;
  int repeats = 5;
  int warmup = 3;
  size_t latency_size = 4;
  int latency_iters = 100;
  bool table = false;
  bool help = false;
  bool version = false;
};

const char* kUsageText =
    "usage: p2p_probe [--gpus 0,1,3] [--size 64M] [--iters N] [--repeats N] [--warmup N]\n"
    "                 [--latency-size 4] [--latency-iters N] [--table] [--help] [--version]\n"
    "  --gpus LIST         CUDA device indices (PCI bus order), default all\n"
    "  --size SIZE         bandwidth transfer size, suffix K/M/G = KiB/MiB/GiB (default 64M)\n"
    "  --iters N           copies per timed run (default 20)\n"
    "  --repeats N         timed runs per figure; the median is reported (default 5)\n"
    "  --warmup N          untimed copies before timing (default 3)\n"
    "  --latency-size SIZE transfer size of the latency test (default 4 bytes)\n"
    "  --latency-iters N   copies per timed latency run (default 100)\n"
    "  --table             print readable matrices instead of JSON\n"
    "exit codes: 0 ok, 1 CUDA error, 2 usage error, 3 no CUDA device, 4 no/old driver\n";

size_t parse_size(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || errno != 0) {
    throw usage_failure(flag + ": expected a size such as 64M, got '" + text + "'");
  }
  std::string suffix(end);
  unsigned long long scale = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    scale = 1ULL << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    scale = 1ULL << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    scale = 1ULL << 30;
  } else if (!suffix.empty() && suffix != "B" && suffix != "b") {
    throw usage_failure(flag + ": unknown suffix '" + suffix + "' (use K, M or G)");
  }
  constexpr unsigned long long kMax = 1ULL << 36;  // 64 GiB: far beyond any useful copy
  if (value == 0 || value > kMax / scale) {
    throw usage_failure(flag + ": size must be between 1 byte and 64G, got '" + text + "'");
  }
  return static_cast<size_t>(value * scale);
}

int parse_count(const std::string& flag, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < lo || value > hi) {
    throw usage_failure(flag + ": expected an integer from " + std::to_string(lo) + " to " +
                        std::to_string(hi) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> gpus;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    int gpu = parse_count("--gpus", item, 0, 1023);
    if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
      throw usage_failure("--gpus: GPU " + item + " is listed twice");
    }
    gpus.push_back(gpu);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return gpus;
}

Options parse_args(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    bool has_inline = arg.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_inline) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) throw usage_failure(arg + ": missing value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      opt.help = true;
    } else if (arg == "--version") {
      opt.version = true;
    } else if (arg == "--table") {
      opt.table = true;
    } else if (arg == "--gpus") {
      opt.gpus = parse_gpu_list(next());
    } else if (arg == "--size") {
      opt.size = parse_size(arg, next());
    } else if (arg == "--latency-size") {
      opt.latency_size = parse_size(arg, next());
    } else if (arg == "--iters") {
      opt.iters = parse_count(arg, next(), 1, 100000);
    } else if (arg == "--repeats") {
      opt.repeats = parse_count(arg, next(), 1, 1000);
    } else if (arg == "--warmup") {
      opt.warmup = parse_count(arg, next(), 0, 100000);
    } else if (arg == "--latency-iters") {
      opt.latency_iters = parse_count(arg, next(), 1, 1000000);
    } else {
      throw usage_failure("unknown argument '" + arg + "' (see --help)");
    }
  }
  if (opt.latency_size > opt.size) {
    throw usage_failure("--latency-size: must not exceed --size");
  }
  return opt;
}

// ---------------------------------------------------------------- JSON helpers

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

const char* json_bool(bool b) { return b ? "true" : "false"; }

void print_error_json(const ProbeFailure& f) {
  std::string line = "{\"version\":" + std::to_string(kSchemaVersion) + ",\"error\":{";
  line += "\"exit_code\":" + std::to_string(f.exit_code);
  line += ",\"kind\":" + json_string(f.kind);
  line += ",\"message\":" + json_string(f.message);
  if (!f.call.empty()) {
    line += ",\"call\":" + json_string(f.call) + ",\"file\":" + json_string(f.file);
    line += ",\"line\":" + std::to_string(f.line);
    line += ",\"cuda_error\":" + json_string(f.cuda_error);
  }
  line += "}}";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// ---------------------------------------------------------------- data check kernels

// A position-dependent pattern per source GPU, so that a copy that lands in the wrong
// place or from the wrong GPU is caught (broken P2P under an IOMMU copies garbage).
__device__ __host__ inline uint32_t pattern(size_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  return x ^ (x >> 15);
}

__global__ void fill_pattern(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    p[i] = pattern(i, seed);
  }
}

__global__ void count_mismatches(const uint32_t* p, size_t n, uint32_t seed,
                                 unsigned long long* bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    local += p[i] != pattern(i, seed);
  }
  if (local) atomicAdd(bad, local);
}

uint32_t seed_of(int device) { return 0x9E3779B9u * static_cast<uint32_t>(device + 1); }

// ---------------------------------------------------------------- per-device state

struct DeviceState {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0;
  int cc_minor = 0;
  bool kernels = false;  // the fatbin has code this GPU can run
  void* send = nullptr;
  void* recv = nullptr;
  unsigned long long* bad = nullptr;
  void* host = nullptr;  // pinned host buffer for host<->device figures
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

void init_device(DeviceState* d, const Options& opt, std::vector<std::string>* warnings) {
  CUDA_CHECK(cudaSetDevice(d->index));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, d->index));
  d->name = prop.name;
  d->cc_major = prop.major;
  d->cc_minor = prop.minor;
  char bus[32] = {0};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d->index));
  d->pci_bus_id = bus;
  CUDA_CHECK(cudaMalloc(&d->send, opt.size));
  CUDA_CHECK(cudaMalloc(&d->recv, opt.size));
  CUDA_CHECK(cudaMalloc(&d->bad, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMallocHost(&d->host, opt.size));
  CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&d->start));
  CUDA_CHECK(cudaEventCreate(&d->stop));
  // A build without code for this GPU (e.g. CUDA 13 has no sm_70) can still time
  // copies; only the data check needs a kernel.
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, fill_pattern);
  d->kernels = err == cudaSuccess;
  if (!d->kernels) {
    (void)cudaGetLastError();
    warnings->push_back("GPU " + std::to_string(d->index) + " (sm_" +
                        std::to_string(d->cc_major * 10 + d->cc_minor) +
                        "): no kernel image in this build (" + PROBE_ARCHS +
                        "), data check skipped");
    CUDA_CHECK(cudaMemset(d->send, 0x5A, opt.size));
    return;
  }
  fill_pattern<<<256, 256, 0, d->stream>>>(static_cast<uint32_t*>(d->send), opt.size / 4,
                                             seed_of(d->index));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(d->stream));
}

void free_device(DeviceState* d) {
  // Best effort: the process is about to exit, errors here change nothing.
  (void)cudaSetDevice(d->index);
  (void)cudaFree(d->send);
  (void)cudaFree(d->recv);
  (void)cudaFree(d->bad);
  if (d->host) (void)cudaFreeHost(d->host);
  if (d->stream) (void)cudaStreamDestroy(d->stream);
  if (d->start) (void)cudaEventDestroy(d->start);
  if (d->stop) (void)cudaEventDestroy(d->stop);
}

// True when dst->recv holds src's pattern; false on a mismatch. Only call when both
// GPUs run kernels.
bool check_copy(DeviceState* src, DeviceState* dst, size_t bytes) {
  CUDA_CHECK(cudaSetDevice(dst->index));
  CUDA_CHECK(cudaMemsetAsync(dst->bad, 0, sizeof(unsigned long long), dst->stream));
  count_mismatches<<<256, 256, 0, dst->stream>>>(static_cast<const uint32_t*>(dst->recv),
                                                 bytes / 4, seed_of(src->index), dst->bad);
  CUDA_CHECK(cudaGetLastError());
  unsigned long long bad = 0;
  CUDA_CHECK(cudaMemcpyAsync(&bad, dst->bad, sizeof bad, cudaMemcpyDeviceToHost, dst->stream));
  CUDA_CHECK(cudaStreamSynchronize(dst->stream));
  return bad == 0;
}

// ---------------------------------------------------------------- timing

// Milliseconds for `iters` one-way copies src->dst, issued on the source GPU's stream.
float time_one_way(DeviceState* src, DeviceState* dst, size_t bytes, int iters) {
  CUDA_CHECK(cudaSetDevice(src->index));
  CUDA_CHECK(cudaEventRecord(src->start, src->stream));
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaMemcpyPeerAsync(dst->recv, dst->index, src->send, src->index, bytes,
                                   src->stream));
  }
  CUDA_CHECK(cudaEventRecord(src->stop, src->stream));
  CUDA_CHECK(cudaEventSynchronize(src->stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, src->start, src->stop));
  return ms;
}

// Milliseconds for `iters` copies each way at once. The destination's stream waits for
// the start event of the source's stream and the source's stream waits for the
// destination's last copy, so one pair of events spans both directions.
float time_two_way(DeviceState* src, DeviceState* dst, size_t bytes, int iters) {
  CUDA_CHECK(cudaSetDevice(src->index));
  CUDA_CHECK(cudaEventRecord(src->start, src->stream));
  CUDA_CHECK(cudaSetDevice(dst->index));
  CUDA_CHECK(cudaStreamWaitEvent(dst->stream, src->start, 0));
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaMemcpyPeerAsync(src->recv, src->index, dst->send, dst->index, bytes,
                                   dst->stream));
  }
  CUDA_CHECK(cudaEventRecord(dst->stop, dst->stream));
  CUDA_CHECK(cudaSetDevice(src->index));
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaMemcpyPeerAsync(dst->recv, dst->index, src->send, src->index, bytes,
                                   src->stream));
  }
  CUDA_CHECK(cudaStreamWaitEvent(src->stream, dst->stop, 0));
  CUDA_CHECK(cudaEventRecord(src->stop, src->stream));
  CUDA_CHECK(cudaEventSynchronize(src->stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, src->start, src->stop));
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Figures {
  double uni_gbps = NAN;
  double bidi_gbps = NAN;
  double latency_us = NAN;
};

Figures measure(DeviceState* src, DeviceState* dst, const Options& opt) {
  if (opt.warmup > 0) {
    time_one_way(src, dst, opt.size, opt.warmup);
    time_two_way(src, dst, opt.size, opt.warmup);
    time_one_way(src, dst, opt.latency_size, opt.warmup);
  }
  std::vector<double> uni, bidi, lat;
  const double bytes = static_cast<double>(opt.size) * opt.iters;
  for (int r = 0; r < opt.repeats; ++r) {
    uni.push_back(bytes / (time_one_way(src, dst, opt.size, opt.iters) * 1e-3) / 1e9);
    bidi.push_back(2 * bytes / (time_two_way(src, dst, opt.size, opt.iters) * 1e-3) / 1e9);
    float ms = time_one_way(src, dst, opt.latency_size, opt.latency_iters);
    lat.push_back(ms * 1e3 / opt.latency_iters);
  }
  return Figures{median(uni), median(bidi), median(lat)};
}

// ---------------------------------------------------------------- one GPU alone

// Figures of one GPU on its own: what a single-GPU machine can still tell about itself.
struct LocalFigures {
  double d2d_gbps = NAN;       // copy within the GPU's memory (bytes copied, not read+written)
  double h2d_gbps = NAN;       // pinned host -> device
  double d2h_gbps = NAN;       // device -> pinned host
  double h2d_latency_us = NAN;  // small pinned host -> device copy
  double d2h_latency_us = NAN;  // small device -> pinned host copy
};

// Milliseconds for `iters` copies of `bytes` of the given kind on the device's stream.
float time_copies(DeviceState* d, void* dst, const void* src, size_t bytes, int iters,
                  cudaMemcpyKind kind) {
  CUDA_CHECK(cudaSetDevice(d->index));
  CUDA_CHECK(cudaEventRecord(d->start, d->stream));
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, d->stream));
  }
  CUDA_CHECK(cudaEventRecord(d->stop, d->stream));
  CUDA_CHECK(cudaEventSynchronize(d->stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, d->start, d->stop));
  return ms;
}

LocalFigures measure_local(DeviceState* d, const Options& opt) {
  struct Kind {
    void* dst;
    const void* src;
    cudaMemcpyKind kind;
  };
  const Kind d2d{d->recv, d->send, cudaMemcpyDeviceToDevice};
  const Kind h2d{d->recv, d->host, cudaMemcpyHostToDevice};
  const Kind d2h{d->host, d->send, cudaMemcpyDeviceToHost};
  const double bytes = static_cast<double>(opt.size) * opt.iters;
  auto gbps = [&](const Kind& k) {
    if (opt.warmup > 0) time_copies(d, k.dst, k.src, opt.size, opt.warmup, k.kind);
    std::vector<double> runs;
    for (int r = 0; r < opt.repeats; ++r) {
      runs.push_back(bytes / (time_copies(d, k.dst, k.src, opt.size, opt.iters, k.kind) * 1e-3) /
                     1e9);
    }
    return median(runs);
  };
  auto latency = [&](const Kind& k) {
    if (opt.warmup > 0) time_copies(d, k.dst, k.src, opt.latency_size, opt.warmup, k.kind);
    std::vector<double> runs;
    for (int r = 0; r < opt.repeats; ++r) {
      float ms = time_copies(d, k.dst, k.src, opt.latency_size, opt.latency_iters, k.kind);
      runs.push_back(ms * 1e3 / opt.latency_iters);
    }
    return median(runs);
  };
  LocalFigures f;
  f.d2d_gbps = gbps(d2d);
  f.h2d_gbps = gbps(h2d);
  f.d2h_gbps = gbps(d2h);
  f.h2d_latency_us = latency(h2d);
  f.d2h_latency_us = latency(d2h);
  return f;
}

// Enable or disable peer access from `from` to `to`. Returns false (and notes why)
// when enabling fails for a reason other than "already enabled", e.g. too many peers.
bool set_peer_access(int from, int to, bool enable, std::vector<std::string>* warnings) {
  CUDA_CHECK(cudaSetDevice(from));
  cudaError_t err = enable ? cudaDeviceEnablePeerAccess(to, 0) : cudaDeviceDisablePeerAccess(to);
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();  // clear the non-sticky error so later calls do not see it
  if (err == cudaErrorPeerAccessAlreadyEnabled || err == cudaErrorPeerAccessNotEnabled) {
    return true;
  }
  if (!enable) fail_cuda(err, "cudaDeviceDisablePeerAccess(to)", __FILE__, __LINE__);
  warnings->push_back("GPU " + std::to_string(from) + " -> GPU " + std::to_string(to) +
                      ": cudaDeviceEnablePeerAccess failed: " + cudaGetErrorString(err));
  return false;
}

struct PairResult {
  int src = 0;
  int dst = 0;
  bool can_access_peer = false;
  bool p2p_enabled = false;
  Figures p2p;
  Figures nop2p;
  int data_ok = -1;  // -1 unknown (no kernels), 0 mismatch, 1 ok
};

PairResult probe_pair(DeviceState* src, DeviceState* dst, const Options& opt,
                      std::vector<std::string>* warnings) {
  PairResult r;
  r.src = src->index;
  r.dst = dst->index;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, src->index, dst->index));
  r.can_access_peer = can != 0;
  bool check = src->kernels && dst->kernels;
  bool ok = true;

  int back = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&back, dst->index, src->index));

  // Peer access starts disabled and every pair disables what it enabled, so the
  // staged (no-P2P) path is what a first measurement sees.
  r.nop2p = measure(src, dst, opt);
  if (check) ok = check_copy(src, dst, opt.size) && ok;

  if (r.can_access_peer) {
    r.p2p_enabled = set_peer_access(src->index, dst->index, true, warnings);
    bool back_enabled = r.p2p_enabled && back &&
                        set_peer_access(dst->index, src->index, true, warnings);
    if (r.p2p_enabled) {
      r.p2p = measure(src, dst, opt);
      if (check) ok = check_copy(src, dst, opt.size) && ok;
      // Leave no mappings behind: a GPU may only have a few peers mapped at once.
      set_peer_access(src->index, dst->index, false, warnings);
    }
    if (back_enabled) set_peer_access(dst->index, src->index, false, warnings);
  }
  r.data_ok = check ? (ok ? 1 : 0) : -1;
  if (r.data_ok == 0) {
    warnings->push_back("GPU " + std::to_string(r.src) + " -> GPU " + std::to_string(r.dst) +
                        ": copied data does not match (broken P2P, e.g. IOMMU/ACS)");
  }
  return r;
}

// ---------------------------------------------------------------- output

std::string local_json(const LocalFigures& f) {
  return "{\"d2d_gbps\": " + json_number(f.d2d_gbps, 3) +
         ", \"h2d_gbps\": " + json_number(f.h2d_gbps, 3) +
         ", \"d2h_gbps\": " + json_number(f.d2h_gbps, 3) +
         ", \"h2d_latency_us\": " + json_number(f.h2d_latency_us, 2) +
         ", \"d2h_latency_us\": " + json_number(f.d2h_latency_us, 2) + "}";
}

// Why there are no pairs, when there are none: a one-GPU machine is a clean result.
std::vector<std::string> notes_for(const std::vector<DeviceState>& devs) {
  if (devs.size() >= 2) return {};
  return {"only " + std::to_string(devs.size()) +
          " GPU measured: no GPU pairs, so no P2P figures; single-GPU figures only"};
}

void print_json(const Options& opt, const std::vector<DeviceState>& devs,
                const std::vector<PairResult>& pairs, const std::vector<std::string>& warnings,
                const std::vector<LocalFigures>& local, int driver_version,
                int runtime_version) {
  std::printf("{\n  \"version\": %d,\n  \"tool\": \"dlc-p2p-probe %s\",\n", kSchemaVersion,
              kToolVersion);
  std::printf("  \"cuda_driver_version\": %d,\n  \"cuda_runtime_version\": %d,\n", driver_version,
              runtime_version);
  std::printf("  \"devices\": [");
  for (size_t i = 0; i < devs.size(); ++i) {
    const DeviceState& d = devs[i];
    std::printf("%s\n    {\"index\": %d, \"name\": %s, \"pci_bus_id\": %s, "
                "\"compute_capability\": \"%d.%d\", \"local\": %s}",
                i ? "," : "", d.index, json_string(d.name).c_str(),
                json_string(d.pci_bus_id).c_str(), d.cc_major, d.cc_minor,
                local_json(local[i]).c_str());
  }
  std::printf("\n  ],\n  \"pairs\": [");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PairResult& p = pairs[i];
    std::string data_ok = p.data_ok < 0 ? "null" : json_bool(p.data_ok == 1);
    std::printf(
        "%s\n    {\"src\": %d, \"dst\": %d, \"can_access_peer\": %s, \"p2p_enabled\": %s, "
        "\"uni_gbps_p2p\": %s, \"uni_gbps_nop2p\": %s, \"bidi_gbps_p2p\": %s, "
        "\"bidi_gbps_nop2p\": %s, \"latency_us_p2p\": %s, \"latency_us_nop2p\": %s, "
        "\"data_ok\": %s}",
        i ? "," : "", p.src, p.dst, json_bool(p.can_access_peer), json_bool(p.p2p_enabled),
        json_number(p.p2p.uni_gbps, 3).c_str(), json_number(p.nop2p.uni_gbps, 3).c_str(),
        json_number(p.p2p.bidi_gbps, 3).c_str(), json_number(p.nop2p.bidi_gbps, 3).c_str(),
        json_number(p.p2p.latency_us, 2).c_str(), json_number(p.nop2p.latency_us, 2).c_str(),
        data_ok.c_str());
  }
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  std::printf("\n  ],\n  \"params\": {\"size_bytes\": %zu, \"iters\": %d, \"repeats\": %d, "
              "\"warmup\": %d, \"latency_size_bytes\": %zu, \"latency_iters\": %d, "
              "\"device_order\": %s, \"built_archs\": %s},\n",
              opt.size, opt.iters, opt.repeats, opt.warmup, opt.latency_size,
              opt.latency_iters, json_string(order ? order : "").c_str(),
              json_string(PROBE_ARCHS).c_str());
  std::printf("  \"warnings\": [");
  for (size_t i = 0; i < warnings.size(); ++i) {
    std::printf("%s%s", i ? ", " : "", json_string(warnings[i]).c_str());
  }
  std::printf("],\n  \"notes\": [");
  std::vector<std::string> notes = notes_for(devs);
  for (size_t i = 0; i < notes.size(); ++i) {
    std::printf("%s%s", i ? ", " : "", json_string(notes[i]).c_str());
  }
  std::printf("]\n}\n");
}

void print_matrix(const char* title, const std::vector<DeviceState>& devs,
                  const std::vector<PairResult>& pairs, double Figures::*field, bool p2p) {
  std::printf("\n%s\n%8s", title, "src\\dst");
  for (const DeviceState& d : devs) std::printf("%9d", d.index);
  std::printf("\n");
  for (const DeviceState& s : devs) {
    std::printf("%8d", s.index);
    for (const DeviceState& d : devs) {
      if (s.index == d.index) {
        std::printf("%9s", "-");
        continue;
      }
      for (const PairResult& p : pairs) {
        if (p.src != s.index || p.dst != d.index) continue;
        double v = (p2p ? p.p2p : p.nop2p).*field;
        if (std::isfinite(v)) {
          std::printf("%9.2f", v);
        } else {
          std::printf("%9s", "n/a");
        }
      }
    }
    std::printf("\n");
  }
}

void print_local_table(const std::vector<DeviceState>& devs,
                       const std::vector<LocalFigures>& local) {
  std::printf("\nSingle-GPU figures (GB/s; latency us)\n%5s %10s %10s %10s %12s %12s\n", "GPU",
              "in-GPU", "host->GPU", "GPU->host", "lat h->GPU", "lat GPU->h");
  for (size_t i = 0; i < devs.size(); ++i) {
    const LocalFigures& f = local[i];
    std::printf("%5d %10.1f %10.2f %10.2f %12.2f %12.2f\n", devs[i].index, f.d2d_gbps,
                f.h2d_gbps, f.d2h_gbps, f.h2d_latency_us, f.d2h_latency_us);
  }
}

void print_table(const Options& opt, const std::vector<DeviceState>& devs,
                 const std::vector<PairResult>& pairs, const std::vector<std::string>& warnings,
                 const std::vector<LocalFigures>& local) {
  std::printf("dlc-p2p-probe %s: %zu bytes x %d copies, median of %d runs\n", kToolVersion,
              opt.size, opt.iters, opt.repeats);
  for (const DeviceState& d : devs) {
    std::printf("  GPU %d: %s (%s, sm_%d%d)\n", d.index, d.name.c_str(), d.pci_bus_id.c_str(),
                d.cc_major, d.cc_minor);
  }
  print_local_table(devs, local);
  if (devs.size() < 2) {
    for (const std::string& n : notes_for(devs)) std::printf("\nnote: %s\n", n.c_str());
    for (const std::string& w : warnings) std::printf("warning: %s\n", w.c_str());
    return;
  }
  std::printf("\nP2P access (1 = cudaDeviceCanAccessPeer, E = enabled)\n%8s", "src\\dst");
  for (const DeviceState& d : devs) std::printf("%9d", d.index);
  std::printf("\n");
  for (const DeviceState& s : devs) {
    std::printf("%8d", s.index);
    for (const DeviceState& d : devs) {
      const char* cell = "-";
      for (const PairResult& p : pairs) {
        if (p.src == s.index && p.dst == d.index) {
          cell = p.p2p_enabled ? "1E" : (p.can_access_peer ? "1" : "0");
        }
      }
      std::printf("%9s", cell);
    }
    std::printf("\n");
  }
  print_matrix("Unidirectional GB/s, P2P enabled", devs, pairs, &Figures::uni_gbps, true);
  print_matrix("Unidirectional GB/s, P2P disabled", devs, pairs, &Figures::uni_gbps, false);
  print_matrix("Bidirectional GB/s (both ways), P2P enabled", devs, pairs, &Figures::bidi_gbps,
               true);
  print_matrix("Bidirectional GB/s (both ways), P2P disabled", devs, pairs, &Figures::bidi_gbps,
               false);
  print_matrix("Latency us, P2P enabled", devs, pairs, &Figures::latency_us, true);
  print_matrix("Latency us, P2P disabled", devs, pairs, &Figures::latency_us, false);
  for (const std::string& w : warnings) std::printf("warning: %s\n", w.c_str());
}

int run(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  if (opt.help) {
    std::printf("%s", kUsageText);
    return kOk;
  }
  if (opt.version) {
    std::printf("dlc-p2p-probe %s (schema %d, archs %s)\n", kToolVersion, kSchemaVersion,
                PROBE_ARCHS);
    return kOk;
  }
  int driver_version = 0;
  int runtime_version = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver_version));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version));
  if (driver_version == 0) {
    throw ProbeFailure{kNoDriver, "no_driver",
                       "no NVIDIA driver found (libcuda.so could not be loaded)", "", "", 0,
                       ""};
  }
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count == 0) {
    throw ProbeFailure{kNoDevice, "no_device", "no CUDA device found", "", "", 0, ""};
  }
  if (opt.gpus.empty()) {
    for (int i = 0; i < count; ++i) opt.gpus.push_back(i);
  }
  std::vector<DeviceState> devs;
  for (int gpu : opt.gpus) {
    if (gpu >= count) {
      throw usage_failure("--gpus: no GPU " + std::to_string(gpu) + " (this machine has " +
                          std::to_string(count) + ", numbered in PCI bus order)");
    }
    DeviceState d;
    d.index = gpu;
    devs.push_back(d);
  }
  std::vector<std::string> warnings;
  for (DeviceState& d : devs) init_device(&d, opt, &warnings);
  std::vector<LocalFigures> local;
  for (DeviceState& d : devs) local.push_back(measure_local(&d, opt));
  std::vector<PairResult> pairs;
  for (DeviceState& s : devs) {
    for (DeviceState& d : devs) {
      if (s.index != d.index) pairs.push_back(probe_pair(&s, &d, opt, &warnings));
    }
  }
  if (opt.table) {
    print_table(opt, devs, pairs, warnings, local);
  } else {
    print_json(opt, devs, pairs, warnings, local, driver_version, runtime_version);
  }
  for (DeviceState& d : devs) free_device(&d);
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Number GPUs like nvidia-smi and NVML (PCI bus order), not CUDA's default
  // fastest-first, so that indices match the topology. A caller's choice wins.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  try {
    return run(argc, argv);
  } catch (const ProbeFailure& f) {
    print_error_json(f);
    if (f.exit_code == kUsage) std::fprintf(stderr, "%s", kUsageText);
    return f.exit_code;
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still one JSON line
    print_error_json(ProbeFailure{kCudaFailed, "internal", e.what(), "", "", 0, ""});
    return kCudaFailed;
  }
}
