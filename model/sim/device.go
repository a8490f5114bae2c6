package sim

// The reference device: a simulated GPU that implements vmm.Driver and enforces every rule of the vmm
// package doc (docs/cuda-vmm.md) with the error CUDA gives.
//
// State, all guarded by Device.mu:
//   - handles: the physical allocations still holding memory (created, and not yet both released and
//     unmapped). A handle id is never reused, so an id below nextHandle that is not in the map was freed.
//   - reservations: the reserved virtual ranges, in a btree keyed by base.
//   - mappings: the mapped virtual ranges, one per Map call, in a btree keyed by base. Each lies inside one
//     reservation, maps its handle whole, at offset 0, and is accessible as a whole or not at all (SetAccess
//     works on whole mappings, measured on the H200).
//   - streams and events (device_streams.go), shadow contents (shadow.go), faults (faults.go), rule-9
//     hazards (device_hazards.go), the leak report (leaks.go).
//
// Virtual addresses come from a bump pointer starting at VABase, aligned to the granularity, and are never
// handed out twice (not even after FreeAddress), so a stale pointer never silently hits a newer allocation.
// A device made with UniqueAddresses owns a 4 PiB range of its own instead, disjoint from every other such
// device of the process (as the GPUs of one process are); when its bump pointer reaches the range's end it
// reuses freed ranges, first fit.
// Reservations, mappings: btrees, so Map/Unmap/SetAccess cost O(log n + mappings covered).
//
// Every driver call goes through begin (count it, maybe inject a fault) and ends by charging modeled time.
// Validation happens before any mutation, so a failed call changes nothing (vmm.Driver's contract).

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/gmlake/gmlake/vmm"
)

// H200Capacity is the default device capacity: an H200's 141 GB (rounded down to the granularity).
const H200Capacity uint64 = 141_000_000_000

// VABase is the first virtual address the device hands out. Addresses grow upward from here.
const VABase vmm.DevicePtr = 0x7f00_0000_0000

// DeviceConfig configures a simulated device. The zero value is an H200.
type DeviceConfig struct {
	// Capacity is the physical memory in bytes; 0 means H200Capacity. Rounded down to the granularity.
	Capacity uint64
	// Granularity is the allocation granularity, a power of two; 0 means 2 MiB.
	Granularity uint64
	// Costs is the cost model charged to ModeledTime; nil means vmm.H200Costs().
	Costs *vmm.CostModel
	// SyncStreams makes every unit of stream work complete as soon as it is submitted (trace replays).
	SyncStreams bool
	// UniqueAddresses gives the device a virtual address range of its own, [lo, lo+4 PiB), disjoint from
	// that of every other device made with it in this process (the first 4095 of them; then the ranges are
	// used again, in order), so that a pointer names one device, as on GPUs. false: addresses start at
	// VABase on every device (the same calls give the same addresses: tests, reproducers).
	UniqueAddresses bool
	// Seed seeds the random source of FailProb.
	Seed int64
	// RDMAHandles models handles created GPUDirect-RDMA capable (cudavmm's "rdma" request) as the H200's
	// driver 580.159 treats them (docs/cuda-vmm.md, Shareable handles). A handle's primary mapping is the one
	// made when it had none, or the first one after it became dirty; unmapping the primary mapping while
	// others remain makes the handle dirty. A mapping's first SetAccess while its handle is dirty makes that
	// mapping bad; while a bad mapping of a handle exists, every Map of the handle, and the first SetAccess
	// of another mapping of it, fails with UnknownCUDAError. The conformance suite checks the rule against the GPU
	// (GMLAKE_CUDA_HANDLES=rdma). DeviceState's HandleInfo.Poisoned says which handles have a bad mapping.
	RDMAHandles bool

	_ struct{}
}

// DeviceMapping is one Map call's mapping, as the device sees it.
type DeviceMapping struct {
	VA         vmm.Range  // the mapped virtual range; VA.Size is the handle's size
	Handle     vmm.Handle // the physical handle mapped there, whole, at offset 0
	Accessible bool       // SetAccess has granted access (always to the whole mapping)
}

