import type { Kysely } from 'kysely';
import type { Hex } from 'viem';
import { accountCode } from '../chain/account-code.ts';
import { isTransportError } from '../chain/rpc-errors.ts';
import type { ChainReaders } from '../chain/readers.ts';
import type { Database } from '../storage/schema.ts';
import { consumeNonce } from './nonce-store.ts';
import { parseSiwe, type SiweFields } from './parse.ts';

// Signature recovery is loaded by the first sign-in, not when the gateway starts (start-up time, idle memory).
let signatures: Promise<typeof import('viem/utils')> | undefined;
const loadSignatures = () => (signatures ??= import('viem/utils'));

export interface SiweRules {
  domains: string[];
  /** Allowed URI origins (scheme://host:port). */
  uris: string[];
  chainIds: number[];
  windowSeconds: number;
  clockSkewSeconds: number;
  /** ERC-6492 factories whose undeployed wallets may sign. */
  allowedFactories: string[];
  /** The only chain where contract-wallet signatures count; null: contract wallets cannot sign in. */
  contractWalletChainId: number | null;
}

export type SiweResult = { ok: true; address: string; statement: string | undefined } | { ok: false; status: 401 | 403 | 503; reason: string };

/**
 * Decides whether the signed statement is one the request accepts (src/siwe/actions.ts): null to
 * accept, or the refusal (403: the proof is the wallet's, but made for another action).
 */
export type StatementCheck = (statement: string | undefined) => string | null;

export const MAX_MESSAGE_BYTES = 4096;
export const MAX_SIGNATURE_CHARS = 2048;

const refuse = (reason: string): SiweResult => ({ ok: false, status: 401, reason });

/**
 * Verifies a Sign-In with Ethereum proof and uses up its nonce. The checks run cheapest first (size,
 * parse, fields, clock, signature) so that junk costs nothing and only a proof that is otherwise valid
 * may touch the RPC or the database. The returned address is lowercase. The statement (the action
 * the proof was made for) is checked after the signature, so a 403 is only said to the wallet's
 * own proofs, and before the nonce, so a proof sent to the wrong endpoint stays usable for its own.
 */
export class SiweVerifier {
  constructor(
    private readonly rules: SiweRules,
    private readonly db: Kysely<Database>,
    private readonly chains: ChainReaders,
    private readonly now: () => number = Date.now,
  ) {}

  async verify(message: unknown, signature: unknown, acceptsStatement: StatementCheck): Promise<SiweResult> {
    if (typeof message !== 'string' || typeof signature !== 'string' || !message || !signature) {
      return refuse('a SIWE proof needs both "message" and "signature"');
    }
    if (Buffer.byteLength(message) > MAX_MESSAGE_BYTES) return refuse(`SIWE message is larger than ${MAX_MESSAGE_BYTES} bytes`);
    if (signature.length > MAX_SIGNATURE_CHARS) return refuse(`SIWE signature is longer than ${MAX_SIGNATURE_CHARS} characters`);
    if (!/^0x[0-9a-fA-F]+$/.test(signature)) return refuse('SIWE signature must be 0x-prefixed hex');

    const parse = await parseSiwe(message);
    if (!parse.ok) return refuse(`SIWE message is not a valid EIP-4361 message (${parse.problem})`);
    const parsed = parse.fields;

    const fieldProblem = this.checkFields(parsed);
    if (fieldProblem) return refuse(fieldProblem);

    const timeProblem = this.checkTimes(parsed);
    if (timeProblem) return refuse(timeProblem);

    const signer = await this.checkSignature(parsed, message, signature as Hex);
    if (signer) return signer;

    const wrongAction = acceptsStatement(parsed.statement);
    if (wrongAction !== null) return { ok: false, status: 403, reason: wrongAction };

    const issuedAt = Date.parse(parsed.issuedAt);
    const keepUntil = Math.max(issuedAt, this.now()) + (this.rules.windowSeconds + this.rules.clockSkewSeconds) * 1000;
    const fresh = await consumeNonce(this.db, parsed.address, parsed.nonce, keepUntil);
    if (!fresh) return refuse('this SIWE message was already used; sign a new message with a fresh nonce for every request');
    return { ok: true, address: parsed.address.toLowerCase(), statement: parsed.statement };
  }

