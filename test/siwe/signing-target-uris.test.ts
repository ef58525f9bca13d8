import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError, signingTarget } from '../../src/gateway-client/gateway-client.ts';

// attack: an announced uri that is a string but not an http(s) URL is refused as a malformed announcement.
const base = { domain: 'gw.example', uri: 'https://gw.example', domains: ['gw.example'], statement: 's', chainId: 1, version: '1' } as never;

for (const uris of [['not a uri'], ['https://gw.example\nChain ID: 999'], ['javascript:alert(1)']]) {
  test(`an announced uri ${JSON.stringify(uris[0])} is refused as malformed (GatewayError), not handed to the signer`, () => {
    let got: unknown;
    try {
      got = signingTarget('https://gw.example', { ...(base as object), uris } as never);
    } catch (e) {
      got = e;
    }
    assert.ok(got instanceof GatewayError, `signingTarget returned ${JSON.stringify(got)}`);
  });
}