// HandleInfo describes a physical handle that still holds memory.
type HandleInfo struct {
	Handle   vmm.Handle
	Size     uint64
	Released bool // Release was called; the memory returns when Mappings drops to 0
	Mappings int  // how many mappings of it exist
	Poisoned bool // RDMAHandles: a bad mapping of it exists, so Map of it fails with UnknownCUDAError
}

// DeviceState is a deep copy of the device's memory state, for the spec checkers. Slices are sorted by
// address (Reservations, Mappings) or handle id (Handles).
type DeviceState struct {
	Reservations []vmm.Range
	Mappings     []DeviceMapping
	Handles      []HandleInfo
	Used         uint64 // physical bytes not yet returned to the device
	Capacity     uint64
}

// handle is a physical allocation.
type handle struct {
	id       vmm.Handle
	size     uint64
	released bool
	mappings int    // Invariant: equals the number of mappings in Device.mappings with this handle
	shadow   shadow // the bytes written to it (sparse; unwritten bytes read 0)
	// RDMAHandles only (DeviceConfig.RDMAHandles' rule). primary: the base of its primary mapping. dirty:
	// the primary mapping was unmapped while others remained, and no Map came since. bad: Invariant: the
	// number of its mappings with bad set; while > 0, Map of it fails.
	primary vmm.DevicePtr
	dirty   bool
	bad     int
	// exported: the descriptor ExportFD gave for the handle (an open /dev/null, standing in for the driver's
	// shareable handle), closed when the handle is released; nil until the first ExportFD.
	exported *os.File
}

// mapping is one Map call's mapping.
type mapping struct {
	base vmm.DevicePtr
	size uint64
	h    *handle
	// access: a SetAccess covering this whole mapping succeeded. Access is per mapping: SetAccess over part
	// of one is refused (rule 5), so there is no partly accessible mapping.
	access bool
	// bad (RDMAHandles only): its first access was set while its handle was dirty.
	bad  bool
	uses []use // pending Memset writes through this mapping, at most one per stream (device_hazards.go)
}

func (m *mapping) limit() vmm.DevicePtr { return m.base.Add(m.size) }

// Device is the simulated GPU. Create it with NewDevice; it is safe for concurrent use.
type Device struct {
	gran     uint64
	capacity uint64
	costs    *vmm.CostModel
	sync     bool
	rdma     bool // DeviceConfig.RDMAHandles
	// [vaLo, vaHi) holds every address the device hands out; vaHi == 0: no end below 2^64.
	vaLo, vaHi vmm.DevicePtr

	mu struct {
		sync.Mutex
		used         uint64 // Invariant: sum of sizes of handles
		handles      map[vmm.Handle]*handle
		nextHandle   vmm.Handle
		reservations *btree.BTreeG[vmm.Range] // keyed by Base; disjoint
		mappings     *btree.BTreeG[*mapping]  // keyed by base; disjoint; each inside one reservation
		nextVA       vmm.DevicePtr            // bump pointer for Reserve
		// wrapped: the bump pointer reached vaHi once; Reserve searches freed gaps (first fit) from then on.
		wrapped    bool
		streams    map[vmm.Stream]*stream // live streams, DefaultStream included
		zombies    []*stream              // destroyed streams with pending work
		nextStream vmm.Stream
		events     map[vmm.Event]*event
		nextEvent  vmm.Event
		counts     vmm.CallCounts
		modeled    time.Duration
		modeledBy  [vmm.NumCallKinds]time.Duration // modeled split by call kind; sums to modeled
		faults     faults
		hazards    []Hazard // rule-9 races seen (device_hazards.go)
	}
}

var (
	_ vmm.Driver      = (*Device)(nil)
	_ vmm.CallCounter = (*Device)(nil)
)

