// torch_abi_test: drives the torch engine ABI of libgmlake.so (gmlake.h, issue 15) as the C++ CUDAAllocator
// of python/gmlake_torch does, on the simulated device. Built and run by torch_test.go (TestTorchABI) with
// GMLAKE_DEVICE=sim and GMLAKE_SIM_CAPACITY=256MiB:
//   g++ -O1 -o torch_abi_test torch_abi_test.cc -I.. -L DIR -lgmlake -Wl,-rpath,DIR -lpthread && ./torch_abi_test
// Prints a line per failed check and closes with "N passed, M failed"; exits 1 if any failed.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gmlake.h"

static int passed, failed;

#define CHECK(cond, ...)                                                                                      \
	do {                                                                                                      \
		if (cond) {                                                                                           \
			passed++;                                                                                         \
		} else {                                                                                              \
			failed++;                                                                                         \
			std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                       \
			std::printf(__VA_ARGS__);                                                                         \
			std::printf("\n");                                                                                \
		}                                                                                                     \
	} while (0)

static const uint64_t MiB = 1 << 20;

static std::string last_error() {
	char buf[4096];
	gmlake_last_error(buf, sizeof buf);
	return buf;
}

static gmlake_device_stats stats(int device) {
	gmlake_device_stats s;
	std::memset(&s, 0xff, sizeof s);
	int rc = gmlake_get_device_stats(device, &s);
	CHECK(rc == 0, "gmlake_get_device_stats: %d %s", rc, last_error().c_str());
	return s;
}

// consistent checks what holds for every statistic: peak >= current, all = small + large.
static void consistent(const gmlake_device_stats &s, const char *when) {
	const gmlake_stat *arrays[] = {s.allocation, s.segment, s.active, s.inactive_split, s.allocated_bytes,
	                               s.reserved_bytes, s.active_bytes, s.inactive_split_bytes, s.requested_bytes};
	for (const gmlake_stat *a : arrays) {
		for (int i = 0; i < 3; i++) {
			CHECK(a[i].peak >= a[i].current, "%s: stat %d: peak %lld < current %lld", when, i,
			      (long long)a[i].peak, (long long)a[i].current);
		}
		CHECK(a[0].current == a[1].current + a[2].current, "%s: all %lld != small %lld + large %lld", when,
		      (long long)a[0].current, (long long)a[1].current, (long long)a[2].current);
	}
}

// events counts what the event callback saw.
struct events {
	int64_t mapped = 0; // bytes mapped minus unmapped
	int maps = 0, unmaps = 0, ooms = 0;
	uint64_t oom_size = 0;
	int bad = 0; // calls with a wrong device or action
};

static void on_event(void *ctx, int device, int action, uint64_t addr, uint64_t size, void *stream) {
	events *e = (events *)ctx;
	(void)stream;
	if (device != 0) {
		e->bad++;
		return;
	}
	switch (action) {
	case GMLAKE_EVENT_SEGMENT_MAP:
		e->maps++;
		e->mapped += (int64_t)size;
		if (addr == 0) e->bad++;
		break;
	case GMLAKE_EVENT_SEGMENT_UNMAP:
		e->unmaps++;
		e->mapped -= (int64_t)size;
		if (addr == 0) e->bad++;
		break;
	case GMLAKE_EVENT_OOM:
		e->ooms++;
		e->oom_size = size;
		break;
	default:
		e->bad++;
	}
}

static std::string snapshot(int device) {
	std::vector<char> buf(16);
	int n = gmlake_snapshot_json(device, buf.data(), buf.size());
	if (n < 0) return "<error>";
	if ((size_t)n >= buf.size()) {
		buf.resize(n + 1);
		gmlake_snapshot_json(device, buf.data(), buf.size());
	}
	return buf.data();
}

static bool has(const std::string &s, const std::string &sub) { return s.find(sub) != std::string::npos; }

