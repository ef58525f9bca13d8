import pino, { type DestinationStream, type Logger } from 'pino';
import { batchedStdout } from './log-destination.ts';
import { refusalOf } from './refusal-log.ts';

/**
 * JSON logs with secrets kept out: credentials travel in headers (redacted by path) and, for SIWE
 * GETs, in the query string, whose values are never logged. Only method, path, query keys and the
 * client address describe a request.
 */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-payment', 'payment-signature', 'sign-in-with-x', 'cookie'];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: {
        // Every header that carries a credential: a key (authorization, x-api-key as the Anthropic
        // SDK sends it), a payment (x-payment, payment-signature) or a signed sign-in-with-x proof.
        // Only under `headers`: a `req` goes through its serializer first, which keeps no header at
        // all, so a path under `req` could never match and would only cost every request's log line
        // a clone and a second serialisation of its `req`.
        paths: CREDENTIAL_HEADERS.map((h) => `headers["${h}"]`),
        censor: '[redacted]',
      },
      serializers: {
        req: (req: { method?: string; url?: string; ip?: string }) => ({ method: req.method, url: redactQuery(req.url ?? ''), remoteAddress: req.ip }),
        // A refusal's code and field (refusal-log.ts), so the line says why a client was refused.
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode, ...refusalOf(res) }),
        err: pino.stdSerializers.err,
      },
    },
    // Asynchronous writes to stdout: under load, the lines logged while one write is in flight go
    // out together in the next, instead of one write system call per line (log-destination.ts).
    destination ?? batchedStdout(),
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
