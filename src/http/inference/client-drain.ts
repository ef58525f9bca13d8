import type { ServerResponse } from 'node:http';

import type { ClientDrain } from '../../metered/sink.ts';

/**
 * Waits until a streaming client has taken what is buffered for it. A client that stops reading
 * would otherwise hold the stream, its reservation and a provider connection for ever, so the wait
 * ends as 'stalled' once the client accepted no byte for `idleMs` (the same silence the gateway
 * allows a provider between chunks). A client that reads slowly but keeps reading is waited for.
 */
export function waitForClient(raw: ServerResponse, idleMs: number): Promise<ClientDrain> {
  return new Promise((resolve) => {
    let last = unsent(raw);
    const check = setInterval(() => {
      const now = unsent(raw);
      const progressed = now.queued < last.queued || now.handleQueued !== last.handleQueued;
      last = now;
      if (!progressed) done('stalled');
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

/**
 * What is still waiting to leave the gateway's socket. Nothing is written while the wait lasts,
 * so `writableLength` falling, or the handle's write queue (libuv's unsent bytes; not public API,
 * hence the guard) changing at all, means the kernel took bytes: libuv only moves on to the next
 * batch once the previous one went out. The kernel's own buffers (megabytes on a fast link) are
 * invisible from here: a client reading them counts once the kernel asks for more.
 */
function unsent(raw: ServerResponse): { queued: number; handleQueued: number } {
  const handle = (raw.socket as unknown as { _handle?: { writeQueueSize?: unknown } } | null)?._handle;
  const handleQueued = typeof handle?.writeQueueSize === 'number' ? handle.writeQueueSize : Number.POSITIVE_INFINITY;
  return { queued: raw.writableLength, handleQueued };
}
