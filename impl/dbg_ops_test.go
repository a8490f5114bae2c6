package impl

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gmlake/gmlake/model"
	"github.com/gmlake/gmlake/vmm"
)

// TestDbgOps replays a harness ops file (GMLAKE_DBG_OPS=path) on the engine, logging each step.
func TestDbgOps(t *testing.T) {
	path := os.Getenv("GMLAKE_DBG_OPS")
	if path == "" {
		t.Skip()
	}
	f, _ := os.Open(path)
	sc := bufio.NewScanner(f)
	sc.Scan()
	hdr := sc.Text()
	kv := map[string]string{}
	for _, w := range strings.Fields(hdr)[1:] {
		p := strings.SplitN(w, "=", 2)
		kv[p[0]] = p[1]
	}
	capa, _ := strconv.ParseUint(kv["capacity"], 10, 64)
	dev := model.NewDevice(model.DeviceConfig{Capacity: capa, SyncStreams: kv["sync"] == "true"})
	a, _ := New(dev, Config{Policy: kv["policy"]})
	nstreams, _ := strconv.Atoi(kv["streams"])
	streams := []vmm.Stream{0}
	for len(streams) < nstreams {
		s, _ := dev.CreateStream()
		streams = append(streams, s)
	}
	ptrs := map[string]vmm.DevicePtr{}
	st := func(x string) vmm.Stream { n, _ := strconv.Atoi(x[1:]); return streams[n] }
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) == 0 {
			continue
		}
		var err error
		switch w[0] {
		case "alloc":
			n, _ := strconv.ParseUint(w[2], 10, 64)
			var p vmm.DevicePtr
			p, err = a.Alloc(n, st(w[3]))
			if err == nil {
				ptrs[w[1]] = p
			}
		case "free":
			err = a.Free(ptrs[w[1]])
		case "record":
			err = a.RecordStream(ptrs[w[1]], st(w[2]))
		case "launch":
			dev.Launch(st(w[1]))
		case "complete":
			dev.Complete(st(w[1]))
		case "completeall":
			dev.CompleteAll()
		case "emptycache":
			err = a.EmptyCache()
		case "clearfaults":
			dev.ClearFaults()
		case "fail":
			k, _ := vmm.ParseCallKind(w[1])
			n, _ := strconv.Atoi(w[2])
			r := vmm.UnknownCUDAError
			if w[3] == "CUDA_ERROR_OUT_OF_MEMORY" {
				r = vmm.OutOfMemory
			}
			dev.FailNth(k, n, r)
		}
		t.Logf("%-40s err=%v reserved=%d used=%d", sc.Text(), err, a.Stats().ReservedBytes>>20, dev.Used()>>20)
	}
	for _, b := range a.Snapshot().Blocks {
		t.Logf("%v %v %v s%d size=%dMiB ev=%d held=%d", b.Kind, b.State, b.Range, b.Stream, b.Range.Size>>20, b.Events, b.HeldBy)
	}
	for _, ss := range a.sortedStreams() {
		t.Logf("stream %d safeSeq %d fences %v (freeSeq %d)", ss.s, ss.safeSeq, ss.fences, a.freeSeq)
	}
}
