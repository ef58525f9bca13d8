import { Writable } from 'node:stream';
import pino from 'pino';

/** A destination that keeps every line a logger writes to it. */
export function capturedLines(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, sink };
}

/** A pino logger whose lines are kept, for tests that check what was logged. */
export function captureLogger() {
  const { lines, sink } = capturedLines();
  return { logger: pino(sink), lines };
}
