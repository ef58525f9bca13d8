import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { ephemeralRange, freePort, portsOutside } from '../../src/devchain/ports.ts';

/**
 * A port handed out for a server that binds later must not be one an outgoing connection can take in between: those
 * come from the kernel's ephemeral range (a test lost its port so, EADDRINUSE, and its file hung until the timeout).
 */
test('freePort answers a bindable port outside the ephemeral range, a different one each time', async () => {
  const [low, high] = ephemeralRange();
  const ports = new Set<number>();
  for (let i = 0; i < 20; i++) {
    const port = await freePort();
    assert.ok(port < low || port > high, `${port} is outside the ephemeral range (${low}-${high})`);
    ports.add(port);
  }
  assert.ok(ports.size >= 18, `random, not one port over and over (${ports.size} distinct of 20)`);
  const port = await freePort();
  const srv = createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', resolve);
  });
  await new Promise((r) => srv.close(r));
});

test('the ports it draws from, for the ranges kernels are tuned to', () => {
  // Linux's default, and the tunings that start the range low or end it early.
  assert.deepEqual(portsOutside([32_768, 60_999]), [
    [10_000, 32_767],
    [61_000, 65_535],
  ]);
  assert.deepEqual(portsOutside([10_500, 60_999]), [[61_000, 65_535]]);
  assert.deepEqual(portsOutside([9_000, 65_500]), [[1_024, 8_999]]);
  assert.deepEqual(portsOutside([1_024, 65_535]), [], 'nothing left: the caller falls back to the kernel');
  assert.deepEqual(portsOutside([49_152, 65_535]), [[10_000, 49_151]]);
});
