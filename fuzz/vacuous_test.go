package fuzz

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gmlake/gmlake/vmm"
)

// Property (issue 36 item 8): a campaign in which no allocation can succeed is refused before it runs
// (Validate: a cap below one chunk), and one that runs its course with no allocation succeeding all the
// same fails (Summary.Vacuous, OK false, a Failure that says why): it used to pass with 0 allocations.
func TestCampaignInWhichNothingIsAllocatedFails(t *testing.T) {
	cfg := CampaignConfig{Policy: "caching", Duration: 300 * time.Millisecond, Seed: 5, Streams: 2,
		Capacity: 2 * vmm.MiB, MemoryLimit: vmm.MiB, OutDir: t.TempDir(), MinimizeFor: -1}
	if _, err := RunCampaign(context.Background(), cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("a cap below one chunk: err = %v, want ErrBadConfig naming --memory-limit", err)
	}
	cfg.noValidate = true
	s, err := RunCampaign(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Allocs != 0 {
		t.Fatalf("%d allocations succeeded under a 1 MiB cap", s.Allocs)
	}
	if s.OK() || !s.Vacuous || !strings.Contains(s.Failure, "no allocation succeeded") {
		t.Errorf("a campaign that allocated nothing: OK %v, vacuous %v, failure %q; want a failure saying so", s.OK(), s.Vacuous, s.Failure)
	}
}
