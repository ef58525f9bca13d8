import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * JSON logs with secrets kept out: credentials travel in headers (redacted by path) and, for SIWE
 * GETs, in the query string, whose values are never logged. Only method, path, query keys and the
 * client address describe a request.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers["x-payment"]',
          'req.headers["payment-signature"]',
          'req.headers.cookie',
          'headers.authorization',
        ],
        censor: '[redacted]',
      },
      serializers: {
        req: (req: { method?: string; url?: string; ip?: string }) => ({ method: req.method, url: redactQuery(req.url ?? ''), remoteAddress: req.ip }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
        err: pino.stdSerializers.err,
      },
    },
    // Asynchronous writes to stdout: under load, the lines logged while one write is in flight go
    // out together in the next, instead of one write system call per line. pino flushes what is
    // left when the process exits.
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const keys = url
    .slice(q + 1)
    .split('&')
    .filter(Boolean)
    .map((pair) => `${pair.split('=')[0]}=[redacted]`);
  return `${url.slice(0, q)}?${keys.join('&')}`;
}
