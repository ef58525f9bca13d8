import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { track, waitForOutput } from '../../src/devchain/processes.ts';
import { BIN, runTollgate } from '../support/cli.ts';

/** True when nothing accepts connections at `url` any more. */
async function refuses(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return false;
  } catch (err) {
    return /ECONNREFUSED/.test(String((err as Error).cause));
  }
}

const urlsIn = (output: string) => ({
  gateway: output.match(/^ {4}gateway {10}(http:\/\/127\.0\.0\.1:\d+)/m)?.[1],
  chain: output.match(/^ {4}chain \(anvil\) {4}(http:\/\/127\.0\.0\.1:\d+)/m)?.[1],
  provider: output.match(/^ {4}fake provider {4}(http:\/\/127\.0\.0\.1:\d+)/m)?.[1],
});

/**
 * The channel agent's story as printed: one deposit, twenty requests each charged, the charges
 * claimed to the micro-USDC, the rest refunded, the agent's on-chain payment equal to the charges,
 * the ledger check and its on-chain audit clean, and fewer gas than `exact` would have spent.
 */
function assertChannelAgent(stdout: string): void {
  const tx = '0x[0-9a-f]{64}';
  assert.match(stdout, new RegExp(`deposit \\$1\\.000000 in ${tx}; charged \\d+ micro-USDC`));
  const served = stdout.match(/10 chat, 5 stream, 5 embedding; charged \(micro-USDC\) ([\d ]+) = (\d+) in all, no transaction/);
  assert.ok(served, 'the session line is printed');
  const charges = served[1]!.trim().split(' ').map(Number);
  const charged = Number(served[2]);
  assert.equal(charges.length, 20);
  assert.ok(charges.every((c) => c > 0));
  assert.equal(
    charges.reduce((a, b) => a + b, 0),
    charged,
  );
  assert.match(stdout, new RegExp(`claimed ${charged} micro-USDC in ${tx}\n {4}settled to the receiver in ${tx}\n`));
  const usd = (micro: number) => (micro / 1e6).toFixed(6).replace('.', '\\.');
  assert.match(stdout, new RegExp(`refunded \\$${usd(1_000_000 - charged)} in ${tx}\n`));
  assert.match(
    stdout,
    new RegExp(
      `the agent paid ${usd(charged)} USDC on chain = charged; payTo received it\n {4}` +
        `deposited \\$1\\.000000 = claimed \\$${usd(charged)} \\+ refunded \\$${usd(1_000_000 - charged)}\n`,
    ),
  );
  assert.match(stdout, /ledger check and its on-chain audit clean/);
  const gas = stdout.match(/= (\d+) for 20 requests \(the agent sent none\)\n {4}exact: (\d+) a request .* = (\d+) for 20/);
  assert.ok(gas, 'the gas lines are printed');
  assert.equal(Number(gas[2]) * 20, Number(gas[3]));
  assert.ok(Number(gas[1]) < Number(gas[3]) / 3, `a channel session (${gas[1]} gas) costs a fraction of 20 exact settlements (${gas[3]})`);
}

