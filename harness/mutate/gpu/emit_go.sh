#!/usr/bin/env bash
# Mutants of the real driver's code (impl/cudavmm: driver.go, cuda.c, handles.go), built here for the GPU
# machine (no Go there): for each key, the GPU checkers' test binaries compiled with the mutant through
# go test -overlay (the tree is not touched), stripped and xz-compressed to fit the carry: DIR/NNN/{cudavmm,
# conformance,gpu}.test.xz; DIR/000 is the unmutated build. A mutant that does not compile is "invalid"
# (DIR/NNN/invalid). go_mutants.sh runs them on the GPU.
#   harness/mutate/gpu/emit_go.sh KEYS DIR     # then carry DIR: OUT=$OUT bash harness/mutate/gpu/go_mutants.sh DIR
set -euo pipefail
KEYS=$1 DIR=$2
cd "$(dirname "$0")/../../.."
ROOT=$(pwd)
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
go run ./cmd/gmlake mutate --dir impl/cudavmm --keys "$KEYS" --emit "$DIR/src"
cp "$DIR/src/mutants.tsv" "$DIR/"
build() { # build NNN [OVERLAY]
	local d=$DIR/$1
	mkdir -p "$d"
	local ov=()
	[ -n "${2:-}" ] && ov=(-overlay "$2")
	for p in impl/cudavmm:cudavmm harness/conformance:conformance harness/gpu:gpu; do
		if ! go test -c -ldflags='-s -w' "${ov[@]}" -o "$d/${p#*:}.test" "./${p%:*}" >"$d/build.log" 2>&1; then
			echo "$(grep -m1 -i error "$d/build.log" | cut -c1-200)" >"$d/invalid"
			rm -f "$d"/*.test
			return
		fi
	done
	xz -T2 "$d"/*.test
}
build 000
while IFS=$'\t' read -r n file key; do
	src=$DIR/src/$n-$(basename "$file")
	if [ ! -f "$src" ]; then
		# A Go file is written as NAME.go.txt (EmitCXX), but cgo compiles only a file named .go: the overlay
		# gets a copy under _go/ (a folder ./... patterns skip, so go vet ./... never sees it).
		mkdir -p "$DIR/_go/$n"
		cp "$src.txt" "$DIR/_go/$n/$(basename "$file")"
		src=$DIR/_go/$n/$(basename "$file")
	fi
	printf '{"Replace":{"%s":"%s"}}' "$ROOT/$file" "$src" >"$DIR/src/$n.json"
	build "$n" "$DIR/src/$n.json"
	echo "emit_go.sh: $n $([ -f "$DIR/$n/invalid" ] && echo invalid || echo built) $key"
done <"$DIR/mutants.tsv"
du -sh "$DIR"