// NewDevice returns a fresh simulated device: nothing reserved or created, DefaultStream idle.
func NewDevice(cfg DeviceConfig) *Device {
	g := cfg.Granularity
	if g == 0 {
		g = 2 * vmm.MiB
	}
	if g&(g-1) != 0 {
		panic(fmt.Sprintf("model: granularity %d is not a power of two", g))
	}
	c := cfg.Capacity
	if c == 0 {
		c = H200Capacity
	}
	c -= c % g
	costs := cfg.Costs
	if costs == nil {
		costs = vmm.H200Costs()
	}
	d := &Device{gran: g, capacity: c, costs: costs, sync: cfg.SyncStreams, rdma: cfg.RDMAHandles}
	d.mu.handles = make(map[vmm.Handle]*handle)
	d.mu.nextHandle = 1
	d.mu.reservations = btree.NewG(16, func(a, b vmm.Range) bool { return a.Base < b.Base })
	d.mu.mappings = btree.NewG(16, func(a, b *mapping) bool { return a.base < b.base })
	d.vaLo = VABase
	if cfg.UniqueAddresses {
		d.vaLo = VABase + vmm.DevicePtr((vaSlots.Add(1)-1)%vaSlotCount*vaSlotSize)
		d.vaHi = d.vaLo + vaSlotSize
	}
	d.mu.nextVA = d.vaLo
	d.mu.streams = map[vmm.Stream]*stream{vmm.DefaultStream: {id: vmm.DefaultStream}}
	d.mu.nextStream = 1
	d.mu.events = make(map[vmm.Event]*event)
	d.mu.nextEvent = 1
	d.mu.faults.init(cfg.Seed)
	return d
}

// vaSlotSize is the virtual address range of a device made with UniqueAddresses (4 PiB: 25,000 H200-sized
// reservations before the range is used again); vaSlotCount such ranges fit between VABase and 2^64.
const (
	vaSlotSize  = 1 << 52
	vaSlotCount = (1<<64 - 1 - uint64(VABase)) / vaSlotSize
)

// vaSlots counts the devices made with UniqueAddresses in this process.
var vaSlots atomic.Uint64

// AddressRange returns the half-open range [lo, hi) of the addresses the device hands out (hi is the
// largest address for a device without UniqueAddresses).
func (d *Device) AddressRange() (lo, hi vmm.DevicePtr) {
	if d.vaHi == 0 {
		return d.vaLo, ^vmm.DevicePtr(0)
	}
	return d.vaLo, d.vaHi
}

// Capacity returns the device's physical memory in bytes.
func (d *Device) Capacity() uint64 { return d.capacity }

// Used returns the physical bytes not yet returned to the device (created, and not both released and
// unmapped).
func (d *Device) Used() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.used
}

// beginLocked counts a call of kind k and returns the injected failure for it, if any. d.mu must be held.
func (d *Device) beginLocked(k vmm.CallKind) error {
	d.mu.counts[k]++
	if r, ok := d.mu.faults.check(k); ok {
		d.chargeLocked(k, 0)
		return &vmm.CallError{Call: k, Result: r, Detail: injectedDetail}
	}
	return nil
}

// failLocked charges a failed call (the cost of the smallest call of its kind) and builds its error.
func (d *Device) failLocked(k vmm.CallKind, r vmm.Result, format string, args ...any) error {
	d.chargeLocked(k, 0)
	return vmm.Errorf(k, r, format, args...)
}

// checkSizeLocked enforces rule 1: size is a positive multiple of the granularity.
func (d *Device) checkSizeLocked(k vmm.CallKind, size uint64) error {
	if size == 0 || size%d.gran != 0 {
		return d.failLocked(k, vmm.InvalidValue, "rule 1: size %d (%s) is not a positive multiple of the granularity %d",
			size, vmm.FormatBytes(size), d.gran)
	}
	return nil
}

