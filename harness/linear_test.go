package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/gmlake/gmlake/harness/ops"
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/model/contract"
	"github.com/gmlake/gmlake/vmm"
)

// The linearizability checker bites: two clients handed overlapping live ranges, one after the other, is
// illegal (C-NOOVERLAP); the visualization is written. Reordering them to overlap in time does not help.
// A legal history (free between the two) passes.
func TestLinearizableCheckerBites(t *testing.T) {
	ccfg := &contract.ContractConfig{Capacity: 64 * vmm.MiB, Granularity: 2 * vmm.MiB, Streams: []vmm.Stream{1}, Errors: ops.ContractErrors}
	p := vmm.DevicePtr(0x7f0000000000)
	alloc := func(client int, call, ret int64, ptr vmm.DevicePtr) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: contract.ContractInput{Op: contract.COpAlloc, Size: 4096, Stream: vmm.Stream(client)},
			Call: call, Output: contract.ContractOutput{Ptr: ptr}, Return: ret}
	}
	bad := []porcupine.Operation{alloc(0, 1, 2, p), alloc(1, 3, 4, p+2048)}
	r := CheckHistory(ccfg, bad, time.Second, "bites")
	if r.Result != porcupine.Illegal {
		t.Fatalf("overlapping live allocations judged %v", r.Result)
	}
	if _, err := os.Stat(r.VizPath); err != nil {
		t.Fatalf("no visualization written: %q %v", r.VizPath, err)
	}
	t.Logf("visualization of the illegal history: %s", r.VizPath)
	os.RemoveAll(filepath.Dir(r.VizPath))
	free := porcupine.Operation{ClientId: 0, Input: contract.ContractInput{Op: contract.COpFree, Ptr: p}, Call: 5, Output: contract.ContractOutput{}, Return: 6}
	good := []porcupine.Operation{alloc(0, 1, 2, p), free, alloc(1, 7, 8, p+2048)}
	if r := CheckHistory(ccfg, good, time.Second, "ok"); r.Result != porcupine.Ok {
		t.Fatalf("legal history judged %v", r.Result)
	}
}

// TestLinearizable records concurrent histories, one goroutine per stream (4 streams), for each policy,
// and checks each for linearizability against the allocator contract (INV-CONTRACT: C-NOOVERLAP,
// C-STREAM, C-OOM, C-FREE, i.e. INV-NOOVERLAP, INV-STREAM and INV-NOSPURIOUSOOM at the API). An illegal
// history writes porcupine's HTML visualization; the test prints its path. Half the histories (odd seeds)
// call the serving layer as libgmlake does (impl/serve: sync-and-retry on out of memory, every fourth under
// a 64 MiB cap), its synchronisations in the history as the streams' completions.
func TestLinearizable(t *testing.T) {
	histories, seq := 100, 40
	if longProfile() {
		histories, seq = 2000, 60
	}
	for _, p := range impl.Policies {
		t.Run(p, func(t *testing.T) {
			total, unknown := 0, 0
			for seed := int64(1); seed <= int64(histories); seed++ {
				cfg := LinearConfig{Policy: p, Seed: seed, Ops: seq, Serve: seed%2 == 1}
				if seed%4 == 3 {
					cfg.MemoryLimit = 64 * vmm.MiB
				}
				r := RunLinear(cfg)
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				total += r.Ops
				switch r.Result {
				case porcupine.Illegal:
					t.Fatalf("seed %d: history of %d ops is not linearizable against the contract; visualization: %s\n"+
						"serving layer %v, limit %d; rerun: go test ./harness -run 'TestLinearizable/%s$' -v; its ops in call order "+
						"replay single-threaded and shrink: gmlake fuzz --replay %s --minimize", seed, r.Ops, r.VizPath, cfg.Serve, cfg.MemoryLimit, p, r.Program)
				case porcupine.Unknown:
					unknown++
					t.Logf("seed %d: porcupine timed out (%d ops): inconclusive", seed, r.Ops)
				}
			}
			t.Logf("policy %s: %d histories checked (%d inconclusive, half through the serving layer), %d operations, 4 goroutines on 4 streams", p, histories, unknown, total)
		})
	}
}

// TestLinearServeRecordsTheSynchronisations: through the serving layer on a small device, the layer's
// synchronisations (out of memory, EmptyCache) appear in the history as completions of the streams they
// waited for, on clients of their own, and the history is linearizable with them.
func TestLinearServeRecordsTheSynchronisations(t *testing.T) {
	syncs := 0
	for seed := int64(1); seed <= 20 && syncs == 0; seed++ {
		cfg := LinearConfig{Policy: impl.PolicyGMLake, Seed: seed, Ops: 40, Serve: true, Capacity: 48 * vmm.MiB}
		r, hist, _ := runLinearHist(cfg)
		if r.Err != nil || r.Result != porcupine.Ok {
			t.Fatalf("seed %d: %v %v (%s)", seed, r.Err, r.Result, r.VizPath)
		}
		for _, o := range hist {
			if o.ClientId >= 4 {
				if in := o.Input.(contract.ContractInput); in.Op != contract.COpComplete {
					t.Fatalf("a synchronisation recorded as %v", in)
				}
				syncs++
			}
		}
	}
	if syncs == 0 {
		t.Fatal("20 histories through the serving layer on a 48 MiB device recorded no synchronisation")
	}
}

// An illegal history is also saved as a program of the same ops in call order (LinearResult.Program),
// which replays single-threaded in every other checker: it parses, holds every op the goroutines called,
// and runs clean on the engine without the seeded bug.
func TestLinearIllegalHistorySavesItsOps(t *testing.T) {
	if !impl.SeededBugs {
		t.Skip("seeded bugs need -tags gmlake_mutants")
	}
	for k := 0; k < 400; k++ {
		// The seeded bugs and policies in turn, until one history is illegal.
		muts := impl.AllMutations()
		seed := int64(1 + k/(len(muts)*len(impl.Policies)))
		cfg := LinearConfig{Policy: impl.Policies[k%len(impl.Policies)], Seed: seed, Mutations: muts[(k/len(impl.Policies))%len(muts)],
			Timeout: 5 * time.Second}
		r, hist, _ := runLinearHist(cfg)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Result != porcupine.Illegal {
			continue
		}
		if r.Program == "" {
			t.Fatalf("seed %d: illegal history, no program saved", seed)
		}
		p, err := ops.ReadFile(r.Program)
		if err != nil {
			t.Fatalf("seed %d: the saved program does not parse: %v", seed, err)
		}
		if len(p.Ops) != len(hist) || p.Cfg.Streams != 4 || p.Cfg.Policy != cfg.Policy {
			t.Fatalf("seed %d: program of %d ops on %+v for a history of %d calls", seed, len(p.Ops), p.Cfg, len(hist))
		}
		clean := p.Cfg
		clean.Mutations = 0
		if i, vs, _, err := ops.Run(clean, p.Ops); err != nil || i >= 0 {
			t.Fatalf("seed %d: the ops fail on the engine without the bug at %d: %v %v (%s)", seed, i, vs, err, r.Program)
		}
		i, _, _, _ := ops.Run(p.Cfg, p.Ops)
		t.Logf("%v under %s, seed %d: illegal history saved as %s (%d ops); single-threaded with the bug it fails at op %d (-1: passes)", cfg.Mutations, cfg.Policy, seed, r.Program, len(p.Ops), i)
		return
	}
	t.Fatal("400 histories under the seeded bugs: none illegal")
}
