import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { tempDir } from '../support/engines.ts';
import { runTollgate, type CliResult } from '../support/cli.ts';

/** A port something else already listens on. */
async function occupiedPort(servers: Server[]): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/** The whole of stderr is one line: what to fix, no stack trace. */
function oneLine(res: CliResult, pattern: RegExp): void {
  assert.equal(res.code, 2, `exit code 2 (stderr: ${res.stderr})`);
  assert.match(res.stderr, pattern);
  assert.equal(res.stderr.trimEnd().split('\n').length, 1, `one line: ${res.stderr}`);
  assert.ok(!res.stderr.includes('    at '), 'no stack trace');
  assert.ok(!/ {2}/.test(res.stderr), 'no double space');
}

describe('start-up failures: one line naming what to fix, exit code 2', () => {
  const servers: Server[] = [];
  let dir: string;
  const serve = (config: Record<string, unknown>, name: string) => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      stringify({ server: { host: '127.0.0.1', port: 0 }, metrics: { port: 0 }, database: { url: `sqlite:${join(dir, name, 'tollgate.db')}` }, ...config }),
    );
    return runTollgate(['--config', file, 'serve']);
  };
  before(() => {
    dir = tempDir();
  });
  after(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

  test('the API port is in use', async () => {
    const port = await occupiedPort(servers);
    oneLine(
      await serve({ server: { host: '127.0.0.1', port } }, 'api-port'),
      new RegExp(`^tollgate: cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use .*server\\.port or TOLLGATE_PORT\\n$`),
    );
  });

  test('the metrics port is in use', async () => {
    const port = await occupiedPort(servers);
    oneLine(await serve({ metrics: { port } }, 'metrics-port'), new RegExp(`^tollgate: the metrics port 127\\.0\\.0\\.1:${port} is in use .*metrics\\.port`));
  });

  test('PostgreSQL does not answer (the password stays hidden)', async () => {
    const port = await closedPort();
    const res = await serve({ database: { url: `postgres://tollgate:hunter2secret@127.0.0.1:${port}/tollgate` } }, 'postgres');
    oneLine(
      res,
      new RegExp(
        `^tollgate: cannot reach PostgreSQL at postgres://tollgate:\\*\\*\\*@127\\.0\\.0\\.1:${port}/tollgate \\(ECONNREFUSED\\); start it, or fix database\\.url`,
      ),
    );
    assert.ok(!res.stderr.includes('hunter2secret') && !res.stdout.includes('hunter2secret'), 'the password is not printed');
  });

  test('a password typed without percent-encoding (@ or # in it) stays hidden too', async () => {
    const port = await closedPort();
    // The URL parser reads `#…` as a fragment and the first `@` as the end of the user part, so the
    // rest of such a password sits where a host or fragment would be printed.
    for (const [name, password] of [
      ['at-hash', 'hunter2@pw#part9'],
      ['hash', '12#hunter2part9'],
    ] as const) {
      const res = await serve({ database: { url: `postgres://tollgate:${password}@127.0.0.1:${port}/tollgate` } }, `postgres-${name}`);
      oneLine(res, /^tollgate: cannot reach PostgreSQL at postgres:.*; start it, or fix database\.url/);
      for (const part of ['hunter2', 'part9']) assert.ok(!res.stderr.includes(part) && !res.stdout.includes(part), `"${part}" is not printed: ${res.stderr}`);
    }
  });

  test('a PostgreSQL URL that cannot be parsed (port out of range, unclosed IPv6 bracket) names database.url, for serve and migrate', async () => {
    for (const [name, url] of [
      ['bad-port', 'postgres://tollgate:hunter2secret@127.0.0.1:99999/tollgate'],
      ['bad-bracket', 'postgres://tollgate:hunter2secret@[::1/tollgate'],
    ] as const) {
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, stringify({ server: { host: '127.0.0.1', port: 0 }, metrics: { port: 0 }, database: { url } }));
      for (const command of ['serve', 'migrate']) {
        const res = await runTollgate(['--config', file, command]);
        oneLine(res, /^tollgate: database\.url is not a URL PostgreSQL can read .*percent-encode/);
        assert.ok(!res.stderr.includes('hunter2secret') && !res.stdout.includes('hunter2secret'), 'the password is not printed');
      }
    }
  });

  test('the SQLite path goes through a file', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a folder');
    oneLine(
      await serve({ database: { url: `sqlite:${join(file, 'tollgate.db')}` } }, 'parent-file'),
      new RegExp(`^tollgate: database\\.url: the SQLite file .* cannot be created because ${file} is a file, not a folder`),
    );
  });

  test('the SQLite folder cannot be created (/proc/nope), at once instead of hanging in migrate', async () => {
    oneLine(
      await serve({ database: { url: 'sqlite:/proc/nope/x.db' } }, 'proc'),
      /^tollgate: database\.url: cannot create the folder \/proc\/nope for the SQLite file \(ENOENT\)/,
    );
    const file = join(dir, 'proc.yaml');
    oneLine(await runTollgate(['--config', file, 'migrate']), /cannot create the folder \/proc\/nope/);
  });

  test('the config file is not YAML, is a folder, or does not exist', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'server:\n  port: [8080\n');
    oneLine(await runTollgate(['--config', bad, 'serve']), /^tollgate: config file .*bad\.yaml is not valid YAML \(line \d+, column \d+\): /);
    oneLine(await runTollgate(['--config', dir, 'serve']), /^tollgate: cannot read config file .*: it is a folder, not a file/);
    oneLine(await runTollgate(['--config', join(dir, 'missing.yaml'), 'serve']), /^tollgate: config file .*missing\.yaml does not exist/);
  });
});

describe('tollgate --version', () => {
  test('prints the package version, as --version and -V', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const res = await runTollgate([flag]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, `${version}\n`);
    }
  });
});
