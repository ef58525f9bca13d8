import { Writable } from 'node:stream';
import pino from 'pino';

/** A pino logger whose lines are kept, for tests that check what was logged. */
export function captureLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: pino(sink), lines };
}
