// Package impl is the gmlake allocator engine: a GPU caching allocator over vmm.Driver that defragments
// with virtual memory stitching (GMLake, ASPLOS 2024), and the PyTorch policies (caching, expandable) on the
// same engine. It never imports model, spec or harness: the engine cannot see its judge.
package impl
