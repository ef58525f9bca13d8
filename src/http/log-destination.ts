import pino, { type DestinationStream } from 'pino';

/**
 * Standard output for the logs: pino's asynchronous writer (sonic-boom), handed the lines of one
 * turn of the event loop together instead of one at a time. The writer measures the byte length of
 * its pending text on every write it is given, which flattens all of it into a new string: line by
 * line under load, that copied the whole pending batch once per request (about 5 KB a request at
 * saturation, bench/README.md "The allocation budget of a JSON request"). Handed over per turn, a
 * batch is joined once. The lines keep their order; what is pending when the process exits is handed
 * over first (this handler is registered before the writer's own, which then flushes it).
 */
export function batchedStdout(
  makeWriter: () => Pick<ReturnType<typeof pino.destination>, 'write' | 'flush'> = () => pino.destination({ dest: 1, sync: false }),
): DestinationStream & { flush(cb?: (err?: Error) => void): void } {
  let pending: string[] = [];
  let scheduled = false;
  const handOver = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.length === 1 ? pending[0]! : pending.join('');
    pending = [];
    writer.write(text);
  };
  process.on('exit', handOver);
  const writer = makeWriter();
  return {
    write(line: string) {
      pending.push(line);
      if (!scheduled) {
        scheduled = true;
        setImmediate(handOver);
      }
    },
    flush(cb) {
      handOver();
      writer.flush(cb);
    },
  };
}
