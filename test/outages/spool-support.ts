import { after, before } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { tempDir } from '../support/engines.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { chatBody } from './support.ts';

export interface SpoolGateway {
  h: ChatHarness;
  spoolDir: string;
  /** Unhandled rejections seen while the suite ran (a settle path must leave none). */
  rejections: unknown[];
  /** The PostgreSQL server (engine 'postgres'), to stop and start in a test. */
  pg?: PostgresServer;
}

/**
 * The settle-spool attacks' gateway, one per suite (registers its before/after hooks): a chat
 * harness on `engine` (PostgreSQL started for it) with its spool in a fresh directory.
 */
export function useSpoolGateway(engine: 'sqlite' | 'postgres' = 'sqlite'): SpoolGateway {
  const ctx = { spoolDir: '', rejections: [] } as unknown as SpoolGateway;
  const onRejection = (r: unknown) => ctx.rejections.push(r);
  before(async () => {
    process.on('unhandledRejection', onRejection);
    ctx.spoolDir = tempDir();
    if (engine === 'postgres') ctx.pg = await startPostgres();
    ctx.h = await startChatHarness(engine, { ledger: { spoolDir: ctx.spoolDir } }, ctx.pg ? { databaseUrl: await ctx.pg.database() } : {});
  });
  after(async () => {
    process.off('unhandledRejection', onRejection);
    await ctx.h?.stop();
    await ctx.pg?.stop();
  });
  return ctx;
}

/** The sum of tollgate_charged_usdc_total over its labels. */
export async function chargedMetric(h: ChatHarness): Promise<number> {
  return (await h.gw.services.metrics.chargedUsdc.get()).values.reduce((a, v) => a + v.value, 0);
}

/** A streamed chat with `key`: its request id, status and whole body (an error reading it, as text). */
export async function streamChat(h: ChatHarness, key: string): Promise<{ id: string; status: number; text: string }> {
  const r = await fetch(`${h.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...chatBody, stream: true }),
  });
  return { id: r.headers.get('x-request-id')!, status: r.status, text: await r.text().catch((e) => `<<body error ${e}>>`) };
}
