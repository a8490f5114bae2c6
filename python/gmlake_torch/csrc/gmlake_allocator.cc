// gmlake as PyTorch's CUDA allocator: a c10::cuda::CUDACachingAllocator::CUDAAllocator that forwards every
// method to libgmlake's C ABI (gmlake.h). python/gmlake_torch compiles this file against the installed torch's
// headers on first use (cached per torch version, C++ ABI and library path) and installs it with
// gmlake_torch_install, which does what torch.cuda.memory.change_current_allocator does: it stores the
// allocator in c10's atomic allocator slot (and c10's allocator table) before CUDA starts.
//
// What this file owns: PyTorch's side of the contract. The engine (gmlake) owns blocks, pools, statistics and
// segments; this class turns them into PyTorch's types (DataPtr, DeviceStats, SnapshotInfo, TraceEntry,
// c10::OutOfMemoryError), evaluates CUDA graph pool filters, records allocation history with PyTorch's own
// context recorder, and calls OOM observers and allocator trace trackers.
//
// Threading: the hot path (allocate / raw_delete) takes no lock unless a pool capture is underway, memory
// history is on, or a trace tracker is attached (each an atomic flag read). Everything else takes mu_.
//
// Link note (the old OOM shim's crash): the library must share the process's libstdc++. python/gmlake_torch
// links it with the C driver against the libstdc++.so.6 that the running process has loaded, so no static copy
// of libstdc++ (with its own std::locale facet ids) can end up in it.

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <cuda.h>  // the driver's types for CUDA IPC's imports; its functions are looked up (dlsym), not linked
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

// gmlake.h declares cudaStream_t as void* for C callers without CUDA headers; here CUDA's own declaration is in
// scope, so gmlake.h's is renamed away (both are the same pointer to the driver's stream).
#define cudaStream_t gmlake_cudaStream_t
#include "gmlake.h"
#undef cudaStream_t

namespace gmlake_torch {

using c10::DeviceIndex;
using c10::MempoolId_t;
namespace CCA = c10::cuda::CUDACachingAllocator;
namespace CDA = c10::CachingDeviceAllocator;

constexpr int kMaxDevices = 128;  // above C10_COMPILE_TIME_MAX_GPUS on every build

std::string lastError() {
  char buf[4096];
  buf[0] = 0;
  gmlake_last_error(buf, sizeof buf);
  return buf;
}

// format_size as PyTorch's native allocator prints sizes (CUDACachingAllocator.cpp), so that messages read alike.
std::string formatSize(uint64_t size) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (size <= 1024) {
    os << size << " bytes";
  } else if (size <= 1048576) {
    os << (static_cast<double>(size) / 1024.0) << " KiB";
  } else if (size <= 1073741824ULL) {
    os << static_cast<double>(size) / 1048576.0 << " MiB";
  } else {
    os << static_cast<double>(size) / 1073741824.0 << " GiB";
  }
  return os.str();
}

// ---- A minimal JSON reader for gmlake_snapshot_json (objects, arrays, integers, strings, booleans). ----

struct JValue {
  enum Kind { Null, Bool, Num, Str, Arr, Obj } kind = Null;
  bool b = false;
  uint64_t u = 0;   // integers: addresses and sizes up to 2^64 - 1
  bool neg = false; // a negative integer: -u
  std::string s;
  std::vector<JValue> a;
  std::vector<std::pair<std::string, JValue>> o;

  const JValue* get(const char* key) const {
    for (const auto& kv : o) {
      if (kv.first == key) {
        return &kv.second;
      }
    }
    return nullptr;
  }
  uint64_t num(const char* key, uint64_t dflt = 0) const {
    const JValue* v = get(key);
    return v && v->kind == Num ? v->u : dflt;
  }
  int64_t inum(const char* key, int64_t dflt = 0) const {
    const JValue* v = get(key);
    if (!v || v->kind != Num) {
      return dflt;
    }
    return v->neg ? -static_cast<int64_t>(v->u) : static_cast<int64_t>(v->u);
  }
  bool flag(const char* key) const {
    const JValue* v = get(key);
    return v && v->kind == Bool && v->b;
  }
  std::string str(const char* key) const {
    const JValue* v = get(key);
    return v && v->kind == Str ? v->s : std::string();
  }
};

class JParser {
 public:
  explicit JParser(const std::string& t) : t_(t) {}
  JValue parse() {
    JValue v = value();
    ws();
    TORCH_CHECK(i_ == t_.size(), "gmlake: snapshot JSON has trailing text at offset ", i_);
    return v;
  }