  private checkFields(p: SiweFields): string | null {
    if (!this.rules.domains.includes(p.domain)) {
      return `SIWE domain "${p.domain}" is not accepted here; sign for ${this.rules.domains.join(' or ')}`;
    }
    let origin: string;
    try {
      origin = new URL(p.uri).origin;
    } catch {
      return `SIWE uri "${p.uri}" is not a URL`;
    }
    if (!this.rules.uris.includes(origin)) return `SIWE uri "${p.uri}" is not accepted here; use ${this.rules.uris.join(' or ')}`;
    if (p.version !== '1') return `SIWE version must be 1`;
    if (!this.rules.chainIds.includes(p.chainId)) {
      return `SIWE chain id ${p.chainId} is not accepted here; use one of ${this.rules.chainIds.join(', ')}`;
    }
    if (!/^[A-Za-z0-9]{8,}$/.test(p.nonce)) return 'SIWE nonce must be at least 8 letters or digits';
    return null;
  }

  private checkTimes(p: SiweFields): string | null {
    const now = this.now();
    const issuedAt = Date.parse(p.issuedAt);
    if (Number.isNaN(issuedAt)) return 'SIWE issuedAt is not a valid time';
    if (now - issuedAt > this.rules.windowSeconds * 1000) {
      return `SIWE message was issued more than ${this.rules.windowSeconds} s ago; sign a fresh one`;
    }
    if (issuedAt - now > this.rules.clockSkewSeconds * 1000) return 'SIWE issuedAt is in the future; check the signer clock';
    if (p.expirationTime !== undefined && Date.parse(p.expirationTime) <= now) return 'SIWE message has expired';
    if (p.notBefore !== undefined && Date.parse(p.notBefore) > now) return 'SIWE message is not valid yet (notBefore)';
    return null;
  }

  /**
   * Returns null when the signature is the address's, or the refusal. A key's (ECDSA) signature is
   * accepted with any allowed chain id: the key controls the address on every chain. Anything else
   * (ERC-1271, ERC-6492) is asked only of the contract-wallet chain, because that is the one chain
   * whose contract at the address owns the account (src/siwe/contract-wallet-chain.ts).
   */
  private async checkSignature(p: SiweFields, message: string, signature: Hex): Promise<SiweResult | null> {
    const claimed = p.address.toLowerCase();
    const { isErc6492Signature, parseErc6492Signature, recoverMessageAddress } = await loadSignatures();
    // An EOA signature is checked locally; only when it fails can the address be a contract wallet.
    try {
      const recovered = await recoverMessageAddress({ message, signature });
      if (recovered.toLowerCase() === claimed) return null;
    } catch {
      // Not a 65-byte ECDSA signature: may still be ERC-1271 / ERC-6492.
    }
    const mismatch = refuse('SIWE signature does not match the address in the message');
    const home = this.rules.contractWalletChainId;
    if (home === null) return mismatch;
    if (p.chainId !== home) {
      return refuse(
        `SIWE signature does not match the address as a key signature, and contract wallets sign in only on chain ${home}: ` +
          `sign a new message with Chain ID: ${home}`,
      );
    }

    try {
      const client = this.chains.client(home);
      const code = await accountCode(client, p.address as Hex);
      if (code === 'delegated') {
        // Its delegate may say yes to anything; only the key that set the delegation speaks for it.
        return refuse('SIWE signature does not match the address: an EIP-7702 account signs with its own key, not through its delegate');
      }
      if (code === 'none') {
        if (!isErc6492Signature(signature)) return mismatch;
        const factory = parseErc6492Signature(signature).address?.toLowerCase();
        if (!factory || !this.rules.allowedFactories.map((f) => f.toLowerCase()).includes(factory)) {
          return refuse('SIWE signature is from an undeployed contract wallet whose factory is not allowed here');
        }
      }
      const valid = await client.verifyMessage({ address: p.address as Hex, message, signature });
      return valid ? null : mismatch;
    } catch (err) {
      // Only the RPC's outage is a 503. Anything else thrown here is the signature's own doing (an
      // ERC-6492 or ERC-8010 wrapper that does not decode): a 503 would be neither true nor counted
      // as a failed authentication, so junk proofs could be sent without end, an RPC call each.
      if (!isTransportError(err)) return mismatch;
      return { ok: false, status: 503, reason: `the chain ${home} RPC could not be reached to check a contract-wallet signature; try again shortly` };
    }
  }
}
