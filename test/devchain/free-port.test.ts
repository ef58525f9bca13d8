import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { freePort } from '../../src/devchain/ports.ts';

/**
 * A port handed out for a server that binds later must not be one an outgoing connection can take in between: those
 * come from the kernel's ephemeral range (a test lost its port so, EADDRINUSE, and its file hung until the timeout).
 */
test('freePort answers a bindable port below the ephemeral range, a different one each time', async () => {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const ports = new Set<number>();
  for (let i = 0; i < 20; i++) {
    const port = await freePort();
    assert.ok(port >= 10_000 && port < low!, `${port} is outside the ephemeral range (from ${low})`);
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