 private:
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) {
      i_++;
    }
  }
  char peek() {
    ws();
    TORCH_CHECK(i_ < t_.size(), "gmlake: snapshot JSON ends early");
    return t_[i_];
  }
  void expect(char c) {
    TORCH_CHECK(peek() == c, "gmlake: snapshot JSON: expected '", c, "' at offset ", i_);
    i_++;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) {
        i_++;
        char e = t_[i_];
        if (e == 'u') {
          i_ += 4;  // no \u escapes in gmlake's snapshot; skip them
          out += '?';
        } else {
          out += (e == 'n' ? '\n' : e == 't' ? '\t' : e);
        }
      } else {
        out += t_[i_];
      }
      i_++;
    }
    expect('"');
    return out;
  }
  JValue value() {
    JValue v;
    char c = peek();
    if (c == '{') {
      v.kind = JValue::Obj;
      i_++;
      if (peek() == '}') {
        i_++;
        return v;
      }
      while (true) {
        std::string k = string();
        expect(':');
        v.o.emplace_back(std::move(k), value());
        if (peek() == ',') {
          i_++;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = JValue::Arr;
      i_++;
      if (peek() == ']') {
        i_++;
        return v;
      }
      while (true) {
        v.a.push_back(value());
        if (peek() == ',') {
          i_++;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = JValue::Str;
      v.s = string();
      return v;
    }
    if (t_.compare(i_, 4, "true") == 0) {
      v.kind = JValue::Bool;
      v.b = true;
      i_ += 4;
      return v;
    }
    if (t_.compare(i_, 5, "false") == 0) {
      v.kind = JValue::Bool;
      i_ += 5;
      return v;
    }
    if (t_.compare(i_, 4, "null") == 0) {
      i_ += 4;
      return v;
    }
    v.kind = JValue::Num;
    if (t_[i_] == '-') {
      v.neg = true;
      i_++;
    }
    size_t start = i_;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      v.u = v.u * 10 + static_cast<uint64_t>(t_[i_] - '0');
      i_++;
    }
    // A fraction or exponent (not produced for integers; tolerated): skipped.
    while (i_ < t_.size() && (t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-' ||
                              (t_[i_] >= '0' && t_[i_] <= '9'))) {
      i_++;
    }
    TORCH_CHECK(i_ > start, "gmlake: snapshot JSON: unexpected '", c, "' at offset ", start);
    return v;
  }
  const std::string& t_;
  size_t i_ = 0;
};

// ---- The allocator. ----

// One capture (CUDA graph or MemPool context) allocating to a private pool: PyTorch's filter decides which
// streams' allocations go there (CUDAGraph: the capturing stream; use_mem_pool: the calling thread).
struct Capture {
  DeviceIndex device;
  MempoolId_t id;
  std::function<bool(cudaStream_t)> filter;
  std::vector<cudaStream_t> marked;  // streams told to gmlake as capturing (gmlake_set_capturing)
};

// What history recording keeps for a live block.
struct LiveInfo {
  size_t requested;
  cudaStream_t stream;
  MempoolId_t pool;
  std::shared_ptr<c10::GatheredContext> context;
};

// getCheckpointState's result: the pool's live allocations at the time (setCheckpointPoolState cannot restore
// them: gmlake cannot re-create an allocation at a given address).
struct PoolCheckpoint : public CCA::AllocatorState {
  DeviceIndex device;
  MempoolId_t id;
  std::vector<uint64_t> live;
};

// A block of a foreign pool (below): its allocator's memory, cached by gmlake for the pool.
struct ForeignBlock {
  void* ptr = nullptr;
  size_t size = 0;
  cudaStream_t stream = nullptr;       // the stream it was allocated on: reused only there, as native
  std::vector<cudaStream_t> uses;      // other streams record_stream named while it was live
  std::vector<cudaEvent_t> pending;    // recorded on those streams at its free: reusable once all complete
};

// A pool whose memory comes from another allocator (torch.cuda.MemPool(allocator=...), which torch's
// symmetric memory uses): gmlake keeps it outside its engine, as PyTorch's allocator keeps such a pool: the
// allocator's blocks are cached for the pool's later requests on the same stream, and returned to the
// allocator (raw_delete) by empty_cache once the pool is no longer in use, or named by emptyCache(pool).
// The pool keeps its allocator alive until then. Not in gmlake's statistics, cap or snapshot (docs/pytorch.md).
struct ForeignPool {
  std::shared_ptr<CCA::CUDAAllocator> allocator;
  DeviceIndex device = 0;
  bool active = true;               // its use count is above 0 (a MemPool object or a graph holds it)
  size_t live = 0;                  // blocks handed out and not freed
  std::vector<ForeignBlock> free;   // blocks cached for reuse
};

void rawDeleter(void* ptr);
void onEngineEvent(void* ctx, int device, int action, uint64_t addr, uint64_t size, void* stream);

// ---- CUDA IPC --------------------------------------------------------------------------------------------
//
// A shared allocation travels as PyTorch's ShareableHandle: an offset and a byte string whose first two bytes
// are the format's version (2, as PyTorch's) and kind. gmlake writes
//   'e'  PyTorch's expandable-segment layout, when the handles under the allocation all have one size S:
//        {int32 pid, int32 0, uint64 S, uint64 n} then n int32 descriptors; any PyTorch (native, expandable or
//        gmlake) opens it, mapping handle i at i*S;
//   'g'  gmlake's own, when the sizes differ (a stitched block, an arena's last chunk):
//        {int32 pid, int32 0, uint64 n} then n × {int32 fd, int32 0, uint64 size}; a gmlake process opens it.
// The descriptors are the producer's (gmlake_ipc_export); the consumer duplicates them with pidfd_getfd, so it
// must be allowed to (the same user, and under Yama ptrace_scope 1 a descendant, as torch.multiprocessing's
// workers are). The consumer opens 'c' (native's cudaIpcMemHandle), 'e' and 'g', keeps one mapping per handle
// string while any tensor uses it, and unmaps it (after a device synchronize) when the last one goes.
constexpr char kHandleVersion = 2;
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // older headers; the running kernel may still have it
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

struct IpcHeaderE {
  int32_t pid;
  int32_t pad;
  uint64_t segment_size;
  uint64_t num_handles;
};
struct IpcHeaderG {
  int32_t pid;
  int32_t pad;
  uint64_t num_handles;
};
struct IpcPieceG {
  int32_t fd;
  int32_t pad;
  uint64_t size;
};
static_assert(sizeof(IpcHeaderE) == 24, "PyTorch's ShareHeader is 24 bytes");

// The driver calls an import needs, looked up once in the libcuda.so.1 the process already has loaded.
struct IpcDriver {
  CUresult (*import_)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
  CUresult (*props)(CUmemAllocationProp*, CUmemGenericAllocationHandle) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*free_)(CUdeviceptr, size_t) = nullptr;
  std::string missing;

  static const IpcDriver& get() {
    static const IpcDriver d = [] {
      IpcDriver d;
      void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (lib == nullptr) {
        lib = dlopen("libcuda.so.1", RTLD_NOW);
      }
      auto sym = [&](auto& fn, const char* name) {
        *reinterpret_cast<void**>(&fn) = lib ? dlsym(lib, name) : nullptr;
        if (fn == nullptr && d.missing.empty()) {
          d.missing = name;
        }
      };
      sym(d.import_, "cuMemImportFromShareableHandle");
      sym(d.props, "cuMemGetAllocationPropertiesFromHandle");
      sym(d.granularity, "cuMemGetAllocationGranularity");
      sym(d.reserve, "cuMemAddressReserve");
      sym(d.map, "cuMemMap");
      sym(d.access, "cuMemSetAccess");
      sym(d.unmap, "cuMemUnmap");
      sym(d.release, "cuMemRelease");
      sym(d.free_, "cuMemAddressFree");
      return d;
    }();
    return d;
  }
};

#define GMLAKE_CU_CHECK(call, what)                                                                           \
  do {                                                                                                        \
    CUresult r_ = (call);                                                                                     \
    TORCH_CHECK(r_ == CUDA_SUCCESS, "gmlake: opening a CUDA IPC handle: ", what, " failed with CUresult ", \
                static_cast<int>(r_));                                                                        \
  } while (0)

// One imported mapping: the handles side by side from base, unmapped and released when the last user goes.
struct IpcMapping {
  CUdeviceptr base = 0;
  size_t total = 0;
  std::vector<CUmemGenericAllocationHandle> handles;
  int device = 0;

  ~IpcMapping() {
    const IpcDriver& d = IpcDriver::get();
    if (base != 0) {
      // the consumer's kernels may still read it: as PyTorch's expandable segments do before unmapping
      c10::cuda::CUDAGuard g(static_cast<DeviceIndex>(device));
      (void)cudaDeviceSynchronize();
      d.unmap(base, total);
    }
    for (auto h : handles) {
      d.release(h);
    }
    if (base != 0) {
      d.free_(base, total);
    }
  }
};

// Imports n descriptors of process pid (sizes[i] bytes each) and maps them side by side on the current device.
std::shared_ptr<IpcMapping> importPieces(int pid, const std::vector<std::pair<int, uint64_t>>& pieces) {
  const IpcDriver& d = IpcDriver::get();
  TORCH_CHECK(d.missing.empty(), "gmlake: opening a CUDA IPC handle: libcuda.so.1 has no ", d.missing);
  TORCH_CHECK(!pieces.empty(), "gmlake: opening a CUDA IPC handle: it names no memory");
  auto m = std::make_shared<IpcMapping>();
  m->device = c10::cuda::current_device();
  long pidfd = syscall(SYS_pidfd_open, pid, 0);
  TORCH_CHECK(pidfd >= 0, "gmlake: opening a CUDA IPC handle: pidfd_open(", pid, "): ", std::strerror(errno),
              " (the producing process must still run, and this kernel must have pidfd_open, Linux 5.3)");
  for (const auto& [fd, size] : pieces) {
    long mine = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    if (mine < 0) {
      int err = errno;
      close(static_cast<int>(pidfd));
      TORCH_CHECK(false, "gmlake: opening a CUDA IPC handle: pidfd_getfd(descriptor ", fd, " of process ", pid,
                  "): ", std::strerror(err),
                  " (EPERM: this process may not take the producer's descriptors; it must be the same user and, "
                  "under Yama ptrace_scope 1, the producer's descendant, as torch.multiprocessing's workers are)");
    }
    CUmemGenericAllocationHandle h = 0;
    CUresult r = d.import_(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(mine)),
                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(static_cast<int>(mine));
    if (r != CUDA_SUCCESS) {
      close(static_cast<int>(pidfd));
      TORCH_CHECK(false, "gmlake: opening a CUDA IPC handle: cuMemImportFromShareableHandle failed with CUresult ",
                  static_cast<int>(r));
    }
    m->handles.push_back(h);
    m->total += size;
  }
  close(static_cast<int>(pidfd));
  CUmemAllocationProp prop{};
  GMLAKE_CU_CHECK(d.props(&prop, m->handles[0]), "cuMemGetAllocationPropertiesFromHandle");
  size_t gran = 0;
  GMLAKE_CU_CHECK(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  CUdeviceptr base = 0;
  GMLAKE_CU_CHECK(d.reserve(&base, m->total, gran, 0, 0), "cuMemAddressReserve");
  size_t at = 0;
  for (size_t i = 0; i < pieces.size(); i++) {
    CUresult r = d.map(base + at, pieces[i].second, 0, m->handles[i], 0);
    if (r != CUDA_SUCCESS) {
      if (at > 0) {
        d.unmap(base, at);
      }
      d.free_(base, m->total);
      TORCH_CHECK(false, "gmlake: opening a CUDA IPC handle: cuMemMap of piece ", i, " failed with CUresult ",
                  static_cast<int>(r));
    }
    at += pieces[i].second;
  }
  m->base = base;  // from here the destructor unmaps and frees
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = m->device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GMLAKE_CU_CHECK(d.access(base, m->total, &desc, 1), "cuMemSetAccess");
  return m;
}

// Parses a handle string ('e' or 'g') into the producer's pid and its (descriptor, size) pieces.
void parseHandle(const std::string& h, int* pid, std::vector<std::pair<int, uint64_t>>* pieces) {
  auto need = [&](size_t n) {
    TORCH_CHECK(h.size() >= n, "gmlake: a CUDA IPC handle of ", h.size(), " bytes is cut short (want ", n, ")");
  };
  need(2);
  const char* p = h.data() + 2;
  if (h[1] == 'e') {
    IpcHeaderE hd;
    need(2 + sizeof hd);
    std::memcpy(&hd, p, sizeof hd);
    TORCH_CHECK(hd.num_handles > 0 && hd.num_handles < (1u << 20) && hd.segment_size > 0,
                "gmlake: a CUDA IPC handle ('e') names ", hd.num_handles, " handles of ", hd.segment_size, " bytes");
    need(2 + sizeof hd + hd.num_handles * sizeof(int32_t));
    *pid = hd.pid;
    for (uint64_t i = 0; i < hd.num_handles; i++) {
      int32_t fd;
      std::memcpy(&fd, p + sizeof hd + i * sizeof fd, sizeof fd);
      pieces->emplace_back(fd, hd.segment_size);
    }
    return;
  }
  IpcHeaderG hd;
  need(2 + sizeof hd);
  std::memcpy(&hd, p, sizeof hd);
  TORCH_CHECK(hd.num_handles > 0 && hd.num_handles < (1u << 20), "gmlake: a CUDA IPC handle ('g') names ",
              hd.num_handles, " handles");
  need(2 + sizeof hd + hd.num_handles * sizeof(IpcPieceG));
  *pid = hd.pid;
  for (uint64_t i = 0; i < hd.num_handles; i++) {
    IpcPieceG pc;
    std::memcpy(&pc, p + sizeof hd + i * sizeof pc, sizeof pc);
    pieces->emplace_back(pc.fd, pc.size);
  }
}

// The producer's side: the handle string of the live allocation at ptr (ptr may lie inside it).
CCA::ShareableHandle exportHandle(void* ptr) {
  void* base = nullptr;
  size_t bsize = 0;
  TORCH_CHECK(gmlake_base_allocation(ptr, &base, &bsize) == 0,
              "gmlake: CUDA IPC: sharing ", ptr, ", which is no live allocation: ", lastError());
  std::vector<gmlake_ipc_piece> pieces(16);
  size_t n = 0;
  uint64_t off = 0, size = 0;
  while (true) {
    if (gmlake_ipc_export(base, pieces.data(), pieces.size(), &n, &off, &size) == 0) {
      break;
    }
    TORCH_CHECK(gmlake_last_error_kind() == GMLAKE_ERR_INVALID && n > pieces.size(),
                "gmlake: CUDA IPC: sharing the allocation at ", base, ": ", lastError());
    pieces.resize(n);
  }
  pieces.resize(n);
  bool uniform = true;
  for (const auto& pc : pieces) {
    uniform = uniform && pc.size == pieces[0].size;
  }
  std::string out;
  out.push_back(kHandleVersion);
  if (uniform) {
    out.push_back('e');
    IpcHeaderE hd{static_cast<int32_t>(getpid()), 0, pieces[0].size, n};
    out.append(reinterpret_cast<const char*>(&hd), sizeof hd);
    for (const auto& pc : pieces) {
      int32_t fd = pc.fd;
      out.append(reinterpret_cast<const char*>(&fd), sizeof fd);
    }
  } else {
    out.push_back('g');
    IpcHeaderG hd{static_cast<int32_t>(getpid()), 0, n};
    out.append(reinterpret_cast<const char*>(&hd), sizeof hd);
    for (const auto& pc : pieces) {
      IpcPieceG g{pc.fd, 0, pc.size};
      out.append(reinterpret_cast<const char*>(&g), sizeof g);
    }
  }
  auto delta = static_cast<ptrdiff_t>(reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(base));
  return CCA::ShareableHandle{static_cast<ptrdiff_t>(off) + delta, std::move(out)};
}

// The consumer's side: opened handles, one mapping per handle string while a tensor uses it (PyTorch's own
// allocator keeps the same cache, so that a handle received twice maps once).
class IpcImports {
 public:
  std::shared_ptr<void> open(const std::string& handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cache_.find(handle); it != cache_.end()) {
      if (auto live = it->second.lock()) {
        return live;
      }
      cache_.erase(it);
    }
    TORCH_CHECK(handle.size() >= 2 && handle[0] == kHandleVersion,
                "gmlake: a CUDA IPC handle of version ", handle.empty() ? -1 : static_cast<int>(handle[0]),
                " (this gmlake reads version ", static_cast<int>(kHandleVersion), ": the producer runs another torch)");
    std::shared_ptr<void> sp;
    if (handle[1] == 'c') {
      TORCH_CHECK(handle.size() >= 2 + CUDA_IPC_HANDLE_SIZE, "gmlake: a CUDA IPC handle ('c') cut short");
      cudaIpcMemHandle_t h;
      std::memcpy(&h, handle.data() + 2, CUDA_IPC_HANDLE_SIZE);
      void* dev = nullptr;
      C10_CUDA_CHECK(cudaIpcOpenMemHandle(&dev, h, cudaIpcMemLazyEnablePeerAccess));
      int device = c10::cuda::current_device();
      sp = std::shared_ptr<void>(dev, [device](void* p) {
        c10::cuda::CUDAGuard g(static_cast<DeviceIndex>(device));
        (void)cudaIpcCloseMemHandle(p);
      });
    } else if (handle[1] == 'e' || handle[1] == 'g') {
      int pid = 0;
      std::vector<std::pair<int, uint64_t>> pieces;
      parseHandle(handle, &pid, &pieces);
      std::shared_ptr<IpcMapping> m = importPieces(pid, pieces);
      void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(m->base));
      sp = std::shared_ptr<void>(p, [m](void*) mutable { m.reset(); });
    } else {
      TORCH_CHECK(false, "gmlake: a CUDA IPC handle of unknown kind '", handle[1], "'");
    }
    cache_[handle] = sp;
    return sp;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<void>> cache_;
};

class GMLakeAllocator final : public CCA::CUDAAllocator {
 public:
  GMLakeAllocator() {
    gmlake_set_event_callback(&onEngineEvent, this);
  }

  // ---- c10::Allocator ----

  c10::DataPtr allocate(size_t size) override {
    DeviceIndex device = 0;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    void* p = size == 0 ? nullptr : malloc(size, device, stream);
    return {p, p, &rawDeleter, c10::Device(c10::DeviceType::CUDA, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &rawDeleter;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
  }

  // ---- c10::DeviceAllocator ----

  bool initialized() override {
    return initialized_.load();
  }

  void emptyCache(MempoolId_t mempool_id) override {
    // gmlake releases the free memory of every pool that is not held by a live private pool (a CUDA graph's
    // memory stays mapped until its pool is released), on every device.
    TORCH_CHECK(gmlake_empty_cache() == 0, "gmlake: empty_cache(): ", lastError());
    if (n_foreign_.load() > 0) {
      releaseForeign(mempool_id);
    }
  }

  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    if (ptr.get() == nullptr || ptr.get_deleter() != &rawDeleter) {
      return;  // not ours (e.g. a tensor over memory gmlake did not hand out): nothing to record, as native
    }
    if (C10_UNLIKELY(n_side_.load(std::memory_order_relaxed) > 0)) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = foreign_live_.find(reinterpret_cast<uintptr_t>(ptr.get()));
      if (it != foreign_live_.end()) {
        ForeignBlock& b = it->second.second;
        if (stream.stream() != b.stream &&
            std::find(b.uses.begin(), b.uses.end(), stream.stream()) == b.uses.end()) {
          b.uses.push_back(stream.stream());
        }
        return;
      }
      if (uncached_.count(reinterpret_cast<uintptr_t>(ptr.get())) != 0) {
        return;  // cudaFree waits for the device anyway
      }
    }
    TORCH_CHECK(gmlake_record_stream(ptr.get(), stream.stream()) == 0, "gmlake: record_stream(): ", lastError());
  }

  CDA::DeviceStats getDeviceStats(DeviceIndex device) override {
    gmlake_device_stats g;
    std::memset(&g, 0, sizeof g);
    TORCH_CHECK(gmlake_get_device_stats(device, &g) == 0, "gmlake: memory statistics of device ",
                static_cast<int>(device), ": ", lastError());
    CDA::DeviceStats s;
    auto copyArr = [](CDA::StatArray& to, const gmlake_stat* from) {
      for (size_t i = 0; i < to.size(); i++) {
        copyOne(to[i], from[i]);
      }
    };
    copyArr(s.allocation, g.allocation);
    copyArr(s.segment, g.segment);
    copyArr(s.active, g.active);
    copyArr(s.inactive_split, g.inactive_split);
    copyArr(s.allocated_bytes, g.allocated_bytes);
    copyArr(s.reserved_bytes, g.reserved_bytes);
    copyArr(s.active_bytes, g.active_bytes);
    copyArr(s.inactive_split_bytes, g.inactive_split_bytes);
    copyArr(s.requested_bytes, g.requested_bytes);
    s.num_alloc_retries = g.num_alloc_retries;
    s.num_ooms = g.num_ooms;
    copyOne(s.oversize_allocations, g.oversize_allocations);
    copyOne(s.oversize_segments, g.oversize_segments);
    s.num_sync_all_streams = g.num_sync_all_streams;
    s.num_device_alloc = g.num_device_alloc;
    s.num_device_free = g.num_device_free;
    s.max_split_size = g.max_split_size;
    return s;
  }

  void resetAccumulatedStats(DeviceIndex device) override {
    TORCH_CHECK(gmlake_reset_accumulated_stats(device) == 0, "gmlake: reset_accumulated_memory_stats(",
                static_cast<int>(device), "): ", lastError());
  }

  void resetPeakStats(DeviceIndex device) override {
    TORCH_CHECK(gmlake_reset_peak_stats(device) == 0, "gmlake: reset_peak_memory_stats(", static_cast<int>(device),
                "): ", lastError());
  }

  // ---- CUDAAllocator ----

  void* raw_alloc(size_t nbytes) override {
    if (nbytes == 0) {
      return nullptr;
    }
    DeviceIndex device = 0;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    return malloc(nbytes, device, c10::cuda::getCurrentCUDAStream(device).stream());
  }

  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override {
    if (nbytes == 0) {
      return nullptr;
    }
    DeviceIndex device = 0;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    return malloc(nbytes, device, stream);
  }

  void raw_delete(void* ptr) override {
    free(ptr);
  }

  void init(int device_count) override {
    // PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction caps every device as PyTorch's allocator does (at
    // each device's first use here); a bad value fails CUDA's initialisation with PyTorch's words.
    conf_fraction_ = confFraction();
    device_count_ = device_count;
    initialized_.store(true);
  }

  double getMemoryFraction(DeviceIndex device) override {
    applyConfFraction(device);
    double f = gmlake_get_memory_fraction(device);
    TORCH_CHECK(f >= 0, "gmlake: get_per_process_memory_fraction(", static_cast<int>(device), "): ", lastError());
    return f;
  }

  void setMemoryFraction(double fraction, DeviceIndex device) override {
    // As PyTorch's allocator: [0, 1]; 0 is a cap of 0 bytes (every allocation that needs new memory fails).
    TORCH_CHECK(fraction >= 0 && fraction <= 1, "invalid fraction:", fraction, ". Please set within [0, 1].");
    if (device >= 0 && device < kMaxDevices) {
      conf_applied_[device].store(true);  // an explicit setting overrides PYTORCH_CUDA_ALLOC_CONF's
    }
    TORCH_CHECK(gmlake_set_memory_fraction(fraction, device) == 0, "gmlake: set_per_process_memory_fraction(",
                fraction, ", ", static_cast<int>(device), "): ", lastError());
  }

  std::vector<CCA::StreamSegmentSize> getExpandableSegmentSizes(DeviceIndex /*device*/) override {
    return {};  // gmlake has no PyTorch-style expandable segments
  }

  void enable(bool value) override {
    enabled_.store(value);
  }

  bool isEnabled() const override {
    return enabled_.load();
  }

  void cacheInfo(DeviceIndex device, size_t* largestBlock) override {
    size_t largest = 0;
    TORCH_CHECK(gmlake_cache_info(device, &largest) == 0, "gmlake: cacheInfo(", static_cast<int>(device),
                "): ", lastError());
    *largestBlock = largest;
  }

  void* getBaseAllocation(void* ptr, size_t* size) override {
    if (C10_UNLIKELY(n_side_.load(std::memory_order_relaxed) > 0)) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = foreign_live_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it != foreign_live_.end()) {
        if (size != nullptr) {
          *size = it->second.second.size;
        }
        return ptr;
      }
    }
    void* base = nullptr;
    size_t sz = 0;
    TORCH_CHECK(gmlake_base_allocation(ptr, &base, &sz) == 0, "gmlake: getBaseAllocation(", ptr, "): ",
                lastError());
    if (size != nullptr) {
      *size = sz;
    }
    return base;
  }

  CCA::SnapshotInfo snapshot(MempoolId_t mempool_id, bool include_traces) override {
    CCA::SnapshotInfo info;
    int ndev = device_count_ > 0 ? device_count_ : 1;
    std::unique_lock<std::mutex> lock(mu_);
    for (int d = 0; d < ndev && d < kMaxDevices; d++) {
      if (!used_[d].load()) {
        continue;  // a device gmlake never allocated on has no segments
      }
      lock.unlock();
      std::string text = snapshotJSON(d);
      lock.lock();
      JValue root = JParser(text).parse();
      const JValue* segs = root.get("segments");
      if (segs == nullptr || segs->kind != JValue::Arr) {
        continue;
      }
      for (const JValue& sj : segs->a) {
        CDA::SegmentInfo seg;
        const JValue* pid = sj.get("pool_id");
        if (pid && pid->kind == JValue::Arr && pid->a.size() == 2) {
          seg.owner_private_pool_id = {pid->a[0].u, pid->a[1].u};
        }
        if (mempool_id != MempoolId_t{0, 0} && seg.owner_private_pool_id != mempool_id) {
          continue;
        }
        seg.device = static_cast<DeviceIndex>(sj.num("device", d));
        seg.address = sj.num("address");
        seg.total_size = sj.num("total_size");
        seg.requested_size = sj.num("requested_size");
        seg.allocated_size = sj.num("allocated_size");
        seg.active_size = sj.num("active_size");
        seg.stream = reinterpret_cast<void*>(static_cast<uintptr_t>(sj.num("stream")));
        seg.is_large = sj.str("segment_type") != "small";
        seg.is_expandable = sj.flag("is_expandable");
        // creation order: ProcessGroupNCCL::registerMemPool sorts a pool's segments by it and asserts it is set
        seg.registration_counter = static_cast<decltype(seg.registration_counter)>(sj.num("registration_counter"));
        // PyTorch derives each block's address by adding up the sizes before it: tile the segment in address
        // order, with inactive blocks in any gap the engine did not list.
        std::vector<const JValue*> blocks;
        if (const JValue* bj = sj.get("blocks"); bj && bj->kind == JValue::Arr) {
          for (const JValue& b : bj->a) {
            blocks.push_back(&b);
          }
        }
        std::sort(blocks.begin(), blocks.end(),
                  [](const JValue* x, const JValue* y) { return x->num("address") < y->num("address"); });
        uint64_t at = seg.address;
        for (const JValue* b : blocks) {
          uint64_t addr = b->num("address");
          if (addr > at) {
            CDA::BlockInfo gap;
            gap.size = addr - at;
            seg.blocks.push_back(gap);
          }
          CDA::BlockInfo bi;
          bi.size = b->num("size");
          bi.requested_size = b->num("requested_size");
          std::string state = b->str("state");
          bi.allocated = state == "active_allocated";
          bi.active = bi.allocated || state == "active_pending_free";
          auto it = live_.find(addr);
          if (it != live_.end()) {
            bi.context_when_allocated = it->second.context;
          }
          seg.blocks.push_back(std::move(bi));
          at = addr + b->num("size");
        }
        if (at < seg.address + seg.total_size) {
          CDA::BlockInfo tail;
          tail.size = seg.address + seg.total_size - at;
          seg.blocks.push_back(tail);
        }
        info.segments.push_back(std::move(seg));
      }
    }
    if (include_traces) {
      info.device_traces.resize(static_cast<size_t>(ndev));
      for (int d = 0; d < ndev && d < kMaxDevices; d++) {
        info.device_traces[d].assign(traces_[d].begin(), traces_[d].end());
      }
    }
    info.config_metadata.garbage_collection_threshold = 0;
    info.config_metadata.max_split_size = SIZE_MAX;
    info.config_metadata.pinned_num_register_threads = 0;
    info.config_metadata.expandable_segments = false;
    info.config_metadata.release_lock_on_malloc = false;
    info.config_metadata.pinned_use_host_register = false;
    info.config_metadata.graph_capture_record_stream_reuse = false;
    info.config_metadata.last_allocator_settings = "gmlake";
    return info;
  }

  void beginAllocateToPool(DeviceIndex device, MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : captures_) {
      TORCH_CHECK(!(c.device == device && c.id == mempool_id),
                  "beginAllocateToPool: already recording to mempool_id");
    }
    TORCH_CHECK(gmlake_pool_create_or_incref(device, mempool_id.first, mempool_id.second) >= 0,
                "gmlake: beginAllocateToPool(device ", static_cast<int>(device), ", pool (", mempool_id.first, ", ",
                mempool_id.second, ")): ", lastError());
    used_[device].store(true);
    captures_.push_back(Capture{device, mempool_id, std::move(filter), {}});
    n_captures_.fetch_add(1);
  }

  void endAllocateToPool(DeviceIndex device, MempoolId_t mempool_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = captures_.begin(); it != captures_.end(); ++it) {
      if (it->device == device && it->id == mempool_id) {
        for (cudaStream_t s : it->marked) {
          gmlake_set_capturing(device, s, 0);
        }
        captures_.erase(it);
        n_captures_.fetch_sub(1);
        return;
      }
    }
    TORCH_CHECK(false, "endAllocatePool: not currently recording to mempool_id");
  }

  void releasePool(DeviceIndex device, MempoolId_t mempool_id) override {
    TORCH_CHECK(gmlake_pool_release(device, mempool_id.first, mempool_id.second) >= 0, "gmlake: releasePool(device ",
                static_cast<int>(device), ", pool (", mempool_id.first, ", ", mempool_id.second, ")): ", lastError());
    if (n_foreign_.load() > 0) {
      int n = gmlake_pool_use_count(device, mempool_id.first, mempool_id.second);
      std::lock_guard<std::mutex> lock(mu_);
      auto it = foreign_.find({static_cast<int>(device), mempool_id});
      if (it != foreign_.end() && n <= 0) {
        it->second->active = false;  // empty_cache now returns its cached blocks to its allocator
      }
    }
  }

  int getPoolUseCount(DeviceIndex device, MempoolId_t mempool_id) override {
    int n = gmlake_pool_use_count(device, mempool_id.first, mempool_id.second);
    TORCH_CHECK(n >= 0, "gmlake: getPoolUseCount: ", lastError());
    return n;
  }

  void createOrIncrefPool(DeviceIndex device, MempoolId_t mempool_id,
                          std::shared_ptr<CCA::CUDAAllocator> allocator) override {
    // The engine keeps the pool's use count (getPoolUseCount) either way; a pool with another allocator
    // takes its memory from that allocator (ForeignPool).
    TORCH_CHECK(gmlake_pool_create_or_incref(device, mempool_id.first, mempool_id.second) >= 0,
                "gmlake: createOrIncrefPool(device ", static_cast<int>(device), ", pool (", mempool_id.first, ", ",
                mempool_id.second, ")): ", lastError());
    used_[device].store(true);
    if (allocator != nullptr && allocator.get() != this) {
      std::lock_guard<std::mutex> lock(mu_);
      auto& fp = foreign_[{static_cast<int>(device), mempool_id}];
      if (fp == nullptr) {
        fp = std::make_shared<ForeignPool>();
        fp->allocator = std::move(allocator);
        fp->device = device;
        n_foreign_.store(static_cast<int>(foreign_.size()));
      }
      fp->active = true;
    }
  }

  void setUseOnOOM(DeviceIndex /*device*/, MempoolId_t /*mempool_id*/, bool use_on_oom) override {
    TORCH_CHECK(!use_on_oom,
                "torch.cuda.MemPool(use_on_oom=True) is not supported under gmlake: a private pool's memory never "
                "serves another pool's requests. Leave use_on_oom False.");
  }

  // no_split holds for a foreign pool as it is: its blocks are handed out whole, never split (foreignAlloc).
  // torch's symmetric memory asks for it on its MemPool(allocator=...). gmlake's own pools split and stitch.
  void setNoSplit(DeviceIndex device, MempoolId_t mempool_id) override {
    TORCH_CHECK(foreignPool(device, mempool_id) != nullptr,
                "torch.cuda.MemPool(no_split=True) is not supported under gmlake (gmlake splits and stitches blocks "
                "by its own rules; a MemPool with its own allocator= is served unsplit). Leave no_split False.");
  }

  bool checkPoolLiveAllocations(DeviceIndex device, MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override {
    std::vector<uint64_t> live = poolLive(device, mempool_id);
    if (live.size() != expected_live_allocations.size()) {
      return false;
    }
    for (uint64_t p : live) {
      if (expected_live_allocations.count(reinterpret_cast<void*>(static_cast<uintptr_t>(p))) == 0) {
        return false;
      }
    }
    return true;
  }

  CCA::ShareableHandle shareIpcHandle(void* ptr) override {
    return exportHandle(ptr);
  }

  std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
    return ipc_.open(handle);
  }

  bool isHistoryEnabled() override {
    return history_.load();
  }

  void recordHistory(bool enabled, CDA::CreateContextFn context_recorder, size_t alloc_trace_max_entries,
                     CDA::RecordContext when, bool clearHistory, const std::vector<std::string>& skip_actions) override {
    std::lock_guard<std::mutex> lock(mu_);
    context_recorder_.store(context_recorder);
    when_.store(static_cast<int>(enabled ? when : CDA::RecordContext::NEVER));
    max_entries_ = std::max<size_t>(1, alloc_trace_max_entries);
    skip_.assign(8 + 1, false);
    for (const auto& a : skip_actions) {
      skip_[static_cast<size_t>(CDA::parseTraceEntryAction(a))] = true;
    }
    if (clearHistory || !enabled) {  // as PyTorch's allocator: turning history off drops what it recorded
      for (auto& t : traces_) {
        t.clear();
      }
    }
    if (!enabled) {
      live_.clear();
    }
    history_.store(enabled);
    slow_.store(history_.load() || !trackers_.empty());
  }

  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& /*md*/) override {}

  void attachOutOfMemoryObserver(CCA::OutOfMemoryObserver observer) override {
    std::lock_guard<std::mutex> lock(mu_);
    oom_observers_.push_back(std::move(observer));
  }

  void attachAllocatorTraceTracker(CCA::AllocatorTraceTracker tracker) override {
    std::lock_guard<std::mutex> lock(mu_);
    trackers_.push_back(std::move(tracker));
    slow_.store(true);
  }

  void enablePeerAccess(DeviceIndex dev, DeviceIndex dev_to_access) override {
    c10::cuda::CUDAGuard device_guard(dev);
    cudaError_t err = cudaDeviceEnablePeerAccess(dev_to_access, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else {
      C10_CUDA_CHECK(err);
    }
  }

  cudaError_t memcpyAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                          cudaStream_t stream, bool /*p2p_enabled*/) override {
    // gmlake's memory is cuMemMap'd and mapped for its own device only: across devices only
    // cudaMemcpyPeerAsync is correct (as for PyTorch's expandable segments without peer mappings).
    if (dstDevice == srcDevice) {
      return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
    }
    return cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, stream);
  }

  std::shared_ptr<CCA::AllocatorState> getCheckpointState(DeviceIndex device, MempoolId_t id) override {
    auto st = std::make_shared<PoolCheckpoint>();
    st->device = device;
    st->id = id;
    st->live = poolLive(device, id);
    return st;
  }

  CCA::CheckpointDelta setCheckpointPoolState(DeviceIndex /*device*/,
                                              std::shared_ptr<CCA::AllocatorState> /*pps*/) override {
    TORCH_CHECK(false,
                "gmlake cannot restore a CUDA graph pool to a checkpoint (setCheckpointPoolState: it would have to "
                "re-create allocations at given addresses). torch.compile(mode=\"reduce-overhead\") needs it only "
                "when a CUDA graph tree re-records after replaying; use mode=\"max-autotune-no-cudagraphs\" or mark "
                "steps with torch.compiler.cudagraph_mark_step_begin(), or run without gmlake.");
  }

  std::string name() override {
    return "gmlake";
  }

  // ---- gmlake's own ----

  // malloc serves one allocation: from the private pool whose capture filter takes the stream, else from the
  // default pool. On failure: a device-wide sync (pending stream-ordered frees complete) and one more try, then
  // c10::OutOfMemoryError with PyTorch's wording, after the OOM observers ran.
  void* malloc(size_t size, DeviceIndex device, cudaStream_t stream) {
    MempoolId_t pool{0, 0};
    bool capturing = false;
    if (C10_UNLIKELY(n_captures_.load(std::memory_order_relaxed) > 0)) {
      pool = poolFor(device, stream, &capturing);
    }
    if (C10_UNLIKELY(!used_[device].load(std::memory_order_relaxed))) {
      applyConfFraction(device);
      used_[device].store(true);
    }
    if (C10_UNLIKELY(!enabled_.load(std::memory_order_relaxed)) && pool == MempoolId_t{0, 0}) {
      return uncachedAlloc(size, device);  // torch.cuda.caching_allocator_enable(False)
    }
    std::shared_ptr<ForeignPool> fp;
    if (C10_UNLIKELY((pool != MempoolId_t{0, 0})) && n_foreign_.load(std::memory_order_relaxed) > 0) {
      fp = foreignPool(device, pool);
    }
    void* p = nullptr;
    if (C10_UNLIKELY(fp != nullptr)) {
      p = foreignAlloc(size, device, stream, fp, capturing);
    } else {
      p = tryAlloc(size, device, stream, pool, capturing);
      if (C10_UNLIKELY(p == nullptr)) {
        p = onFailure(size, device, stream, pool, capturing);
      }
    }
    if (C10_UNLIKELY(slow_.load(std::memory_order_relaxed))) {
      onAlloc(p, size, device, stream, pool);
    }
    if (C10_UNLIKELY(c10::memoryProfilingEnabled())) {
      reportUsage(p, static_cast<int64_t>(size), device);
    }
    return p;
  }

  void free(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    if (C10_UNLIKELY(n_side_.load(std::memory_order_relaxed) > 0) && sideFree(ptr)) {
      return;
    }
    int device = single_device_.load(std::memory_order_relaxed);
    if (C10_UNLIKELY(device < 0)) {
      device = deviceOf(ptr);
    }
    size_t size = 0;
    if (C10_UNLIKELY(slow_.load(std::memory_order_relaxed))) {
      size = onFree(ptr, device);
    }
    if (C10_UNLIKELY(c10::memoryProfilingEnabled())) {
      reportUsage(ptr, -static_cast<int64_t>(size != 0 ? size : blockSize(ptr)), static_cast<DeviceIndex>(device));
    }
    if (C10_UNLIKELY(n_captures_.load(std::memory_order_relaxed) > 0)) {
      c10::cuda::CUDAStreamCaptureModeGuard g{cudaStreamCaptureModeRelaxed};
      gmlake_free(ptr, 0, device, nullptr);
    } else {
      gmlake_free(ptr, 0, device, nullptr);
    }
  }

  // A segment event from the engine (called on the thread of the gmlake call that caused it, outside the
  // engine's lock).
  void engineEvent(int device, int action, uint64_t addr, uint64_t size, void* stream) {
    if (!slow_.load(std::memory_order_relaxed) || device < 0 || device >= kMaxDevices) {
      return;
    }
    CDA::TraceEntry::Action a;
    if (action == GMLAKE_EVENT_SEGMENT_MAP) {
      a = CDA::TraceEntry::SEGMENT_MAP;
    } else if (action == GMLAKE_EVENT_SEGMENT_UNMAP) {
      a = CDA::TraceEntry::SEGMENT_UNMAP;
    } else {
      return;  // OOM is recorded by malloc when it gives up (after the retry), as native records it
    }
    auto ctx = gather(CDA::RecordContext::ALL);  // outside mu_: the recorder takes the GIL
    std::lock_guard<std::mutex> lock(mu_);
    record(CDA::TraceEntry(a, static_cast<DeviceIndex>(device), addr, size, stream, MempoolId_t{0, 0},
                           c10::getApproximateTime(), ctx));
  }

 private:
  static void copyOne(CDA::Stat& to, const gmlake_stat& from) {
    to.current = from.current;
    to.peak = from.peak;
    to.allocated = from.allocated;
    to.freed = from.freed;
  }

  void* tryAlloc(size_t size, DeviceIndex device, cudaStream_t stream, MempoolId_t pool, bool capturing) {
    if (C10_LIKELY(!capturing && (pool == MempoolId_t{0, 0}))) {
      void* p = gmlake_alloc(size, device, stream);
      if (C10_LIKELY(p != nullptr)) {
        noteDevice(device);
      }
      return p;
    }
    // During a capture the engine's driver calls must not be captured: relaxed mode, as native cudaMalloc.
    c10::cuda::CUDAStreamCaptureModeGuard g{cudaStreamCaptureModeRelaxed};
    void* p = pool == MempoolId_t{0, 0} ? gmlake_alloc(size, device, stream)
                                        : gmlake_alloc_pool(size, device, stream, pool.first, pool.second);
    if (p != nullptr) {
      noteDevice(device);
    }
    return p;
  }

  void noteDevice(DeviceIndex device) {
    int d = single_device_.load(std::memory_order_relaxed);
    if (C10_LIKELY(d == device)) {
      return;
    }
    if (d == kUnset) {
      if (single_device_.compare_exchange_strong(d, device)) {
        return;
      }
    }
    if (d != device) {
      single_device_.store(kMulti);
    }
  }

  // deviceOf: the device of a pointer once several devices have allocations (the CUDA driver knows the device
  // of every mapped range).
  int deviceOf(void* ptr) {
    int d = single_device_.load();
    if (d >= 0) {
      return d;
    }
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, ptr) == cudaSuccess && attr.device >= 0) {
      return attr.device;
    }
    (void)cudaGetLastError();
    DeviceIndex cur = 0;
    (void)c10::cuda::GetDevice(&cur);
    return cur;
  }

  MempoolId_t poolFor(DeviceIndex device, cudaStream_t stream, bool* capturing) {
    std::lock_guard<std::mutex> lock(mu_);
    *capturing = true;  // some capture is underway: keep the driver calls out of it
    for (auto& c : captures_) {
      if (c.device == device && c.filter(stream)) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive &&
            std::find(c.marked.begin(), c.marked.end(), stream) == c.marked.end()) {
          gmlake_set_capturing(device, stream, 1);
          c.marked.push_back(stream);
        }
        (void)cudaGetLastError();
        return c.id;
      }
    }
    return MempoolId_t{0, 0};
  }

  std::vector<uint64_t> poolLive(DeviceIndex device, MempoolId_t id) {
    std::vector<uint64_t> ptrs(64);
    while (true) {
      int n = gmlake_pool_live(device, id.first, id.second, ptrs.data(), ptrs.size());
      TORCH_CHECK(n >= 0, "gmlake: live allocations of pool (", id.first, ", ", id.second, ") on device ",
                  static_cast<int>(device), ": ", lastError());
      if (static_cast<size_t>(n) <= ptrs.size()) {
        ptrs.resize(static_cast<size_t>(n));
        return ptrs;
      }
      ptrs.resize(static_cast<size_t>(n) * 2);
    }
  }

  void* onFailure(size_t size, DeviceIndex device, cudaStream_t stream, MempoolId_t pool, bool capturing) {
    // As PyTorch's allocator, which refuses these before rounding could overflow.
    TORCH_CHECK_WITH(OutOfMemoryError, size < (static_cast<size_t>(1) << 60),
                     "CUDA out of memory. Tried to allocate more than 1EB memory.");
    gmlake_alloc_failure f;
    std::memset(&f, 0, sizeof f);
    bool have = gmlake_last_failure(&f) == 0;
    std::string why = lastError();
    TORCH_CHECK(!have || f.kind == GMLAKE_FAIL_OOM, "gmlake: allocation of ", size, " bytes on device ",
                static_cast<int>(device), " failed: ", why);
    // gmlake already stitched, released its cache and retried. As native does before giving up: wait for
    // every stream of the device (stream-ordered frees become reusable), then once more. Not while capturing:
    // a device-wide sync would invalidate the capture.
    if (!capturing) {
      {
        c10::cuda::CUDAGuard guard(device);
        C10_CUDA_CHECK(cudaDeviceSynchronize());
      }
      void* p = tryAlloc(size, device, stream, pool, capturing);
      if (p != nullptr) {
        return p;
      }
      std::memset(&f, 0, sizeof f);
      have = gmlake_last_failure(&f) == 0;
      why = lastError();
      TORCH_CHECK(!have || f.kind == GMLAKE_FAIL_OOM, "gmlake: allocation of ", size, " bytes on device ",
                  static_cast<int>(device), " failed: ", why);
    }
    size_t device_free = f.device_free;
    size_t device_total = f.device_total;
    if (!have || device_total == 0) {
      c10::cuda::CUDAGuard guard(device);
      if (cudaMemGetInfo(&device_free, &device_total) != cudaSuccess) {
        (void)cudaGetLastError();
      }
    }
    std::vector<CCA::OutOfMemoryObserver> observers;
    {
      auto ctx = gather(CDA::RecordContext::ALL);
      std::lock_guard<std::mutex> lock(mu_);
      observers = oom_observers_;
      if (history_.load()) {
        record(CDA::TraceEntry(CDA::TraceEntry::OOM, device, device_free, size, stream, pool,
                               c10::getApproximateTime(), ctx));
      }
    }
    for (const auto& obs : observers) {
      obs(device, f.allocated, f.limit != 0 ? f.limit : device_total, device_free);
    }
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(size), f.allocated, f.reserved,
                                     c10::Device(c10::DeviceType::CUDA, device));
    std::string allowed;
    if (f.limit != 0) {
      allowed = formatSize(f.limit) + " allowed; ";
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", formatSize(size), ". GPU ",
                     static_cast<int>(device), " has a total capacity of ", formatSize(device_total), " of which ",
                     formatSize(device_free), " is free. ", allowed, "Of the allocated memory ",
                     formatSize(f.allocated), " is allocated by PyTorch, and ",
                     formatSize(f.reserved > f.allocated ? f.reserved - f.allocated : 0),
                     " is reserved by PyTorch but unallocated. gmlake (after stitching, releasing its cache and a "
                     "device-wide sync): ",
                     formatSize(f.allocated), " live, ", formatSize(f.cached), " cached, ", formatSize(f.reserved),
                     " reserved", f.limit != 0 ? (", limit " + formatSize(f.limit)) : std::string(), ". ", why);
    return nullptr;
  }

  // gather: PyTorch's context (stack) if history records at this level. Never under mu_: the recorder takes
  // the GIL, and a Python thread holding the GIL may be waiting for mu_.
  std::shared_ptr<c10::GatheredContext> gather(CDA::RecordContext level) {
    CDA::CreateContextFn fn = context_recorder_.load();
    if (fn == nullptr || !history_.load() || when_.load() < static_cast<int>(level)) {
      return nullptr;
    }
    return fn();
  }

  void record(CDA::TraceEntry e) {
    for (const auto& t : trackers_) {
      t(e);
    }
    if (!history_.load() || skip_[static_cast<size_t>(e.action_)]) {
      return;
    }
    auto& q = traces_[e.device_];
    if (q.size() >= max_entries_) {
      q.pop_front();
    }
    q.push_back(std::move(e));
  }

  void onAlloc(void* p, size_t size, DeviceIndex device, cudaStream_t stream, MempoolId_t pool) {
    auto ctx = gather(CDA::RecordContext::STATE);
    std::lock_guard<std::mutex> lock(mu_);
    if (history_.load()) {
      live_[reinterpret_cast<uintptr_t>(p)] = LiveInfo{size, stream, pool, ctx};
    }
    bool keep = when_.load() >= static_cast<int>(CDA::RecordContext::ALLOC);
    record(CDA::TraceEntry(CDA::TraceEntry::ALLOC, device, reinterpret_cast<uintptr_t>(p), size, stream, pool,
                           c10::getApproximateTime(), keep ? ctx : nullptr));
  }

  size_t onFree(void* ptr, int device) {
    auto ctx = gather(CDA::RecordContext::ALL);
    std::lock_guard<std::mutex> lock(mu_);
    LiveInfo li{0, nullptr, MempoolId_t{0, 0}, nullptr};
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != live_.end()) {
      li = it->second;
      live_.erase(it);
    } else {
      li.requested = blockSize(ptr);  // allocated before recording started
    }
    auto now = c10::getApproximateTime();
    auto dev = static_cast<DeviceIndex>(device);
    record(CDA::TraceEntry(CDA::TraceEntry::FREE_REQUESTED, dev, reinterpret_cast<uintptr_t>(ptr), li.requested,
                           li.stream, li.pool, now, ctx));
    record(CDA::TraceEntry(CDA::TraceEntry::FREE_COMPLETED, dev, reinterpret_cast<uintptr_t>(ptr), li.requested,
                           li.stream, li.pool, now, ctx));
    return li.requested;
  }

  static size_t blockSize(void* ptr) {
    void* base = nullptr;
    size_t sz = 0;
    return gmlake_base_allocation(ptr, &base, &sz) == 0 ? sz : 0;
  }

  void reportUsage(void* p, int64_t delta, DeviceIndex device) {
    gmlake_device_stats g;
    std::memset(&g, 0, sizeof g);
    if (gmlake_get_device_stats(device, &g) != 0) {
      return;
    }
    c10::reportMemoryUsageToProfiler(p, delta, static_cast<size_t>(g.allocated_bytes[0].current),
                                     static_cast<size_t>(g.reserved_bytes[0].current),
                                     c10::Device(c10::DeviceType::CUDA, device));
  }

  // uncachedAlloc: with the caching allocator disabled (torch.cuda.caching_allocator_enable(False)), as
  // PyTorch's allocator: straight from cudaMalloc, outside gmlake's engine and its statistics; freed by
  // cudaFree whenever it is freed, enabled again or not.
  void* uncachedAlloc(size_t size, DeviceIndex device) {
    c10::cuda::CUDAGuard guard(device);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", formatSize(size),
                       " with the caching allocator disabled (torch.cuda.caching_allocator_enable(False)): "
                       "cudaMalloc failed on GPU ", static_cast<int>(device), ".");
    }
    C10_CUDA_CHECK(err);
    std::lock_guard<std::mutex> lock(mu_);
    uncached_.emplace(reinterpret_cast<uintptr_t>(p), device);
    n_side_.store(static_cast<int>(uncached_.size() + foreign_live_.size()));
    return p;
  }

  // sideFree frees ptr if it is not the engine's: an uncached block (cudaFree) or a foreign pool's (back to
  // the pool's cache, reusable once the streams record_stream named are past its free); true if so.
  bool sideFree(void* ptr) {
    DeviceIndex device = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto fit = foreign_live_.find(reinterpret_cast<uintptr_t>(ptr));
      if (fit != foreign_live_.end()) {
        std::shared_ptr<ForeignPool> fp = fit->second.first;
        ForeignBlock b = std::move(fit->second.second);
        foreign_live_.erase(fit);
        n_side_.store(static_cast<int>(uncached_.size() + foreign_live_.size()));
        c10::cuda::CUDAGuard guard(fp->device);
        for (cudaStream_t u : b.uses) {
          cudaEvent_t ev = nullptr;
          C10_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
          C10_CUDA_CHECK(cudaEventRecord(ev, u));
          b.pending.push_back(ev);
        }
        b.uses.clear();
        fp->live--;
        fp->free.push_back(std::move(b));
        return true;
      }
      auto it = uncached_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == uncached_.end()) {
        return false;
      }
      device = it->second;
      uncached_.erase(it);
      n_side_.store(static_cast<int>(uncached_.size() + foreign_live_.size()));
    }
    c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaFree(ptr));
    return true;
  }

  std::shared_ptr<ForeignPool> foreignPool(DeviceIndex device, MempoolId_t pool) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = foreign_.find({static_cast<int>(device), pool});
    return it == foreign_.end() ? nullptr : it->second;
  }

  // eventsDone: whether every event a freed foreign block waits on has completed (then destroyed). Under mu_.
  static bool eventsDone(ForeignBlock& b) {
    for (cudaEvent_t ev : b.pending) {
      cudaError_t err = cudaEventQuery(ev);
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
      }
      C10_CUDA_CHECK(err);
    }
    for (cudaEvent_t ev : b.pending) {
      C10_CUDA_CHECK(cudaEventDestroy(ev));
    }
    b.pending.clear();
    return true;
  }

  // foreignAlloc serves a request from a foreign pool: the smallest cached block on the stream that fits and
  // whose other streams are past its free, else a new block from the pool's allocator. Its failure (a null
  // pointer) is c10::OutOfMemoryError, after the pool's cached blocks went back to the allocator and one more try.
  void* foreignAlloc(size_t size, DeviceIndex device, cudaStream_t stream, const std::shared_ptr<ForeignPool>& fp,
                     bool capturing) {
    const size_t want = (size + 511) / 512 * 512;
    {
      std::lock_guard<std::mutex> lock(mu_);
      c10::cuda::CUDAGuard guard(device);
      size_t best = fp->free.size();
      for (size_t i = 0; i < fp->free.size(); i++) {
        ForeignBlock& b = fp->free[i];
        if (b.stream == stream && b.size >= want && (best == fp->free.size() || b.size < fp->free[best].size) &&
            eventsDone(b)) {
          best = i;
        }
      }
      if (best != fp->free.size()) {
        ForeignBlock b = std::move(fp->free[best]);
        fp->free.erase(fp->free.begin() + static_cast<std::ptrdiff_t>(best));
        void* p = b.ptr;
        foreign_live_[reinterpret_cast<uintptr_t>(p)] = {fp, std::move(b)};
        fp->live++;
        n_side_.store(static_cast<int>(uncached_.size() + foreign_live_.size()));
        return p;
      }
    }
    void* p = nullptr;
    for (int attempt = 0; attempt < 2 && p == nullptr; attempt++) {
      if (attempt == 1) {
        releaseForeignPool(fp);  // its cached blocks back to its allocator, then once more
      }
      c10::cuda::CUDAGuard guard(device);
      c10::cuda::CUDAStreamCaptureModeGuard mode{cudaStreamCaptureModeRelaxed};
      (void)capturing;
      p = fp->allocator->raw_alloc_with_stream(want, stream);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "CUDA out of memory. Tried to allocate ", formatSize(size),
                     " from a torch.cuda.MemPool whose allocator (", fp->allocator->name(),
                     ") returned no memory on GPU ", static_cast<int>(device), ".");
    std::lock_guard<std::mutex> lock(mu_);
    ForeignBlock b;
    b.ptr = p;
    b.size = want;
    b.stream = stream;
    foreign_live_[reinterpret_cast<uintptr_t>(p)] = {fp, std::move(b)};
    fp->live++;
    n_side_.store(static_cast<int>(uncached_.size() + foreign_live_.size()));
    return p;
  }

  // releaseForeignPool returns fp's cached blocks to its allocator (waiting for the streams they wait on).
  void releaseForeignPool(const std::shared_ptr<ForeignPool>& fp) {
    std::vector<ForeignBlock> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop.swap(fp->free);
    }
    c10::cuda::CUDAGuard guard(fp->device);
    for (ForeignBlock& b : drop) {
      for (cudaEvent_t ev : b.pending) {
        C10_CUDA_CHECK(cudaEventSynchronize(ev));
        C10_CUDA_CHECK(cudaEventDestroy(ev));
      }
      fp->allocator->raw_delete(b.ptr);
    }
  }

  // releaseForeign: empty_cache's part for foreign pools: every pool no longer in use, and the pool named,
  // give their cached blocks back; a pool no longer in use and holding nothing is forgotten (its allocator
  // with it).
  void releaseForeign(MempoolId_t named) {
    std::vector<std::shared_ptr<ForeignPool>> pools;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, fp] : foreign_) {
        if (!fp->active || (named != MempoolId_t{0, 0} && key.second == named)) {
          pools.push_back(fp);
        }
      }
    }
    for (const auto& fp : pools) {
      releaseForeignPool(fp);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = foreign_.begin(); it != foreign_.end();) {
      if (!it->second->active && it->second->live == 0 && it->second->free.empty()) {
        it = foreign_.erase(it);
      } else {
        ++it;
      }
    }
    n_foreign_.store(static_cast<int>(foreign_.size()));
  }

  // confFraction reads per_process_memory_fraction from PYTORCH_CUDA_ALLOC_CONF (-1: not set), refusing
  // what PyTorch's allocator refuses. gmlake takes no other key of it (docs/pytorch.md).
  static double confFraction() {
    const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    if (env == nullptr) {
      return -1;
    }
    std::string conf(env);
    const std::string key = "per_process_memory_fraction";
    double f = -1;
    size_t at = 0;
    while (at <= conf.size()) {
      size_t end = conf.find(',', at);
      if (end == std::string::npos) {
        end = conf.size();
      }
      std::string item = conf.substr(at, end - at);
      at = end + 1;
      size_t b = item.find_first_not_of(" \t");
      if (b == std::string::npos || item.compare(b, key.size(), key) != 0) {
        continue;
      }
      size_t colon = item.find(':', b + key.size());
      std::string v = colon == std::string::npos ? std::string() : item.substr(colon + 1);
      char* stop = nullptr;
      errno = 0;
      double x = v.empty() ? std::nan("") : std::strtod(v.c_str(), &stop);
      bool ok = errno == 0 && stop != nullptr && stop != v.c_str() &&
                std::string(stop).find_first_not_of(" \t") == std::string::npos && x >= 0 && x <= 1;
      TORCH_CHECK(ok, "per_process_memory_fraction is invalid, set it in [0.0, 1.0] (PYTORCH_CUDA_ALLOC_CONF=\"",
                  conf, "\", under gmlake)");
      f = x;
    }
    return f;
  }

  // applyConfFraction caps device by PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction, once, unless
  // set_per_process_memory_fraction came first.
  void applyConfFraction(DeviceIndex device) {
    if (conf_fraction_ < 0 || device < 0 || device >= kMaxDevices || conf_applied_[device].exchange(true)) {
      return;
    }
    TORCH_CHECK(gmlake_set_memory_fraction(conf_fraction_, device) == 0, "gmlake: PYTORCH_CUDA_ALLOC_CONF's "
                "per_process_memory_fraction:", conf_fraction_, " on device ", static_cast<int>(device), ": ",
                lastError());
  }

  static std::string snapshotJSON(int device) {
    std::string buf(1 << 16, '\0');
    while (true) {
      int n = gmlake_snapshot_json(device, &buf[0], buf.size());
      TORCH_CHECK(n >= 0, "gmlake: snapshot of device ", device, ": ", lastError());
      if (static_cast<size_t>(n) < buf.size()) {
        buf.resize(static_cast<size_t>(n));
        return buf;
      }
      buf.assign(static_cast<size_t>(n) + 1, '\0');
    }
  }

  static constexpr int kUnset = -1;
  static constexpr int kMulti = -2;

  std::atomic<bool> initialized_{false};
  std::atomic<bool> enabled_{true};
  double conf_fraction_ = -1;                       // PYTORCH_CUDA_ALLOC_CONF's fraction (-1: none); set by init
  std::atomic<bool> conf_applied_[kMaxDevices] = {};  // the device's cap was set (by that fraction or by a call)
  // n_side_ == uncached_.size() + foreign_live_.size(): blocks not the engine's (read without mu_ on the hot
  // path); n_foreign_ == foreign_.size().
  std::atomic<int> n_side_{0};
  std::atomic<int> n_foreign_{0};
  int device_count_ = 0;
  // single_device_: the one device that has allocations (kUnset before the first; kMulti once a second device
  // allocates: frees then ask the driver for a pointer's device).
  std::atomic<int> single_device_{kUnset};
  std::atomic<bool> used_[kMaxDevices] = {};  // devices gmlake has allocated on (for snapshot)
  std::atomic<int> n_captures_{0};            // == captures_.size(); read without mu_ on the hot path
  std::atomic<bool> history_{false};
  std::atomic<bool> slow_{false};             // history_ || !trackers_.empty(): the hot path records
  std::atomic<CDA::CreateContextFn> context_recorder_{nullptr};  // PyTorch's stack recorder (history)
  std::atomic<int> when_{0};                  // a CDA::RecordContext: which events get a context

  std::mutex mu_;  // guards everything below
  std::vector<Capture> captures_;
  size_t max_entries_ = 1;
  std::vector<bool> skip_ = std::vector<bool>(9, false);
  std::deque<CDA::TraceEntry> traces_[kMaxDevices];
  std::unordered_map<uintptr_t, LiveInfo> live_;  // live blocks while history is recorded
  std::unordered_map<uintptr_t, DeviceIndex> uncached_;  // cudaMalloc'd while caching was disabled: their device
  std::map<std::pair<int, MempoolId_t>, std::shared_ptr<ForeignPool>> foreign_;  // by (device, pool id)
  // live blocks of foreign pools: their pool and block
  std::unordered_map<uintptr_t, std::pair<std::shared_ptr<ForeignPool>, ForeignBlock>> foreign_live_;
  std::vector<CCA::OutOfMemoryObserver> oom_observers_;
  std::vector<CCA::AllocatorTraceTracker> trackers_;
  IpcImports ipc_;  // CUDA IPC handles this process opened
};

