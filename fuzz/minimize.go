package fuzz

// Minimization: delta debugging (Zeller's ddmin) over a failing program's operations, re-running each
// candidate single-threaded on the simulated device (Exec). A candidate "still fails" when it fails with
// the same check (Failure.Inv), so the minimizer does not slide to a different bug. Any subsequence is a
// valid program (the executor skips operations about allocations that do not exist), and after each
// success the candidate is cut right after its failing step.

import (
	"time"
)

// Minimize returns a smaller program that still fails with check want under policy, and the number of
// runs it took. It stops at deadline with the smallest program found so far.
func Minimize(p *Program, policy string, opts ExecOptions, want string, deadline time.Time) (*Program, int) {
	runs := 0
	// fails runs ops and returns the length to keep (up to and including the failing step), or 0.
	fails := func(ops []Op) int {
		runs++
		q := &Program{Setup: p.Setup, Ops: ops}
		_, f := Exec(q, policy, opts)
		if f == nil || f.Inv() != want {
			return 0
		}
		if f.Step >= 0 && f.Step < len(ops) {
			return f.Step + 1
		}
		return len(ops)
	}
	ops := append([]Op(nil), p.Ops...)
	if k := fails(ops); k > 0 {
		ops = ops[:k]
	} else {
		return p.Clone(), runs // does not fail (with that check): nothing to minimize
	}
	n := 2
	for len(ops) >= 2 && time.Now().Before(deadline) {
		chunk := (len(ops) + n - 1) / n
		reduced := false
		for start := 0; start < len(ops) && time.Now().Before(deadline); start += chunk {
			end := min(start+chunk, len(ops))
			cand := make([]Op, 0, len(ops)-(end-start))
			cand = append(cand, ops[:start]...)
			cand = append(cand, ops[end:]...)
			if k := fails(cand); k > 0 {
				ops = cand[:k]
				n = max(n-1, 2)
				reduced = true
				break
			}
		}
		if !reduced {
			if n >= len(ops) {
				break
			}
			n = min(2*n, len(ops))
		}
	}
	// Last pass: simplify what is left, one op at a time (smaller allocations fail the same way surprisingly
	// often, and are easier to read).
	for i := 0; i < len(ops) && time.Now().Before(deadline); i++ {
		if ops[i].Kind != OpAlloc || ops[i].Size <= 1 {
			continue
		}
		for _, s := range []uint64{1, ops[i].Size / 2} {
			if s == 0 || s >= ops[i].Size {
				continue
			}
			cand := append([]Op(nil), ops...)
			cand[i].Size = s
			if k := fails(cand); k > 0 {
				ops = cand[:k]
				break
			}
		}
	}
	return &Program{Setup: p.Setup, Ops: ops}, runs
}
