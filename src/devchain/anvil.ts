import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopChild, track, waitForOutput } from './processes.ts';

/**
 * A local EVM chain: the anvil binary from npm (@foundry-rs/anvil-linux-amd64, a dev dependency),
 * on 127.0.0.1 and a port the OS picks. Used by the tests and by `tollgate demo`.
 */
export interface Anvil {
  rpcUrl: string;
  chainId: number;
  /** Raw JSON-RPC, for anvil_* and evm_* cheat codes. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** The folder anvil writes old blocks' states to; removed by `stop()`, and when the process exits. */
  stateFolder: string;
  stop(): Promise<void>;
}

/**
 * Base Sepolia's chain id by default. Not 31337: the Permit2 runtime code that ships precompiled
 * has 31337 and another deployment address baked into its cached EIP-712 domain, so on 31337 it
 * would check signatures against the wrong domain. 84532 also has an x402 v1 network name
 * ("base-sepolia"), which lets tests send v1 payloads.
 */
export const DEV_CHAIN_ID = 84532;

export function anvilBinary(): string {
  try {
    return createRequire(import.meta.url).resolve('@foundry-rs/anvil-linux-amd64/bin/anvil');
  } catch {
    throw new Error('anvil is not installed: run `npm install` (it comes with the dev dependencies) and try again');
  }
}

/**
 * `blockTimeSeconds`: also mine an empty block that often, beside mining each transaction at once.
 * Without it an idle chain's latest block grows old, and a payment signed with validAfter a few
 * minutes back (the Python x402 client and x402-fetch use now - 600) fails simulation against it.
 */
export async function startAnvil(opts: { chainId?: number; blockTimeSeconds?: number; persistedStates?: number } = {}): Promise<Anvil> {
  const chainId = opts.chainId ?? DEV_CHAIN_ID;
  const mining = opts.blockTimeSeconds ? ['--block-time', String(opts.blockTimeSeconds), '--mixed-mining'] : [];
  // A chain that runs for hours (`tollgate demo --keep` mines a block a second) keeps at most this many old states on
  // disk; older blocks' state can no longer be read. Unbounded by default: a test's chain is short-lived.
  const history = opts.persistedStates === undefined ? [] : ['--max-persisted-states', String(opts.persistedStates)];
  // anvil writes the states of older blocks to disk (hundreds of MB for a test file's chain, gigabytes for a whole
  // suite) under ~/.foundry/anvil/tmp by default and never removes them, not even when it exits on SIGTERM. Its own
  // folder, removed when it stops, keeps full history (an old block's balance can still be read) without the leak.
  const stateFolder = mkdtempSync(join(tmpdir(), 'tollgate-anvil-'));
  const removeStateFolder = () => rmSync(stateFolder, { recursive: true, force: true, maxRetries: 5 });
  const args = ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(chainId), '--cache-path', stateFolder];
  const child = spawn(anvilBinary(), [...args, ...mining, ...history], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child, 'SIGKILL', removeStateFolder);
  // However the chain ends (stop(), or on its own), its folder goes with it; this listener runs before stopChild's.
  // When the whole process exits no event runs: track's afterKill above removes it then.
  child.once('exit', () => {
    try {
      removeStateFolder();
    } catch {
      // Left for the system's temporary-folder clean-up (npm test removes its run's folder).
    }
  });
  const stop = () => stopChild(child);
  const match = await waitForOutput(child, /Listening on 127\.0\.0\.1:(\d+)/, 'anvil').catch(async (err) => {
    await stop();
    throw err;
  });
  // Keep draining its output so a chatty anvil never blocks on a full pipe.
  child.stdout?.resume();
  child.stderr?.resume();
  const rpcUrl = `http://127.0.0.1:${match[1]}`;
  let id = 0;
  return {
    rpcUrl,
    chainId,
    async rpc<T>(method: string, params: unknown[] = []): Promise<T> {
      const res = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
      });
      const body = (await res.json()) as { result?: T; error?: { message: string } };
      if (body.error) throw new Error(`${method}: ${body.error.message}`);
      return body.result as T;
    },
    stateFolder,
    stop,
  };
}
