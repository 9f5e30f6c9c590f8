// The dashboard in a real browser: Debian's chromium, headless, driven by
// puppeteer-core. Prints "ok NAME" or "FAIL NAME: why" per scenario.
// Usage: node browser.mjs CHROMIUM URL OPERATOR_TOKEN CAPS STATE CAPSULE...
// (CAPSULE... is the capsule command, perhaps behind setpriv)
import { spawn } from "node:child_process";
import http from "node:http";
import puppeteer from "puppeteer-core";

const [chromium, url, token, caps, state, ...capsule] = process.argv.slice(2);
const results = [];
const ok = (name) => results.push(`ok ${name}`);
const fail = (name, why) => results.push(`FAIL ${name}: ${String(why).split("\n")[0]}`);
const bound = { timeout: 60000 }; // a bound against a hang, not a timing assertion

function run(args) {
  return new Promise((resolve) => {
    const p = spawn(capsule[0], [...capsule.slice(1), ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("close", (code) => resolve({ code, out, err }));
  });
}
const call = (args) => run(["call", "--caps", caps, "--state", state, "asker", "dispatch", args]);

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run"],
});
const page = await browser.newPage();
const violations = [];
page.on("console", (m) => {
  if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
});

let base = url; // the signed-in session's pages: URL/s/KEY
try {
  // sign in through the form
  await page.goto(url + "/", { waitUntil: "load" });
  if (!page.url().endsWith("/login")) throw new Error(`not sent to /login: ${page.url()}`);
  await page.type("#token", token);
  await Promise.all([page.waitForNavigation(bound), page.click("#signin")]);
  // the session's pages live under its own path, its cookie scoped to it
  const home = new URL(page.url()).pathname;
  if (!/^\/s\/[0-9a-f]{64}\/$/.test(home)) throw new Error(`after sign-in at ${page.url()}`);
  base = url + home.slice(0, -1);
  const cookies = await page.cookies();
  const c = cookies.find((x) => x.name === "capsule_ui" && x.path === home.slice(0, -1));
  if (!c || !c.httpOnly || c.sameSite !== "Strict") throw new Error(`cookie ${JSON.stringify(cookies)}`);
  if (await page.evaluate(() => document.cookie.includes("capsule_ui")))
    throw new Error("the session cookie is readable from script");
  ok("login");
} catch (e) {
  fail("login", e);
}

try {
  // another service on 127.0.0.1 (another port), visited by the signed-in
  // operator: the browser sends it the host's cookies, but the session's
  // is scoped to its own path, so it is never among them
  const seen = [];
  const other = http.createServer((req, res) => {
    seen.push(req.headers.cookie || "");
    res.end("<p>another service</p>");
  });
  await new Promise((r) => other.listen(0, "127.0.0.1", r));
  const there = `http://127.0.0.1:${other.address().port}`;
  for (const p of ["/", "/login", "/approvals", "/s/"]) await page.goto(there + p, { waitUntil: "load" });
  other.close();
  const sid = (await page.cookies(base + "/")).find((x) => x.name === "capsule_ui");
  if (!sid) throw new Error("no session cookie to look for");
  if (seen.length < 4) throw new Error(`the other service saw ${seen.length} requests`);
  if (seen.some((c) => c.includes(sid.value))) throw new Error(`the session id was sent: ${seen.join(" | ")}`);
  ok("session-cookie-not-sent-to-other-port");
} catch (e) {
  fail("session-cookie-not-sent-to-other-port", e);
}

try {
  // the approvals page open; a call asks; its approval appears without a
  // reload (the event stream), one click approves it, the waiting call runs
  await page.goto(base + "/approvals", { waitUntil: "load" });
  await page.waitForFunction(() => document.body.dataset.live === "1", bound);
  const marker = `approve-me-${Date.now()}`;
  // a call that waits for the operator's decision on its pending approval
  const waiting = run(["call", "--caps", caps, "--state", state, "--wait-approval", "120", "asker",
    "dispatch", JSON.stringify({ text: marker })]);
  const row = await page.waitForFunction(
    (m) => [...document.querySelectorAll("#approvals tr")].find((tr) => tr.textContent.includes(m)),
    bound,
    marker,
  );
  const id = await row.evaluate((tr) => tr.id);
  await Promise.all([page.waitForNavigation(bound), page.click(`#${id} button.approve`)]);
  const notice = await page.$eval(".notice", (n) => n.textContent);
  if (!/Approved/.test(notice)) throw new Error(`notice: ${notice}`);
  const r = await waiting; // --wait-approval bounds it
  if (r.code !== 0 || !r.out.includes(marker)) throw new Error(`call exit ${r.code}: ${r.out}${r.err}`);
  ok("approve-live-call-runs");
} catch (e) {
  fail("approve-live-call-runs", e);
}

