#!/usr/bin/env bash
# Written rules that CI enforces (run by ctest as lint/banned):
# - no unbounded string functions (strcpy, strcat, sprintf, vsprintf, gets);
# - no non-reentrant strtok, no system()/popen() (they spawn a shell);
# - no fork(): processes that run gRPC threads start children with
#   posix_spawn or uv_spawn only;
# - tests never wait with sleep()/usleep(): they poll with a deadline.
set -u
top=${1:-$(dirname "$0")/../..}
cd "$top" || exit 2
status=0
check() {
	local what=$1 pattern=$2
	shift 2
	local hits
	hits=$(grep -nE "$pattern" "$@" 2>/dev/null | grep -vE '^\S+:[0-9]+:\s*(\*|/\*)')
	if [ -n "$hits" ]; then
		echo "banned: $what"
		echo "$hits"
		status=1
	fi
}
mapfile -t src < <(find src include bench test -name '*.[ch]' | sort)
mapfile -t tests < <(find test -name '*.[ch]' | sort)
check "unbounded string function" '(^|[^[:alnum:]_-])(strcpy|strcat|sprintf|vsprintf|gets)\s*\(' "${src[@]}"
check "strtok (use strtok_r)" '(^|[^[:alnum:]_-])strtok\s*\(' "${src[@]}"
check "shell spawn (use posix_spawn/uv_spawn)" '(^|[^[:alnum:]_-])(system|popen)\s*\(' "${src[@]}"
check "fork (use posix_spawn/uv_spawn)" '(^|[^[:alnum:]_-])(v?fork)\s*\(' "${src[@]}"
check "sleep in a test (poll with a deadline)" '(^|[^[:alnum:]_-])(u?sleep)\s*\(' "${tests[@]}"
[ $status = 0 ] && echo "banned: no hits in ${#src[@]} files"
exit $status
