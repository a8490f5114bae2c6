#!/usr/bin/env bash
# The C++ allocator's mutants, made here for the GPU machine (no Go there): the keys' mutated sources of
# python/gmlake_torch/csrc/gmlake_allocator.cc written into DIR (gmlake mutate --emit), each compiled once here
# against the vendored torch 2.11 headers (python/cxxcheck, -fsyntax-only, warnings off: the user's build has no
# -Werror), so that a mutant that cannot compile is counted invalid here and costs no GPU time.
#   harness/mutate/gpu/emit.sh KEYS DIR      # then carry DIR and dist/ to the GPU: cxx_mutants.sh DIR
set -euo pipefail
KEYS=$1 DIR=$2
cd "$(dirname "$0")/../../.."
rm -rf "$DIR"
go run ./cmd/gmlake mutate --dir python/gmlake_torch/csrc --keys "$KEYS" --emit "$DIR"
H=python/cxxcheck
: >"$DIR/precheck.tsv"
while IFS=$'\t' read -r n file key; do
	src="$DIR/$n-$(basename "$file")"
	if err=$(${CXX:-g++} -std=c++17 -fsyntax-only -w -DNDEBUG -D_GLIBCXX_USE_CXX11_ABI=1 -I"$H/torch-2.11/include" \
		-I"$H/cudastub" -Icapi -Ipython/gmlake_torch/csrc "$src" 2>&1); then
		printf '%s\tvalid\t%s\n' "$n" "$key" >>"$DIR/precheck.tsv"
	else
		printf '%s\tinvalid\t%s\t%s\n' "$n" "$key" "$(printf '%s' "$err" | grep -m1 error | cut -c1-200)" >>"$DIR/precheck.tsv"
		rm -f "$src"
	fi
done <"$DIR/mutants.tsv"
echo "emit.sh: $(grep -c $'\tvalid\t' "$DIR/precheck.tsv") of $(wc -l <"$DIR/mutants.tsv") mutants compile; $DIR/precheck.tsv"
