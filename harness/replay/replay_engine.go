package replay

import (
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// The engine satisfies what a replay drives.
var _ replayAllocator = (*impl.Allocator)(nil)

// newReplayAllocator builds the engine a replay drives; tests of the harness alone replace it.
var newReplayAllocator = func(d vmm.Driver, cfg impl.Config) (replayAllocator, error) {
	return impl.New(d, cfg)
}
