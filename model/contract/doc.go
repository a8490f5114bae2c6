// Package contract owns the allocator contract: what ANY correct allocator must do, as a pure state machine
// over what a caller can observe (pointers, sizes, streams, errors). It is the oracle of rapid, porcupine,
// the explorer and the fuzzers, and is never linked into the product (libgmlake, the Go facade). Slow and
// obviously right. See contract.go for the rules by call.
package contract
