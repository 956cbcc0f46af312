#!/usr/bin/env bash
# Every C file follows .clang-format (run by ctest as lint/format). To fix:
#   git ls-files '*.c' '*.h' | xargs clang-format -i
set -u
top=${1:-$(dirname "$0")/../..}
cd "$top" || exit 2
command -v clang-format >/dev/null || { echo "clang-format is not installed (make deps)"; exit 1; }
status=0
n=0
while IFS= read -r f; do
	n=$((n + 1))
	clang-format --dry-run -Werror "$f" 2>/dev/null || { echo "not formatted: $f"; status=1; }
done < <(find include src test bench -name '*.[ch]' | sort)
[ $status = 0 ] && echo "format: $n files formatted"
exit $status