// checkPtrLocked enforces that ptr is aligned to the granularity and ptr+size does not overflow.
func (d *Device) checkPtrLocked(k vmm.CallKind, ptr vmm.DevicePtr, size uint64) error {
	if uint64(ptr)%d.gran != 0 {
		return d.failLocked(k, vmm.InvalidValue, "rule 1: address %v is not aligned to the granularity %d", ptr, d.gran)
	}
	if uint64(ptr)+size < uint64(ptr) {
		return d.failLocked(k, vmm.InvalidValue, "range %v + %d overflows the address space", ptr, size)
	}
	return nil
}

// beginRangeLocked starts a call k over the range [ptr, ptr+size): its count and armed fault (beginLocked),
// then rule 1 for the size and the address (checkSizeLocked, checkPtrLocked), in the order the H200 checks them.
func (d *Device) beginRangeLocked(k vmm.CallKind, ptr vmm.DevicePtr, size uint64) error {
	if err := d.beginLocked(k); err != nil {
		return err
	}
	if err := d.checkSizeLocked(k, size); err != nil {
		return err
	}
	return d.checkPtrLocked(k, ptr, size)
}

// lookupHandleLocked returns the live, unreleased handle h or an InvalidHandle error (rule 7).
func (d *Device) lookupHandleLocked(k vmm.CallKind, h vmm.Handle) (*handle, error) {
	hd := d.mu.handles[h]
	switch {
	case hd != nil && !hd.released:
		return hd, nil
	case hd != nil:
		return nil, d.failLocked(k, vmm.InvalidHandle, "rule 7: handle %d was released (still mapped %d times)", h, hd.mappings)
	case h != 0 && h < d.mu.nextHandle:
		return nil, d.failLocked(k, vmm.InvalidHandle, "rule 7: handle %d was released and its memory freed", h)
	}
	return nil, d.failLocked(k, vmm.InvalidHandle, "handle %d was never created", h)
}

// Granularity returns the allocation granularity (constant). It is counted, but an injected fault cannot
// fail it (the call has no error result).
func (d *Device) Granularity() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.beginLocked(vmm.CallGranularity) == nil {
		d.chargeLocked(vmm.CallGranularity, 0)
	}
	return d.gran
}

// Create allocates size bytes of physical memory.
func (d *Device) Create(size uint64) (vmm.Handle, error) {
	const k = vmm.CallCreate
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return 0, err
	}
	if err := d.checkSizeLocked(k, size); err != nil {
		return 0, err
	}
	if size > d.capacity-d.mu.used {
		return 0, d.failLocked(k, vmm.OutOfMemory, "asked %d (%s), free %d (%s) of %s",
			size, vmm.FormatBytes(size), d.capacity-d.mu.used, vmm.FormatBytes(d.capacity-d.mu.used),
			vmm.FormatBytes(d.capacity))
	}
	h := &handle{id: d.mu.nextHandle, size: size}
	d.mu.nextHandle++
	d.mu.handles[h.id] = h
	d.mu.used += size
	d.chargeLocked(k, size)
	return h.id, nil
}

// Release drops the reference to h; the memory returns once h is also unmapped everywhere.
func (d *Device) Release(h vmm.Handle) error {
	const k = vmm.CallRelease
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	hd, err := d.lookupHandleLocked(k, h)
	if err != nil {
		return err
	}
	hd.released = true
	if hd.exported != nil {
		hd.exported.Close()
		hd.exported = nil
	}
	d.maybeFreeLocked(hd)
	d.chargeLocked(k, hd.size)
	return nil
}

// ExportFD returns a POSIX file descriptor standing for h's memory, as the real driver's
// cuMemExportToShareableHandle: the same descriptor for every call on h, closed when h is released (so a
// test can see that an exported handle's descriptor does not outlive it). Not a driver call the cost model
// counts. ErrInvalidHandle for a handle not live.
func (d *Device) ExportFD(h vmm.Handle) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	hd, ok := d.mu.handles[h]
	if !ok || hd.released {
		return -1, fmt.Errorf("sim: export of handle %d: %w", h, vmm.ErrInvalidHandle)
	}
	if hd.exported == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return -1, fmt.Errorf("sim: export of handle %d: %w", h, err)
		}
		hd.exported = f
	}
	return int(hd.exported.Fd()), nil
}

