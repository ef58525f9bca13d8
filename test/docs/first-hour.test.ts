import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { freePort } from '../../src/devchain/ports.ts';
import { stopChild, track, waitForOutput } from '../../src/devchain/processes.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { openStorage } from '../../src/storage/database.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { until } from '../support/until.ts';

const BIN = join(process.cwd(), 'bin/tollgate.mjs');

/**
 * `npm start` and `npx tollgate` as the README's reader runs them from the checkout: this
 * checkout's bin/tollgate.mjs. `exec`, so that the gateway is the shell's own process and stops
 * on the test's SIGTERM like a Ctrl-C.
 */
const PRELUDE = `set -eo pipefail
npm() { if [ "$1" = start ]; then shift; [ "\${1:-}" = -- ] && shift; exec node ${BIN} serve "$@"; fi; command npm "$@"; }
npx() { if [ "$1" = tollgate ]; then shift; node ${BIN} "$@"; else command npx "$@"; fi; }`;

/**
 * The README's "Your first hour" for a newcomer with no provider account, block by block as
 * written: start with --fake-providers, make a wallet, credit it, create a key, chat, ledger-check.
 * The only departures from a fresh clone: the folder's tollgate.yaml gives the gateway a free port
 * on 127.0.0.1 and its own SQLite file (the built-in catalog stays), TOLLGATE_URL points the wallet
 * CLI at that port, and the placeholders (0xYourWallet, 0xYourPrivateKey, sk-...) are what the
 * earlier steps printed.
 */
describe('README: the first hour without a provider key, with --fake-providers', () => {
  let dir: string;
  let origin: string;
  let gateway: ChildProcess | undefined;
  let output = '';
  const env = () => ({ PATH: process.env.PATH, HOME: process.env.HOME, TOLLGATE_URL: origin });
  let wallet = { privateKey: '', address: '' };
  let apiKey = '';

  /** Runs one README block in the folder, to completion. */
  const run = (block: string, extraEnv: NodeJS.ProcessEnv = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile('bash', ['-c', `${PRELUDE}\n${block}`], { cwd: dir, env: { ...env(), ...extraEnv }, timeout: 120_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const ok = async (block: string) => {
    const r = await run(block);
    assert.equal(r.code, 0, `exit ${r.code}\n${block}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r.stdout;
  };
  /** The block with its placeholders replaced; each must be there, or the README moved on from this test. */
  const filled = (block: string, subs: [string | RegExp, string][]) =>
    subs.reduce((text, [from, to]) => {
      const next = text.replace(from, to);
      assert.notEqual(next, text, `${String(from)} is not in the block any more: update this test\n${block}`);
      return next;
    }, block);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-readme-first-hour-'));
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'tollgate.yaml'),
      stringify({ server: { host: '127.0.0.1', port, publicUrl: origin }, metrics: { port: 0 }, database: { url: `sqlite:${join(dir, 'tollgate.db')}` } }),
    );
  });
  after(async () => {
    if (gateway) await stopChild(gateway, 'SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  test('1. npm start -- --fake-providers: a warning names the fake providers, and the summary lists their models', async () => {
    gateway = spawn('bash', ['-c', `${PRELUDE}\n${docBlock('readme-start-fake')}`], { cwd: dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    track(gateway);
    gateway.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    gateway.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    await waitForOutput(gateway, /"msg":"tollgate listening on /, 'npm start -- --fake-providers', 30_000);
    // The warning goes to stderr, the listening line to stdout: the two pipes can be read in either order.
    await until(() => output.includes('built-in fake providers on'), 'the fake providers warning');
    assert.match(
      output,
      /^tollgate: --fake-providers: built-in fake providers on http:\/\/127\.0\.0\.1:\d+\/v1 and http:\/\/127\.0\.0\.1:\d+ serve fake\/canned-chat, /m,
    );
    assert.match(output, /canned \(no model is called\)[^\n]*never in production/);
    const summary = JSON.parse(output.split('\n').find((l) => l.includes('"msg":"tollgate listening'))!) as { models: Record<string, string[]> };
    assert.deepEqual(summary.models.fake, ['fake/canned-chat', 'fake/canned-embedding']);
    assert.deepEqual(summary.models['fake-anthropic'], ['fake-anthropic/canned-claude']);
    assert.ok(summary.models.openai, 'the built-in catalog is still served');
  });

  test('2. npx tollgate wallet new: a labelled private key and address', async () => {
    const out = await ok(docBlock('readme-wallet-new'));
    const m = /^private key {2}(0x[0-9a-f]{64})\naddress {6}(0x[0-9a-fA-F]{40})\n$/.exec(out);
    assert.ok(m, out);
    wallet = { privateKey: m[1]!, address: m[2]! };
  });

  test('3. npx tollgate admin credit: the wallet from step 2 holds $5', async () => {
    const out = await ok(filled(docBlock('readme-credit'), [['0xYourWallet', wallet.address]]));
    assert.match(out, /balance now \$5\.000000/);
  });

  test('4. wallet keys create: an API key, printed once', async () => {
    const out = await ok(filled(docBlock('readme-create-key'), [['0xYourPrivateKey', wallet.privateKey]]));
    apiKey = out.split('\n')[0]!;
    assert.match(apiKey, /^sk-/);
  });

  test('5. the first chat: a canned answer that says so, billed', async () => {
    const block = filled(docBlock('readme-first-chat'), [
      ['http://localhost:8080', origin],
      [/sk-\.\.\./, apiKey],
    ]);
    const answer = JSON.parse(await ok(block)) as { object: string; choices: { message: { content: string } }[]; usage: { charged_usdc: number } };
    assert.equal(answer.object, 'chat.completion');
    assert.match(answer.choices[0]!.message.content, /canned answer from Tollgate's built-in fake provider[\s\S]*no language model was called/);
    assert.ok(answer.usage.charged_usdc > 0, 'the chat was billed');
    const storage = openStorage(`sqlite:${join(dir, 'tollgate.db')}`);
    try {
      const { balance_usdc } = await getBalance(storage.db, wallet.address);
      assert.equal(balance_usdc, 5_000_000 - answer.usage.charged_usdc, 'the balance paid exactly the charge');
    } finally {
      await storage.close();
    }
  });

  test('6. npx tollgate admin ledger-check: ledger OK', async () => {
    assert.match(await ok(docBlock('readme-ledger-check')), /ledger OK/);
    const storage = openStorage(`sqlite:${join(dir, 'tollgate.db')}`);
    try {
      await assertLedgerConsistent(storage.db);
    } finally {
      await storage.close();
    }
  });
});