// The one instance, never destroyed (PyTorch may free tensors during interpreter exit, after static
// destructors would have run).
std::shared_ptr<GMLakeAllocator>* g_alloc = nullptr;

void rawDeleter(void* ptr) {
  (*g_alloc)->free(ptr);
}

void onEngineEvent(void* ctx, int device, int action, uint64_t addr, uint64_t size, void* stream) {
  static_cast<GMLakeAllocator*>(ctx)->engineEvent(device, action, addr, size, stream);
}

int copyOut(const std::string& s, char* buf, size_t len) {
  if (buf != nullptr && len > 0) {
    size_t k = std::min(s.size(), len - 1);
    std::memcpy(buf, s.data(), k);
    buf[k] = 0;
  }
  return static_cast<int>(s.size());
}

}  // namespace gmlake_torch

extern "C" {

// The interface version of this file, checked by python/gmlake_torch against the one it expects.
int gmlake_torch_version(void) {
  return 1;
}

// Makes gmlake PyTorch's CUDA allocator, as torch.cuda.memory.change_current_allocator does. Returns 0, or -1
// with the reason in err (e.g. CUDA already initialised).
int gmlake_torch_install(char* err, size_t len) {
  using namespace gmlake_torch;
  try {
    CCA::CUDAAllocator* cur = CCA::allocator.load();
    if (g_alloc != nullptr && cur == g_alloc->get()) {
      return 0;
    }
    if (cur != nullptr && cur->initialized()) {
      copyOut("PyTorch's CUDA allocator (" + cur->name() +
                  ") is already initialised (CUDA has started): gmlake must be enabled before the first CUDA tensor, "
                  "torch.cuda.init() or model.cuda()",
              err, len);
      return -1;
    }
    if (g_alloc == nullptr) {
      g_alloc = new std::shared_ptr<GMLakeAllocator>(std::make_shared<GMLakeAllocator>());
    }
    CCA::allocator.store(g_alloc->get());
    c10::SetAllocator(c10::DeviceType::CUDA, g_alloc->get(), /*priority=*/UINT8_MAX);
    return 0;
  } catch (const std::exception& e) {
    copyOut(e.what(), err, len);
    return -1;
  }
}

// Formats a size and throws and catches a c10::Error, as the out-of-memory path does: if this library had a
// libstdc++ of its own (the old shim's crash), this fails here, at enable time. Returns 0 when all is well.
int gmlake_torch_selftest(char* out, size_t len) {
  using namespace gmlake_torch;
  try {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", formatSize(2ULL << 30), ".");
  } catch (const c10::OutOfMemoryError& e) {
    std::string msg = e.what_without_backtrace();
    copyOut(msg, out, len);
    return msg.rfind("CUDA out of memory. Tried to allocate 2.00 GiB.", 0) == 0 ? 0 : 1;
  }
  return 2;
}

// 1 if gmlake's allocator is the one PyTorch uses now.
int gmlake_torch_installed(void) {
  using namespace gmlake_torch;
  return g_alloc != nullptr && CCA::allocator.load() == g_alloc->get() ? 1 : 0;
}

}  // extern "C"
