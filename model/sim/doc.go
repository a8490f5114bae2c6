// Package sim owns the simulated GPU: a vmm.Driver that enforces every rule of docs/cuda-vmm.md with the
// error CUDA gives (as measured on the H200), with shadow contents for each physical chunk, controllable
// streams, deterministic fault injection, counters, modeled time and a leak report. It is a product
// component, not only a test double: the default device of `make run` and the `sim` device of libgmlake.
// DeviceConfig.RDMAHandles adds the H200 driver's rule for GPUDirect-RDMA-capable handles (rdma.go lists the
// measured patterns).
// The allocator's oracle lives apart, in model/contract, so that the library links no judge.
package sim
