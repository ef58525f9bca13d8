import { after, afterEach, before, beforeEach } from 'node:test';
import { startChatHarness, type ChatHarness } from './chat-harness.ts';

/**
 * The five failures every client test renders: one chat request each, set up on a harness whose
 * chat limit is RATE_LIMIT_PER_MINUTE a wallet. Each case gets fresh wallets, so the order of the
 * cases does not matter.
 */
export const RATE_LIMIT_PER_MINUTE = 1;

export interface ErrorCase {
  status: 400 | 401 | 402 | 429 | 502;
  code: string;
  /** The key and model the client should use; the harness is already set up to fail. */
  prepare(h: ChatHarness): Promise<{ key: string; model: string }>;
}

export const ERROR_CASES: ErrorCase[] = [
  { status: 400, code: 'VALIDATION_ERROR', prepare: async (h) => ({ key: (await h.wallet(1_000_000)).key, model: 'shared-name' }) },
  { status: 401, code: 'UNAUTHORIZED', prepare: async () => ({ key: 'sk-not-a-real-key', model: 'chat-small' }) },
  { status: 402, code: 'INSUFFICIENT_BALANCE', prepare: async (h) => ({ key: (await h.wallet(10)).key, model: 'chat-small' }) },
  {
    status: 429,
    code: 'RATE_LIMITED',
    async prepare(h) {
      // The wallet's one request this minute is spent (a 402: the limit counts before the balance).
      const { key } = await h.wallet(0);
      await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }),
      });
      return { key, model: 'chat-small' };
    },
  },
  {
    status: 502,
    code: 'UPSTREAM_ERROR',
    async prepare(h) {
      h.fake.behaviour = { failStatus: 503 };
      return { key: (await h.wallet(1_000_000)).key, model: 'chat-small' };
    },
  },
];

/** The message each case carries (the text after openai-node's "<status> " prefix). */
export const MESSAGES: Record<ErrorCase['status'], RegExp> = {
  400: /^model "shared-name" is offered by several providers; use one of fake\/shared-name, other\/shared-name$/,
  401: /^invalid or revoked API key$/,
  402: /^available balance 10 micro-USDC cannot cover this request's reserved cost of \d+; top up with POST \/v1\/topup, or lower max_tokens\. It reserves \d+ for up to \d+ prompt tokens and max_tokens \d+: its prompt alone needs \d+ \(at max_tokens 1\), more than the 10 available$/,
  429: /^rate limit exceeded$/,
  502: /^the provider answered 503: injected failure 503; nothing was charged$/,
};

/**
 * Inside a describe: a chat harness answering errors in `format` (the config default when absent),
 * started before and stopped after the suite, with the ledger checked after every test. Returns a
 * getter, since the harness exists only once `before` has run.
 */
export function errorFormatSuite(format: 'spec' | 'openai' | undefined, chatPerMinute = RATE_LIMIT_PER_MINUTE): () => ChatHarness {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { ...(format ? { errors: { format } } : {}), rateLimits: { chat: { perMinute: chatPerMinute } } });
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());
  return () => h;
}