// maybeFreeLocked returns hd's memory to the device if it is released and unmapped (rule 7).
func (d *Device) maybeFreeLocked(hd *handle) {
	if hd.released && hd.mappings == 0 {
		delete(d.mu.handles, hd.id)
		d.mu.used -= hd.size
	}
}

// Reserve reserves size bytes of virtual address space, aligned to the granularity.
func (d *Device) Reserve(size uint64) (vmm.DevicePtr, error) {
	const k = vmm.CallReserve
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return 0, err
	}
	if err := d.checkSizeLocked(k, size); err != nil {
		return 0, err
	}
	base := d.mu.nextVA
	over := uint64(base)+size < uint64(base) || (d.vaHi != 0 && uint64(base)+size > uint64(d.vaHi))
	if over && d.vaHi != 0 {
		d.mu.wrapped = true
	}
	switch {
	case d.mu.wrapped:
		var ok bool
		if base, ok = d.firstFitLocked(size); !ok {
			return 0, d.failLocked(k, vmm.OutOfMemory, "virtual address space exhausted: no free range of %d bytes in [%v, %v)", size, d.vaLo, d.vaHi)
		}
	case over:
		return 0, d.failLocked(k, vmm.OutOfMemory, "virtual address space exhausted: asked %d at %v", size, base)
	default:
		// The bump pointer only grows, so the new range cannot overlap a live reservation.
		d.mu.nextVA = base.Add(size)
	}
	d.mu.reservations.ReplaceOrInsert(vmm.Range{Base: base, Size: size})
	d.chargeLocked(k, size)
	return base, nil
}

// firstFitLocked returns the lowest address of [vaLo, vaHi) where size bytes overlap no reservation.
func (d *Device) firstFitLocked(size uint64) (vmm.DevicePtr, bool) {
	at := d.vaLo
	found := false
	d.mu.reservations.Ascend(func(r vmm.Range) bool {
		if uint64(r.Base) >= uint64(at)+size {
			found = true
			return false
		}
		at = max(at, r.Base.Add(r.Size))
		return true
	})
	return at, found || uint64(at)+size <= uint64(d.vaHi)
}

// reservationAtLocked returns the reservation containing p.
func (d *Device) reservationAtLocked(p vmm.DevicePtr) (vmm.Range, bool) {
	var r vmm.Range
	ok := false
	d.mu.reservations.DescendLessOrEqual(vmm.Range{Base: p}, func(x vmm.Range) bool {
		r, ok = x, x.Contains(p)
		return false
	})
	return r, ok
}

// FreeAddress returns the reservation (ptr, size) exactly as reserved, with nothing mapped in it (rule 6).
func (d *Device) FreeAddress(ptr vmm.DevicePtr, size uint64) error {
	const k = vmm.CallFreeAddress
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	r, ok := d.mu.reservations.Get(vmm.Range{Base: ptr})
	if !ok {
		return d.failLocked(k, vmm.InvalidValue, "rule 6: %v is not the base of a reservation", ptr)
	}
	if r.Size != size {
		return d.failLocked(k, vmm.InvalidValue, "rule 6: reservation %v has size %d, not %d", r, r.Size, size)
	}
	if m := d.firstMappingFromLocked(r.Base); m != nil && m.base < r.Limit() {
		return d.failLocked(k, vmm.InvalidValue, "rule 6: reservation %v still has a mapping at [%v, %v)",
			r, m.base, m.limit())
	}
	d.mu.reservations.Delete(r)
	d.chargeLocked(k, size)
	return nil
}

// mappingAtLocked returns the mapping containing p, or nil.
func (d *Device) mappingAtLocked(p vmm.DevicePtr) *mapping {
	var m *mapping
	d.mu.mappings.DescendLessOrEqual(&mapping{base: p}, func(x *mapping) bool {
		if p < x.limit() {
			m = x
		}
		return false
	})
	return m
}

