# shellcheck shell=bash
# realbin.sh - sourced by the scripts that need the ELF file of a program
# of a libtool build (test/tsan/run-tsan.sh, test/tsan/tsan-broker.sh,
# test/vm/build-guest.sh): a program linking the project's shared
# libraries is a wrapper script, its ELF under .libs.
#
# realbin FILE: prints FILE's ELF: .libs/NAME or .libs/lt-NAME next to FILE
#   when one is executable (in that order), else FILE itself.

realbin() {
    local f=$1
    if [ -x "$(dirname "$f")/.libs/$(basename "$f")" ]; then
        echo "$(dirname "$f")/.libs/$(basename "$f")"
    elif [ -x "$(dirname "$f")/.libs/lt-$(basename "$f")" ]; then
        echo "$(dirname "$f")/.libs/lt-$(basename "$f")"
    else
        echo "$f"
    fi
}
