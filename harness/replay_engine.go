package harness

import (
	"github.com/gmlake/gmlake/impl"
	"github.com/gmlake/gmlake/vmm"
)

// The engine satisfies what a replay drives.
var _ allocator = (*impl.Allocator)(nil)

// newAllocator builds the engine a replay drives; tests of the harness alone replace it.
var newAllocator = func(d vmm.Driver, cfg impl.Config) (allocator, error) {
	return impl.New(d, cfg)
}
