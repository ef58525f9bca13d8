import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { runTollgate } from '../support/cli.ts';

// A mistyped --gateway often lands on something that answers 200 with a web page (a dashboard, a
// proxy's welcome page, another service). The wallet commands must say so, not crash with a stack.
describe('tollgate wallet pointed at a server that answers 200 with HTML', () => {
  const key = `0x${'59'.repeat(32)}`;
  let server: Server;
  let url: string;
  const asked: string[] = [];

  before(async () => {
    server = createServer((req, res) => {
      asked.push(`${req.method} ${req.url?.split('?')[0]}`);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><html><body>Welcome to nginx!</body></html>');
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((done) => server.close(() => done())));

  for (const args of [['keys', 'list'], ['usage'], ['topups'], ['keys', 'create', '--label', 'x'], ['keys', 'revoke', '1'], ['topup', '--usd', '1']]) {
    test(`wallet ${args.join(' ')}: exit 2, a one-line error that names the URL and says it is not JSON`, async () => {
      asked.length = 0;
      const res = await runTollgate(['wallet', '--gateway', url, ...args], { TOLLGATE_WALLET_KEY: key });
      assert.equal(res.code, 2, res.stderr);
      assert.doesNotMatch(res.stderr, /TypeError|\n\s+at /, 'no stack trace');
      assert.match(res.stderr, /^tollgate: NOT_JSON: /);
      assert.match(res.stderr, new RegExp(`${url}.*text/html.*--gateway`));
      assert.ok(!res.stderr.includes(key.slice(2)) && !res.stdout.includes(key.slice(2)));
      // Only the first question was asked: nothing was signed and sent to the stranger.
      assert.equal(asked.length, 1, asked.join(', '));
    });
  }
});
