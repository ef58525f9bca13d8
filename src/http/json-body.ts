import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, badRequest } from '../refusal.ts';
import { runInLane } from '../cpu-lane.ts';

export interface JsonBounds {
  maxDepth: number;
  /** Containers plus separators: about the number of values. */
  maxValues: number;
}

/**
 * A number token longer than this is refused. A number whose rounding is close to a tie (2^-1075
 * written out in its 700-odd digits) costs V8 big-integer arithmetic in proportion to its digits:
 * 20,000 of them are 100+ ms in one JSON.parse. A double needs at most 17 significant digits, so no
 * real client writes more than a few dozen characters for one.
 */
export const MAX_NUMBER_CHARS = 64;

/**
 * JSON.parse costs time per value, per key byte and per digit of a number, not per byte: 10 MiB of
 * `{}` objects takes seconds, 10 MiB of one string milliseconds, and V8 follows nesting as deep as
 * the bytes go. So the raw bytes are scanned first, in one pass that skips string contents
 * natively, and a body beyond the bounds is refused before anything is built from it.
 */
export function jsonBoundsProblem(body: Buffer, bounds: JsonBounds): string | null {
  // Object keys are hashed and interned, so their total length costs too (a few thousand
  // 1,000-byte keys take tens of ms). An average of 32 bytes a key is far above real requests.
  const maxKeyBytes = bounds.maxValues * 32;
  let depth = 0;
  let values = 0;
  let keyBytes = 0;
  const n = body.length;
  for (let i = 0; i < n; i++) {
    const c = body[i]!;
    if (c === 0x22 /* " */) {
      const end = closingQuote(body, i + 1);
      if (end < 0) return null; // unterminated: JSON.parse reports it as invalid JSON
      if (nextNonSpace(body, end + 1) === 0x3a /* : */) {
        keyBytes += end - i - 1;
        if (keyBytes > maxKeyBytes) return `its object keys are longer than ${maxKeyBytes} bytes in total`;
      }
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > bounds.maxDepth) return `it is nested deeper than ${bounds.maxDepth} levels`;
      if (++values > bounds.maxValues) return `it has more than ${bounds.maxValues} values`;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    } else if (c === 0x2c /* , */) {
      if (++values > bounds.maxValues) return `it has more than ${bounds.maxValues} values`;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39) /* 0-9 */) {
      const end = numberEnd(body, i);
      if (end - i > MAX_NUMBER_CHARS) return `it has a number written in more than ${MAX_NUMBER_CHARS} characters`;
      i = end - 1;
    }
  }
  return null;
}

/** Index just past the run of number characters (digits, sign, point, exponent) starting at `from`. */
function numberEnd(body: Buffer, from: number): number {
  let i = from;
  while (i < body.length && isNumberChar(body[i]!)) i++;
  return i;
}

const isNumberChar = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x2b || c === 0x65 || c === 0x45;

/** Index of the quote that closes a string whose contents start at `from`, or -1. */
function closingQuote(body: Buffer, from: number): number {
  let at = body.indexOf(0x22, from);
  while (at >= 0) {
    let slashes = 0;
    while (body[at - 1 - slashes] === 0x5c /* \ */) slashes++;
    if (slashes % 2 === 0) return at;
    at = body.indexOf(0x22, at + 1);
  }
  return -1;
}

function nextNonSpace(body: Buffer, from: number): number | undefined {
  let i = from;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  return body[i];
}

const receivedBytes = new WeakMap<FastifyRequest, number>();

/**
 * The size of a JSON request body as it was received, before parsing; when the parser did not see
 * it, the size of the parsed body serialised again. Stored Responses bound a request's expansion by
 * it (src/stored-responses/resolve.ts).
 */
export function jsonBodyBytes(request: FastifyRequest): number {
  return receivedBytes.get(request) ?? Buffer.byteLength(JSON.stringify(request.body) ?? '');
}

/**
 * The size a request's body will have, known on its headers: its Content-Length (the body is read
 * to exactly that, and never decompressed); undefined without one (a chunked body).
 */
export function declaredBodyBytes(request: FastifyRequest): number | undefined {
  const declared = request.headers['content-length'];
  return declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
}

/**
 * A body up to this size is decoded and parsed at once (well under a millisecond); a larger one in
 * a turn of the CPU lane of its own, so that bodies arriving together are not parsed back to back.
 */
const PARSED_AT_ONCE = 64 * 1024;

/**
 * Replaces Fastify's JSON parser with one that checks the bounds first and then parses as Fastify
 * does (including its __proto__ and constructor.prototype refusals).
 */
export function boundedJsonParser(app: FastifyInstance, bounds: JsonBounds): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    receivedBytes.set(request, raw.length);
    // Bodies are not decompressed: a compressed one would otherwise be refused as invalid JSON,
    // which points the client at the wrong fault (RFC 9110 §15.5.16: an unsupported coding is 415).
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity') {
      done(
        new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${encoding.slice(0, 40)} is not accepted; send the JSON body uncompressed`),
        undefined,
      );
      return;
    }
    const problem = jsonBoundsProblem(raw, bounds);
    if (problem) {
      const remedy = `send a flatter, smaller JSON document with numbers of at most ${MAX_NUMBER_CHARS} characters`;
      done(badRequest(`request body refused: ${problem}; ${remedy}`), undefined);
      return;
    }
    if (raw.length <= PARSED_AT_ONCE) {
      parse(request, raw.toString('utf8'), done);
      return;
    }
    runInLane({
      advance() {
        parse(request, raw.toString('utf8'), done);
        return true;
      },
    }).catch((error: unknown) => done(error as Error, undefined));
  });
}
