// abi_fuzz: the C ABI fuzz harness (issue 36 item 1). It turns bytes into a sequence of calls of every function
// of both ABIs of gmlake.h (the pluggable-allocator functions and the torch engine ABI) with hostile arguments
// (NULL, 0, SIZE_MAX, counts beyond what was written, unknown devices, pools, streams and pointers, capture
// end without begin, event callbacks that re-enter the library or close it, calls after close), and judges
// after EACH call:
//   - the call's own answer: success leaves no last error (GMLAKE_ERR_NONE, ""), a failure leaves one whose
//     kind fits (a bad argument is GMLAKE_ERR_INVALID; only GMLAKE_ERR_OOM may say "out of memory"), a buffer
//     gets at most the count given and never more than the result reported (guard bytes), the result is what
//     this harness's own ledger says (pool use counts, live lists, base allocations, memory fractions);
//   - no panic inside the library (gmlake_stats_json's panics_total stays 0, no engine disabled);
//   - the engine still serves (a fresh 512-byte allocation and its free succeed, or fail only with
//     GMLAKE_ERR_OOM under a memory fraction the sequence set);
//   - statistics consistent with the ledger (live allocations and requested bytes, PyTorch's and gmlake's
//     figures; with the event callback on since the engine started, mapped minus unmapped segment bytes equal
//     reserved bytes: every event is delivered by the call that caused it);
//   - close's report true (gmlake_close returns the ledger's live count).
// Built and run by abi_fuzz_test.go (FuzzABI) with GMLAKE_DEVICE=sim. Modes:
//   abi_fuzz --serve      read frames from stdin (4-byte little-endian length, then the input), answer each
//                         with lines ending in "END"; exits after a failure (its state is then suspect)
//   abi_fuzz FILE...      run each file as one input (to reproduce one by hand)
// A failure prints "FAIL call N: CALL: WHY" and the calls of the input up to it.

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include "gmlake.h"

namespace {

const uint64_t MiB = 1 << 20;
const int NDEV = 2;        // the valid devices the sequences use (sim devices 0 and 1)
const size_t MAX_LIVE = 24; // allocations held at once (memory stays far below the simulated 1 GiB)
const int MAX_CALLS = 400; // calls of one input

// The input, read a byte at a time; past its end every read is 0.
struct Input {
	const uint8_t *p;
	size_t n, i;
	bool done() const { return i >= n; }
	uint8_t u8() { return i < n ? p[i++] : 0; }
	template <class T, size_t N> const T &pick(const T (&table)[N]) { return table[u8() % N]; }
};

const size_t kSizes[] = {0, 1, 512, 4096, MiB, MiB + 1, 3 * MiB, 8 * MiB, 2048 * MiB, SIZE_MAX, SIZE_MAX / 2,
                         (size_t)1 << 40};
const int kDevices[] = {0, 1, 0, 1, 0, -1, 64, INT_MAX, INT_MIN};
const uintptr_t kStreams[] = {0, 0x55, 0x77, UINTPTR_MAX};
const uint64_t kPools[][2] = {{1, 1}, {2, 7}, {UINT64_MAX, UINT64_MAX}, {0, 0}};
const int NPOOLS = 3; // kPools[3] is the default pool, which the ledger does not model
const double kFractions[] = {1.0, 0.75, 0.5, 1e-9, 0.0, -1.0, 2.0, NAN, INFINITY, -INFINITY, 1e-300};
const size_t kLens[] = {0, 1, 8, 64, SIZE_MAX};

struct Alloc {
	uintptr_t p;
	size_t size;
	int dev;
	int pool; // index into kPools, -1: the default pool, orphan(i): of pool i, released since (until re-created)
};

// orphan is the pool index of an allocation whose pool i was released (a create of the same id revives the pool
// with its allocations, as impl's CreateOrIncrefPool does).
int orphan(int i) { return -10 - i; }

struct Dev {
	bool started = false;      // an engine may run (a call that starts one was made since the last close)
	bool evComplete = false;   // the event callback was on since the engine started: mapped must be exact
	int64_t mapped = 0;        // segment bytes mapped minus unmapped, from the events
	double fraction = 1.0;     // the last fraction set (1: none)
	int poolUse[NPOOLS] = {};  // use counts of kPools[0..NPOOLS)
	std::map<uintptr_t, bool> capturing;
};

// Callback modes (the input's first byte, and op set_event_callback).
enum { CB_OFF, CB_RECORD, CB_READ, CB_ALLOC, CB_CLOSE, CB_MODES };

struct Harness {
	Input in;
	std::vector<Alloc> live;
	std::vector<uintptr_t> freed;
	Dev dev[NDEV];
	int cbMode = CB_OFF;
	int cbDepth = 0;
	std::string calls;   // the calls so far, one a line
	std::string failure; // the first failure, "" while none
	int ncall = 0;
	std::string call; // the current call's text