// firstMappingFromLocked returns the first mapping whose base is >= p, or nil.
func (d *Device) firstMappingFromLocked(p vmm.DevicePtr) *mapping {
	var m *mapping
	d.mu.mappings.AscendGreaterOrEqual(&mapping{base: p}, func(x *mapping) bool {
		m = x
		return false
	})
	return m
}

// Map places the whole handle h at ptr (rules 1, 2, 3, 7). Rule 1 holds for the size because it must equal
// the handle's, which Create checked.
func (d *Device) Map(ptr vmm.DevicePtr, size uint64, h vmm.Handle, offset uint64) error {
	const k = vmm.CallMap
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return err
	}
	// Order measured on the H200 (harness TestConformanceReal): offset and size against the handle come
	// before the address, and a size that is not a granularity multiple is NOT_SUPPORTED like any other size
	// that is not the handle's. The handle is looked up first: the GPU cannot check a stale one at all (it
	// crashes in libcuda), the model refuses it before anything else.
	hd, err := d.lookupHandleLocked(k, h)
	if err != nil {
		return err
	}
	if offset != 0 {
		return d.failLocked(k, vmm.NotSupported, "rule 2: offset %d into handle %d: handles are mapped whole, at offset 0",
			offset, h)
	}
	if size != hd.size {
		return d.failLocked(k, vmm.NotSupported, "rule 2: size %d does not equal handle %d's size %d: handles are mapped whole",
			size, h, hd.size)
	}
	if err := d.checkPtrLocked(k, ptr, size); err != nil {
		return err
	}
	want := vmm.Range{Base: ptr, Size: size}
	r, ok := d.reservationAtLocked(ptr)
	if !ok {
		return d.failLocked(k, vmm.InvalidValue, "rule 3: %v is not inside a reservation", want)
	}
	if want.Limit() > r.Limit() {
		return d.failLocked(k, vmm.InvalidValue, "rule 3: %v runs past the end of reservation %v", want, r)
	}
	if m := d.mappingAtLocked(ptr); m != nil {
		return d.failLocked(k, vmm.InvalidValue, "rule 3: %v overlaps the mapping [%v, %v) of handle %d",
			want, m.base, m.limit(), m.h.id)
	}
	if m := d.firstMappingFromLocked(ptr); m != nil && m.base < want.Limit() {
		return d.failLocked(k, vmm.InvalidValue, "rule 3: %v overlaps the mapping [%v, %v) of handle %d",
			want, m.base, m.limit(), m.h.id)
	}
	if hd.bad > 0 {
		return d.failLocked(k, vmm.UnknownCUDAError, "RDMA-capable handle %d has a bad mapping (one that got its first "+
			"access after the handle's primary mapping was unmapped): the H200's driver 580 maps it nowhere else "+
			"until that mapping is unmapped", h)
	}
	d.mu.mappings.ReplaceOrInsert(&mapping{base: ptr, size: size, h: hd})
	if hd.mappings == 0 || hd.dirty {
		hd.primary, hd.dirty = ptr, false
	}
	hd.mappings++
	d.chargeLocked(k, size)
	return nil
}

