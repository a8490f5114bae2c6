# gmlake: two commands set everything up on a fresh machine: `make run` and `make test`.
# Each target delegates to the folder that owns the work.
GO      ?= go
BIN     ?= bin
TRACES  := $(wildcard testdata/traces/*.trace.gz)

.PHONY: run test vet unit race tla cxx-check verify cli gpu perf-bins capi wheel wheel-test fuzz bench clean

## run: replay the bundled real training traces through every policy on the simulated H200
run:
	$(GO) run ./cmd/gmlake replay --targets $(TRACES)

## test: everything that needs no GPU (vet, unit and model-based tests, the race detector, the Quint spec, the
## wheel, the C++ allocator's compile check)
test: vet unit race tla wheel-test cxx-check

vet:
	$(GO) mod download
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags gmlake_testhooks ./capi

unit:
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -timeout 10m -tags gmlake_mutants -run 'Mutation|Campaign|BestFit|SpuriousOOM' ./impl ./harness ./fuzz

## race: the concurrent checkers under the race detector (a data race fails CI): the engine's and the serving
## layer's threads, porcupine's concurrent histories, the simulated device, the trace recorder's writers, and
## the C ABI's threaded C and C++ programs compiled into capi's test binary (a libgmlake.so built with -race
## cannot be loaded by a C program: capi/racehost_testhooks.go). GORACE halts at the first race.
RACEPKGS = ./impl ./impl/serve ./harness ./model/sim ./trace
RACERUN  = ^(TestConcurrentStreams|TestEmptyCacheNeverRacesPendingWrites|TestServeConcurrentThreadsKeepEveryRule|TestLinearizable|TestLinearServeRecordsTheSynchronisations|TestDeviceConcurrentUse|TestRecorderConcurrent.*)$$
race:
	GORACE=halt_on_error=1 $(GO) test -race -count=1 -timeout 10m -run '$(RACERUN)' $(RACEPKGS)
	GORACE=halt_on_error=1 $(GO) test -race -count=1 -timeout 10m -tags gmlake_testhooks -run '^TestHostProgramsUnderRace$$' ./capi

## tla: typecheck, test and simulate the Quint spec; check ITF conformance
tla:
	./tla/run.sh ci

## verify: the long verification profile, for nightly use: every checker long (figures: sequences, steps,
## states, depth, histories), the fuzz targets of the perimeter (the C ABI, the settings parser, the trace
## reader), the seeded bugs, the Quint spec, then every mutant of impl/, of the layers libgmlake runs over it
## (impl/serve, impl/clib), of the C ABI (capi), of the trace format and recorder (trace) and of replay's
## figures (harness/replay) (gmlake mutate; hours: it prints one line per mutant, then the score per folder and
## per checker and the survivors; each folder's mutants run only the checkers that call it)
verify:
	GMLAKE_PROFILE=long $(GO) test -count=1 -timeout 3h -v -run '^(TestRapid|TestExplore|TestLinearizable|TestFindings)$$' ./harness/
	GMLAKE_PROFILE=long $(GO) test -count=1 -timeout 1h -v -run '^TestCLibSwarm$$' ./harness/ops/
	GMLAKE_PROFILE=long $(GO) test -count=1 -timeout 40m -run '^FuzzABI$$' -fuzz '^FuzzABI$$' -fuzztime 20m ./capi
	$(GO) test -count=1 -timeout 20m -run '^$$' -fuzz '^FuzzParseEnv$$' -fuzztime 10m ./impl/clib
	$(GO) test -count=1 -timeout 20m -run '^$$' -fuzz '^FuzzReader$$' -fuzztime 10m ./trace
	GMLAKE_PROFILE=long $(GO) test -count=1 -timeout 3h ./harness/... ./fuzz/...
	GMLAKE_PROFILE=long $(GO) test -count=1 -timeout 3h -tags gmlake_mutants -run 'Mutation' ./harness ./fuzz
	./tla/run.sh long
	mkdir -p $(BIN)
	$(GO) run ./cmd/gmlake mutate --dir impl,impl/serve,impl/clib,capi,trace,harness/replay --json $(BIN)/mutants.json

## cli: the gmlake command (replay, fuzz, probe, mutate) into $(BIN)/gmlake; `go run ./cmd/gmlake ARGS` runs it unbuilt
cli:
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/gmlake ./cmd/gmlake

## gpu: build the GPU test and benchmark binaries into $(BIN)/ for a machine with a GPU and no Go (stripped:
## the device tool carries 64 MiB at most); harness/gpu/battery.sh runs the GPU checkers there
GPUFLAGS = -ldflags='-s -w'
gpu:
	mkdir -p $(BIN)
	$(GO) build $(GPUFLAGS) -o $(BIN)/gmlake ./cmd/gmlake
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/cudavmm.test ./impl/cudavmm
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/conformance.test ./harness/conformance
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/probe.test ./harness/probe
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/impl.test ./impl
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/gpu.test ./harness/gpu
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/fuzz.test ./fuzz
	$(GO) test -c $(GPUFLAGS) -tags gmlake_mutants -o $(BIN)/gpu-mutants.test ./harness/gpu

## perf-bins: the Go layers' hot-path benchmarks as stripped test binaries in $(BIN)/perf, for
## bench/torch/breakdown.sh on the GPU machine (no Go there: carry dist and $(BIN)/perf)
perf-bins:
	mkdir -p $(BIN)/perf
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/perf/impl.test ./impl
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/perf/serve.test ./impl/serve
	$(GO) test -c $(GPUFLAGS) -o $(BIN)/perf/clib.test ./impl/clib

## cxx-check: the C++ allocator (python/gmlake_torch/csrc) compiles against torch 2.11's headers, without a GPU,
## CUDA or torch (python/cxxcheck/README.md)
cxx-check:
	python/cxxcheck/check.sh

## capi: the PyTorch pluggable allocator library
capi:
	$(GO) build -buildmode=c-shared -o capi/libgmlake.so ./capi

## wheel: the pip-installable gmlake_torch wheel (libgmlake.so bundled; no Go needed to install) into dist/
wheel: capi
	rm -f dist/gmlake_torch-*.whl
	python3 python/build_wheel.py --lib capi/libgmlake.so --out dist

## wheel-test: the wheel installs offline into a fresh venv and its tests pass on the simulated device
wheel-test: wheel
	python/tests/wheel_test.sh dist/gmlake_torch-*.whl

## fuzz: each go test -fuzz target for a short, fixed time
fuzz:
	./fuzz/run.sh

## bench: the engine's hot-path benchmarks
bench:
	$(GO) test -run '^$$' -bench 'BenchmarkAllocFree' -benchmem ./impl

clean:
	rm -rf $(BIN) capi/libgmlake.so capi/libgmlake.h dist
