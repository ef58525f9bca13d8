import assert from 'node:assert/strict';
import OpenAI from 'openai';

/** The APIError openai-node rejects `promise` with; fails the test if it resolves or throws anything else. */
export async function rejection(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    return err;
  }
  assert.fail('the call succeeded');
}