async function setPolicy(policy) {
  await page.goto(base + "/", { waitUntil: "load" });
  const form = 'tr[data-tool="asker.dispatch"] form.policy';
  await page.select(`${form} select[name=policy]`, policy);
  await Promise.all([page.waitForNavigation(bound), page.click(`${form} button`)]);
  return page.$eval('tr[data-tool="asker.dispatch"] td.policy', (td) => td.textContent);
}

try {
  // block, and the next call is refused; allow, and it runs with no approval
  const shown = await setPolicy("block");
  if (!shown.startsWith("block")) throw new Error(`shown: ${shown}`);
  const source = await page.$eval('tr[data-tool="asker.dispatch"] td.source', (td) => td.textContent);
  if (source !== "operator") throw new Error(`source: ${source}`);
  const blocked = await call('{"text":"blocked?"}');
  if (blocked.code !== 4 || !/blocked by policy/.test(blocked.err)) throw new Error(`blocked call: ${blocked.code} ${blocked.err}`);
  await setPolicy("allow");
  const allowed = await call('{"text":"allowed now"}');
  if (allowed.code !== 0 || !allowed.out.includes("allowed now")) throw new Error(`allowed call: ${allowed.code} ${allowed.err}`);
  ok("policy-change-takes-effect");
} catch (e) {
  fail("policy-change-takes-effect", e);
}

try {
  // the audit log filtered by capability and decision: the blocked call's record, chain ok
  await page.goto(base + "/audit", { waitUntil: "load" });
  await page.type("#f-capability", "asker");
  await page.type("#f-decision", "block");
  await Promise.all([page.waitForNavigation(bound), page.click("#search")]);
  const rows = await page.$$eval("tr.record", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
  );
  if (!rows.length) throw new Error("no record found");
  if (!rows.every((r) => r[3] === "asker" && r[5] === "block" && r[8] === "ok"))
    throw new Error(`rows: ${JSON.stringify(rows)}`);
  await Promise.all([page.waitForNavigation(bound), page.click("#verify-chain")]);
  const verify = await page.$eval("#verify", (p) => p.textContent);
  if (!/verifies/.test(verify)) throw new Error(`verify: ${verify}`);
  ok("audit-filter-finds-record");
} catch (e) {
  fail("audit-filter-finds-record", e);
}

try {
  // the audit page follows the log: a record appended by another process
  // (a call) offers a link to it without a reload
  await page.goto(base + "/audit", { waitUntil: "load" });
  await page.waitForFunction(() => document.body.dataset.live === "1", bound);
  if (await page.$("#audit-new")) throw new Error("a new-records link before any new record");
  const marker = `live-audit-${Date.now()}`;
  const r = await call(JSON.stringify({ text: marker }));
  if (r.code !== 0) throw new Error(`call exit ${r.code}: ${r.err}`);
  await page.waitForSelector("#audit-new", bound);
  await Promise.all([page.waitForNavigation(bound), page.click("#audit-new")]);
  const newest = await page.$eval("tr.record td:nth-child(4)", (td) => td.textContent);
  if (newest !== "asker") throw new Error(`newest record's capability: ${newest}`);
  ok("audit-live-new-record");
} catch (e) {
  fail("audit-live-new-record", e);
}

try {
  // the egress log: a call whose requests the proxy refused; its decisions
  // found by capability and decision, then by its call's link
  const r = await run(["call", "--caps", caps, "--state", state, "net", "dispatch", '{"text":"browser"}']);
  if (r.code !== 0) throw new Error(`net call exit ${r.code}: ${r.err}`);
  await page.goto(base + "/egress", { waitUntil: "load" });
  await page.type("#f-capability", "net");
  await page.type("#f-decision", "deny");
  await Promise.all([page.waitForNavigation(bound), page.click("#search")]);
  const rows = await page.$$eval("tr.egress", (trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
  );
  if (!rows.length) throw new Error("no decision found");
  if (!rows.every((x) => x[3] === "net" && x[5] === "deny" && x[7] === "198.51.100.9"))
    throw new Error(`rows: ${JSON.stringify(rows)}`);
  if (!rows.some((x) => x[8] === "8081" && x[9].includes("p<b>8081"))) throw new Error(`rows: ${JSON.stringify(rows)}`);
  await Promise.all([page.waitForNavigation(bound), page.click("tr.egress a")]);
  const call = await page.$$eval("tr.egress", (trs) => trs.length);
  if (call !== 2) throw new Error(`the call's decisions: ${call}`);
  ok("egress-filter-finds-decision");
} catch (e) {
  fail("egress-filter-finds-decision", e);
}

if (violations.length) fail("no-csp-violations", violations[0]);
else ok("no-csp-violations");
await browser.close();
for (const r of results) console.log(r);
