// capsule's Talos shim, run as `node --input-type=module -e <this file>`
// inside the plugin's sandbox (embedded in capsule at build time).
//
// Reads one JSON request on stdin:
//   {op: "call"|"poll"|"subscribe"|"probe", plugin, module, function, trigger,
//    functions, args, config, state, taskConfig, sources, nodePath}
// `sources` maps each TypeScript file of the plugin (absolute path) to the
// JavaScript capsule compiled for it on the host (esbuild, cached by content
// hash): a module hook serves them, so the plugin's own URLs, relative
// imports and node_modules stay as written. Bare imports the plugin's
// node_modules lacks are looked up in `nodePath` (the operator's).
// Writes one line on fd 1: {"ok": true, ...} or {"ok": false, "error"}.
// The plugin's console and process.stdout go to stderr (the tool log).
//
// The contract is Talos's own (apps/server/src/plugins/loader.ts, runner.ts,
// triggers/poller.ts): a handler is `handlers[name]` or a named export,
// called as handler(args, config) with config one flat object of strings
// (credentials and settings); a trigger is `triggers[id].poll(config,
// state, config)` returning {event, newState}, then, when a task is attached
// (`taskConfig`, the call's params), `triggers[id].filter(event, taskConfig)`
// deciding whether it runs (`pass`); a push trigger is
// `triggers[id].subscribe(config, config, emit)` (triggers/subscriber.ts),
// each emitted event a line of its own; `init(logger, services)` is called
// first when exported.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { writeSync } from 'node:fs';
import { Console } from 'node:console';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const req = JSON.parse(input);
const where = req.op === 'poll' || req.op === 'subscribe' ? `trigger ${req.trigger}` : req.op === 'call' ? `function ${req.function}` : 'its entry';
const name = `plugin ${req.plugin}, ${where}`;
let answered = false;
let renewed = null; // the OAuth tokens refreshOAuth got, for capsule to store
const answer = (o) => {
  if (answered) return;
  answered = true;
  if (renewed && o.ok) o.oauth = renewed;
  let line;
  try {
    line = JSON.stringify(o);
  } catch (e) {
    line = JSON.stringify({ ok: false, error: `${name}: the value returned is not JSON (${e.message}); return a string or a JSON-serialisable value` });
  }
  writeSync(1, line + '\n');
};
const fail = (msg) => answer({ ok: false, error: `${name}: ${msg}` });
// the event loop ran dry with the handler's promise still pending
process.on('beforeExit', () => { fail('its promise never settled (nothing was left to wait for)'); process.exit(0); });

// the plugin may print: keep fd 1 for the answer
const logger = new Console({ stdout: process.stderr, stderr: process.stderr });
globalThis.console = logger;
process.stdout.write = process.stderr.write.bind(process.stderr);

const hooks = `
import { pathToFileURL, fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
let sources = {}, nodePath = null, plugin = '';
export function initialize(d) { sources = d.sources; nodePath = d.nodePath; plugin = d.plugin; }
const missing = (e) => e && (e.code === 'ERR_MODULE_NOT_FOUND' || e.code === 'ERR_UNSUPPORTED_DIR_IMPORT');
export async function resolve(spec, ctx, next) {
  try { return await next(spec, ctx); } catch (e) {
    if (!missing(e)) throw e;
    const parent = ctx.parentURL && ctx.parentURL.startsWith('file:') ? fileURLToPath(ctx.parentURL) : null;
    if (parent && (spec.startsWith('./') || spec.startsWith('../'))) {
      const base = new URL(spec, ctx.parentURL);
      const path = fileURLToPath(base);
      for (const c of [path.replace(/\\.m?js$/, '.ts'), path + '.ts', path + '/index.ts', path + '.js', path + '.mjs'])
        if (sources[c] || existsSync(c)) return { url: pathToFileURL(c).href, shortCircuit: true };
      throw e;
    }
    if (nodePath && !spec.startsWith('/') && !/^[a-z]+:/.test(spec)) {
      try { return await next(spec, { ...ctx, parentURL: pathToFileURL(nodePath + '/node_modules/').href }); }
      catch (e2) { if (!missing(e2)) throw e2; }
    }
    const err = new Error('cannot resolve the import "' + spec + '"' + (parent ? ' of ' + parent : '') +
      ': it is not in the plugin\\'s node_modules' + (nodePath ? ' nor in ' + nodePath + '/node_modules' : '') +
      '; run \`capsule plugin install\` on the plugin, or name a node_modules with \`capsule config set ' + plugin + ' node_path DIR\`');
    err.code = 'ERR_MODULE_NOT_FOUND';
    throw err;
  }
}
export async function load(url, ctx, next) {
  if (url.startsWith('file:')) {
    const code = sources[fileURLToPath(url)];
    if (code !== undefined) return { format: 'module', source: code, shortCircuit: true };
  }
  return next(url, ctx);
}
`;

