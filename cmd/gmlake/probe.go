package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gmlake/gmlake/harness/probe"
	"github.com/gmlake/gmlake/impl/cudavmm"
	"github.com/gmlake/gmlake/vmm"
)

// maxProbeReps bounds the probe's repetition counts; probeHandleTypes are the shareable handle types
// cuMemCreate can ask for (impl/cudavmm).
const maxProbeReps = 1_000_000

var probeHandleTypes = []string{"posix_fd", "fabric", "rdma"}

func init() {
	var device, reps, stitchReps, eventReps int
	var tol float64
	var handles string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Measure the CUDA VMM call costs on a real GPU and compare them with the cost model",
		Long: `probe times every driver call kind (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess,
cuMemUnmap, cuMemRelease, cuMemAddressFree, and cuMemAlloc/cuMemFree for comparison) at 2 MiB, 20 MiB, 256 MiB
and 1 GiB, the stitching of 8, 64 and 512 granularity-sized handles into one range, and the event calls GMLake
makes per block operation (cuEventCreate, cuEventRecord, cuEventQuery, cuEventDestroy). It prints the median
microseconds in the shape of the table in docs/cuda-vmm.md, then the measurements beside vmm.H200Costs(),
marking each cell that differs by more than the tolerance. Needs a GPU with about 1.1 GiB free.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every value is checked before the GPU is opened.
			for _, c := range []struct {
				flag string
				v    int
			}{{"--reps", reps}, {"--stitch-reps", stitchReps}, {"--event-reps", eventReps}} {
				if c.v < 1 || c.v > maxProbeReps {
					return badFlag("%s %d: want 1 to %d", c.flag, c.v, maxProbeReps)
				}
			}
			if device < 0 {
				return badFlag("--device %d: want a CUDA device ordinal, 0 or more", device)
			}
			if math.IsNaN(tol) || tol < 0 || math.IsInf(tol, 0) {
				return badFlag("--tolerance %v: want a relative difference of 0 or more, like 0.25", tol)
			}
			for _, h := range strings.Split(handles, ",") {
				if h = strings.TrimSpace(h); h != "" && !slices.Contains(probeHandleTypes, h) {
					return badFlag("--handles %q: want some of %s, comma-separated", h, strings.Join(probeHandleTypes, ", "))
				}
			}
			d, err := cudavmm.New(device)
			if err != nil {
				return deviceError("gmlake probe", " (the probe times a real GPU's driver calls)", err)
			}
			defer d.Close()
			if err := d.RequestHandles(handles); err != nil {
				return fmt.Errorf("--handles: %w", err)
			}
			free, total, err := d.MemInfo()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "device %d: granularity %s, %s free of %s\nshareable handles: %s\n", device,
				vmm.FormatBytes(d.Granularity()), vmm.FormatBytes(free), vmm.FormatBytes(total), d.HandleTypes())
			// One Create before the table settles what the driver accepts of --handles (fabric needs an IMEX
			// channel); the table measures that.
			if h, err := d.Create(d.Granularity()); err == nil {
				_ = d.Release(h)
			}
			fmt.Fprintf(out, "after one cuMemCreate: %s\n\n", d.HandleTypes())
			r, err := probe.Run(d, probe.Config{Reps: reps, StitchReps: stitchReps, EventReps: eventReps})
			if err != nil {
				return err
			}
			fmt.Fprintln(out, r.Table())
			cmp, devs := r.Compare(vmm.H200Costs(), tol)
			fmt.Fprintln(out, cmp)
			if len(devs) == 0 {
				fmt.Fprintf(out, "every cell within %.0f%% of the cost model\n", tol*100)
			} else {
				fmt.Fprintf(out, "%d cells differ from the cost model by more than %.0f%%:\n", len(devs), tol*100)
				for _, dv := range devs {
					fmt.Fprintf(out, "  %s at %s: measured %v, model %v (x%.2f)\n", dv.Kind.Short(),
						vmm.FormatBytes(dv.Size), dv.Measured, dv.Model, dv.Ratio)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&device, "device", 0, "CUDA device ordinal")
	cmd.Flags().IntVar(&reps, "reps", 25, "repetitions per call kind and size (the median is printed)")
	cmd.Flags().IntVar(&stitchReps, "stitch-reps", 5, "repetitions per stitched-range size")
	cmd.Flags().IntVar(&eventReps, "event-reps", 1000, "repetitions of each event call")
	cmd.Flags().StringVar(&handles, "handles", "", "shareable handle types cuMemCreate asks for: posix_fd, fabric, rdma, comma-separated (default: plain memory)")
	cmd.Flags().Float64Var(&tol, "tolerance", 0.25, "relative difference from the cost model that is flagged")
	rootCmd.AddCommand(cmd)
}
