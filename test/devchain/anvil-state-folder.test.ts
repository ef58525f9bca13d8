import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { startAnvil } from '../../src/devchain/anvil.ts';

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

test('a process that exits with its chain still running removes the chain and its folder', async () => {
  const script = `
    import { startAnvil } from './src/devchain/anvil.ts';
    const anvil = await startAnvil();
    await anvil.rpc('anvil_mine', ['0x400']);
    console.log(anvil.stateFolder);
    process.exit(0);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const code = await new Promise((r) => child.once('exit', r));
  assert.equal(code, 0);
  const folder = out.trim();
  assert.match(folder, /tollgate-anvil-/);
  assert.equal(existsSync(folder), false, `the exiting process removed ${folder}`);
});
