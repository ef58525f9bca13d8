import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientBucket } from '../../src/http/client-bucket.ts';

test('per-address limits count IPv4 by address, IPv6 by /64, and a gone client without failing', () => {
  assert.equal(clientBucket('203.0.113.7'), '203.0.113.7');
  assert.equal(clientBucket('::ffff:203.0.113.7'), '203.0.113.7', 'an IPv4-mapped address is its IPv4 address');
  assert.equal(clientBucket('2001:db8:1:2::9'), '2001:db8:1:2::/64');
  assert.equal(clientBucket('2001:0db8:0001:0002:ffff:0:0:9'), '2001:db8:1:2::/64', 'written out in full, the same /64');
  assert.equal(clientBucket('fe80::1%eth0'), 'fe80:0:0:0::/64', 'a zone id is not part of the address');
  assert.equal(clientBucket('::1'), '0:0:0:0::/64');
  // Node leaves request.ip undefined once the socket has closed (the fuzz run met it mid-request).
  assert.equal(clientBucket(undefined), 'gone');
});
