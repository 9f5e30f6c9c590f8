# Shared by the fifteenth review's scripts: review 14's lib.sh (capsule,
# work, caps, state, C, skip, probe_cap, serve_http, call: see there),
# and r15, this directory. Usage: . lib.sh CAPSULE NAME
r15=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$r15/../review14/lib.sh" "$@"
