import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PaidRequestDeps } from '../../payments/paid-request/deps.ts';
import type { Services } from '../../services.ts';
import { siwxConfigProblem, verifySiwxHeader } from '../../siwe/siwx.ts';
import { authFailureLimit } from '../auth/auth-failure-limit.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { bazaarOf } from './extensions.ts';
import { setChannelReceipt, setReceipt, settleDepsOf } from './payment-wire.ts';

/**
 * The paid-request workflow's port over one request (src/payments/paid-request/deps.ts): the
 * gateway's pieces it reads, and what it does to the connection, written here the HTTP way (the
 * X-RateLimit-* headers and the 429, the auth-failure limit per client address, the receipt headers).
 * Only reached with pay-per-request on, when top-ups are on too (services.topup is set).
 */
export function paidRequestPort(services: Services, request: FastifyRequest, reply: FastifyReply): PaidRequestDeps {
  const { config } = services;
  return {
    db: services.storage.db,
    topup: services.topup!,
    settle: settleDepsOf(services, request.log),
    config,
    now: services.now,
    log: request.log,
    requestId: request.id,
    body: request.body,
    countRequest: (wallet) => enforceRateLimit(services, reply, `chat:${wallet}`, services.rateWindows.chat),
    siwxOffered: !siwxConfigProblem(config.server.publicUrl, config.siwe),
    // The challenge names the route as clients reach it, under server.publicUrl (a gateway published
    // under a path, behind a proxy that strips it, sees only /v1/…): the signed uri's path is checked
    // against that, the path of the 402's resource URL.
    verifySiwx: (header, path) =>
      authFailureLimit(services).check(
        request,
        () => verifySiwxHeader(header, publishedPath(config.server.publicUrl, path), { siwe: services.siwe, secret: services.keySecret }),
        (result) => !result.ok && result.status === 401,
      ),
    bazaar: (path) => bazaarOf(services, path),
    showReceipt: (payment) => {
      if (payment) setReceipt(reply, payment);
      else reply.removeHeader('payment-response').removeHeader('x-payment-response');
    },
    showChannelReceipt: (receipt) => {
      // A stream's headers are out with its first byte: it keeps the receipt it started with.
      if (reply.raw.headersSent) return;
      if (receipt) setChannelReceipt(reply, receipt);
      else reply.removeHeader('payment-response').removeHeader('x-payment-response');
    },
    stopsBeforeChannelCommit: () => services.failPoints.channelFailure === 'stop-before-commit',
    cutClient: () => reply.raw.destroy(),
  };
}

/** The path of `route` under the public URL, as the 402's resource URL has it (pay-per-request.ts: publicUrl without its trailing slash, then the route). */
export function publishedPath(publicUrl: string, route: string): string {
  return new URL(`${publicUrl.replace(/\/$/, '')}${route}`).pathname;
}
