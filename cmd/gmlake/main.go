// Command gmlake is the project's command line: replay real training traces through every policy, run fuzz
// campaigns, benchmark and probe the driver. It is thin: the work lives in the packages it calls.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an init function.
package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gmlake/gmlake/vmm"
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

func init() { rootCmd.SetFlagErrorFunc(flagParseError) }

// errBadFlag is the kind (errors.Is) of every command-line error found before any work starts.
var errBadFlag = errors.New("bad command line")

type flagError struct {
	msg string
	err error // the package's error it says, if any (errors.Is reaches its kind too)
}

func (e flagError) Error() string        { return e.msg }
func (e flagError) Is(target error) bool { return target == errBadFlag }
func (e flagError) Unwrap() error        { return e.err }

// badFlag returns an errBadFlag error; the message names the flag and says what it wants.
func badFlag(format string, args ...any) error { return flagError{msg: fmt.Sprintf(format, args...)} }

// badFlagErr makes err, a package's refusal of a value that names the flag (fuzz.CampaignConfig.Validate),
// an errBadFlag error too.
func badFlagErr(err error) error { return flagError{msg: err.Error(), err: err} }

// pflagError matches the parse errors of the flag library: `invalid argument "x" for "-s, --streams" flag:
// strconv.ParseInt: parsing "x": invalid syntax`, which names Go functions.
var pflagError = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?(--[\w-]+)" flag: (.*)$`)

// flagParseError says a flag's value that does not parse in the user's words: the flag, the value, and
// the kind of value it wants (cobra's SetFlagErrorFunc).
func flagParseError(cmd *cobra.Command, err error) error {
	m := pflagError.FindStringSubmatch(err.Error())
	if m == nil {
		return badFlag("%v (gmlake %s --help lists the flags)", err, cmd.Name())
	}
	want := "a valid value"
	f := cmd.Flags().Lookup(strings.TrimPrefix(m[2], "--"))
	if f != nil {
		switch f.Value.Type() {
		case "int", "int64", "uint64", "uint", "int32":
			want = "a whole number, like " + f.DefValue
		case "float64":
			want = "a number, like " + f.DefValue
		case "duration":
			want = "a duration, like 30s, 5m or 1h30m"
		case "bool":
			want = "true or false"
		}
	}
	return badFlag("%s %q: want %s", m[2], m[1], want)
}

// deviceError says why a GPU could not be opened in the CLI's words, with what to do instead: the driver's
// own message names the Go constructor of the simulated device, where the user types a flag.
func deviceError(flag, instead string, err error) error {
	if errors.Is(err, vmm.ErrDriverNotLoaded) {
		return fmt.Errorf("%s: no CUDA driver on this machine (libcuda.so.1 does not load): run on a machine with an NVIDIA driver%s: %w",
			flag, instead, vmm.ErrDriverNotLoaded)
	}
	return fmt.Errorf("%s: %w", flag, err)
}

// checkInputFile fails unless path names something this process can read as one input: a file, a pipe or
// a device such as /dev/stdin; not a folder.
func checkInputFile(flag, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return badFlag("%s %s: %v", flag, path, errors.Unwrap(err))
	}
	if st.IsDir() {
		return badFlag("%s %s: a folder, want a file", flag, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return badFlag("%s %s: cannot read it: %v", flag, path, errors.Unwrap(err))
	}
	return f.Close()
}

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
