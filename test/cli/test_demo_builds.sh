#!/usr/bin/env bash
#
# test_demo_builds.sh - contrib/run-demo.sh builds every program of the
# build folder that it, or a script it runs, starts: each program
# test/DIR/NAME named as $dir/test/DIR/NAME in run-demo.sh or as
# $BUILD/test/DIR/NAME in a script it calls must be a target of its
# `make -C "$dir"` line.
# (contrib/build.sh release builds no check programs, and the demo's step 5
# ran test/coll/run-coll-ucp.sh --demo, whose coll_ucp_test it never
# built: on a fresh machine the main job stopped there.)
# Ends with "demo-builds: N passed, N failed".
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
demo=$top/contrib/run-demo.sh
pass=0
fail=0

targets=$(grep -E '^make -C "\$dir"' "$demo" | tr ' ' '\n' | grep -E '^test/')
if [ -z "$targets" ]; then
    echo "FAIL: no 'make -C \"\$dir\" ... test/...' line in contrib/run-demo.sh"
    echo "demo-builds: 0 passed, 1 failed"
    exit 1
fi
# the scripts of this repository the demo runs
scripts=$(grep -oE '"\$top/[A-Za-z0-9_/.-]+\.sh"' "$demo" | tr -d '"' |
          sed 's|^\$top/||' | sort -u)
need=$(grep -oE '\$dir/test/[A-Za-z0-9_]+/[A-Za-z0-9_]+' "$demo" | sed 's|^\$dir/||')
for s in $scripts; do
    need="$need
$(grep -oE '\$BUILD/test/[A-Za-z0-9_]+/[A-Za-z0-9_]+' "$top/$s" | sed 's|^\$BUILD/||')"
done
for p in $(printf '%s\n' "$need" | grep . | sort -u); do
    if printf '%s\n' "$targets" | grep -qxF "$p"; then
        pass=$((pass + 1))
    else
        echo "FAIL: run-demo.sh (or a script it runs) starts $p, which its make line does not build"
        fail=$((fail + 1))
    fi
done
echo "demo-builds: $pass passed, $fail failed"
[ $fail -eq 0 ]
