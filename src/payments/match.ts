import { createHash } from 'node:crypto';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { x402ExactPermit2ProxyAddress, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { ApiError } from '../refusal.ts';
import type { DecodedPayment } from './decode.ts';
import type { Offer } from './offers.ts';
import { caipOfV1Network } from './x402-v1.ts';
import type { PaymentPurpose } from '../storage/schema.ts';

export const paymentMismatch = (message: string) => new ApiError(400, 'PAYMENT_MISMATCH', message);

/** Who pays what, taken from the signed authorization: the key under which it is credited once. */
export interface PaymentIdentity {
  network: string;
  chainId: number;
  asset: string;
  payer: string;
  nonce: string;
  method: 'eip3009' | 'permit2';
  payTo: string;
  amountAtomic: string;
  /** Unix seconds after which the authorization cannot be used any more. */
  validBefore: number;
}

export interface MatchedPayment {
  offer: Offer;
  /** A v2 payload whose `accepted` is the server's own requirement, for verify and settle. */
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  identity: PaymentIdentity;
  /** SHA-256 of the signature: tells a replay of this payment from another use of its nonce. */
  digest: string;
  /** What the payment is taken for, recorded with it when it is first seen (default `topup`). */
  purpose?: PaymentPurpose;
  /** A chat payment's request (pay-per-request/request-digest.ts), recorded with it when it is first seen. */
  requestDigest?: string;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * Finds the offer the payment is for and checks every term the payer signed against it. The amount,
 * the recipient and the asset all come from the server's offer for the requested amount.
 */
export function matchPayment(decoded: DecodedPayment, offers: Offer[]): MatchedPayment {
  const offer = offerFor(decoded, offers);
  const req = offer.requirements;
  if (decoded.envelope.x402Version === 2) checkAcceptedTerms((decoded.envelope as PaymentPayload).accepted, req);
  if (offer.config.transferMethod !== decoded.kind) {
    throw paymentMismatch(`${req.asset} on ${req.network} is paid by ${offer.config.transferMethod}, but the payment is a ${decoded.kind} authorization`);
  }
  const identity = decoded.kind === 'eip3009' ? eip3009Terms(decoded.inner, req) : permit2Terms(decoded.inner, req);
  const { maxAmountRequired: _v1Amount, ...accepted } = req;
  return {
    offer,
    // Only the fields checked here reach the facilitator: it picks EIP-3009 or Permit2 by which key
    // the payload has, so a payload carrying both would be recorded as one and settled as the other.
    payload: { x402Version: 2, accepted, payload: decoded.inner },
    requirements: accepted,
    identity: { ...identity, network: req.network, chainId: chainIdOf(req.network), asset: req.asset.toLowerCase(), method: decoded.kind },
    digest: createHash('sha256').update(decoded.inner.signature.toLowerCase()).digest('hex'),
  };
}

/**
 * The offer (network and asset) a payment is for, by what it names, whatever amount it carries:
 * pay-per-request reads the amount the payer signed to decide which price it covers.
 */
export function offerFor(decoded: DecodedPayment, offers: Offer[]): Offer {
  return decoded.envelope.x402Version === 2 ? offerForV2(decoded, offers) : offerForV1(decoded, offers);
}

function offerForV2(decoded: DecodedPayment, offers: Offer[]): Offer {
  const accepted = (decoded.envelope as PaymentPayload).accepted;
  const ofScheme = offers.filter((o) => o.requirements.scheme === accepted.scheme);
  if (ofScheme.length === 0) throw paymentMismatch(`scheme "${accepted.scheme}" is not offered; use "exact"`);
  const offer = ofScheme.find((o) => o.requirements.network === accepted.network && same(o.requirements.asset, accepted.asset));
  if (!offer) {
    const anyOnNetwork = ofScheme.some((o) => o.requirements.network === accepted.network);
    throw paymentMismatch(
      anyOnNetwork
        ? `asset ${accepted.asset} is not offered on ${accepted.network}; pay with an entry of the 402 response's accepts`
        : `network ${accepted.network} is not offered; pay with an entry of the 402 response's accepts`,
    );
  }
  return offer;
}

/** The requirement a v2 client echoes back must be the server's own, amount and recipient included. */
function checkAcceptedTerms(accepted: PaymentPayload['accepted'], req: PaymentRequirements): void {
  if (accepted.amount !== req.amount) {
    throw paymentMismatch(`the payment is for ${accepted.amount} units but this top-up costs ${req.amount}; request a new 402 for the amount you want`);
  }
  if (!same(accepted.payTo, req.payTo)) throw paymentMismatch(`the payment is to ${accepted.payTo}, not to this gateway's payTo ${req.payTo}`);
}

/**
 * v1 payloads name the network (e.g. "base-sepolia") and not the asset: the authorization binds it
 * (EIP-3009: the token's EIP-712 domain; Permit2: the permitted token). An EIP-3009 payment is for
 * the first EIP-3009 offer on its network, the one offer of that network the v1 body lists
 * (payments/x402-v1.ts): signed for any other token, its signature fails verification.
 */
function offerForV1(decoded: DecodedPayment, offers: Offer[]): Offer {
  const { scheme, network } = decoded.envelope as { scheme: string; network: string };
  if (scheme !== 'exact') throw paymentMismatch(`scheme "${scheme}" is not offered; use "exact"`);
  // The stock v1 clients' names first; then the wider list @x402/evm reads v1 payloads with (same ids).
  const wider = Object.hasOwn(EVM_NETWORK_CHAIN_ID_MAP, network) ? EVM_NETWORK_CHAIN_ID_MAP[network as keyof typeof EVM_NETWORK_CHAIN_ID_MAP] : undefined;
  const caip = caipOfV1Network(network) ?? (wider === undefined ? undefined : `eip155:${wider}`);
  if (caip === undefined)
    throw paymentMismatch(`network "${network}" is not an x402 v1 network name this gateway knows; pay with an entry of the 402 response's accepts`);
  const candidates = offers.filter((o) => o.requirements.network === caip && o.config.transferMethod === decoded.kind);
  const offer =
    decoded.kind === 'permit2' ? candidates.find((o) => same(o.requirements.asset, decoded.inner.permit2Authorization.permitted.token)) : candidates[0];
  if (!offer) throw paymentMismatch(`no ${decoded.kind} offer on network ${network}; pay with an entry of the 402 response's accepts`);
  return offer;
}

type Terms = Omit<PaymentIdentity, 'network' | 'chainId' | 'asset' | 'method'>;

function eip3009Terms(inner: Extract<DecodedPayment, { kind: 'eip3009' }>['inner'], req: PaymentRequirements): Terms {
  const a = inner.authorization;
  if (!same(a.to, req.payTo)) throw paymentMismatch(`the authorization pays ${a.to}, not this gateway's payTo ${req.payTo}`);
  if (a.value !== req.amount) throw paymentMismatch(`the authorization is for ${a.value} units but this top-up costs ${req.amount}`);
  return {
    payer: a.from.toLowerCase(),
    nonce: a.nonce.toLowerCase(),
    payTo: req.payTo.toLowerCase(),
    amountAtomic: req.amount,
    validBefore: clampSeconds(a.validBefore),
  };
}

function permit2Terms(inner: Extract<DecodedPayment, { kind: 'permit2' }>['inner'], req: PaymentRequirements): Terms {
  const p = inner.permit2Authorization;
  if (!same(p.permitted.token, req.asset)) throw paymentMismatch(`the permit is for token ${p.permitted.token}, not ${req.asset}`);
  if (p.permitted.amount !== req.amount) {
    throw paymentMismatch(
      req.scheme === 'upto'
        ? `the permit's maximum is ${p.permitted.amount} units but this request's upto offer is exactly ${req.amount}; sign the upto entry of a new 402 as it is`
        : `the permit is for ${p.permitted.amount} units but this top-up costs ${req.amount}`,
    );
  }
  if (!same(p.witness.to, req.payTo)) throw paymentMismatch(`the permit pays ${p.witness.to}, not this gateway's payTo ${req.payTo}`);
  if (req.scheme === 'upto') uptoWitnessTerms(p, req);
  // The x402 exact scheme's Permit2 proxy is the only spender an exact Permit2 payment may name.
  else if (!same(p.spender, x402ExactPermit2ProxyAddress))
    throw paymentMismatch(`the permit's spender must be the x402 exact Permit2 proxy ${x402ExactPermit2ProxyAddress}`);
  else if (p.witness.facilitator !== undefined)
    throw paymentMismatch('an exact Permit2 witness names no facilitator; sign the exact entry of the 402 as it is');
  // Canonical decimal: "05" and "5" are the same Permit2 nonce on chain, so the same payment key.
  return {
    payer: p.from.toLowerCase(),
    nonce: BigInt(p.nonce).toString(),
    payTo: req.payTo.toLowerCase(),
    amountAtomic: req.amount,
    validBefore: clampSeconds(p.deadline),
  };
}

/**
 * An upto permit may only be spent by the x402 upto proxy, and only by the facilitator the offer
 * named (the witness binds it): anyone else could pick the amount up to the maximum.
 */
function uptoWitnessTerms(p: Extract<DecodedPayment, { kind: 'permit2' }>['inner']['permit2Authorization'], req: PaymentRequirements): void {
  if (!same(p.spender, x402UptoPermit2ProxyAddress))
    throw paymentMismatch(`an upto permit's spender must be the x402 upto Permit2 proxy ${x402UptoPermit2ProxyAddress}`);
  const offered = String((req.extra as { facilitatorAddress?: unknown }).facilitatorAddress ?? '');
  if (p.witness.facilitator === undefined || !same(p.witness.facilitator, offered)) {
    throw paymentMismatch(
      `the upto witness names facilitator ${p.witness.facilitator ?? '(none)'}, not ${offered} as the offer does; sign the upto entry of the 402 as it is`,
    );
  }
}

export function chainIdOf(network: string): number {
  return Number(network.slice('eip155:'.length));
}

/** uint256 deadlines beyond what a JS number holds mean "no practical expiry". */
function clampSeconds(text: string): number {
  const v = BigInt(text);
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
}
