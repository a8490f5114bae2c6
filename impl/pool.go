package impl

// Private memory pools (PyTorch's MempoolId_t: CUDA graph pools, torch.cuda.MemPool).

import (
	"errors"
)

// PoolID names a memory pool: PyTorch's MempoolId_t {id0, id1}. The zero value is the default pool.
type PoolID struct {
	A, B uint64
}

// ErrUnknownPool is returned for a pool that was never created or is already released.
var ErrUnknownPool = errors.New("gmlake: unknown memory pool")

// mempool is a private pool.
type mempool struct {
	id PoolID
}

// defaultPool reports whether ss belongs to the default pool.
func (ss *streamState) defaultPool() bool { return ss != nil && ss.mp == nil }
