#!/usr/bin/env node
// The floor for bench/steady-cost.ts: the least a Node.js process can do to follow the node
// heartbeats. It lists the Leases in kube-node-lease and then watches them over one HTTPS
// connection with node:https alone, splits the stream into lines and JSON.parses each one; nothing
// else (no store, no decisions, no metrics, no rxjs). Whatever the controller costs above this, per
// lease event, is its own code; this much is the runtime's.
//
//   node [node flags] bench/watch-floor.mjs --kubeconfig=FILE [--read-every=MS]
//
// --read-every=MS reads the watch socket only once per MS (stops and starts its libuv stream handle,
// as src/watch/read-pacer.ts does): what reading on a cadence saves a bare process.
//
// Takes a JSON kubeconfig with a bearer token and inline CA (what src/localcluster writes). Prints
// `synced <n>` once the list is in, then `events <n>` on SIGTERM, and exits.
import { readFileSync } from 'node:fs';
import https from 'node:https';

const kcPath = process.argv.find((a) => a.startsWith('--kubeconfig='))?.slice('--kubeconfig='.length);
const readEvery = Number(
  process.argv.find((a) => a.startsWith('--read-every='))?.slice('--read-every='.length) ?? 0,
);
if (!kcPath) {
  console.error('usage: node bench/watch-floor.mjs --kubeconfig=FILE');
  process.exit(2);
}
const kc = JSON.parse(readFileSync(kcPath, 'utf8'));
const ctx = kc.contexts.find((c) => c.name === kc['current-context']).context;
const cluster = kc.clusters.find((c) => c.name === ctx.cluster).cluster;
const user = kc.users.find((u) => u.name === ctx.user).user;
const server = new URL(cluster.server);
const agent = new https.Agent({
  keepAlive: true,
  ca: Buffer.from(cluster['certificate-authority-data'], 'base64'),
});
const headers = { Authorization: `Bearer ${user.token}`, Accept: 'application/json' };
const LEASES = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

function get(path) {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: server.hostname, port: server.port, path, agent, headers }, resolve);
    req.on('error', reject);
  });
}

async function list() {
  let cont = '';
  let count = 0;
  let rv = '';
  do {
    const res = await get(`${LEASES}?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`);
    let body = '';
    res.setEncoding('utf8');
    for await (const chunk of res) body += chunk;
    const page = JSON.parse(body);
    count += page.items.length;
    rv = page.metadata.resourceVersion;
    cont = page.metadata.continue ?? '';
  } while (cont);
  return { count, rv };
}

let events = 0;
async function watch(rv) {
  for (;;) {
    const res = await get(
      `${LEASES}?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=1800`,
    );
    res.setEncoding('utf8');
    let partial = '';
    const handle = res.socket._handle;
    const ticker = readEvery > 0 ? setInterval(() => handle.readStart(), readEvery) : undefined;
    for await (const chunk of res) {
      if (ticker) handle.readStop();
      let start = 0;
      let nl = chunk.indexOf('\n');
      while (nl !== -1) {
        const line = partial + chunk.slice(start, nl);
        partial = '';
        const ev = JSON.parse(line);
        rv = ev.object.metadata.resourceVersion;
        events++;
        start = nl + 1;
        nl = chunk.indexOf('\n', start);
      }
      partial += chunk.slice(start);
    }
    clearInterval(ticker);
  }
}

process.on('SIGTERM', () => {
  console.log(`events ${events}`);
  process.exit(0);
});
const { count, rv } = await list();
console.log(`synced ${count}`);
await watch(rv);