// wholeMappingsLocked returns the mappings that exactly tile [ptr, ptr+size) (rule 5), or an error naming
// the first hole or the partly covered mapping.
func (d *Device) wholeMappingsLocked(k vmm.CallKind, ptr vmm.DevicePtr, size uint64, rule string) ([]*mapping, error) {
	want := vmm.Range{Base: ptr, Size: size}
	end := want.Limit()
	if m := d.mappingAtLocked(ptr); m != nil && m.base != ptr {
		return nil, d.failLocked(k, vmm.InvalidValue, "%s: %v starts inside the mapping [%v, %v)", rule, want, m.base, m.limit())
	}
	var ms []*mapping
	next := ptr
	var err error
	d.mu.mappings.AscendGreaterOrEqual(&mapping{base: ptr}, func(m *mapping) bool {
		if next >= end {
			return false
		}
		if m.base != next {
			err = d.failLocked(k, vmm.InvalidValue, "%s: %v has an unmapped hole at [%v, %v)", rule, want, next, min(m.base, end))
			return false
		}
		if m.limit() > end {
			err = d.failLocked(k, vmm.InvalidValue, "%s: %v ends inside the mapping [%v, %v)", rule, want, m.base, m.limit())
			return false
		}
		ms = append(ms, m)
		next = m.limit()
		return true
	})
	if err != nil {
		return nil, err
	}
	if next < end {
		return nil, d.failLocked(k, vmm.InvalidValue, "%s: %v has an unmapped hole at [%v, %v)", rule, want, next, end)
	}
	return ms, nil
}

// mappingsWithinLocked returns the mappings inside [ptr, ptr+size), in address order; there may be holes
// between them, or none at all (rule 4, measured on the H200). It fails with InvalidValue if the range cuts
// a mapping (starts or ends inside one) or touches address space that is not reserved.
func (d *Device) mappingsWithinLocked(k vmm.CallKind, ptr vmm.DevicePtr, size uint64) ([]*mapping, error) {
	want := vmm.Range{Base: ptr, Size: size}
	end := want.Limit()
	// Not measured on the H200 (the conformance suite unmaps only inside its reservations): the model
	// refuses to unmap address space nobody reserved, the strict answer, so that such a call is found.
	r, ok := d.reservationAtLocked(ptr)
	if !ok {
		return nil, d.failLocked(k, vmm.InvalidValue, "rule 4: %v is not reserved", ptr)
	}
	for r.Limit() < end {
		nr, ok := d.mu.reservations.Get(vmm.Range{Base: r.Limit()})
		if !ok {
			return nil, d.failLocked(k, vmm.InvalidValue, "rule 4: %v runs past the reservation %v into unreserved space", want, r)
		}
		r = nr
	}
	if m := d.mappingAtLocked(ptr); m != nil && m.base != ptr {
		return nil, d.failLocked(k, vmm.InvalidValue, "rule 4: %v starts inside the mapping [%v, %v)", want, m.base, m.limit())
	}
	var ms []*mapping
	var err error
	d.mu.mappings.AscendGreaterOrEqual(&mapping{base: ptr}, func(m *mapping) bool {
		if m.base >= end {
			return false
		}
		if m.limit() > end {
			err = d.failLocked(k, vmm.InvalidValue, "rule 4: %v ends inside the mapping [%v, %v)", want, m.base, m.limit())
			return false
		}
		ms = append(ms, m)
		return true
	})
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// Unmap removes every mapping inside [ptr, ptr+size) (rule 4): whole mappings, with or without unmapped
// holes between them; a reserved range with nothing mapped is a successful no-op (both measured on the
// H200, harness TestConformanceReal). Cutting a mapping is InvalidValue. Costs Cost(Unmap, m.size) per
// mapping removed, Cost(Unmap, 0) when there is none.
func (d *Device) Unmap(ptr vmm.DevicePtr, size uint64) error {
	const k = vmm.CallUnmap
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginRangeLocked(k, ptr, size); err != nil {
		return err
	}
	ms, err := d.mappingsWithinLocked(k, ptr, size)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		d.chargeLocked(k, 0)
	}
	for _, m := range ms {
		d.checkHazardLocked(k, m)
		d.mu.mappings.Delete(m)
		m.h.mappings--
		if m.bad {
			m.h.bad--
		}
		if m.base == m.h.primary {
			m.h.dirty = m.h.mappings > 0
		}
		d.maybeFreeLocked(m.h)
		d.chargeLocked(k, m.size)
	}
	return nil
}

