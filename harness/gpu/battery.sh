#!/bin/bash
# The GPU battery (harness/gpu/battery.sh), run on the device machine from the module root after `make gpu`
# here: `bash harness/gpu/battery.sh 1; bash harness/gpu/battery.sh 2` (BIN: the binaries' folder, default
# bin; OUT: where the logs go). Part 1: conformance and integrity on the driver, cudavmm, rapid and
# porcupine on the GPU, the seeded-bug bite test. Part 2: the campaign through the serving layer,
# FuzzOpsOnGPU (a failing input is kept in $OUT/new-fuzz-inputs.tgz).
TIMEFORMAT='%R s'; R=$(pwd); B=$R/${BIN:-bin}
part=${1:-1}
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader > $OUT/gpu-$part.txt 2>&1
sum() { grep -E '^(--- |ok|FAIL|PASS)|violation|illegal|differences|sequences|histories|caught|panic' "$1" | tail -${2:-25}; }
if [ "$part" = 1 ]; then
  cd $R/harness/conformance; echo "== conformance"; time $B/conformance.test -test.run 'Real' -test.v > $OUT/conformance.log 2>&1; sum $OUT/conformance.log
  cd $R/impl/cudavmm; echo "== cudavmm"; time $B/cudavmm.test -test.v > $OUT/cudavmm.log 2>&1; sum $OUT/cudavmm.log 10
  cd $R/harness/gpu; echo "== gpu"; GMLAKE_GPU_OUT=$OUT; export GMLAKE_GPU_OUT; time $B/gpu.test -test.v -test.run 'OnGPU' -rapid.checks=500 -gpu.histories=200 > $OUT/gpu.log 2>&1; sum $OUT/gpu.log 40
  echo "== bite"; time $B/gpu-mutants.test -test.v -test.run Bite -gpu.bitechecks=150 -gpu.bitehistories=20 > $OUT/bite.log 2>&1; sum $OUT/bite.log 20
else
  echo "== campaign"; time $B/gmlake fuzz --device cuda --policy all --duration 10s --streams 8 --capacity 8GiB --seed 14 --hang-after 30s 2>&1 | tr '\r' '\n' > $OUT/campaign.log; tail -12 $OUT/campaign.log
  cd $R/fuzz && echo "== fuzz"; time $B/fuzz.test -test.run '^$' -test.fuzz FuzzOpsOnGPU -test.fuzztime 90s -test.parallel 8 -test.fuzzminimizetime 20x -test.fuzzcachedir /tmp/fc > $OUT/fuzzgpu.log 2>&1; tail -15 $OUT/fuzzgpu.log
  new=$(git -C $R status --porcelain -uall fuzz/testdata/fuzz | awk '{print $2}')
  if [ -n "$new" ]; then tar czf $OUT/new-fuzz-inputs.tgz -C $R $new; fi
fi
