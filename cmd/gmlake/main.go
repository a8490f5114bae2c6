// Command gmlake is the project's command line: replay real training traces through every policy, run fuzz
// campaigns, benchmark and probe the driver. It is thin: the work lives in the packages it calls.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an init function.
package main

import (
	"errors"
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
	SilenceUsage:  true,
	SilenceErrors: true, // main prints the error, once
}

// errBadFlag is the kind (errors.Is) of every command-line error found before any work starts.
var errBadFlag = errors.New("bad command line")

type flagError struct{ msg string }

func (e flagError) Error() string        { return e.msg }
func (e flagError) Is(target error) bool { return target == errBadFlag }

// badFlag returns an errBadFlag error; the message names the flag and says what it wants.
func badFlag(format string, args ...any) error { return flagError{fmt.Sprintf(format, args...)} }

// checkDir fails unless dir is an existing folder this process can create files in.
func checkDir(flag, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return badFlag("%s %s: %v", flag, dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return badFlag("%s %s: not a folder", flag, dir)
	}
	f, err := os.CreateTemp(dir, ".gmlake-write-check-*")
	if err != nil {
		return badFlag("%s %s: cannot write there: %v", flag, dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkWritable fails unless path can be written (created or truncated later); it leaves no file behind
// that was not there before.
func checkWritable(flag, path string) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return badFlag("%s %s: cannot write it: %v", flag, path, errors.Unwrap(err))
	}
	f.Close()
	if statErr != nil {
		return os.Remove(path)
	}
	return nil
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gmlake:", err)
		os.Exit(1)
	}
}
