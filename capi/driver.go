package main

import (
	"fmt"

	"github.com/gmlake/gmlake/impl/clib"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/model/sim"
	"github.com/gmlake/gmlake/vmm"
)

// Driver kinds GMLAKE_DEVICE accepts.
const (
	driverCUDA = "cuda" // the real GPU through impl/cudavmm (libcuda.so.1 loaded at run time); the default
	driverSim  = "sim"  // the simulated H200 of model/sim, streams completing at once
)

// openDriver opens device ordinal `device` of the given kind and completes cfg for it (its name, and
// OwnStreams for the simulated device, which knows only streams it created). For driverSim, simCapacity is
// the simulated device's memory in bytes (0: an H200's); every simulated device is independent, with
// addresses of its own (a pointer names one device, as on GPUs).
func openDriver(kind string, device int, simCapacity uint64, cfg *clib.Config) (vmm.Driver, error) {
	switch kind {
	case driverCUDA, "":
		d, err := cudavmm.New(device)
		if err != nil {
			return nil, fmt.Errorf("gmlake: opening CUDA device %d: %w", device, err)
		}
		cfg.Driver = driverCUDA
		return d, nil
	case driverSim:
		cfg.Driver, cfg.OwnStreams = driverSim, true
		return sim.NewDevice(sim.DeviceConfig{Capacity: simCapacity, SyncStreams: true, UniqueAddresses: true}), nil
	}
	return nil, fmt.Errorf("gmlake: unknown driver %q: use %q or %q", kind, driverCUDA, driverSim)
}

// simLeaks describes what a simulated device still holds ("" for the real GPU, or when nothing leaked).
func simLeaks(d vmm.Driver) string {
	if s, ok := d.(*sim.Device); ok {
		if l := s.Leaks(); !l.Empty() {
			return l.String()
		}
	}
	return ""
}
