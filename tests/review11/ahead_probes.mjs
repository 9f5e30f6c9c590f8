// Attempts on serve --grpc's lease asked ahead (src/gateway/instance.c
// ahead_fresh, instance_keeper.c, selu_channels.c) with the C Selu example
// (text-tools): edits that might slip between the lease asked ahead and
// the call taking it, a user's call taking another's, the keeper's inotify
// descriptor left in serve's processes or in the server's sandbox.
// Prints "blocked NAME", "ok NAME" or "WORKS NAME: why"; exits 1 when one works.
// Usage: node ahead_probes.mjs ORCH_PROTO TARGET ALICE_TOKEN BOB_TOKEN LOG PKG OUTSIDE SERVE_PID
import { execSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../examples/selu-node/package.json'));
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [orchPath, target, alice, bob, log, pkg, outside, spid] = process.argv.slice(2);
const odef = loader.loadSync(orchPath, { keepCase: true, defaults: true });
const opkg = grpc.loadPackageDefinition(odef).selu.capability.v1;
const orch = new opkg.Capability(target, grpc.credentials.createInsecure());
let failed = 0;
const say = (what, name, cond, why) => {
  if (cond) console.log(`${what} ${name}`);
  else {
    failed++;
    console.log(`WORKS ${name}: ${why}`);
  }
};
const meta = (t) => { const m = new grpc.Metadata(); m.add('authorization', `Bearer ${t}`); return m; };
const enc = (o) => Buffer.from(JSON.stringify(o));
const wcall = (text, tok = alice) => new Promise((resolve) => {
  orch.Invoke({ tool_name: 'text-tools.word_count', args_json: enc({ text }) }, meta(tok),
    { deadline: Date.now() + 60000 }, (err, res) => resolve({ err, res }));
});
const words = (r) => { try { return JSON.parse(r.res.result_json.toString()).words; } catch { return -1; } };
const count = (re) => (fs.readFileSync(log, 'utf8').match(re) || []).length;
const lives = () => [count(/the package changed/g), count(/serving leases/g)];
const sh = (cmd) => execSync(cmd, { shell: '/bin/bash', stdio: ['ignore', 'ignore', 'inherit'] });

// each edit right after a warm call (whose next lease is then asked
// ahead): the next call must not reach the server started before it
const edits = [
  ['a file in a new subdirectory', (i) => sh(`mkdir "${pkg}/sub${i}" && echo x >"${pkg}/sub${i}/f"`)],
  ['a file renamed over another', (i) => sh(`echo v${i} >"${outside}/tmp${i}" && mv "${outside}/tmp${i}" "${pkg}/added.txt"`)],
  ['a mode changed', () => sh(`chmod 0600 "${pkg}/added.txt"`)],
  ['only the times changed', () => sh(`touch -d '2001-01-01' "${pkg}/added.txt"`)],
  ['the package directory swapped for a copy', (i) => sh(`mv "${pkg}" "${outside}/old${i}" && cp -a "${outside}/old${i}" "${pkg}"`)],
  ['a hard link made outside, written there', (i) => sh(`ln "${pkg}/added.txt" "${outside}/link${i}" && echo w >>"${outside}/link${i}"`)]
];
sh(`echo first >"${pkg}/added.txt"`);
for (let i = 0; i < edits.length; i++) {
  const [name, edit] = edits[i];
  await wcall('a b');
  const warm = await wcall('a b');
  const before = lives();
  edit(i);
  const r = await wcall('x y z');
  const after = lives();
  say('blocked', `the call right after an edit (${name}) reaches the old server`,
    words(warm) === 2 && words(r) === 3 && after[0] === before[0] + 1 && after[1] === before[1] + 1,
    `answers ${words(warm)} ${words(r)}; retired, started ${before} -> ${after}`);
}

// bob's first call right after alice's (her next lease asked ahead): his
// own instance starts; it does not take hers
await wcall('a b');
await wcall('a b');
let before = lives();
let r = await wcall('b o b', bob);
let after = lives();
say('blocked', "bob's call takes alice's lease asked ahead", words(r) === 3 && after[1] === before[1] + 1,
  `started ${before[1]} -> ${after[1]}: ${JSON.stringify(r.err || words(r))}`);
// alternating, each answered; no further instance
before = lives();
let right = 0;
for (let i = 0; i < 10; i++) right += words(await wcall(Array(i + 1).fill('w').join(' '), i % 2 ? bob : alice)) === i + 1;
after = lives();
say('ok', 'alternating users each answered on their own warm instance', right === 10 && after[1] === before[1],
  `${right} right, started ${before[1]} -> ${after[1]}`);

// the keeper's inotify descriptor: not kept by serve's processes past
// the call (does not grow with calls), never in the server's processes
const inotify = (pid) => {
  let n = 0;
  try {
    for (const f of fs.readdirSync(`/proc/${pid}/fd`))
      try { n += fs.readlinkSync(`/proc/${pid}/fd/${f}`) === 'anon_inode:inotify'; } catch {}
  } catch {}
  return n;
};
const family = () => { // serve and its descendants
  const kids = (p) => { try { return fs.readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').split(' ').filter(Boolean); } catch { return []; } };
  const all = [spid];
  for (let i = 0; i < all.length; i++) all.push(...kids(all[i]));
  return all;
};
// serve's own process holds one of its own (the watch on --caps: absent
// while it rescans instead, as when this user's inotify instances ran
// out, and back with the next reload): never counted
const held = () => family().reduce((n, p) => n + (p === spid ? Math.max(inotify(p) - 1, 0) : inotify(p)), 0);
const n1 = held();
for (let i = 0; i < 40; i++) await wcall('a b');
await new Promise((res) => setTimeout(res, 500));
const n2 = held();
say('blocked', "the keeper's inotify descriptors kept by serve's processes", n2 <= n1, `${n1} after the edits, ${n2} after 40 more calls`);
const servers = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
  try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('selu-text/capability'); } catch { return false; }
});
const leaked = servers.filter((p) => inotify(p) > 0);
say('blocked', "an inotify descriptor in the server's sandbox", servers.length > 0 && leaked.length === 0,
  `${servers.length} server processes, with one: ${leaked}`);
orch.close();
process.exit(failed ? 1 : 0);
