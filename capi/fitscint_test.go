package main

import (
	"math"
	"strings"
	"testing"
)

// TestFitsCIntRefusesCountsAnIntCannotHold: the counts gmlake_pool_use_count and gmlake_pool_live return
// pass through fitsCInt, which accepts 0 to MaxInt32 and refuses a negative count or one past MaxInt32
// with an errOther error that names the count (a C int would wrap it into a negative "error" or a lie).
func TestFitsCIntRefusesCountsAnIntCannotHold(t *testing.T) {
	for _, n := range []int{0, 1, math.MaxInt32 - 1, math.MaxInt32} {
		if err := fitsCInt(n, "the use count"); err != nil {
			t.Errorf("fitsCInt(%d) = %v, want nil", n, err)
		}
	}
	for _, n := range []int{-1, math.MaxInt32 + 1, math.MaxInt} {
		err := fitsCInt(n, "the use count")
		if err == nil {
			t.Fatalf("fitsCInt(%d) = nil, want an error", n)
		}
		if kindOf(err) != errOther || !strings.Contains(err.Error(), "the use count") {
			t.Errorf("fitsCInt(%d) = %v (kind %v), want errOther naming the count", n, err, kindOf(err))
		}
	}
}
