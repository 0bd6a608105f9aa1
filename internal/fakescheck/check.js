// Drives the project's fakes (cmd/fakeservers) with the vendors' own
// clients from npm and fails on any call a client cannot complete: a fake
// that answers what the real service would not, or in a shape the
// vendor's client refuses, is caught here rather than in production.
// Every call tidybot makes of a service is driven (docs/adapters.md,
// "How the fakes are checked"). Usage: npm ci && node check.js; the Go
// command is `go run ./cmd/fakeservers` from the module root unless
// FAKESERVERS names a built binary.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { todoist } from './todoist.js';
import { openai } from './openai.js';
import { slack } from './slack.js';
import { telegram } from './telegram.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function startFakes() {
  const [cmd, args] = process.env.FAKESERVERS
    ? [process.env.FAKESERVERS, []]
    : ['go', ['run', './cmd/fakeservers']];
  const child = spawn(cmd, args, { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] });
  const first = new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => resolve(JSON.parse(line)));
    child.once('exit', (code) => reject(new Error(`fakeservers exited (${code}) before naming its servers`)));
    child.once('error', reject);
  });
  return { child, ready: first };
}

// check runs one suite: each step is [name, async fn]; a step that throws
// fails, with the client's own error.
async function check(service, steps) {
  let failed = 0;
  for (const [name, fn] of steps) {
    try {
      await fn();
      console.log(`ok   ${service}: ${name}`);
    } catch (err) {
      failed++;
      const detail = err?.issues ? JSON.stringify(err.issues).slice(0, 600) : String(err?.stack ?? err).split('\n').slice(0, 3).join(' | ');
      console.log(`FAIL ${service}: ${name}: ${detail}`);
    }
  }
  return { service, total: steps.length, failed };
}

const { child, ready } = startFakes();
let code = 0;
try {
  const env = await ready;
  const results = [];
  for (const [service, suite] of [['todoist', todoist], ['openai', openai], ['slack', slack], ['telegram', telegram]]) {
    results.push(await check(service, suite(env)));
  }
  for (const r of results) {
    console.log(`${r.service}: ${r.total - r.failed}/${r.total} calls completed`);
    if (r.failed) code = 1;
  }
} catch (err) {
  console.error('fakes-check:', err);
  code = 1;
} finally {
  child.stdin.end();
}
process.exitCode = code;
