import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chainFailure } from '../../src/metered/deployment-call.ts';
import { upstreamFailure } from '../../src/metered/upstream-error.ts';
import type { CatalogModel } from '../../src/providers/catalog.ts';

const model = { id: 'fake/routed' } as CatalogModel;
const twoRoutes = { model, routes: [{}, {}] };
const failedWith503 = (attempts: number, deploymentsTried: number, ended: 'exhausted' | 'deadline' | 'stopped') => ({
  ok: false as const,
  attempts,
  deploymentsTried,
  ended,
  last: { ok: false as const, action: 'retry' as const, status: 503, error: upstreamFailure('the provider answered 503') },
});

describe("the client's 502 when no deployment served", () => {
  test('every deployment called: says so, with the attempts', () => {
    assert.equal(
      chainFailure(twoRoutes, failedWith503(2, 2, 'exhausted')).message,
      'every deployment of fake/routed failed (2 attempts); the last: the provider answered 503; nothing was charged',
    );
  });

  test('the deadline ended the chain before the last deployment: counts only those called', () => {
    assert.equal(
      chainFailure(twoRoutes, failedWith503(1, 1, 'deadline')).message,
      '1 of 2 deployments of fake/routed failed (1 attempt); the last: the provider answered 503; nothing was charged',
    );
  });

  test("a stop (the request's own fault, or a non-streaming timeout) is the provider's answer alone", () => {
    assert.equal(chainFailure(twoRoutes, failedWith503(1, 1, 'stopped')).message, 'the provider answered 503; nothing was charged');
  });
});
