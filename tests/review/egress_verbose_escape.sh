#!/bin/bash
# Finding: `capsule run -v` prints each egress denial with the tool's
# request path unescaped (src/net/egress_log.c). libhttp-parser lets bytes
# >= 0x80 into a path, so a tool puts C1 controls (U+009B = CSI) and bidi
# overrides (U+202E) on the operator's terminal, which capsule escapes
# everywhere else (docs/gateway.md). Exits non-zero when the attack works.
capsule=$(realpath "${1:-build/capsule}")
out=$(timeout 30 "$capsule" run -v --allow-host example.invalid -- /bin/bash -c \
  'exec 3<>/dev/tcp/127.0.0.1/3128
   printf "GET http://evil.test/a\xc2\x9b2J\xe2\x80\xaefdp.exe HTTP/1.1\r\nHost: evil.test\r\n\r\n" >&3
   cat <&3 >/dev/null' 2>&1 >/dev/null)
printf '%s\n' "$out"
if printf '%s' "$out" | grep -q $'\xc2\x9b\|\xe2\x80\xae'; then
  echo "VULNERABLE: C1 CSI / RLO from the tool reached capsule's stderr raw"; exit 1
fi
echo "blocked"; exit 0
