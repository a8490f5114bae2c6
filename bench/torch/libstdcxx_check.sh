#!/usr/bin/env bash
# Why the old gmlake OOM shim crashed under torch 2.11 (GMLAKE_SHIM=1): it was linked with $CXX (else g++) the
# usual way (`$CXX -shared ... -lc10`). For each compiler here ($CXX and the g++ on PATH): which libstdc++
# does a plain `-shared` link use, is it NEEDED dynamically, and does the library define its own std::locale::id
# objects (a private libstdc++ copy, whose facet ids disagree with the process's: an ostream << size_t in it
# fetches the wrong facet and crashes)? python/gmlake_torch/_build.py links against the process's own
# libstdc++.so.6 with the C driver instead.
set -u
T=$(mktemp -d)
printf '#include <sstream>\n#include <string>\nextern "C" const char* f(unsigned long x) { static std::string s; std::ostringstream o; o << x; s = o.str(); return s.c_str(); }\n' >"$T/t.cc"
printf '#include <stdio.h>\n#include <dlfcn.h>\nint main(int c, char** v) { void* h = dlopen(v[1], RTLD_NOW); if (!h) { printf("dlopen: %%s\\n", dlerror()); return 1; } const char* (*f)(unsigned long) = (const char* (*)(unsigned long))dlsym(h, "f"); printf("f(1234) = %%s\\n", f(1234)); return 0; }\n' >"$T/m.cc"
/usr/bin/g++ -O2 "$T/m.cc" -o "$T/m" -ldl  # the host program: the system g++ and its shared libstdc++
for cxx in ${CXX:-} /usr/bin/g++; do
	[ -x "$(command -v "$cxx")" ] || continue
	echo "== $cxx: $("$cxx" --version | head -1)"
	echo "   -print-file-name=libstdc++.so: $("$cxx" -print-file-name=libstdc++.so) -> $(readlink -f "$("$cxx" -print-file-name=libstdc++.so)")"
	echo "   -print-file-name=libstdc++.a: $("$cxx" -print-file-name=libstdc++.a)"
	"$cxx" -O2 -shared -fPIC "$T/t.cc" -o "$T/plain.so" || continue
	echo "   plain -shared: $(stat -c %s "$T/plain.so") bytes; NEEDED: $(readelf -d "$T/plain.so" | grep NEEDED | sed 's/.*\[//; s/\]//' | tr '\n' ' ')"
	echo "   std::locale::id objects defined in it: $(nm -C --defined-only "$T/plain.so" | grep -c 'locale::id')"
	echo "   loaded into a program that uses the system libstdc++: $(timeout 10 "$T/m" "$T/plain.so" 2>&1 || echo "crashed, status $?")"
done
rm -rf "$T"
