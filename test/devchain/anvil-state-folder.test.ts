import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { startAnvil } from '../../src/devchain/anvil.ts';
import { until } from '../support/until.ts';

const ACCOUNT = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'; // anvil's first prefunded account

/**
 * anvil writes older blocks' states to disk and never removes them itself: under ~/.foundry/anvil/tmp, 3-4 GB were
 * left behind per run of the suite (71 GB filled the disk) before each chain got a folder of its own that goes when
 * the chain stops, and when the process that started it exits without stopping it.
 */
test('a stopped chain leaves no state on disk, and keeps full history while it runs', async (t) => {
  const anvil = await startAnvil();
  t.after(() => anvil.stop());
  // Enough blocks that anvil moves states out of memory (about 80 MB written for 1,024).
  await anvil.rpc('anvil_mine', ['0x400']);
  assert.ok(readdirSync(anvil.stateFolder).length > 0, 'anvil wrote its states into the folder it was given');
  const atBlockOne = await anvil.rpc<string>('eth_getBalance', [ACCOUNT, '0x1']);
  assert.ok(BigInt(atBlockOne) > 0n, 'an old block still answers: the history is kept, only in our folder');
  await anvil.stop();
  assert.equal(existsSync(anvil.stateFolder), false, 'stop() removed the state folder');
});

test('a chain told to keep N old states keeps at most N on disk (the demo left running for hours)', async (t) => {
  const anvil = await startAnvil({ persistedStates: 100 });
  t.after(() => anvil.stop());
  await anvil.rpc('anvil_mine', ['0x800']);
  // One file per persisted state, in one folder per chain under the folder it was given.
  const states = readdirSync(anvil.stateFolder).flatMap((d) => readdirSync(join(anvil.stateFolder, d)));
  assert.ok(states.length > 0 && states.length <= 100, `${states.length} states kept on disk after 2,048 blocks`);
  const latest = await anvil.rpc<string>('eth_blockNumber');
  assert.ok(BigInt(await anvil.rpc<string>('eth_getBalance', [ACCOUNT, latest])) > 0n, 'the latest block still answers');
});

/** Whether `pid` is a live process: absent, or a zombie nobody reaped yet, is not. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\S+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
}

for (const [how, ending] of [
  ['exits', 'process.exit(0);'],
  // The test runner stops a file past its timeout with SIGTERM; test/support/exit-on-signal.mjs makes that an exit.
  ['is stopped with SIGTERM', "await import('./test/support/exit-on-signal.mjs'); process.kill(process.pid, 'SIGTERM'); await new Promise(() => {});"],
] as const) {
  test(`a process that ${how} with its chain still running stops the chain and removes its folder`, async () => {
    const script = `
      import { startAnvil } from './src/devchain/anvil.ts';
      const anvil = await startAnvil();
      await anvil.rpc('anvil_mine', ['0x400']);
      const pid = (await import('node:child_process')).execFileSync('pgrep', ['-f', anvil.stateFolder]).toString().trim();
      console.log(JSON.stringify({ folder: anvil.stateFolder, pid: Number(pid) }));
      ${ending}
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, NODE_TEST_CONTEXT: 'child' },
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
    });
    // 'close', not 'exit': every line it printed has been read.
    await new Promise((r) => child.once('close', r));
    const { folder, pid } = JSON.parse(out.trim()) as { folder: string; pid: number };
    assert.match(folder, /tollgate-anvil-/);
    assert.ok(pid > 0, 'the chain was found running before the exit');
    await until(() => !alive(pid), `the chain (pid ${pid}) was stopped`, 3_000);
    assert.equal(existsSync(folder), false, `the exiting process removed ${folder}`);
  });
}