describe('tollgate demo', () => {
  test('runs the whole story offline, every step green, ends with the ledger check, and stops everything', async () => {
    // A temporary folder of its own, to see that the demo leaves nothing behind in it (its chain's folder included).
    const temp = mkdtempSync(join(tmpdir(), 'tollgate-demo-temp-'));
    const res = await runTollgate(['demo'], { TMPDIR: temp });
    const left = readdirSync(temp);
    rmSync(temp, { recursive: true, force: true });
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.deepEqual(left, [], 'the demo removed everything it put in the temporary folder');
    const steps = [
      'local chain: anvil',
      'deploy USDC',
      'fake OpenAI-compatible provider',
      'gateway on SQLite',
      'GET /v1/models',
      'POST /v1/topup: pay $5 in USDC with @x402/fetch',
      'POST /v1/auth/keys',
      'POST /v1/chat/completions with the openai SDK',
      'the same, streamed',
      'GET /v1/usage/:wallet',
      'DELETE /v1/auth/keys/:id: revoke the key, then try it again',
      'ledger check',
      'POST /v1/chat/completions with no key: a new wallet (10.000000 USDC) deposits into a channel',
      '19 more requests (chat, streamed chat, embeddings): one signed voucher each',
      'claim and settle now',
      'GET /v1/channels/refund',
      'channel check',
    ];
    const lines = res.stdout.split('\n');
    for (const step of steps) {
      const at = lines.findIndex((l) => l.startsWith(`→ ${step}`));
      assert.ok(at >= 0, `step "${step}" is shown`);
      assert.match(lines.slice(at + 1).find((l) => /^ {2}(ok|FAILED)/.test(l)) ?? '', /^ {2}ok \(\d+\.\d\ds\)/, `step "${step}" succeeded`);
    }
    assert.match(res.stdout, /waiting for the payment to settle on chain/, 'progress during the on-chain wait');
    assert.match(res.stdout, /credited \$5\.000000; balance \$5\.000000/);
    assert.match(res.stdout, /refused as expected: 401 UNAUTHORIZED\n/);
    assert.match(res.stdout, /invariants hold; payTo received 5\.000000 USDC on chain = credited \$5\.000000 = balance \$4\.\d{6} \+ charged \$0\.\d{6}/);
    assertChannelAgent(res.stdout);
    assert.match(res.stdout, /Demo finished in \d+\.\ds/);
    assert.match(res.stdout, /stopped the chain, the provider and the gateway/);
    assert.ok(!/FAILED/.test(res.stdout));
    // Without --keep no secret is printed: the key is masked.
    assert.doesNotMatch(res.stdout, /sk-[A-Za-z0-9_-]{20,}/);
    const chain = res.stdout.match(/→ local chain: anvil\n.*\n {4}(http:\/\/127\.0\.0\.1:\d+)/)?.[1];
    assert.ok(chain && (await refuses(chain)), 'anvil was stopped');
  });

  test('--keep leaves a usable stack with the wallet key and an API key; Ctrl-C stops all of it and removes its folder', async () => {
    const temp = mkdtempSync(join(tmpdir(), 'tollgate-demo-temp-'));
    const child = spawn(process.execPath, [BIN, 'demo', '--keep'], { env: { PATH: process.env.PATH, TMPDIR: temp }, stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    let output = '';
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    let folder: string | undefined;
    try {
      await waitForOutput(child, /TOLLGATE_WALLET_KEY=0x[0-9a-f]{64} npx tollgate wallet/, 'tollgate demo --keep', 60_000);
      const urls = urlsIn(output);
      const key = output.match(/^ {4}API key {10}(sk-\S+)$/m)?.[1];
      const wallet = output.match(/^ {4}test wallet {6}(0x[0-9a-fA-F]{40})$/m)?.[1];
      const log = output.match(/^ {4}gateway log {6}(\S+)$/m)?.[1];
      folder = log ? dirname(log) : undefined;
      assert.ok(urls.gateway && urls.chain && urls.provider && key && wallet && folder && existsSync(folder), output);
      // The dashboard URL is printed, and its page offers the demo's wallet (a normal start never does: test/dashboard/serving.test.ts).
      assert.match(output, new RegExp(`^ {4}dashboard {8}${urls.gateway}/ `, 'm'));
      const page = await fetch(`${urls.gateway}/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<script type="module" src="\/dashboard\/app.js">/);
      const dashboard = (await (await fetch(`${urls.gateway}/v1/dashboard/config`)).json()) as { demo_wallet: { address: string } | null };
      assert.equal(dashboard.demo_wallet?.address.toLowerCase(), wallet.toLowerCase());

      const chat = await fetch(`${urls.gateway}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'demo-chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(chat.status, 200);
      const usage = (await (await fetch(`${urls.gateway}/v1/usage/${wallet}`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        balance_usdc: number;
      };
      assert.ok(usage.balance_usdc > 4_900_000 && usage.balance_usdc < 5_000_000);

      // The demo's folder and its chain's are in the temporary folder while it runs...
      assert.deepEqual(
        readdirSync(temp)
          .map((f) => f.replace(/-\w{6}$/, ''))
          .sort(),
        ['tollgate-anvil', 'tollgate-demo'],
      );
      child.kill('SIGINT');
      assert.equal(await exited, 130);
      // ...and Ctrl-C removed both.
      assert.deepEqual(readdirSync(temp), []);
      for (const url of [urls.gateway!, urls.chain!, urls.provider!]) assert.ok(await refuses(url), `${url} was stopped`);
      assert.ok(folder && !existsSync(folder), `Ctrl-C removed the temporary folder ${folder}`);
    } finally {
      // Even when an assertion above failed: Ctrl-C first, so the demo stops its chain itself, then SIGKILL.
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        await Promise.race([exited, sleep(10_000)]);
      }
      child.kill('SIGKILL');
      // And this test leaves nothing in the temporary folder.
      if (folder) rmSync(folder, { recursive: true, force: true });
      rmSync(temp, { recursive: true, force: true });
    }
  });

  test('a bad --port is refused with exit code 2', async () => {
    const res = await runTollgate(['demo', '--port', 'eighty']);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /--port must be a port number, got "eighty"/);
  });
});
