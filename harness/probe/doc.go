// Package probe owns measuring what driver calls cost: the median latency of every VMM call kind at several
// sizes, of stitching K handles into one range, of the event calls GMLake makes per block and (on the real
// GPU) of cuMemAlloc/cuMemFree for comparison; the table in the shape of docs/cuda-vmm.md, and the
// comparison with vmm's cost model (`gmlake probe`). It drives any vmm.Driver; impl/cudavmm gives it the
// plain allocation calls through PlainAllocator.
package probe
