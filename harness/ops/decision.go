package ops

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"

	"github.com/gmlake/gmlake/spec"
	"github.com/gmlake/gmlake/vmm"
)

// A decision history pins what the engine decided at every step, not only what it answered: where an
// allocation was placed (its reservation, by rank of base address, and its offset there; whether a
// stitched block serves it), the bytes reserved, mapped and allocated after the step, how many blocks are
// free, pending and stitched, and which driver calls the step made (a stream synchronisation as sync). It
// is a regression oracle: it says that a decision moved, not that the new one is wrong (the contract, the
// spec's predicates and the judges say that); an intended change is accepted by rewriting the goldens
// (fuzz's TestDecisionHistories, GMLAKE_UPDATE=1) and reviewing their diff. It names no absolute address,
// but it is the simulated device's: on a real GPU the driver's addresses and the streams' timing differ,
// and so would the decisions.

// decision is the digest of the step r just ran (Config.Decisions): taken from the View after it and from
// the driver calls it made since the previous digest.
func (e *Env) decision(r StepResult) string {
	v := e.viewBefore() // the View after this step (reused when the step was checked)
	var b strings.Builder
	if r.Op.Kind == OpAlloc && r.Err == nil {
		b.WriteString(placement(v, r.Ptr) + " ")
	}
	var free, pend, sb int
	for _, x := range v.Blocks {
		switch {
		case x.Stitched:
			sb++
		case x.State == spec.BlockFree:
			free++
		case x.State == spec.BlockPending:
			pend++
		}
	}
	fmt.Fprintf(&b, "rsv=%s map=%s alloc=%s free=%d pend=%d sb=%d", vmm.FormatBytes(v.Stats.Reserved),
		vmm.FormatBytes(v.Stats.Mapped), vmm.FormatBytes(v.Stats.Allocated), free, pend, sb)
	if !e.closed {
		// Every PyTorch statistic (memory_stats()) and the memory_snapshot() segments, as two hashes: a
		// change says one of them moved; print them (e.A.TorchStats(), e.A.TorchSnapshot()) to see which.
		fmt.Fprintf(&b, " stats=%08x snap=%08x", digest(e.A.TorchStats()), digest(e.A.TorchSnapshot()))
	}
	if c, ok := e.Device.(vmm.CallCounter); ok {
		now := c.Counts()
		var calls []string
		for k := vmm.CallKind(0); k < vmm.NumCallKinds; k++ {
			if d := now[k] - e.decided[k]; d != 0 {
				calls = append(calls, fmt.Sprintf("%s+%d", k.Short(), d))
			}
		}
		e.decided = now
		if d := e.syncs - e.decidedSyncs; d != 0 { // a stream synchronisation (not a call the device counts)
			calls = append(calls, fmt.Sprintf("sync+%d", d))
		}
		e.decidedSyncs = e.syncs
		if len(calls) > 0 {
			b.WriteString(" calls=" + strings.Join(calls, ","))
		}
	}
	return b.String()
}

// digest is a short hash of v's printed value (%+v: every field, in order).
func digest(v any) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%+v", v)
	return h.Sum32()
}

// placement names where ptr lies: `rN+OFF` (the N-th reservation by base address, OFF bytes in, in hex),
// then ` sb` when a stitched block serves it.
func placement(v spec.View, ptr vmm.DevicePtr) string {
	at := "r?"
	for i, r := range v.Device.Reservations { // sorted by base

		if r.Contains(ptr) {
			at = fmt.Sprintf("r%d+%#x", i, uint64(ptr-r.Base))
			break
		}
	}
	for _, a := range v.Live {
		if a.Ptr != ptr {
			continue
		}
		for _, x := range v.Blocks {
			if x.ID == a.Block && x.Stitched {
				return at + " sb"
			}
		}
	}
	return at
}

// DecisionHistory prints the run as History does, each outcome followed by ` || ` and the step's decision
// digest (Config.Decisions must be set): the ops replay as they are (Parse drops the comments).
func (e *Env) DecisionHistory() string {
	var b strings.Builder
	b.WriteString(e.Cfg.Header() + "\n")
	for i, o := range e.Ops {
		out, dec := "", ""
		if i < len(e.outcomes) {
			out = e.outcomes[i]
		}
		if i < len(e.decisions) {
			dec = e.decisions[i]
		}
		fmt.Fprintf(&b, "%-40s // %s || %s\n", o.String(), out, dec)
	}
	return b.String()
}

// RunDecisions runs p in a fresh Env that records decisions and returns its decision history, ending with
// a `# finish:` line: "ok" or the invariants Finish's leak check found broken (a program without a close
// gets clearfaults, completeall and close first, as Finish would run them).
func RunDecisions(p *Program) (string, error) {
	cfg := p.Cfg
	cfg.Decisions = true
	e, err := NewEnv(cfg)
	if err != nil {
		return "", err
	}
	for _, o := range p.Ops {
		e.Step(o)
	}
	if !e.Closed() {
		// Finish's own ends, as steps: the program written back replays them as its own ops, judged
		// the same, so its finish line is the leak check alone either way.
		for _, k := range []OpKind{OpClearFaults, OpCompleteAll, OpClose} {
			e.Step(Op{Kind: k})
		}
	}
	fin := "ok"
	for i, v := range e.Finish() {
		if i == 0 {
			fin = ""
		}
		fin += " | " + v.Inv
	}
	return e.DecisionHistory() + "# finish: " + fin + "\n", nil
}

// WriteDecisionGolden writes p's decision history (RunDecisions) to path, after comment (the golden's note:
// comment lines ending in a newline).
func WriteDecisionGolden(path, comment string, p *Program) error {
	got, err := RunDecisions(p)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(comment+got), 0o644)
}

// LeadingComments returns the comment lines before a history's setup line (its note, which a golden file
// keeps when it is rewritten) and whether one of them marks it open (`# open`: a finding not yet fixed).
func LeadingComments(text string) (note string, open bool) {
	for _, l := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(l, "#") || strings.HasPrefix(l, headerPrefix) {
			break
		}
		note += l
		open = open || strings.HasPrefix(l, "# open")
	}
	return note, open
}
