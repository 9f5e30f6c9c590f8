# Shared by the seventeenth review's scripts: review 14's lib.sh (capsule,
# work, caps, state, C, skip, probe_cap, serve_http, call: see there).
# Usage: . lib.sh CAPSULE NAME
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../review14/lib.sh" "$@"
