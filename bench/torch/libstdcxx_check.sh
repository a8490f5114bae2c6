#!/usr/bin/env bash
# Why the old gmlake OOM shim crashed under torch 2.11 (GMLAKE_SHIM=1): does this machine's `g++ -shared`
# link libstdc++ dynamically (NEEDED libstdc++.so.6) or pull a static copy into the library? A static copy
# has its own std::locale facet ids, so an ostream << size_t in it fetches the wrong facet and crashes.
# python/gmlake_torch/_build.py links the C++ allocator against the process's libstdc++.so.6 instead.
set -u
echo "CXX=${CXX:-} g++=$(command -v g++) $(g++ --version | head -1)"
echo "g++ -print-file-name=libstdc++.so: $(g++ -print-file-name=libstdc++.so) -> $(readlink -f "$(g++ -print-file-name=libstdc++.so)")"
echo "g++ -print-file-name=libstdc++.a: $(g++ -print-file-name=libstdc++.a)"
T=$(mktemp -d)
printf '#include <sstream>\n#include <string>\nstd::string f(unsigned long x) { std::ostringstream o; o << x; return o.str(); }\n' >"$T/t.cc"
g++ -O2 -shared -fPIC "$T/t.cc" -o "$T/plain.so" && echo "plain g++ -shared: $(stat -c %s "$T/plain.so") bytes, NEEDED: $(readelf -d "$T/plain.so" | grep NEEDED | sed 's/.*\[//; s/\]//' | tr '\n' ' ') std::locale::id symbols defined: $(nm -C --defined-only "$T/plain.so" | grep -c 'locale::id')"
S=$(ldconfig -p | grep 'libstdc++.so.6 ' | head -1 | sed 's/.*=> //')
g++ -O2 -fPIC -c "$T/t.cc" -o "$T/t.o" && gcc -shared "$T/t.o" "$S" -o "$T/fixed.so" && echo "gcc -shared + $S: $(stat -c %s "$T/fixed.so") bytes, NEEDED: $(readelf -d "$T/fixed.so" | grep NEEDED | sed 's/.*\[//; s/\]//' | tr '\n' ' ') std::locale::id symbols defined: $(nm -C --defined-only "$T/fixed.so" | grep -c 'locale::id')"
rm -rf "$T"