// SetAccess grants read/write access to [ptr, ptr+size), which must be exactly tiled by whole mappings, no
// holes (rule 5): over part of a mapping it is InvalidValue (measured on the H200, harness
// TestConformanceReal). It costs Cost(SetAccess, m.size) per mapping.
func (d *Device) SetAccess(ptr vmm.DevicePtr, size uint64) error {
	const k = vmm.CallSetAccess
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginRangeLocked(k, ptr, size); err != nil {
		return err
	}
	ms, err := d.wholeMappingsLocked(k, ptr, size, "rule 5 (access is set on whole mappings, fully mapped)")
	if err != nil {
		return err
	}
	for _, m := range ms {
		if d.rdma && m.h.bad > 0 && !m.bad && !m.access {
			return d.failLocked(k, vmm.UnknownCUDAError, "RDMA-capable handle %d has a bad mapping: the H200's driver 580 "+
				"sets no first access on another mapping of it", m.h.id)
		}
	}
	for _, m := range ms {
		if d.rdma && !m.access && m.h.dirty {
			m.bad = true
			m.h.bad++
		}
		m.access = true
		d.chargeLocked(k, m.size)
	}
	return nil
}

// MemInfo returns the free and total physical memory.
func (d *Device) MemInfo() (free, total uint64, err error) {
	const k = vmm.CallMemInfo
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(k); err != nil {
		return 0, 0, err
	}
	d.chargeLocked(k, 0)
	return d.capacity - d.mu.used, d.capacity, nil
}

// Counts returns the number of driver calls made since creation or ResetCounters, by kind. Every call is
// counted, whether it succeeded, broke a rule or failed by injection.
func (d *Device) Counts() vmm.CallCounts {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.counts
}

// ModeledTime returns the driver time the cost model charges for the calls since creation or ResetCounters.
// A successful call costs Cost(kind, size) (per mapping covered for Unmap and SetAccess; an Unmap that
// found nothing mapped costs Cost(Unmap, 0)); a failed call costs Cost(kind, 0), what the smallest call of
// its kind costs.
func (d *Device) ModeledTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.modeled
}

// ModeledByKind returns ModeledTime split by call kind.
func (d *Device) ModeledByKind() [vmm.NumCallKinds]time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.modeledBy
}

// chargeLocked adds the modeled cost of one call of kind k touching size bytes.
func (d *Device) chargeLocked(k vmm.CallKind, size uint64) {
	c := d.costs.Cost(k, size)
	d.mu.modeled += c
	d.mu.modeledBy[k] += c
}

// ResetCounters zeroes Counts and ModeledTime. Fault injection schedules are not affected.
func (d *Device) ResetCounters() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.counts = vmm.CallCounts{}
	d.mu.modeled = 0
	d.mu.modeledBy = [vmm.NumCallKinds]time.Duration{}
}

// State returns a deep copy of the memory state.
func (d *Device) State() DeviceState {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := DeviceState{Used: d.mu.used, Capacity: d.capacity}
	s.Reservations, s.Mappings, s.Handles = d.snapshotLocked()
	return s
}

// snapshotLocked copies reservations, mappings and handles.
func (d *Device) snapshotLocked() ([]vmm.Range, []DeviceMapping, []HandleInfo) {
	rs := make([]vmm.Range, 0, d.mu.reservations.Len())
	d.mu.reservations.Ascend(func(r vmm.Range) bool { rs = append(rs, r); return true })
	ms := make([]DeviceMapping, 0, d.mu.mappings.Len())
	d.mu.mappings.Ascend(func(m *mapping) bool {
		ms = append(ms, DeviceMapping{VA: vmm.Range{Base: m.base, Size: m.size}, Handle: m.h.id, Accessible: m.access})
		return true
	})
	hs := make([]HandleInfo, 0, len(d.mu.handles))
	for _, h := range d.mu.handles {
		hs = append(hs, HandleInfo{Handle: h.id, Size: h.size, Released: h.released, Mappings: h.mappings, Poisoned: h.bad > 0})
	}
	sortHandles(hs)
	return rs, ms, hs
}