function lookup(mod, fn) {
  const shapes = [mod.handlers, mod, mod.default && mod.default.handlers, mod.default];
  for (const s of shapes) if (s && typeof s[fn] === 'function') return s[fn].bind(s);
  return null;
}

// Node 20's fetch ignores HTTP_PROXY: where the plugin may reach the
// network at all, it is through capsule's egress proxy, so fetch's global
// dispatcher becomes undici's ProxyAgent (capsule binds undici in read-only)
async function proxyFetch() {
  const proxy = process.env.HTTPS_PROXY || process.env.HTTP_PROXY;
  const hint = proxy
    ? `; capsule's egress proxy allows only the hosts granted to ${req.plugin} (capsule grant list)`
    : `; ${req.plugin} has no network until the operator grants a host (capsule grant ${req.plugin} --host HOST[:PORT])`;
  // a failed fetch says why capsule may have stopped it (the error stays the same object)
  const inner = globalThis.fetch;
  globalThis.fetch = async (...a) => {
    try {
      return await inner(...a);
    } catch (e) {
      if (e instanceof Error && !e.message.includes('capsule')) e.message += hint;
      throw e;
    }
  };
  if (!proxy || !req.undici) return;
  const { ProxyAgent, setGlobalDispatcher } = await import(pathToFileURL(req.undici).href);
  setGlobalDispatcher(new ProxyAgent(proxy));
}

async function loadPlugin() {
  await proxyFetch();
  register('data:text/javascript,' + encodeURIComponent(hooks), {
    data: { sources: req.sources || {}, nodePath: req.nodePath || null, plugin: req.plugin },
  });
  let mod;
  try {
    mod = await import(pathToFileURL(req.module).href);
  } catch (e) {
    throw new Error(`cannot load ${req.module}: ${(e instanceof Error ? e.message : String(e)).split('\n')[0]}`);
  }
  if (typeof mod.init === 'function') {
    const services = { getService: () => undefined, registerService: () => {} };
    const log = { info: (m) => logger.info(m), warn: (m) => logger.warn(m), error: (m) => logger.error(m), debug: (m) => logger.debug(m) };
    await mod.init(log, services);
  }
  return mod;
}

// The OAuth access token renewed before the plugin runs, when capsule
// gives a token endpoint (`oauth.tokenUrl`, the operator's) and the token
// is missing or expires within a minute: RFC 6749's refresh grant, posted
// with fetch, so through capsule's egress proxy under the plugin's grants
async function refreshOAuth() {
  const o = req.oauth;
  const c = req.config;
  if (!o || !o.tokenUrl) return;
  if (c.access_token && Number(c.token_expiry || 0) - Date.now() > 60000) return;
  if (!c.refresh_token)
    throw new Error(`the OAuth access token ${c.access_token ? 'has expired' : 'is not set'} and there is no refresh_token to renew it (capsule cred set ${req.plugin} refresh_token)`);
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: c.refresh_token });
  if (c.client_id) body.set('client_id', c.client_id);
  if (c.client_secret) body.set('client_secret', c.client_secret);
  let r, j;
  try {
    r = await fetch(o.tokenUrl, { method: 'POST', body, headers: { accept: 'application/json' } });
    j = await r.json().catch(() => ({}));
  } catch (e) {
    throw new Error(`cannot renew the OAuth token at ${o.tokenUrl}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!r.ok || typeof j.access_token !== 'string' || !j.access_token)
    throw new Error(`cannot renew the OAuth token: ${o.tokenUrl} answered ${r.status}${typeof j.error === 'string' ? ` (${j.error})` : ''}; set a new refresh_token with \`capsule cred set ${req.plugin} refresh_token\``);
  const seconds = Number(j.expires_in) > 0 ? Number(j.expires_in) : 3600;
  renewed = {
    access_token: j.access_token,
    refresh_token: typeof j.refresh_token === 'string' && j.refresh_token ? j.refresh_token : c.refresh_token,
    token_expiry: String(Date.now() + seconds * 1000),
  };
  Object.assign(c, renewed);
}

