// Package cudavmm implements vmm.Driver on a real NVIDIA GPU through the CUDA driver API, loaded at run
// time with dlopen("libcuda.so.1"): no CUDA headers or libraries are needed to build it, and New returns a
// clear error on machines without a driver. It is the only package that imports "C" or unsafe.
package cudavmm
