import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redactDatabaseUrl } from '../../src/storage/redact-url.ts';

describe('redactDatabaseUrl: database URLs in logs and messages', () => {
  test('hides the password in the user part and in password-like query parameters', () => {
    assert.equal(redactDatabaseUrl('postgres://tollgate:s3cr3t@db.internal:5432/tollgate'), 'postgres://tollgate:***@db.internal:5432/tollgate');
    assert.equal(
      redactDatabaseUrl('postgresql://db/tollgate?user=t&password=s3cr3t&sslmode=require'),
      'postgresql://db/tollgate?user=t&password=***&sslmode=require',
    );
  });

  test('hides a password typed without percent-encoding, whatever @ # / ? it holds', () => {
    assert.equal(redactDatabaseUrl('postgres://u:p@ss#w0rd@db:5432/tollgate'), 'postgres://u:***@db:5432/tollgate');
    assert.equal(redactDatabaseUrl('postgres://u:12#secret@db/tollgate'), 'postgres://u:***@db/tollgate');
    assert.equal(redactDatabaseUrl('postgres://u:a/b?c@db/tollgate'), 'postgres://u:***@db/tollgate');
    assert.equal(redactDatabaseUrl('postgres://u:p@ss@db/tollgate?password=x'), 'postgres://u:***@db/tollgate?password=***');
  });

  test('leaves URLs without secrets as they are, and never prints an unparsable one', () => {
    assert.equal(redactDatabaseUrl('sqlite:./data/tollgate.db'), 'sqlite:./data/tollgate.db');
    assert.equal(redactDatabaseUrl('postgres://localhost/tollgate'), 'postgres://localhost/tollgate');
    assert.equal(redactDatabaseUrl('postgres://u:p@[bad'), 'postgres:(unparsable URL)');
  });
});