function probe(mod) {
  const missing = (req.functions || []).filter((f) => !lookup(mod, f));
  if (missing.length === (req.functions || []).length && missing.length > 0)
    return fail(`the module exports none of the declared functions (${missing.join(', ')}); export them in \`handlers\` or by name`);
  if (missing.length) return fail(`the module does not export the declared function(s) ${missing.join(', ')}`);
  // which triggers push (Talos subscribes to those and does not poll them)
  const subscribe = {};
  for (const [id, t] of Object.entries(mod.triggers || {}))
    subscribe[id] = !!t && typeof t.subscribe === 'function';
  answer({ ok: true, subscribe });
}

// Talos's subscriber: subscribe(config, settings, emit) returns the
// function that ends the subscription; each emitted event is one line
// ({ok, event, pass}); SIGTERM (capsule stopping) unsubscribes and exits
async function subscribe(mod) {
  const t = mod.triggers && mod.triggers[req.trigger];
  if (!t || typeof t.subscribe !== 'function')
    return fail(`the module exports no \`triggers.${req.trigger}.subscribe\` function`);
  const emit = (event) => {
    if (!event || typeof event !== 'object' || Array.isArray(event))
      return logger.error(`${name}: an emitted event that is not an object was dropped`);
    let line;
    try {
      line = JSON.stringify({ ok: true, event, pass: passes(t, event) });
    } catch (e) {
      return logger.error(`${name}: an emitted event that is not JSON was dropped (${e.message})`);
    }
    writeSync(1, line + '\n');
  };
  const unsubscribe = await t.subscribe(req.config, req.config, emit);
  const stop = async () => {
    try {
      if (typeof unsubscribe === 'function') await unsubscribe();
    } catch (e) {
      logger.error(`${name}: unsubscribe threw: ${e instanceof Error ? e.message : String(e)}`);
    }
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  writeSync(1, JSON.stringify({ ok: true, subscribed: true, ...(renewed ? { oauth: renewed } : {}) }) + '\n');
  setInterval(() => {}, 1 << 30); // alive until stopped
  await new Promise(() => {});
}

async function poll(mod) {
  const t = mod.triggers && mod.triggers[req.trigger];
  if (!t || typeof t.poll !== 'function')
    return fail(`the module exports no \`triggers.${req.trigger}.poll\` function`);
  const r = await t.poll(req.config, req.state, req.config);
  if (!r || typeof r !== 'object' || Array.isArray(r))
    return fail('poll returned ' + (r === null ? 'null' : typeof r) + ', not {event, newState}');
  if (!r.newState || typeof r.newState !== 'object' || Array.isArray(r.newState))
    return fail('poll returned no newState object (it must return {event, newState})');
  if (r.event !== null && r.event !== undefined && (typeof r.event !== 'object' || Array.isArray(r.event)))
    return fail('poll returned an event that is not an object or null');
  answer({ ok: true, event: r.event ?? null, newState: r.newState, pass: passes(t, r.event ?? null) });
}

// Talos's poller: a trigger's optional filter(event, taskConfig) decides
// whether the task attached to it runs; a filter that throws does not
// stop it ("invalid config: skip the filter")
function passes(t, event) {
  if (!event || req.taskConfig == null || typeof t.filter !== 'function') return true;
  try {
    return !!t.filter(event, req.taskConfig);
  } catch {
    return true;
  }
}

try {
  const mod = await loadPlugin();
  if (req.op !== 'probe') await refreshOAuth();
  if (req.op === 'probe') probe(mod);
  else if (req.op === 'poll') await poll(mod);
  else if (req.op === 'subscribe') await subscribe(mod);
  else {
    const fn = lookup(mod, req.function);
    if (!fn) fail('the module exports no such function (neither in `handlers` nor by name)');
    else {
      const result = await fn(req.args, req.config);
      answer({ ok: true, result: result === undefined ? null : result });
    }
  }
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
}
process.exit(0);
