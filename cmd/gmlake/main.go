// Command gmlake is the project's command line: replay real training traces through every policy, run fuzz
// campaigns, benchmark and probe the driver. It is thin: the work lives in the packages it calls.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "gmlake",
	Short: "A GPU caching allocator that defragments with virtual memory stitching, and its test bench",
	Long: `gmlake replays real training allocation traces through GPU allocator policies (PyTorch's caching
allocator, expandable segments, the original GMLake, and gmlake) on a simulated H200 or a real GPU, and runs
fuzz campaigns against the engine.`,
	SilenceUsage: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gmlake:", err)
		os.Exit(1)
	}
}
