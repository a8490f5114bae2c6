package cudavmm

import (
	"strings"

	"github.com/gmlake/gmlake/vmm"
)

// CheckHandles says whether spec is a handle-type list New (GMLAKE_CUDA_HANDLES) and RequestHandles parse:
// nil, or an error naming the unknown word. It asks no device what it supports. libgmlake's settings check
// (gmlake_check_settings) calls it.
func CheckHandles(spec string) error {
	_, err := parseHandles(spec)
	return err
}

// parseHandles reads RequestHandles' spec: "posix_fd", "fabric" and "rdma" separated by commas or spaces;
// "" and "none" are plain memory. An unknown name is an error matching vmm.ErrInvalidValue.
func parseHandles(spec string) (int32, error) {
	var h int32
	for _, name := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch name {
		case "none":
		case "posix_fd":
			h |= handlePosixFD
		case "fabric":
			h |= handleFabric
		case "rdma":
			h |= handleRDMA
		default:
			return 0, vmm.Errorf(vmm.CallCreate, vmm.InvalidValue,
				"unknown handle type %q in %q: want posix_fd, fabric, rdma or none", name, spec)
		}
	}
	return h, nil
}

// Handle request bits: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR and CU_MEM_HANDLE_TYPE_FABRIC as the driver
// numbers them, and the allocFlags.gpuDirectRDMACapable flag.
const (
	handlePosixFD = 0x1
	handleFabric  = 0x8
	handleRDMA    = 0x100
)

// handleNames names the request bits in h ("none" for plain memory), in HandleTypes' order.
func handleNames(h int32) string {
	var out []string
	for _, n := range []struct {
		bit  int32
		name string
	}{{handlePosixFD, "posix_fd"}, {handleFabric, "fabric"}, {handleRDMA, "rdma"}} {
		if h&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}
