package fuzz

// Reading saved inputs: any program, history or trace (harness/ops reads them), or a FuzzOps corpus file
// (go's "go test fuzz v1" format, as in testdata/fuzz/FuzzOps or a new failing input the fuzzer wrote),
// which is decoded into the program the fuzz target ran.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gmlake/gmlake/harness/ops"
)

// ReadProgramFile reads a program from path: a FuzzOps corpus file is decoded (Decode); anything else is
// read by ops.ReadFile (a program, a history, or a trace, gzip or plain).
func ReadProgramFile(path string) (*ops.Program, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(data, []byte(corpusHeader)) {
		b, err := readCorpusFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return Decode(b), nil
	}
	return ops.ReadFile(path)
}

const corpusHeader = "go test fuzz v1\n"

// corpusFile returns the content of a corpus file for one []byte argument (go's "go test fuzz v1" format).
func corpusFile(b []byte) []byte {
	return []byte(corpusHeader + "[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// readCorpusFile parses a corpus file of one []byte argument.
func readCorpusFile(data []byte) ([]byte, error) {
	text := strings.TrimSpace(string(data))
	_, body, _ := strings.Cut(text, "\n")
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
		return nil, fmt.Errorf("not a corpus file of one []byte argument")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(body, "[]byte("), ")"))
	if err != nil {
		return nil, fmt.Errorf("corpus file: %w", err)
	}
	return []byte(s), nil
}