	// ---- reporting ----
	void failf(const char *fmt, ...) {
		if (!failure.empty()) {
			return;
		}
		char buf[2048];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, sizeof buf, fmt, ap);
		va_end(ap);
		failure = "FAIL call " + std::to_string(ncall) + ": " + call + ": " + buf;
	}
	void begin(const char *fmt, ...) {
		char buf[512];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, sizeof buf, fmt, ap);
		va_end(ap);
		call = buf;
		ncall++;
		calls += "  " + std::to_string(ncall) + ": " + call + "\n";
	}

	static std::string lastError() {
		char buf[4096];
		gmlake_last_error(buf, sizeof buf);
		return buf;
	}

	// ok judges a call that succeeded: no last error.
	void ok() {
		int k = gmlake_last_error_kind();
		std::string e = lastError();
		if (k != GMLAKE_ERR_NONE || !e.empty()) {
			failf("succeeded but left last error kind %d %s", k, e.c_str());
		}
	}
	// failed judges a call that failed: a last error of kind want (0: any), worded for its kind.
	void failed(int want) {
		int k = gmlake_last_error_kind();
		std::string e = lastError();
		if (k == GMLAKE_ERR_NONE || e.empty()) {
			failf("failed but left no last error (kind %d, %s)", k, e.c_str());
			return;
		}
		if (want != 0 && k != want) {
			failf("failed with kind %d, want %d: %s", k, want, e.c_str());
		}
		if (k != GMLAKE_ERR_OOM && strcasestr(e.c_str(), "out of memory") != nullptr) {
			failf("kind %d says out of memory: %s", k, e.c_str());
		}
		if (k == GMLAKE_ERR_INTERNAL || k == GMLAKE_ERR_DISABLED) {
			failf("an internal error: %s", e.c_str());
		}
	}

	// ---- the ledger ----
	static bool validDev(int d) { return d >= 0 && d < NDEV; }
	Alloc *findLive(uintptr_t p) {
		for (auto &a : live) {
			if (a.p == p) {
				return &a;
			}
		}
		return nullptr;
	}
	Alloc *holding(uintptr_t p) {
		for (auto &a : live) {
			if (p >= a.p && p < a.p + a.size) {
				return &a;
			}
		}
		return nullptr;
	}
	int64_t liveCount(int d) const {
		int64_t n = 0;
		for (auto &a : live) {
			n += a.dev == d;
		}
		return n;
	}
	int64_t liveBytes(int d) const {
		int64_t n = 0;
		for (auto &a : live) {
			if (a.dev == d) {
				n += (int64_t)a.size;
			}
		}
		return n;
	}
	void started(int d) {
		if (validDev(d) && !dev[d].started) {
			dev[d].started = true;
			dev[d].evComplete = cbMode != CB_OFF;
			dev[d].mapped = 0;
		}
	}
	void forget(int d) { // after a close
		std::vector<Alloc> keep;
		for (auto &a : live) {
			if (a.dev != d) {
				keep.push_back(a);
			}
		}
		live = keep;
		dev[d] = Dev();
	}

	// pickPtr chooses a pointer: a live one, inside one, a freed one, NULL, unknown, or one of the other
	// device; *dp gets the device to name with it.
	uintptr_t pickPtr(int *dp) {
		int how = in.u8() % 7;
		*dp = in.pick(kDevices);
		if (live.empty() && how <= 2) {
			how = 3 + how;
		}
		switch (how) {
		case 0:
		case 1: {
			Alloc &a = live[in.u8() % live.size()];
			*dp = how == 1 && in.u8() % 4 == 0 ? 1 - a.dev : a.dev;
			return a.p;
		}
		case 2: {
			Alloc &a = live[in.u8() % live.size()];
			*dp = a.dev;
			return a.p + (a.size > 1 ? a.size / 2 : 0); // interior (or the start of a 1-byte block)
		}
		case 3:
			if (!freed.empty()) {
				return freed[in.u8() % freed.size()];
			}
			return 0xdead000;
		case 4:
			return 0;
		case 5:
			return 0xdead000;
		default:
			return UINTPTR_MAX - 4095;
		}
	}

	// ---- the callback ----
	static void onEvent(void *ctx, int device, int action, uint64_t addr, uint64_t size, void *stream) {
		((Harness *)ctx)->event(device, action, addr, size, stream);
	}
	void event(int device, int action, uint64_t addr, uint64_t size, void *) {
		if (!validDev(device)) {
			failf("event for device %d", device);
			return;
		}
		if (action == GMLAKE_EVENT_SEGMENT_MAP) {
			dev[device].mapped += (int64_t)size;
		} else if (action == GMLAKE_EVENT_SEGMENT_UNMAP) {
			dev[device].mapped -= (int64_t)size;
		} else if (action != GMLAKE_EVENT_OOM || addr != 0) {
			failf("event action %d addr %#" PRIx64, action, addr);
		}
		if (cbDepth > 0) {
			return; // one level of re-entry
		}
		cbDepth++;
		switch (cbMode) {
		case CB_READ: {
			gmlake_device_stats st;
			if (gmlake_get_device_stats(device, &st) != 0 || gmlake_stats_json(device, nullptr, 0) <= 0 ||
			    gmlake_snapshot_json(device, nullptr, 0) <= 0) {
				failf("a read from the event callback failed: %s", lastError().c_str());
			}
			break;
		}
		case CB_ALLOC: {
			void *p = gmlake_alloc(4096, device, nullptr);
			if (p != nullptr) {
				gmlake_free(p, 4096, device, nullptr);
			} else if (gmlake_last_error_kind() != GMLAKE_ERR_OOM) {
				failf("an allocation from the event callback failed: %s", lastError().c_str());
			}
			break;
		}
		case CB_CLOSE: {
			int rc = gmlake_close(device);
			if (rc >= 0 || gmlake_last_error_kind() != GMLAKE_ERR_INVALID) {
				failf("gmlake_close from the event callback returned %d (kind %d, %s), want a refusal", rc,
				      gmlake_last_error_kind(), lastError().c_str());
			}
			break;
		}
		}
		cbDepth--;
	}
	void setCallback(int mode) {
		cbMode = mode;
		if (mode == CB_OFF) {
			gmlake_set_event_callback(nullptr, nullptr);
			for (auto &d : dev) {
				d.evComplete = false;
			}
		} else {
			gmlake_set_event_callback(onEvent, this);
			for (auto &d : dev) {
				if (!d.started) {
					d.evComplete = true;
				}
			}
		}
	}

	// ---- copy-out buffers ----
	// copyOut calls fn(buf, len) with a hostile buffer and len, and checks the snprintf rules with guard bytes.
	template <class F> int copyOut(F fn) {
		int how = in.u8() % 5;
		if (how == 0) {
			return fn(nullptr, in.pick(kLens)); // NULL: nothing written, whatever len
		}
		int n = fn(nullptr, 0);
		if (n < 0) {
			return n;
		}
		size_t room, len;
		switch (how) {
		case 1: // exactly the room it needs
			room = len = (size_t)n + 1;
			break;
		case 2: // a len beyond the buffer: only what the result says may be written
			room = (size_t)n + 1;
			len = SIZE_MAX;
			break;
		case 3: // a small buffer
			room = len = in.u8() % 16;
			break;
		default:
			room = in.u8() % 16;
			len = std::min(room, in.pick(kLens));
		}
		std::vector<char> buf(room + 64, '\x5a');
		int m = fn(buf.data(), len);
		if (m != n) {
			failf("returned %d, then %d for the same state", n, m);
			return m;
		}
		size_t wrote = len == 0 ? 0 : std::min((size_t)n, len - 1) + 1;
		if (len > 0 && buf[wrote - 1] != 0) {
			failf("no NUL at %zu (len %zu, result %d)", wrote - 1, len, n);
		}
		for (size_t i = wrote; i < buf.size(); i++) {
			if (buf[i] != '\x5a') {
				failf("wrote byte %zu beyond %zu (len %zu, result %d)", i, wrote, len, n);
				break;
			}
		}
		return m;
	}

	// mayOOM says whether an out of memory is legitimate for a small request on d: under a memory fraction,
	// while a stream captures (no synchronisation to reclaim frees), or while private pools keep memory.
	bool mayOOM(int d) const {
		if (dev[d].fraction != 1.0 || !dev[d].capturing.empty()) {
			return true;
		}
		for (int i = 0; i < NPOOLS; i++) {
			if (dev[d].poolUse[i] > 0) {
				return true;
			}
		}
		for (auto &a : live) {
			if (a.dev == d && a.pool <= orphan(0)) {
				return true;
			}
		}
		return false;
	}

	// ---- the judges after each call ----
	int64_t jsonInt(const std::string &js, const char *key, bool *found) {
		std::string k = std::string("\"") + key + "\":";
		size_t at = js.find(k);
		*found = at != std::string::npos;
		return *found ? strtoll(js.c_str() + at + k.size(), nullptr, 10) : 0;
	}
	std::string statsJSON(int d) {
		int n = gmlake_stats_json(d, nullptr, 0);
		if (n < 0) {
			failf("judge: gmlake_stats_json(%d) failed: %s", d, lastError().c_str());
			return "";
		}
		std::string s(n + 1, 0);
		gmlake_stats_json(d, &s[0], s.size());
		s.resize(n);
		return s;
	}
	void judge() {
		for (int d = 0; d < NDEV && failure.empty(); d++) {
			gmlake_device_stats st;
			if (gmlake_get_device_stats(d, &st) != 0) {
				failf("judge: gmlake_get_device_stats(%d) failed: %s", d, lastError().c_str());
				return;
			}
			if (st.allocation[0].current != liveCount(d) || st.requested_bytes[0].current != liveBytes(d)) {
				failf("judge: device %d has %" PRId64 " allocations of %" PRId64 " bytes, the ledger %" PRId64 " of %" PRId64,
				      d, st.allocation[0].current, st.requested_bytes[0].current, liveCount(d), liveBytes(d));
			}
			if (dev[d].evComplete && dev[d].mapped != st.reserved_bytes[0].current) {
				failf("judge: device %d: the events mapped %" PRId64 " bytes net, reserved is %" PRId64
				      " (an event not delivered by the call that caused it)",
				      d, dev[d].mapped, st.reserved_bytes[0].current);
			}
			std::string js = statsJSON(d);
			bool found;
			if (int64_t p = jsonInt(js, "panics_total", &found); !found || p != 0) {
				failf("judge: panics_total %" PRId64 " (found %d): %s", p, found, js.c_str());
			}
			if (js.find("\"disabled\":true") != std::string::npos) {
				failf("judge: device %d is disabled: %s", d, js.c_str());
			}
			if (int64_t n = jsonInt(js, "num_live", &found); found && n != liveCount(d)) {
				failf("judge: num_live %" PRId64 ", the ledger %" PRId64, n, liveCount(d));
			}
			// The host cache (hostcache.c): its count of live entries is what a scan of its table finds, each
			// entry where its probe run finds it, no more entries than live allocations, and the statistics'
			// own entry handed its log over (no cached free, no entry left).
			if (int64_t hn = jsonInt(js, "host_cache_live", &found); found) {
				int64_t scanned = jsonInt(js, "host_cache_live_scanned", &found);
				int64_t findable = jsonInt(js, "host_cache_findable", &found);
				int64_t freed = jsonInt(js, "host_cache_freed", &found);
				int64_t nlog = jsonInt(js, "host_cache_log", &found);
				if (hn != scanned || hn > liveCount(d) || (hn > 0 && findable != 1) || freed != 0 || nlog != 0) {
					failf("judge: device %d: the host cache counts %" PRId64 " live entries, its table holds %" PRId64
					      " (findable %" PRId64 "), %" PRId64 " cached frees and %" PRId64 " log entries after the "
					      "statistics' hand-over; the ledger has %" PRId64 " live allocations",
					      d, hn, scanned, findable, freed, nlog, liveCount(d));
				}
			}
			// The engine still serves.
			started(d);
			void *p = gmlake_alloc(512, d, nullptr);
			if (p == nullptr) {
				if (gmlake_last_error_kind() != GMLAKE_ERR_OOM || !mayOOM(d)) {
					failf("judge: device %d no longer serves: a 512-byte allocation failed (kind %d): %s", d,
					      gmlake_last_error_kind(), lastError().c_str());
				}
			} else {
				gmlake_free(p, 512, d, nullptr);
				if (gmlake_last_error_kind() != GMLAKE_ERR_NONE) {
					failf("judge: device %d: freeing the probe failed: %s", d, lastError().c_str());
				}
			}
		}
	}

	// ---- the calls ----
	void opAlloc(bool pool, bool throwing) {
		size_t size = in.pick(kSizes);
		int d = in.pick(kDevices);
		uintptr_t s = in.pick(kStreams);
		int pi = pool ? in.u8() % 4 : -1;
		if (live.size() >= MAX_LIVE && size != 0) {
			size = 0;
		}
		void *p = nullptr;
		if (size != 0) {
			started(d); // before the call: the engine's first events are the ledger's
		}
		if (pool) {
			begin("gmlake_alloc_pool(%zu, %d, %#" PRIxPTR ", pool %d)", size, d, s, pi);
			p = gmlake_alloc_pool(size, d, (cudaStream_t)s, kPools[pi][0], kPools[pi][1]);
		} else if (throwing) {
			begin("gmlake_alloc_throw(%zu, %d, %#" PRIxPTR ")", size, d, s);
			try {
				p = gmlake_alloc_throw(size, d, (cudaStream_t)s);
			} catch (const std::exception &e) {
				bool oomText = strstr(e.what(), "CUDA out of memory") != nullptr;
				if (oomText != (gmlake_last_error_kind() == GMLAKE_ERR_OOM)) {
					failf("threw \"%s\" for kind %d", e.what(), gmlake_last_error_kind());
				}
			}
		} else {
			begin("gmlake_alloc(%zu, %d, %#" PRIxPTR ")", size, d, s);
			p = gmlake_alloc(size, d, (cudaStream_t)s);
		}
		if (p != nullptr) {
			ok();
			if (!validDev(d) || size == 0) {
				failf("a pointer %p for device %d, size %zu", p, d, size);
				return;
			}
			if (pool && (pi == 3 || dev[d].poolUse[pi] == 0)) {
				if (pi != 3) {
					failf("allocated from pool %d, which the ledger says does not exist", pi);
				}
			}
			if (holding((uintptr_t)p) != nullptr) {
				failf("%p overlaps a live allocation", p);
			}
			live.push_back(Alloc{(uintptr_t)p, size, d, pool && pi != 3 ? pi : -1});
			return;
		}
		if (size == 0) {
			ok();
			return;
		}
		if (!validDev(d) || (pool && pi != 3 && dev[d].poolUse[pi] == 0)) {
			failed(GMLAKE_ERR_INVALID);
		} else if (size <= 8 * MiB && !mayOOM(d)) {
			failf("a %zu-byte allocation failed on device %d without a cap: %s", size, d, lastError().c_str());
		} else {
			failed(0);
		}
	}

	void opFree() {
		int d;
		uintptr_t p = pickPtr(&d);
		begin("gmlake_free(%#" PRIxPTR ", %d)", p, d);
		gmlake_free((void *)p, 0, d, nullptr);
		Alloc *a = findLive(p);
		if (p == 0) {
			ok();
		} else if (a != nullptr && a->dev == d) {
			ok();
			freed.push_back(p);
			if (freed.size() > 16) {
				freed.erase(freed.begin());
			}
			*a = live.back();
			live.pop_back();
		} else {
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opRecordStream() {
		int d;
		uintptr_t p = pickPtr(&d);
		uintptr_t s = in.pick(kStreams);
		begin("gmlake_record_stream(%#" PRIxPTR ", %#" PRIxPTR ")", p, s);
		int rc = gmlake_record_stream((void *)p, (cudaStream_t)s);
		if (p == 0 || findLive(p) != nullptr) {
			if (rc != 0) {
				failf("returned %d for a live pointer: %s", rc, lastError().c_str());
			}
			ok();
		} else if (rc == 0) {
			failf("accepted a pointer that is no live allocation's start");
		} else {
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opFraction() {
		double f = in.pick(kFractions);
		int d = in.pick(kDevices);
		begin("gmlake_set_memory_fraction(%g, %d)", f, d);
		// As PyTorch's allocator: [0, 1]; 0 and a fraction that caps at 0 bytes are a cap of 0 bytes.
		bool valid = validDev(d) && f >= 0 && f <= 1;
		if (valid) {
			started(d);
		}
		int rc = gmlake_set_memory_fraction(f, d);
		if (valid != (rc == 0)) {
			failf("returned %d (%s)", rc, lastError().c_str());
		} else if (rc == 0) {
			ok();
			dev[d].fraction = f;
		} else {
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opGetFraction() {
		int d = in.pick(kDevices);
		begin("gmlake_get_memory_fraction(%d)", d);
		double f = gmlake_get_memory_fraction(d);
		if (!validDev(d)) {
			if (f >= 0) {
				failf("returned %g for a bad device", f);
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		ok();
		if (f != dev[d].fraction) {  // exactly the fraction set, as PyTorch's get_per_process_memory_fraction
			failf("returned %.17g, the ledger set %.17g", f, dev[d].fraction);
		}
	}

	void opTextCall(int which) {
		int d = in.pick(kDevices);
		int rc = 0;
		switch (which) {
		case 0:
			begin("gmlake_stats_json(%d, ...)", d);
			rc = copyOut([&](char *b, size_t n) { return gmlake_stats_json(d, b, n); });
			break;
		case 1:
			begin("gmlake_snapshot_json(%d, ...)", d);
			rc = copyOut([&](char *b, size_t n) { return gmlake_snapshot_json(d, b, n); });
			break;
		case 2:
			begin("gmlake_knobs(...)");
			rc = copyOut([&](char *b, size_t n) { return gmlake_knobs(b, n); });
			d = 0;
			break;
		default: {
			begin("gmlake_last_error(...) after gmlake_close(%d)", d);
			int c = gmlake_close(d); // a call that fails for a bad device: there is an error to read
			if (validDev(d)) {
				if (c != liveCount(d)) {
					failf("gmlake_close(%d) returned %d, the ledger holds %" PRId64, d, c, liveCount(d));
				}
				forget(d);
			}
			std::string want = lastError();
			rc = copyOut([&](char *b, size_t n) { return gmlake_last_error(b, n); });
			if (rc != (int)want.size()) {
				failf("gmlake_last_error returned %d, the error has %zu bytes", rc, want.size());
			}
			if (lastError() != want) {
				failf("reading the last error changed it");
			}
			return;
		}
		}
		if (validDev(d)) {
			if (rc < 0) {
				failf("returned %d: %s", rc, lastError().c_str());
			}
			ok();
		} else {
			if (rc >= 0) {
				failf("returned %d for a bad device", rc);
			}
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opDeviceStats() {
		int d = in.pick(kDevices);
		bool null = in.u8() % 3 == 0;
		begin("gmlake_get_device_stats(%d, %s)", d, null ? "NULL" : "&st");
		gmlake_device_stats st;
		int rc = gmlake_get_device_stats(d, null ? nullptr : &st);
		if (validDev(d) && !null) {
			if (rc != 0) {
				failf("returned %d: %s", rc, lastError().c_str());
			}
			ok();
		} else {
			if (rc == 0) {
				failf("returned 0");
			}
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opReset() {
		int d = in.pick(kDevices);
		bool acc = in.u8() % 2;
		begin("gmlake_reset_%s_stats(%d)", acc ? "accumulated" : "peak", d);
		int rc = acc ? gmlake_reset_accumulated_stats(d) : gmlake_reset_peak_stats(d);
		if (validDev(d) == (rc == 0)) {
			rc == 0 ? ok() : failed(GMLAKE_ERR_INVALID);
		} else {
			failf("returned %d: %s", rc, lastError().c_str());
		}
	}

	void opPool(int op) {
		int d = in.pick(kDevices);
		int pi = in.u8() % 4;
		const char *names[] = {"create_or_incref", "release", "use_count"};
		begin("gmlake_pool_%s(%d, pool %d)", names[op], d, pi);
		started(d);
		int rc = op == 0   ? gmlake_pool_create_or_incref(d, kPools[pi][0], kPools[pi][1])
		         : op == 1 ? gmlake_pool_release(d, kPools[pi][0], kPools[pi][1])
		                   : gmlake_pool_use_count(d, kPools[pi][0], kPools[pi][1]);
		if (!validDev(d)) {
			if (rc >= 0) {
				failf("returned %d for a bad device", rc);
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (pi == 3) { // the default pool: not modelled; the answer must only be consistent
			rc >= 0 ? ok() : failed(GMLAKE_ERR_INVALID);
			return;
		}
		int &use = dev[d].poolUse[pi];
		int want = op == 0 ? use + 1 : op == 1 ? use - 1 : use;
		if (op == 1 && use == 0) {
			if (rc >= 0) {
				failf("released a pool that does not exist: %d", rc);
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (rc != want) {
			failf("returned %d, the ledger says %d (%s)", rc, want, lastError().c_str());
			return;
		}
		ok();
		use = want;
		for (auto &a : live) {
			if (a.dev == d && op == 1 && use == 0 && a.pool == pi) {
				a.pool = orphan(pi); // of the released pool: not live in it until it is created again
			} else if (a.dev == d && op == 0 && use == 1 && a.pool == orphan(pi)) {
				a.pool = pi; // the pool lives again, with its allocations
			}
		}
	}

	void opPoolLive() {
		int d = in.pick(kDevices);
		int pi = in.u8() % NPOOLS;
		int how = in.u8() % 3;
		begin("gmlake_pool_live(%d, pool %d, %s)", d, pi, how == 0 ? "NULL, SIZE_MAX" : how == 1 ? "exact, SIZE_MAX" : "1, 1");
		std::vector<uint64_t> want;
		for (auto &a : live) {
			if (a.dev == d && a.pool == pi) {
				want.push_back(a.p);
			}
		}
		std::sort(want.begin(), want.end());
		size_t room = how == 0 ? 0 : how == 1 ? want.size() : 1;
		std::vector<uint64_t> buf(room + 8, 0x5a5a5a5a5a5a5a5aULL);
		bool known = validDev(d) && dev[d].poolUse[pi] > 0;
		size_t cap = how == 2 ? 1 : how == 0 || known ? SIZE_MAX : room; // beyond the buffer only where the count is known
		int rc = gmlake_pool_live(d, kPools[pi][0], kPools[pi][1], how == 0 ? nullptr : buf.data(), cap);
		if (!validDev(d)) {
			if (rc >= 0) {
				failf("returned %d for a bad device", rc);
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (rc < 0) {
			failf("returned %d: %s", rc, lastError().c_str());
			return;
		}
		ok();
		if (dev[d].poolUse[pi] > 0 && rc != (int)want.size()) {
			failf("returned %d live allocations, the ledger %zu", rc, want.size());
			return;
		}
		size_t wrote = how == 0 ? 0 : std::min((size_t)rc, cap);
		for (size_t i = 0; i < buf.size(); i++) {
			if (i < wrote && dev[d].poolUse[pi] > 0 && buf[i] != want[i]) {
				failf("entry %zu is %#" PRIx64 ", the ledger %#" PRIx64, i, buf[i], want[i]);
				return;
			}
			if (i >= wrote && buf[i] != 0x5a5a5a5a5a5a5a5aULL) {
				failf("wrote entry %zu beyond %zu", i, wrote);
				return;
			}
		}
	}

	void opCapture() {
		int d = in.pick(kDevices);
		uintptr_t s = in.pick(kStreams);
		int on = in.u8() % 2;
		begin("gmlake_set_capturing(%d, %#" PRIxPTR ", %d)", d, s, on);
		started(d);
		int rc = gmlake_set_capturing(d, (cudaStream_t)s, on);
		if (!validDev(d)) {
			if (rc == 0) {
				failf("returned 0 for a bad device");
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (on || dev[d].capturing.count(s)) {
			if (rc != 0) {
				failf("returned %d: %s", rc, lastError().c_str());
			}
			ok();
			if (on) {
				dev[d].capturing[s] = true;
			} else {
				dev[d].capturing.erase(s);
			}
		} else {
			if (rc == 0) {
				failf("ended a capture that never began: returned 0");
			}
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opCacheInfo() {
		int d = in.pick(kDevices);
		bool null = in.u8() % 3 == 0;
		begin("gmlake_cache_info(%d, %s)", d, null ? "NULL" : "&v");
		size_t v = 0;
		int rc = gmlake_cache_info(d, null ? nullptr : &v);
		if (validDev(d) && !null) {
			if (rc != 0) {
				failf("returned %d: %s", rc, lastError().c_str());
			}
			ok();
		} else {
			if (rc == 0) {
				failf("returned 0");
			}
			failed(GMLAKE_ERR_INVALID);
		}
	}

	void opBase() {
		int d;
		uintptr_t p = pickPtr(&d);
		int nulls = in.u8() % 4;
		begin("gmlake_base_allocation(%#" PRIxPTR ", %s)", p, nulls == 0 ? "NULL, NULL" : "&b, &n");
		void *b = nullptr;
		size_t n = 0;
		int rc = gmlake_base_allocation((void *)p, nulls == 0 ? nullptr : &b, nulls == 0 ? nullptr : &n);
		Alloc *a = holding(p);
		if (a != nullptr) {
			if (rc != 0) {
				failf("returned %d for a pointer inside a live allocation: %s", rc, lastError().c_str());
				return;
			}
			ok();
			if (nulls != 0 && ((uintptr_t)b != a->p || n < a->size)) {
				failf("base %p size %zu, the ledger %#" PRIxPTR " of %zu", b, n, a->p, a->size);
			}
		} else {
			if (rc == 0) {
				failf("returned base %p for a pointer in no live allocation", b);
			}
			failed(GMLAKE_ERR_INVALID);
		}
	}

	// gmlake_ipc_export: a live allocation's start exports open descriptors whose pieces cover it (or, with too
	// short an array, fails INVALID saying how many it needs and writes none); anything else fails INVALID.
	void opIPC() {
		int d;
		uintptr_t p = pickPtr(&d);
		if (in.u8() % 4 == 0) {
			p += 512; // inside (or past) an allocation
		}
		static const size_t caps[] = {0, 1, 2, 64};
		size_t cap = caps[in.u8() % 4];
		bool nullN = in.u8() % 8 == 0;
		begin("gmlake_ipc_export(%#" PRIxPTR ", pieces, %zu, %s, &off, &size)", p, cap, nullN ? "NULL" : "&n");
		gmlake_ipc_piece pc[64];
		for (auto &x : pc) {
			x = {-7, 7, 7};
		}
		size_t n = 0;
		uint64_t off = 0, size = 0;
		int rc = gmlake_ipc_export((void *)p, pc, cap, nullN ? nullptr : &n, &off, &size);
		Alloc *a = holding(p);
		bool start = a != nullptr && a->p == p;
		if (!start || nullN) {
			if (rc == 0) {
				failf("returned 0 for %s", nullN ? "a NULL n" : "a pointer that starts no live allocation");
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (rc != 0) {
			if (n <= cap) {
				failf("returned %d with n %zu <= cap %zu for a live allocation: %s", rc, n, cap, lastError().c_str());
				return;
			}
			failed(GMLAKE_ERR_INVALID);
			if (cap > 0 && pc[0].fd != -7) {
				failf("wrote pieces[0] (fd %d) though it failed", pc[0].fd);
			}
			return;
		}
		ok();
		uint64_t total = 0;
		for (size_t i = 0; i < n; i++) {
			if (pc[i].size == 0 || pc[i].reserved != 0 || fcntl(pc[i].fd, F_GETFD) < 0) {
				failf("piece %zu: fd %d (open: %d), %" PRIu64 " bytes", i, pc[i].fd, fcntl(pc[i].fd, F_GETFD) >= 0,
				      pc[i].size);
				return;
			}
			total += pc[i].size;
		}
		if (n == 0 || size < a->size || off >= pc[0].size || off + size > total) {
			failf("%zu pieces of %" PRIu64 " bytes, the allocation %" PRIu64 " bytes at offset %" PRIu64
			      ", the ledger's %zu bytes", n, total, size, off, a->size);
		}
	}

	void opClose() {
		int d = in.pick(kDevices);
		begin("gmlake_close(%d)", d);
		int rc = gmlake_close(d);
		if (!validDev(d)) {
			if (rc >= 0) {
				failf("returned %d for a bad device", rc);
			}
			failed(GMLAKE_ERR_INVALID);
			return;
		}
		if (rc != liveCount(d)) {
			failf("returned %d, the ledger holds %" PRId64 " live allocations (%s)", rc, liveCount(d), lastError().c_str());
		}
		ok();
		forget(d);
	}

	void opStart() {
		int d = in.pick(kDevices);
		begin("gmlake_start(%d)", d);
		started(d);
		int rc = gmlake_start(d);
		if (validDev(d)) {
			rc == 0 ? ok() : failf("returned %d: %s", rc, lastError().c_str());
		} else {
			rc != 0 ? failed(GMLAKE_ERR_INVALID) : failf("returned 0 for a bad device");
		}
	}

	void opSettings() {
		static const char *const bad[] = {"GMLAKE_POLICY=nope", nullptr};
		static const char *const good[] = {"GMLAKE_DEVICE=sim", "GMLAKE_SIM_CAPACITY=64MiB", nullptr};
		static const char *const empty[] = {nullptr};
		static const char *const junk[] = {"GMLAKE_CHUNK_SIZE", "=", "GMLAKE_=1", "", nullptr};
		const char *const *envs[] = {nullptr, bad, good, empty, junk};
		int which = in.u8() % 6;
		int rc;
		if (which == 5) {
			begin("gmlake_settings_json(...)");
			rc = copyOut([&](char *b, size_t n) { return gmlake_settings_json(b, n); });
		} else {
			begin("gmlake_check_settings(env %d, ...)", which);
			rc = copyOut([&](char *b, size_t n) { return gmlake_check_settings(envs[which], b, n); });
		}
		if (rc < 0) {
			failf("returned %d: %s", rc, lastError().c_str());
		}
		ok();
	}

	void opTrace(bool start) {
		if (start) {
			int null = in.u8() % 2;
			char path[64];
			snprintf(path, sizeof path, "/tmp/gmlake-abi-fuzz-%d.trace", (int)getpid());
			begin("gmlake_trace_start(%s)", null ? "NULL" : path);
			int rc = gmlake_trace_start(null ? nullptr : path);
			if (null && rc == 0) {
				failf("accepted a NULL path");
			}
			rc == 0 ? ok() : failed(null ? GMLAKE_ERR_INVALID : 0);
		} else {
			begin("gmlake_trace_stop()");
			gmlake_trace_stop() == 0 ? ok() : failed(0);
		}
	}

	void step() {
		switch (in.u8() % 26) {
		case 0:
		case 1:
		case 2:
			return opAlloc(false, false);
		case 3:
			return opAlloc(false, true);
		case 4:
		case 5:
			return opAlloc(true, false);
		case 6:
		case 7:
		case 8:
			return opFree();
		case 9:
			return opRecordStream();
		case 10:
			begin("gmlake_empty_cache()");
			gmlake_empty_cache() == 0 ? ok() : failf("failed: %s", lastError().c_str());
			return;
		case 11:
			return opFraction();
		case 12:
			return opGetFraction();
		case 13:
			return opTextCall(in.u8() % 4);
		case 14:
			return opDeviceStats();
		case 15:
			return opReset();
		case 16:
		case 17:
			return opPool(0);
		case 18:
			return opPool(1 + in.u8() % 2);
		case 19:
			return opPoolLive();
		case 20:
			return opCapture();
		case 21: {
			int k = in.u8();
			return k % 2 ? opCacheInfo() : (k % 8 == 4 ? opIPC() : opBase());
		}
		case 22: {
			int mode = in.u8() % CB_MODES;
			begin("gmlake_set_event_callback(mode %d)", mode);
			setCallback(mode);
			ok();
			return;
		}
		case 23:
			return opClose();
		case 24: {
			int n = in.pick(kDevices);
			begin("gmlake_init(%d); gmlake_last_failure(%s)", n, n < 0 ? "NULL" : "&f");
			gmlake_init(n);
			ok();
			gmlake_alloc_failure f;
			gmlake_last_failure(n < 0 ? nullptr : &f);
			return;
		}
		default:
			switch (in.u8() % 4) {
			case 0:
				return opStart();
			case 1:
				return opSettings();
			default:
				return opTrace(in.u8() % 2);
			}
		}
	}

	// finish ends the input: captures ended, every device closed with the ledger's count, and a fresh engine
	// serves.
	void finish() {
		call = "(end of input)";
		for (int d = 0; d < NDEV; d++) {
			for (auto &c : dev[d].capturing) {
				if (gmlake_set_capturing(d, (cudaStream_t)c.first, 0) != 0) {
					failf("ending the capture of stream %#" PRIxPTR " on device %d: %s", c.first, d, lastError().c_str());
				}
			}
			dev[d].capturing.clear();
		}
		gmlake_set_event_callback(nullptr, nullptr);
		gmlake_trace_stop();
		for (int d = 0; d < NDEV; d++) {
			int rc = gmlake_close(d);
			if (rc != liveCount(d)) {
				failf("gmlake_close(%d) returned %d, the ledger holds %" PRId64 " (%s)", d, rc, liveCount(d), lastError().c_str());
			}
			forget(d);
		}
		void *p = gmlake_alloc(4096, 0, nullptr);
		if (p == nullptr) {
			failf("a fresh engine does not serve: %s", lastError().c_str());
		} else {
			gmlake_free(p, 4096, 0, nullptr);
		}
		if (int rc = gmlake_close(0); rc != 0) {
			failf("closing the fresh engine returned %d: %s", rc, lastError().c_str());
		}
		bool found;
		if (int64_t n = jsonInt(statsJSON(0), "panics_total", &found); !found || n != 0) {
			failf("panics_total %" PRId64 " at the end", n);
		}
		char path[64];
		snprintf(path, sizeof path, "/tmp/gmlake-abi-fuzz-%d.trace", (int)getpid());
		unlink(path);
	}

	// run runs one input; returns the report ("" on success).
	std::string run(const uint8_t *p, size_t n) {
		in = Input{p, n, 0};
		setCallback(in.u8() % CB_MODES);
		call = "(start)";
		judge();
		while (!in.done() && ncall < MAX_CALLS && failure.empty()) {
			step();
			if (failure.empty()) {
				judge();
			}
		}
		if (failure.empty()) {
			finish();
		}
		if (failure.empty()) {
			return "";
		}
		return failure + "\ncalls:\n" + calls;
	}
};

// runOne runs an input in a fresh harness and prints its report; returns whether it passed.
bool runOne(const uint8_t *p, size_t n) {
	Harness *h = new Harness();
	std::string r = h->run(p, n);
	if (r.empty()) {
		std::printf("ok calls=%d\n", h->ncall);
	} else {
		std::printf("%s", r.c_str());
	}
	delete h; // a failed input leaves its devices as they are: the process exits after it
	return r.empty();
}

} // namespace

int main(int argc, char **argv) {
	if (argc == 2 && std::strcmp(argv[1], "--serve") == 0) {
		for (;;) {
			uint8_t hdr[4];
			if (std::fread(hdr, 1, 4, stdin) != 4) {
				return 0;
			}
			size_t n = hdr[0] | hdr[1] << 8 | hdr[2] << 16 | (size_t)hdr[3] << 24;
			std::vector<uint8_t> buf(n);
			if (n > 0 && std::fread(buf.data(), 1, n, stdin) != n) {
				return 2;
			}
			bool pass = runOne(buf.data(), n);
			std::printf("END\n");
			std::fflush(stdout);
			if (!pass) {
				return 1;
			}
		}
	}
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		FILE *f = std::fopen(argv[i], "rb");
		if (f == nullptr) {
			std::printf("%s: cannot open\n", argv[i]);
			return 2;
		}
		std::vector<uint8_t> buf;
		int c;
		while ((c = std::fgetc(f)) != EOF) {
			buf.push_back((uint8_t)c);
		}
		std::fclose(f);
		std::printf("%s: ", argv[i]);
		bad += !runOne(buf.data(), buf.size());
	}
	return bad != 0;
}