int main() {
	const int dev = 0;
	events ev;
	gmlake_set_event_callback(on_event, &ev);
	CHECK(has(snapshot(dev), "\"segments\":[]"), "snapshot before start: %s", snapshot(dev).c_str());
	// Before the engine starts: zeros, no error.
	gmlake_device_stats s0 = stats(dev);
	CHECK(s0.allocation[0].current == 0 && s0.reserved_bytes[0].peak == 0 && s0.max_split_size == -1,
	      "stats before start: allocation %lld reserved peak %lld max_split %lld", (long long)s0.allocation[0].current,
	      (long long)s0.reserved_bytes[0].peak, (long long)s0.max_split_size);
	CHECK(gmlake_get_device_stats(-1, &s0) < 0, "a bad device is an error");
	CHECK(gmlake_get_memory_fraction(dev) == 1.0, "fraction before start %g", gmlake_get_memory_fraction(dev));

	// One small, one large allocation.
	void *small = gmlake_alloc(1000, dev, nullptr);
	void *large = gmlake_alloc(8 * MiB, dev, nullptr);
	CHECK(small && large, "allocations: %s", last_error().c_str());
	gmlake_device_stats s = stats(dev);
	consistent(s, "after two allocations");
	CHECK(s.allocation[0].current == 2 && s.allocation[1].current == 1 && s.allocation[2].current == 1,
	      "allocation counts %lld %lld %lld", (long long)s.allocation[0].current, (long long)s.allocation[1].current,
	      (long long)s.allocation[2].current);
	CHECK(s.allocated_bytes[1].current == 1024 && s.requested_bytes[1].current == 1000,
	      "small pool: allocated %lld requested %lld", (long long)s.allocated_bytes[1].current,
	      (long long)s.requested_bytes[1].current);
	CHECK(s.allocated_bytes[2].current == (int64_t)(8 * MiB), "large allocated %lld", (long long)s.allocated_bytes[2].current);
	CHECK(s.reserved_bytes[0].current >= s.allocated_bytes[0].current && s.segment[0].current >= 2,
	      "reserved %lld segments %lld", (long long)s.reserved_bytes[0].current, (long long)s.segment[0].current);
	CHECK(s.num_device_alloc >= 2 && s.num_device_free == 0, "device alloc %lld free %lld",
	      (long long)s.num_device_alloc, (long long)s.num_device_free);
	CHECK(s.active[0].current == 2 && s.active_bytes[0].current == s.allocated_bytes[0].current, "active %lld",
	      (long long)s.active[0].current);
	CHECK(ev.maps >= 2 && ev.mapped == s.reserved_bytes[0].current && ev.bad == 0,
	      "segment events: %d maps, %lld bytes, reserved %lld, %d bad", ev.maps, (long long)ev.mapped,
	      (long long)s.reserved_bytes[0].current, ev.bad);

	// The snapshot lists both blocks in their segments, live.
	std::string js = snapshot(dev);
	char want[128];
	std::snprintf(want, sizeof want, "{\"address\":%llu,\"size\":%llu,\"requested_size\":%llu,\"state\":\"active_allocated\"}",
	              (unsigned long long)(uintptr_t)large, (unsigned long long)(8 * MiB), (unsigned long long)(8 * MiB));
	CHECK(has(js, want), "snapshot lacks %s: %s", want, js.c_str());
	std::snprintf(want, sizeof want, "{\"address\":%llu,\"size\":1024,\"requested_size\":1000,\"state\":\"active_allocated\"}",
	              (unsigned long long)(uintptr_t)small);
	CHECK(has(js, want), "snapshot lacks %s: %s", want, js.c_str());
	CHECK(has(js, "\"segment_type\":\"small\"") && has(js, "\"segment_type\":\"large\"") &&
	          has(js, "\"stitched_blocks\":[]") && has(js, "\"pool_id\":[0,0]"),
	      "snapshot: %s", js.c_str());

	// getBaseAllocation of an interior pointer; of a pointer nobody allocated.
	void *base = nullptr;
	size_t bsize = 0;
	CHECK(gmlake_base_allocation((char *)large + 4096, &base, &bsize) == 0 && base == large && bsize == 8 * MiB,
	      "base of large+4096: %p %zu (%s)", base, bsize, last_error().c_str());
	CHECK(gmlake_base_allocation((void *)16, &base, &bsize) < 0, "base of a stray pointer is an error");

	// Frees, peaks and resets.
	gmlake_free(small, 0, dev, nullptr);
	s = stats(dev);
	consistent(s, "after a free");
	CHECK(s.allocation[1].current == 0 && s.allocation[1].peak == 1 && s.allocation[1].allocated == 1 &&
	          s.allocation[1].freed == 1,
	      "small allocation after free: %lld/%lld/%lld/%lld", (long long)s.allocation[1].current,
	      (long long)s.allocation[1].peak, (long long)s.allocation[1].allocated, (long long)s.allocation[1].freed);
	CHECK(gmlake_reset_peak_stats(dev) == 0, "reset peak");
	s = stats(dev);
	CHECK(s.allocation[0].peak == 1 && s.allocated_bytes[0].peak == s.allocated_bytes[0].current,
	      "peaks after reset: %lld", (long long)s.allocation[0].peak);
	CHECK(gmlake_reset_accumulated_stats(dev) == 0, "reset accumulated");
	s = stats(dev);
	CHECK(s.allocation[0].allocated == 0 && s.allocation[0].freed == 0 && s.num_device_alloc == 0 &&
	          s.allocation[0].current == 1,
	      "accumulated after reset: %lld %lld %lld", (long long)s.allocation[0].allocated,
	      (long long)s.allocation[0].freed, (long long)s.num_device_alloc);

	// cacheInfo sees the free small block's memory; after freeing the large one, at least 8 MiB.
	size_t largest = 0;
	gmlake_free(large, 0, dev, nullptr);
	CHECK(gmlake_cache_info(dev, &largest) == 0 && largest >= 8 * MiB, "cache info %zu", largest);

	// A request larger than the device is an out of memory, with the figures.
	gmlake_alloc_failure f;
	std::memset(&f, 0, sizeof f);
	CHECK(gmlake_alloc(1024 * MiB, dev, nullptr) == nullptr, "1 GiB on a 256 MiB device");
	CHECK(gmlake_last_failure(&f) == 0 && f.kind == GMLAKE_FAIL_OOM && f.requested == 1024 * MiB &&
	          f.device_total == 256 * MiB,
	      "failure of 1 GiB: kind %d requested %llu total %llu", f.kind, (unsigned long long)f.requested,
	      (unsigned long long)f.device_total);
	CHECK(last_error().find("out of memory") != std::string::npos, "error text: %s", last_error().c_str());
	// A real out of memory: the device fills up.
	void *a = gmlake_alloc(150 * MiB, dev, nullptr);
	void *b = gmlake_alloc(150 * MiB, dev, nullptr);
	CHECK(a != nullptr && b == nullptr, "150 MiB twice: %p %p", a, b);
	CHECK(gmlake_last_failure(&f) == 0 && f.kind == GMLAKE_FAIL_OOM && f.requested == 150 * MiB &&
	          f.allocated >= 150 * MiB && f.reserved >= f.allocated && f.cached == f.reserved - f.allocated,
	      "failure of 150 MiB: kind %d allocated %llu reserved %llu cached %llu", f.kind,
	      (unsigned long long)f.allocated, (unsigned long long)f.reserved, (unsigned long long)f.cached);
	s = stats(dev);
	consistent(s, "after out of memory");
	CHECK(s.num_ooms == 2 && s.num_alloc_retries >= 1, "num_ooms %lld retries %lld", (long long)s.num_ooms,
	      (long long)s.num_alloc_retries);
	CHECK(ev.ooms == 2 && ev.oom_size == 150 * MiB, "oom events %d, last %llu bytes", ev.ooms,
	      (unsigned long long)ev.oom_size);
	gmlake_free(a, 0, dev, nullptr);

	// Memory fraction getter follows the setter.
	gmlake_set_memory_fraction(0.5, dev);
	CHECK(gmlake_get_memory_fraction(dev) == 0.5, "fraction %g", gmlake_get_memory_fraction(dev));
	gmlake_set_memory_fraction(1.0, dev);
	CHECK(gmlake_get_memory_fraction(dev) == 1.0, "fraction %g", gmlake_get_memory_fraction(dev));

	gmlake_empty_cache();
	s = stats(dev);
	consistent(s, "after empty_cache");
	CHECK(s.reserved_bytes[0].current == 0 && s.segment[0].current == 0 && s.num_sync_all_streams >= 1 &&
	          s.num_device_free > 0,
	      "after empty_cache: reserved %lld segments %lld syncs %lld", (long long)s.reserved_bytes[0].current,
	      (long long)s.segment[0].current, (long long)s.num_sync_all_streams);
	CHECK(ev.mapped == 0 && ev.unmaps >= 1 && ev.bad == 0, "after empty_cache the events net %lld bytes (%d unmaps)",
	      (long long)ev.mapped, ev.unmaps);
	gmlake_set_event_callback(nullptr, nullptr);

	// A pool call on a device out of range fails with GMLAKE_ERR_INVALID and says which device (each of the three).
	CHECK(gmlake_pool_create_or_incref(64, 7, 1) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID &&
	          has(last_error(), "device 64"),
	      "create on device 64: kind %d, %s", gmlake_last_error_kind(), last_error().c_str());
	CHECK(gmlake_pool_release(-1, 7, 1) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID,
	      "release on device -1: kind %d, %s", gmlake_last_error_kind(), last_error().c_str());
	CHECK(gmlake_pool_use_count(64, 7, 1) < 0 && gmlake_last_error_kind() == GMLAKE_ERR_INVALID,
	      "use count on device 64: kind %d, %s", gmlake_last_error_kind(), last_error().c_str());

	// Pools: a private pool's block serves only that pool; its live list, use count, release.
	CHECK(gmlake_pool_create_or_incref(dev, 7, 1) == 1 && gmlake_pool_create_or_incref(dev, 7, 1) == 2 &&
	          gmlake_pool_use_count(dev, 7, 1) == 2,
	      "use counts: %s", last_error().c_str());
	void *stream = (void *)0x5000;
	CHECK(gmlake_set_capturing(dev, stream, 1) == 0, "capture on: %s", last_error().c_str());
	void *g = gmlake_alloc_pool(4 * MiB, dev, stream, 7, 1);
	CHECK(g != nullptr, "alloc_pool: %s", last_error().c_str());
	gmlake_free(g, 0, dev, stream);
	void *d = gmlake_alloc(4 * MiB, dev, stream);
	CHECK(d != nullptr && d != g, "the default pool got the pool's freed block %p", d);
	void *g2 = gmlake_alloc_pool(4 * MiB, dev, stream, 7, 1);
	CHECK(g2 == g, "the pool's next block %p, want its freed %p", g2, g);
	uint64_t lp[4] = {0, 0, 0, 0};
	CHECK(gmlake_pool_live(dev, 7, 1, lp, 4) == 1 && lp[0] == (uint64_t)(uintptr_t)g2, "pool live: %llu",
	      (unsigned long long)lp[0]);
	CHECK(gmlake_pool_live(dev, 0, 0, nullptr, 0) == 1, "default pool live count");
	CHECK(gmlake_pool_live(99, 7, 1, lp, 4) == -1 && gmlake_pool_live(-1, 7, 1, nullptr, 0) == -1 &&
	          gmlake_pool_use_count(99, 7, 1) == -1,
	      "a device that does not exist is refused with -1 (pool live, use count): %s", last_error().c_str());
	CHECK(has(snapshot(dev), "\"pool_id\":[7,1]"), "snapshot lacks the pool: %s", snapshot(dev).c_str());
	CHECK(gmlake_alloc_pool(4 * MiB, dev, stream, 9, 9) == nullptr, "alloc from an unknown pool");
	CHECK(gmlake_last_failure(&f) == 0 && f.kind == GMLAKE_FAIL_INVALID, "unknown pool failure kind %d", f.kind);
	CHECK(has(last_error(), "unknown memory pool"), "error text: %s", last_error().c_str());
	CHECK(gmlake_set_capturing(dev, stream, 0) == 0, "capture off: %s", last_error().c_str());
	CHECK(gmlake_pool_release(dev, 7, 1) == 1 && gmlake_pool_release(dev, 7, 1) == 0 &&
	          gmlake_pool_use_count(dev, 7, 1) == 0 && gmlake_pool_release(dev, 7, 1) < 0,
	      "releases: %s", last_error().c_str());
	gmlake_free(g2, 0, dev, stream);
	gmlake_free(d, 0, dev, stream);
	CHECK(!has(snapshot(dev), "\"pool_id\":[7,1]"), "the released pool still holds memory: %s", snapshot(dev).c_str());

	CHECK(gmlake_close(dev) == 0, "close: %s", last_error().c_str());
	std::printf("torch abi: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
