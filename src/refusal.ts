/**
 * A request refused with a reason the client should see: status, stable code, and a message that
 * says what to do next. Domain code (chat, providers, top-up) returns or throws these as values and
 * never knows how they are written: the web edge (src/http/errors.ts) renders one in the format the
 * route calls for (the specification's, OpenAI's, or an inbound protocol's own).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A 400; `param` names the request field at fault when there is one (OpenAI's shape shows it). */
export const badRequest = (message: string, extra?: Record<string, unknown> & { param?: string }) => new ApiError(400, 'VALIDATION_ERROR', message, extra);
export const unauthorized = (message: string) => new ApiError(401, 'UNAUTHORIZED', message);
export const notFound = (message: string) => new ApiError(404, 'NOT_FOUND', message);
