#!/usr/bin/env bash
# Talos plugins as Talos runs them, through capsule: plugins of this suite's
# own in the shapes real ones have (TypeScript `handlers` with a relative
# import, named exports in index.mjs, `triggers` that poll, a select
# setting, oauth, `secret: false`), called through the shim; settings set,
# listed and refused; a trigger polled three times with its state carried
# over and an event on the third; the poller under SIGTERM and its lease;
# the malformed cases (no declared export, a syntax error, a value that is
# not JSON, a throw, a poll that throws or returns garbage, a stored state
# that is not JSON, an import that cannot be resolved); a Talos checkout's
# root as --caps with its node_modules. As root and as uid 65534.
# Usage: run.sh CAPSULE
set -u
source "$(dirname "$0")/../lib/gateway.sh"
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
esbuild=$here/../../src/runtime/talos-loader/node_modules/esbuild/bin/esbuild
[ -x "$esbuild" ] || command -v esbuild >/dev/null || [ -n "${CAPSULE_ESBUILD:-}" ] ||
  { echo "SKIP: no esbuild (scripts/deps.sh build installs it)"; exit 77; }
work=$(mktemp -d /var/tmp/capsule-talos.XXXXXX)
chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

# make_plugins DIR: the plugins under test
make_plugins() {
  local d=$1
  mkdir -p "$d/notes" "$d/named" "$d/watch" "$d/noexports" "$d/syntax" "$d/importer"
  cat >"$d/notes/manifest.json" <<'JSON'
{"id": "notes", "name": "Notes", "description": "A TypeScript plugin with handlers.", "version": "1.0.0",
 "logName": "notes", "category": "productivity",
 "credentials": [
   {"name": "base_url", "label": "Base URL", "required": true, "secret": false},
   {"name": "token", "label": "Token", "required": true}],
 "oauth": {"provider": "example", "scopes": ["notes.read"], "authorizeUrl": "/api/oauth/example/authorize"},
 "settings": [
   {"name": "style", "label": "Style", "type": "select", "options": ["plain", "loud"], "default": "plain"},
   {"name": "limit", "label": "Limit", "type": "number", "default": "3"},
   {"name": "verbose", "label": "Verbose", "type": "boolean", "default": "false"}],
 "functions": [
   {"name": "greet", "description": "Greets.", "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}},
   {"name": "config", "description": "Shows its config.", "parameters": {"type": "object"}},
   {"name": "big", "description": "Returns a BigInt.", "parameters": {"type": "object"}},
   {"name": "cycle", "description": "Returns a cycle.", "parameters": {"type": "object"}},
   {"name": "boom", "description": "Throws.", "parameters": {"type": "object"}},
   {"name": "rejects", "description": "Rejects.", "parameters": {"type": "object"}},
   {"name": "stuck", "description": "Never settles.", "parameters": {"type": "object"}},
   {"name": "slow", "description": "Settles after a minute.", "parameters": {"type": "object"}}]}
JSON
  cat >"$d/notes/lib.ts" <<'TS'
export function shout(s: string, style: string): string {
  return style === "loud" ? s.toUpperCase() + "!" : s;
}
TS
  cat >"$d/notes/index.ts" <<'TS'
import { shout } from "./lib.js";
type Config = Record<string, string>;
interface GreetArgs { who: string }
async function greet(args: GreetArgs, config: Config): Promise<string> {
  console.log("printed by the plugin, not the answer");
  return shout(`hello ${args.who}`, config.style);
}
const cyc: { self?: unknown } = {};
cyc.self = cyc;
export const handlers: Record<string, (args: any, config: Config) => Promise<unknown>> = {
  greet,
  config: async (_args, config) => config,
  big: async () => 10n,
  cycle: async () => cyc,
  boom: async () => { throw new Error("kaput"); },
  rejects: () => Promise.reject(new Error("refused")),
  stuck: () => new Promise(() => {}),
  slow: () => new Promise((resolve) => setTimeout(() => resolve("late"), 60000)),
};
TS
  cat >"$d/named/manifest.json" <<'JSON'
{"id": "named", "name": "Named", "description": "Named exports in index.mjs.", "version": "1.0.0",
 "functions": [{"name": "add", "description": "Adds.", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]}
JSON
  echo 'export async function add({ a, b }) { return { sum: a + b }; }' >"$d/named/index.mjs"
  cat >"$d/watch/manifest.json" <<'JSON'
{"id": "watch", "name": "Watch", "description": "A plugin with triggers.", "version": "1.0.0",
 "settings": [{"name": "poll_interval_minutes", "label": "Poll interval (minutes)", "type": "number", "default": "5"}],
 "triggers": [
   {"id": "tick", "label": "Tick", "description": "Every third poll",
    "params": [{"key": "cooldown_seconds", "label": "Cooldown", "type": "number", "default": 60}]},
   {"id": "throws", "label": "Throws"},
   {"id": "garbage", "label": "Garbage"},
   {"id": "picky", "label": "Picky", "description": "Fires each poll; its filter passes counts of at least min_count",
    "params": [{"key": "min_count", "label": "Minimum count", "type": "number", "default": 1},
               {"key": "tag", "label": "Tag", "type": "text"}]},
   {"id": "fthrow", "label": "Filter throws"}],
 "functions": [{"name": "noop", "description": "Nothing.", "parameters": {"type": "object"}}]}
JSON
  cat >"$d/watch/index.ts" <<'TS'
interface State { count?: number }
export const handlers = { noop: async () => "ok" };
export const triggers = {
  tick: {
    async poll(config: Record<string, string>, state: State, settings: Record<string, string>) {
      const count = (state.count ?? 0) + 1;
      const event = count % 3 === 0
        ? { triggerId: "watch:tick", pluginId: "watch", summary: `poll ${count}`, data: { count, interval: settings.poll_interval_minutes } }
        : null;
      return { event, newState: { count } };
    },
  },
  throws: { async poll() { throw new Error("the service is down"); } },
  garbage: { async poll() { return 42; } },
  picky: {
    async poll(_c: Record<string, string>, state: State) {
      const count = (state.count ?? 0) + 1;
      return { event: { summary: `picky ${count}`, data: { count } }, newState: { count } };
    },
    filter(event: { data: { count: number } }, cfg: { min_count: number; tag?: string }) {
      return typeof cfg.min_count === "number" && event.data.count >= cfg.min_count && cfg.tag === "t1";
    },
  },
  fthrow: {
    async poll() { return { event: { summary: "x" }, newState: {} }; },
    filter() { throw new Error("a bad task config"); },
  },
};
TS
  cat >"$d/noexports/manifest.json" <<'JSON'
{"id": "noexports", "name": "N", "description": "Exports none of its functions.", "version": "1.0.0",
 "functions": [{"name": "a", "description": "A.", "parameters": {"type": "object"}}, {"name": "b", "description": "B.", "parameters": {"type": "object"}}]}
JSON
  echo 'export const handlers = { other: async () => 1 };' >"$d/noexports/index.ts"
  sed 's/"noexports"/"syntax"/' "$d/noexports/manifest.json" >"$d/syntax/manifest.json"
  printf 'export const handlers = {\n  a: async ( => 1,\n};\n' >"$d/syntax/index.ts"
  cat >"$d/importer/manifest.json" <<'JSON'
{"id": "importer", "name": "I", "description": "Imports a package.", "version": "1.0.0",
 "functions": [{"name": "pad", "description": "Pads.", "parameters": {"type": "object"}}]}
JSON
  printf 'import pad from "capsule-test-pad";\nexport const handlers = { pad: async () => pad("x") };\n' >"$d/importer/index.ts"
  # an OAuth plugin: its handler shows the tokens its config holds
  mkdir -p "$d/oauthy"
  cat >"$d/oauthy/manifest.json" <<'JSON'
{"id": "oauthy", "name": "OAuthy", "description": "Holds OAuth tokens.", "version": "1.0.0",
 "credentials": [{"name": "client_id", "label": "Client ID", "required": true, "secret": false}, {"name": "client_secret", "label": "Client secret", "required": true}],
 "oauth": {"provider": "test", "scopes": ["mail.read"]},
 "functions": [{"name": "tokens", "description": "Its tokens.", "parameters": {"type": "object"}}]}
JSON
  echo 'export const handlers = { tokens: async (_a: unknown, c: Record<string, string>) => ({ access: c.access_token, refresh: c.refresh_token, fresh: Number(c.token_expiry) > Date.now() + 3000000 }) };' >"$d/oauthy/index.ts"
  # a push trigger (Talos's subscribe): an event every 300 ms until unsubscribed
  mkdir -p "$d/pusher"
  cat >"$d/pusher/manifest.json" <<'JSON'
{"id": "pusher", "name": "Pusher", "description": "A push trigger.", "version": "1.0.0",
 "triggers": [{"id": "ping", "label": "Ping", "params": [{"key": "cooldown_seconds", "label": "Cooldown", "type": "number", "default": 60}, {"key": "min", "label": "Minimum", "type": "number"}]},
              {"id": "broken", "label": "Subscribe throws"},
              {"id": "fetcher", "label": "Asks for a host it may not reach, then emits"},
              {"id": "fetchpoll", "label": "Polled: asks for a host it may not reach"}],
 "functions": [{"name": "noop", "description": "Nothing.", "parameters": {"type": "object"}}]}
JSON
  cat >"$d/pusher/index.ts" <<'TS'
type Emit = (event: unknown) => void;
export const handlers = { noop: async () => "ok" };
export const triggers = {
  ping: {
    async subscribe(_config: Record<string, string>, _settings: Record<string, string>, emit: Emit) {
      let n = 0;
      const timer = setInterval(() => { n++; emit(n === 2 ? "not an object" : { summary: `ping ${n}`, data: { n } }); }, 300);
      return () => { clearInterval(timer); console.error(`unsubscribed after ${n}`); };
    },
    filter(event: { data: { n: number } }, cfg: { min?: number }) { return event.data.n >= (cfg.min ?? 0); },
  },
  broken: { async subscribe() { throw new Error("cannot reach the feed"); } },
  fetcher: {
    async subscribe(_c: Record<string, string>, _s: Record<string, string>, emit: Emit) {
      try { await fetch("http://198.51.100.9:8081/feed"); } catch { /* refused by the proxy */ }
      emit({ summary: "fetched" });
      return () => {};
    },
  },
  fetchpoll: {
    async poll() {
      try { await fetch("http://198.51.100.9:8082/feed"); } catch { /* refused by the proxy */ }
      return { event: { summary: "polled" }, newState: {} };
    },
  },
};
TS
  mkdir -p "$d/net"
  cat >"$d/net/manifest.json" <<'JSON'
{"id": "net", "name": "Net", "description": "Uses fetch and reads a file.", "version": "1.0.0",
 "functions": [
   {"name": "get", "description": "Fetches.", "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
   {"name": "read", "description": "Reads a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]}
JSON
  cat >"$d/net/index.ts" <<'TS'
import { readFileSync } from "node:fs";
export const handlers = {
  async get({ url }: { url: string }) {
    try {
      const r = await fetch(url);
      return { status: r.status, body: await r.text() };
    } catch (e: any) {
      return { failed: String(e?.message), cause: String(e?.cause?.message ?? "") };
    }
  },
  read: async ({ path }: { path: string }) => readFileSync(path, "utf8"),
};
TS
  # an operator's node_modules with the package the importer needs
  mkdir -p "$d/../shared/node_modules/capsule-test-pad"
  echo '{"name": "capsule-test-pad", "type": "module", "exports": "./index.js"}' >"$d/../shared/node_modules/capsule-test-pad/package.json"
  echo 'export default (s) => `[${s}]`;' >"$d/../shared/node_modules/capsule-test-pad/index.js"
  # a Talos checkout: plugins/<id>/ and the root's node_modules
  mkdir -p "$d/../checkout/plugins/uses-root" "$d/../checkout/node_modules"
  echo '{"name": "talos", "private": true}' >"$d/../checkout/package.json"
  cp -r "$d/../shared/node_modules/capsule-test-pad" "$d/../checkout/node_modules/"
  sed 's/"importer"/"uses-root"/' "$d/importer/manifest.json" >"$d/../checkout/plugins/uses-root/manifest.json"
  cp "$d/importer/index.ts" "$d/../checkout/plugins/uses-root/"
}

# stop PID: SIGTERM, then (bounded) wait; its exit status, 124 when it had
# to be killed
stop() {
  local n=0
  kill -TERM "$1"
  while kill -0 "$1" 2>/dev/null && [ $n -lt 300 ]; do sleep 0.2; n=$((n + 1)); done
  kill -0 "$1" 2>/dev/null && { kill -KILL "$1"; wait "$1"; return 124; }
  wait "$1"
}

# suite WHO RUN...: the cases, capsule run through RUN (as that user)
suite() {
  local who=$1; shift
  local dir=$work/$who caps=$work/$who/caps state=$work/$who/state
  mkdir -p "$dir"
  make_plugins "$caps"
  [ "$who" = root ] || chown -R 65534:65534 "$dir"
  local R=("$@")
  tt() { # tt NAME WANT REGEX ARGS...
    local name=$1 want=$2 regex=$3 status; shift 3
    out=$("${R[@]}" "$capsule" "$@" 2>&1 </dev/null); status=$?
    if [ "$status" = "$want" ] && grep -qE -- "$regex" <<<"$out"; then ok "$who: $name"
    else bad "$who: $name (exit $status, want $want)"; head -5 <<<"$out" | sed 's/^/         /'; fi
  }
  local G=(--caps "$caps" --state "$state") f
  for f in greet config big cycle boom rejects stuck slow; do "${R[@]}" "$capsule" policy set notes $f allow "${G[@]}" >/dev/null; done
  for f in named:add watch:noop importer:pad net:get net:read; do "${R[@]}" "$capsule" policy set ${f%%:*} ${f##*:} allow "${G[@]}" >/dev/null; done

  echo " list and show"
  tt list-missing-credential 0 "^notes .* not ready: credential base_url is not set" list "${G[@]}"
  printf 'https://notes.example\n' | "${R[@]}" "$capsule" cred set notes base_url --scope system "${G[@]}" >/dev/null
  printf 's3cret-token\n' | "${R[@]}" "$capsule" cred set notes token --scope system "${G[@]}" >/dev/null
  tt list-ready-typescript 0 "^notes  \(talos, talos-node\)  ready$" list "${G[@]}"
  tt list-ready-named 0 "^named  \(talos, talos-node\)  ready$" list "${G[@]}"
  tt list-no-exports 0 "^noexports .* not ready: plugin noexports, its entry: the module exports none of the declared functions \(a, b\)" list "${G[@]}"
  tt list-syntax-error 0 "^syntax .* not ready: plugin syntax: $caps/syntax/index.ts:2:[0-9]+: .*\(it does not compile\)" list "${G[@]}"
  tt list-unresolved-import 0 "^importer .* not ready: .*cannot resolve the import \"capsule-test-pad\".*capsule config set importer node_path DIR" list "${G[@]}"
  tt show-fields 0 '"provider": "example"' show "$caps/notes"
  if grep -q '"options": \[' <<<"$out" && grep -q '"secret": false' <<<"$out" && grep -q '"category": "productivity"' <<<"$out"; then ok "$who: show-select-secret-category"
  else bad "$who: show-select-secret-category"; fi
  tt show-trigger-params 0 '"key": "cooldown_seconds"' show "$caps/watch"

  echo " calls"
  tt call-typescript-handler 0 '^"hello Ada"$' call "${G[@]}" notes greet '{"who": "Ada"}'
  tt call-config-merged 0 '^\{"style":"plain","limit":"3","verbose":"false","base_url":"https://notes.example","token":"s3cret-token"\}$' call "${G[@]}" notes config '{}'
  tt call-named-export 0 '^\{"sum":5\}$' call "${G[@]}" named add '{"a": 2, "b": 3}'
  tt call-bigint 1 "plugin notes, function big: the value returned is not JSON \(.*BigInt" call "${G[@]}" notes big '{}'
  tt call-cycle 1 "plugin notes, function cycle: the value returned is not JSON \(.*circular" call "${G[@]}" notes cycle '{}'
  tt call-throws 1 "the tool failed: plugin notes, function boom: kaput" call "${G[@]}" notes boom '{}'
  tt call-rejects 1 "the tool failed: plugin notes, function rejects: refused" call "${G[@]}" notes rejects '{}'
  tt call-never-settles 1 "plugin notes, function stuck: its promise never settled" call "${G[@]}" notes stuck '{}'
  tt call-deadline 1 "stopped: wall" call "${G[@]}" --timeout 2 notes slow '{}'
  tt call-after-failures 0 '^"hello Bo"$' call "${G[@]}" notes greet '{"who": "Bo"}'
  if ls "$state/cache/talos" | grep -qE '^[0-9a-f]{64}\.mjs$'; then ok "$who: typescript-cached-by-hash"; else bad "$who: typescript-cached-by-hash"; fi

  echo " settings"
  tt config-set-select 0 "notes.style = loud" config set notes style loud "${G[@]}"
  tt config-used 0 '^"HELLO ADA!"$' call "${G[@]}" notes greet '{"who": "Ada"}'
  tt config-select-refused 1 "'shouty' is not one of the allowed values of setting style of notes: plain, loud" config set notes style shouty "${G[@]}"
  tt config-number-refused 1 "'many' is not a number" config set notes limit many "${G[@]}"
  tt config-boolean-refused 1 "'yes' is not a boolean; setting verbose of notes takes true or false" config set notes verbose yes "${G[@]}"
  tt config-unknown-refused 1 "capability notes has no setting 'colour'; its settings: style, limit, verbose, node_path" config set notes colour red "${G[@]}"
  tt config-user 0 "notes.limit = 7 \(user bob\)" config set notes limit 7 --user bob "${G[@]}"
  tt config-list 0 "^style +setting +select +loud +operator" config list notes "${G[@]}"
  if grep -qE "^limit +setting +number +3 +default" <<<"$out" && grep -qE "^base_url +credential +text +https://notes.example" <<<"$out" &&
     grep -qE "^token +credential +secret +\(set\)" <<<"$out" && ! grep -q s3cret <<<"$out"; then ok "$who: config-list-defaults-and-credentials"
  else bad "$who: config-list-defaults-and-credentials"; sed 's/^/         /' <<<"$out"; fi
  tt config-list-json 0 '"name": "base_url",' config list notes --json "${G[@]}"
  if ! grep -q s3cret <<<"$out"; then ok "$who: config-list-json-hides-secret"; else bad "$who: config-list-json-hides-secret"; fi
  tt config-list-user 0 "^limit +setting +number +7 +user" config list notes --user bob "${G[@]}"
  tt config-rm 0 "config rm: notes.style" config rm notes style "${G[@]}"
  tt config-rm-again 1 "notes has no stored style" config rm notes style "${G[@]}"
  tt config-node-path 0 "notes? *|importer.node_path" config set importer node_path "$dir/shared" "${G[@]}"
  tt import-from-node-path 0 '^"\[x\]"$' call "${G[@]}" importer pad '{}'
  tt checkout-root-ready 0 "^uses-root  \(talos, talos-node\)  ready$" list --caps "$dir/checkout" --state "$state"
  "${R[@]}" "$capsule" policy set uses-root pad allow --caps "$dir/checkout" --state "$state" >/dev/null
  tt checkout-root-import 0 '^"\[x\]"$' call --caps "$dir/checkout" --state "$state" uses-root pad '{}'

  echo " grants"
  mkdir -p "$dir/data" && echo "granted file" >"$dir/data/f.txt"
  [ "$who" = root ] || chown -R 65534:65534 "$dir/data"
  tt read-without-grant 1 "plugin net, function read: ENOENT" call "${G[@]}" net read "{\"path\": \"$dir/data/f.txt\"}"
  tt fetch-without-grant 0 '"failed":"fetch failed; net has no network until the operator grants a host \(capsule grant net --host HOST\[:PORT\]\)"' call "${G[@]}" net get '{"url": "http://192.0.2.1/"}'
  tt grant-read 0 "granted: net read $dir/data" grant net --read "$dir/data" "${G[@]}"
  tt grant-host 0 "granted: net host 198.51.100.9:8080" grant net --host 198.51.100.9:8080 "${G[@]}"
  tt grant-bad-host 1 "--host takes HOST or HOST:PORT" grant net --host "a b:99999" "${G[@]}"
  tt grant-bad-path 1 "--rw takes an absolute path" grant net --rw relative/dir "${G[@]}"
  tt grant-list 0 "^net +read +$dir/data" grant list "${G[@]}"
  tt grant-list-json 0 '"kind": "host",' grant list --json "${G[@]}"
  tt list-shows-grants 0 "^  granted: read $dir/data" list "${G[@]}"
  tt list-json-grants 0 '"grants": \[' list --json "${G[@]}"
  tt show-with-grants 0 "\"path\": \"$dir/data\"" show --state "$state" "$caps/net"
  if grep -q '"origin": "operator"' <<<"$out" && grep -q '"198.51.100.9:8080"' <<<"$out"; then ok "$who: show-grants-origin-and-host"
  else bad "$who: show-grants-origin-and-host"; fi
  tt read-with-grant 0 '^"granted file\\n"$' call "${G[@]}" net read "{\"path\": \"$dir/data/f.txt\"}"
  tt grant-audited 0 "grant .*read $dir/data" audit "${G[@]}"
  tt dry-run-operator 0 "^operator: +2 grants added by .capsule grant." run --state "$state" --config "$caps/net" --dry-run
  tt dry-run-grant-marked 0 "^grant: +read +$dir/data \(the operator's: capsule grant\)" run --state "$state" --config "$caps/net" --dry-run
  tt dry-run-host-marked 0 "^allow host: +198.51.100.9:8080 \(the operator's: capsule grant\)" run --state "$state" --config "$caps/net" --dry-run
  tt dry-run-json-grants 0 '"origin": "operator"' run --state "$state" --config "$caps/net" --dry-run --json
  if [ -n "$ns1" ]; then
    tt fetch-through-proxy 0 '^\{"status":200,"body":"served GET /hello"\}$' call "${G[@]}" net get '{"url": "http://198.51.100.9:8080/hello"}'
    tt fetch-other-port-refused 0 '"failed":"fetch failed; capsule.s egress proxy allows only the hosts granted to net' call "${G[@]}" net get '{"url": "http://198.51.100.9:8081/hello"}'
  fi
  if [ -n "$ns1" ]; then
    echo " OAuth refresh"
    "${R[@]}" "$capsule" policy set oauthy tokens allow "${G[@]}" >/dev/null
    for kv in client_id:cid client_secret:csecret refresh_token:rt-1; do
      printf '%s\n' "${kv#*:}" | "${R[@]}" "$capsule" cred set oauthy "${kv%%:*}" --scope system "${G[@]}" >/dev/null
    done
    tt oauth-url-bad 1 "oauth_token_url must be the provider's token endpoint" config set oauthy oauth_token_url ftp://x "${G[@]}"
    tt oauth-without-url 0 '^\{"refresh":"rt-1","fresh":false\}$' call "${G[@]}" oauthy tokens '{}'
    tt oauth-url 0 "" config set oauthy oauth_token_url http://198.51.100.9:8080/token "${G[@]}"
    tt oauth-url-listed 0 "^oauth_token_url +capsule +url +http://198.51.100.9:8080/token +operator" config list oauthy "${G[@]}"
    tt oauth-not-granted 1 "cannot renew the OAuth token at http://198.51.100.9:8080/token: fetch failed; oauthy has no network" call "${G[@]}" oauthy tokens '{}'
    "${R[@]}" "$capsule" grant oauthy --host 198.51.100.9:8080 "${G[@]}" >/dev/null
    tt oauth-refreshed 0 '^\{"access":"at-2","refresh":"rt-2","fresh":true\}$' call "${G[@]}" oauthy tokens '{}'
    tt oauth-kept-until-expiry 0 '^\{"access":"at-2","refresh":"rt-2","fresh":true\}$' call "${G[@]}" oauthy tokens '{}'
    if ! "${R[@]}" grep -aq "at-2" "$state/state.db" "$state/state.db-wal" 2>/dev/null; then ok "$who: oauth-tokens-sealed"; else bad "$who: oauth-tokens-sealed"; fi
    printf '1000\n' | "${R[@]}" "$capsule" cred set oauthy token_expiry --scope system "${G[@]}" >/dev/null
    tt oauth-refreshed-at-expiry 0 '^\{"access":"at-3","refresh":"rt-3","fresh":true\}$' call "${G[@]}" oauthy tokens '{}'
    printf 'bogus\n' | "${R[@]}" "$capsule" cred set oauthy refresh_token --scope system "${G[@]}" >/dev/null
    printf '1000\n' | "${R[@]}" "$capsule" cred set oauthy token_expiry --scope system "${G[@]}" >/dev/null
    tt oauth-refused 1 "cannot renew the OAuth token: http://198.51.100.9:8080/token answered 400 \(invalid_grant\)" call "${G[@]}" oauthy tokens '{}'
  fi
  tt revoke 0 "revoked: net read $dir/data" revoke net --read "$dir/data" "${G[@]}"
  tt revoke-again 1 "net has no read grant" revoke net --read "$dir/data" "${G[@]}"
  tt read-after-revoke 1 "ENOENT" call "${G[@]}" net read "{\"path\": \"$dir/data/f.txt\"}"

  tt plugin-install-no-package 1 "has no package.json; nothing to install" plugin install "$caps/notes"
  echo '{"name": "notes", "private": true}' >"$caps/named/package.json"
  tt plugin-install-no-lock 1 "has no package-lock.json" plugin install "$caps/named"

  echo " triggers"
  tt poll-1 0 '^$' triggers poll watch tick "${G[@]}"
  tt poll-2 0 '^$' triggers poll watch tick "${G[@]}"
  tt poll-3-event 0 '^\{"triggerId":"watch:tick","pluginId":"watch","summary":"poll 3","data":\{"count":3,"interval":"5"\}\}$' triggers poll watch tick "${G[@]}"
  tt events-list 0 '^1 +[0-9T:.Z-]+ +watch +tick +' events "${G[@]}"
  tt events-json 0 '"summary": "poll 3"' events --json "${G[@]}"
  tt event-audited 0 "watch\.trigger:tick +trigger .*event 1" audit "${G[@]}"
  tt poll-throws 1 "watch:throws: the tool failed: plugin watch, trigger throws: the service is down; nothing was stored" triggers poll watch throws "${G[@]}"
  tt poll-garbage 1 "plugin watch, trigger garbage: poll returned number, not \{event, newState\}" triggers poll watch garbage "${G[@]}"
  tt poll-unknown 1 "declares no trigger 'nope'; its triggers: tick throws garbage picky fthrow" triggers poll watch nope "${G[@]}"
  local db=$state/state.db
  "${R[@]}" sqlite3 "$db" "UPDATE trigger_state SET state = 'not json' WHERE trigger = 'tick'"
  tt poll-bad-state 1 "plugin watch, trigger tick: its stored state is not a JSON object" triggers poll watch tick "${G[@]}"
  if [ "$("${R[@]}" sqlite3 "$db" "SELECT state FROM trigger_state WHERE trigger = 'tick'")" = "not json" ]; then ok "$who: bad-state-nothing-stored"
  else bad "$who: bad-state-nothing-stored"; fi
  "${R[@]}" sqlite3 "$db" "UPDATE trigger_state SET state = '{\"count\": 5}' WHERE trigger = 'tick'"
  tt trigger-on 0 "watch:tick on each event: call named.add" triggers on watch tick --call named add "${G[@]}"
  tt poll-then-call 0 '"summary":"poll 6"' triggers poll watch tick "${G[@]}"
  tt trigger-call-audited 0 "named\.add" audit "${G[@]}"
  # a trigger's filter(event, taskConfig) decides whether the attached call runs (Talos's poller)
  tt trigger-on-params 0 'watch:picky on each event: call named.add with params \{"min_count":2,"tag":"t1"\}' triggers on watch picky --call named add --param min_count=2 --param tag=t1 "${G[@]}"
  tt trigger-param-unknown 1 "--param nope=1: no such param; watch:picky declares: min_count tag" triggers on watch picky --call named add --param nope=1 "${G[@]}"
  tt trigger-param-not-number 1 "--param min_count=many: not a number" triggers on watch picky --call named add --param min_count=many "${G[@]}"
  tt trigger-param-without-on 2 "--param goes with on --call" triggers enable watch picky --param tag=x "${G[@]}"
  tt filter-declines 0 "named.add not called: the trigger's filter declined the event" triggers poll watch picky "${G[@]}"
  tt filter-passes 0 "named.add on the event: ok" triggers poll watch picky "${G[@]}"
  tt filter-event-stored 0 '"summary": "picky 1"' events --json "${G[@]}"
  tt trigger-on-fthrow 0 "watch:fthrow on each event: call named.add$" triggers on watch fthrow --call named add "${G[@]}"
  tt filter-throws-still-calls 0 "named.add on the event: ok" triggers poll watch fthrow "${G[@]}"

  echo " the poller"
  tt trigger-enable 0 "watch:tick enabled" triggers enable watch tick "${G[@]}"
  tt interval-fast 0 "" config set watch poll_interval_minutes 0.005 "${G[@]}"
  local before log=$dir/poller.log pid n=0
  before=$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events")
  "${R[@]}" "$capsule" triggers run "${G[@]}" >"$dir/poller.out" 2>"$log" &
  pid=$!
  # the trigger fires every third poll: wait (bounded) for two more events
  while [ $n -lt 600 ] && [ "$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events")" -lt $((before + 2)) ]; do sleep 0.2; n=$((n + 1)); done
  stop $pid; local st=$?
  if [ $st = 0 ] && grep -q "stopped (SIGTERM)" "$log" && [ "$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events")" -ge $((before + 2)) ]; then ok "$who: poller-fires-and-stops-on-sigterm"
  else bad "$who: poller-fires-and-stops-on-sigterm (exit $st)"; head -5 "$log" | sed 's/^/         /'; fi
  if grep -q "polling watch:tick every 0.005 min" "$log"; then ok "$who: poller-interval-from-setting"; else bad "$who: poller-interval-from-setting"; fi
  if [ "$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM trigger_leases")" = 0 ]; then ok "$who: poller-released-lease"; else bad "$who: poller-released-lease"; fi
  # another poller holds the lease: this one does not poll
  "${R[@]}" sqlite3 "$db" "INSERT INTO trigger_leases VALUES ('watch', 'tick', '$("${R[@]}" id -un)', 'elsewhere:1', 9999999999999)"
  before=$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM trigger_state")
  local polls_before
  polls_before=$("${R[@]}" sqlite3 "$db" "SELECT state FROM trigger_state WHERE trigger = 'tick'")
  "${R[@]}" "$capsule" triggers run "${G[@]}" >/dev/null 2>"$log" &
  pid=$!
  n=0
  while [ $n -lt 300 ] && ! grep -q "another poller holds it" "$log"; do sleep 0.2; n=$((n + 1)); done
  stop $pid
  if grep -q "watch:tick: another poller holds it" "$log" &&
     [ "$("${R[@]}" sqlite3 "$db" "SELECT state FROM trigger_state WHERE trigger = 'tick'")" = "$polls_before" ]; then ok "$who: poller-respects-lease"
  else bad "$who: poller-respects-lease"; head -5 "$log" | sed 's/^/         /'; fi
  tt trigger-disable 0 "watch:tick disabled" triggers disable watch tick "${G[@]}"

  echo " push triggers (subscribe)"
  if [ "$who" = nobody ] && [ -n "${ASAN_OPTIONS:-}" ]; then
    # a subscription's sandbox runs a capsule process inside: in a sanitizer
    # build its runtime cannot map its shadow memory under the sandbox's
    # RLIMIT_DATA fallback as uid 65534 (the MCP suites skip likewise)
    echo "  (push triggers as uid 65534: skipped in a sanitizer build)"
    return 0
  fi
  "${R[@]}" "$capsule" policy set pusher noop allow "${G[@]}" >/dev/null
  tt push-enable 0 "pusher:ping enabled" triggers enable pusher ping "${G[@]}"
  tt push-on 0 'pusher:ping on each event: call named.add with params \{"cooldown_seconds":60,"min":3\}' triggers on pusher ping --call named add --param min=3 "${G[@]}"
  tt push-enable-broken 0 "pusher:broken enabled" triggers enable pusher broken "${G[@]}"
  # a subscription's egress: granted one host:port, it asks for another
  # port (refused by the proxy, nothing sent), then emits: the refusal is
  # stored with that event's audit record
  "${R[@]}" "$capsule" grant pusher --host 198.51.100.9:8080 "${G[@]}" >/dev/null
  tt push-enable-fetcher 0 "pusher:fetcher enabled" triggers enable pusher fetcher "${G[@]}"
  local plog=$dir/push.log pevents
  before=$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events WHERE capability = 'pusher'")
  "${R[@]}" "$capsule" triggers run "${G[@]}" >"$dir/push.out" 2>"$plog" &
  pid=$!
  n=0
  while [ $n -lt 600 ] && { [ "$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events WHERE capability = 'pusher'")" -lt $((before + 5)) ] ||
    [ "$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events WHERE capability = 'pusher' AND trigger = 'fetcher'")" = 0 ]; }; do sleep 0.2; n=$((n + 1)); done
  stop $pid; st=$?
  pevents=$("${R[@]}" sqlite3 "$db" "SELECT count(*) FROM events WHERE capability = 'pusher'")
  if [ $st = 0 ] && grep -q "stopped (SIGTERM)" "$plog" && [ "$pevents" -ge $((before + 5)) ]; then ok "$who: push-events-stored-and-stops"
  else bad "$who: push-events-stored-and-stops (exit $st, $pevents events)"; head -5 "$plog" | sed 's/^/         /'; fi
  if grep -q "subscribing to pusher:ping (a push trigger: not polled)" "$plog"; then ok "$who: push-not-polled"; else bad "$who: push-not-polled"; fi
  if grep -q '^{"summary":"ping 1","data":{"n":1}}$' "$dir/push.out" && ! grep -q '"ping 2"' "$dir/push.out"; then ok "$who: push-event-printed-non-object-dropped"
  else bad "$who: push-event-printed-non-object-dropped"; fi
  if grep -q "named.add not called: the trigger's filter declined the event" "$plog" &&
     [ "$(grep -c "named.add on the event: ok" "$plog")" = 1 ] && grep -q "named.add not called: within its cooldown (60 s)" "$plog"; then ok "$who: push-filter-and-cooldown"
  else bad "$who: push-filter-and-cooldown"; grep "named.add" "$plog" | head -5 | sed 's/^/         /'; fi
  if grep -q "pusher:broken: the subscription ended: .*cannot reach the feed" "$plog"; then ok "$who: push-subscribe-throws-logged"
  else bad "$who: push-subscribe-throws-logged"; fi
  if "${R[@]}" grep -q "unsubscribed after" "$state/logs/pusher.log"; then ok "$who: push-unsubscribed-on-sigterm"; else bad "$who: push-unsubscribed-on-sigterm"; fi
  tt push-event-audited 0 "pusher\.trigger:ping +trigger " audit "${G[@]}"
  local erows
  erows=$("${R[@]}" sqlite3 "$db" "SELECT e.decision, e.host, e.port, a.tool, a.decision FROM egress e LEFT JOIN audit a ON a.seq = e.call_seq WHERE e.capability = 'pusher' ORDER BY e.seq")
  if echo "$erows" | grep -qx "deny|198.51.100.9|8081|trigger:fetcher|trigger"; then ok "$who: push-egress-with-its-event"
  else bad "$who: push-egress-with-its-event"; echo "$erows" | head -5 | sed 's/^/         /'; fi
  "${R[@]}" "$capsule" triggers disable pusher fetcher "${G[@]}" >/dev/null
  # a poll's egress: stored with the audit record of the event it found
  tt poll-fetches 0 '"summary":"polled"' triggers poll pusher fetchpoll "${G[@]}"
  erows=$("${R[@]}" sqlite3 "$db" "SELECT e.decision, e.host, e.port, a.tool, a.decision FROM egress e LEFT JOIN audit a ON a.seq = e.call_seq WHERE e.capability = 'pusher' ORDER BY e.seq")
  if echo "$erows" | grep -qx "deny|198.51.100.9|8082|trigger:fetchpoll|trigger"; then ok "$who: poll-egress-with-its-event"
  else bad "$who: poll-egress-with-its-event"; echo "$erows" | head -5 | sed 's/^/         /'; fi
  tt push-disable 0 "pusher:ping disabled" triggers disable pusher ping "${G[@]}"
  "${R[@]}" "$capsule" triggers disable pusher broken "${G[@]}" >/dev/null
}

# Fetch through the egress proxy: capsule runs in a network namespace of
# the test's own whose only other address (198.51.100.9, TEST-NET-2) is a
# second namespace with a small HTTP server; no packet leaves the host.
ns1="" ns2=""
if [ "$(id -u)" = 0 ] && ip netns add capsule-talos-a-$$ 2>/dev/null; then
  ns1=capsule-talos-a-$$ ns2=capsule-talos-b-$$
  ip netns add "$ns2"
  trap 'kill $(jobs -p) 2>/dev/null; ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null; rm -rf "$work"' EXIT
  ip -n "$ns1" link set lo up && ip -n "$ns2" link set lo up &&
    ip -n "$ns1" link add ctalos0 type veth peer name ctalos1 netns "$ns2" &&
    ip -n "$ns1" addr add 198.51.100.7/24 dev ctalos0 && ip -n "$ns2" addr add 198.51.100.9/24 dev ctalos1 &&
    ip -n "$ns1" link set ctalos0 up && ip -n "$ns2" link set ctalos1 up ||
    { echo "FAIL: cannot set up the test namespaces"; exit 1; }
  # the server also plays an OAuth provider's token endpoint (POST /token,
  # RFC 6749 section 6): refresh token rt-N gives access token at-N+1 and
  # refresh token rt-N+1; anything else is invalid_grant
  cat >"$work/srv.mjs" <<'JS'
import http from 'node:http';
http.createServer((q, s) => {
  if (q.method !== 'POST' || q.url !== '/token') return s.end('served ' + q.method + ' ' + q.url);
  let body = '';
  q.on('data', (c) => (body += c));
  q.on('end', () => {
    const f = new URLSearchParams(body);
    const m = /^rt-(\d+)$/.exec(f.get('refresh_token') || '');
    s.setHeader('content-type', 'application/json');
    if (f.get('grant_type') !== 'refresh_token' || !m || f.get('client_id') !== 'cid' || f.get('client_secret') !== 'csecret') {
      s.statusCode = 400;
      return s.end(JSON.stringify({ error: 'invalid_grant' }));
    }
    const n = Number(m[1]) + 1;
    s.end(JSON.stringify({ access_token: `at-${n}`, refresh_token: `rt-${n}`, expires_in: 3600, token_type: 'Bearer' }));
  });
}).listen(8080, '198.51.100.9', () => console.log('up'));
JS
  ip netns exec "$ns2" node "$work/srv.mjs" >"$work/srv.log" 2>&1 &
  for _ in $(seq 50); do grep -q up "$work/srv.log" && break; sleep 0.1; done
else
  echo "  note: no network namespace (not root?): fetch through the proxy is not tested"
fi
# the suites run inside the first namespace: nsenter execs the command (a
# shell function or ip netns exec would stay its parent), so the pid the
# poller tests signal is capsule's own
inns=()
[ -n "$ns1" ] && inns=(nsenter --net="/run/netns/$ns1")

echo "as root"
suite root "${inns[@]}" env
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$capsule" 2>/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$esbuild" 2>/dev/null; then
  echo "as uid 65534"
  suite nobody "${inns[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$work/nobody"
else
  echo "  note: not root, or uid 65534 cannot reach capsule or esbuild; the unprivileged half is skipped"
fi
finish talos
