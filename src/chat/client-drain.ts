import type { ServerResponse } from 'node:http';

export type ClientDrain = 'drained' | 'closed' | 'stalled';

/**
 * Waits until a streaming client has taken what is buffered for it. A client that stops reading
 * would otherwise hold the stream, its reservation and a provider connection for ever, so the wait
 * ends as 'stalled' once the client accepted no byte for `idleMs` (the same silence the gateway
 * allows a provider between chunks). A client that reads slowly but keeps reading is waited for.
 */
export function waitForClient(raw: ServerResponse, idleMs: number): Promise<ClientDrain> {
  return new Promise((resolve) => {
    // writableLength only falls while the wait lasts (nothing is written meanwhile): a check that
    // finds it no lower than the last one means no byte left for the client in a whole period.
    let queued = raw.writableLength;
    const check = setInterval(() => {
      const now = raw.writableLength;
      if (now < queued) queued = now;
      else done('stalled');
    }, idleMs);
    const onDrain = () => done('drained');
    const onClose = () => done('closed');
    function done(result: ClientDrain): void {
      clearInterval(check);
      raw.off('drain', onDrain);
      raw.off('close', onClose);
      resolve(result);
    }
    raw.once('drain', onDrain);
    raw.once('close', onClose);
  });
}
