import { isErc6492Signature, type Hex, type PublicClient } from 'viem';
import { accountCode } from '../chain/account-code.ts';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../outage.ts';
import { ApiError } from '../refusal.ts';
import { paymentMismatch, type MatchedPayment } from './match.ts';

/**
 * The contract-wallet rule applied to top-ups (see src/siwe/contract-wallet-chain.ts). A payment is
 * credited to the account of its payer's address, and that account is controlled, for a contract
 * wallet, by the contract at the address on the contract-wallet chain. A contract at the same address
 * on another chain may have another owner: crediting its payment would hand the payer's money to
 * whoever signs in for the address. So on any other chain only a key may pay: an address without
 * code (and not about to get some through an ERC-6492 deployment), or an EIP-7702 account.
 */
export type PayerCheck = { ok: true } | { ok: false; reason: string };

export async function checkPayer(m: MatchedPayment, contractWalletChainId: number | null, client: PublicClient): Promise<PayerCheck> {
  const { chainId, payer, network } = m.identity;
  if (chainId === contractWalletChainId) return { ok: true };
  const refused = (what: string): PayerCheck => ({
    ok: false,
    reason:
      contractWalletChainId === null
        ? `the payer ${payer} is ${what} on ${network}, and this gateway accepts contract wallets on no chain; pay from a plain (key) wallet`
        : `the payer ${payer} is ${what} on ${network}, but a contract wallet's account is its contract on eip155:${contractWalletChainId} only; ` +
          `pay from the wallet on eip155:${contractWalletChainId}, or from a plain (key) wallet`,
  });
  if (isErc6492Signature(String(m.payload.payload.signature) as Hex)) return refused('a contract wallet not deployed yet (ERC-6492)');
  const code = await accountCode(client, payer as Hex);
  return code === 'contract' ? refused('a contract wallet') : { ok: true };
}

/** The route's form: a refusal is 400 PAYMENT_MISMATCH, an RPC that does not answer is 503. */
export async function admitPayer(m: MatchedPayment, contractWalletChainId: number | null, client: PublicClient): Promise<void> {
  let check: PayerCheck;
  try {
    check = await checkPayer(m, contractWalletChainId, client);
  } catch {
    throw new ApiError(
      503,
      'FACILITATOR_UNAVAILABLE',
      `the RPC for ${m.identity.network} did not answer; nothing was settled or credited. Send the same payment again in a few seconds (do not sign a new one)`,
      {},
      { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) },
    );
  }
  if (!check.ok) throw paymentMismatch(`${check.reason}; nothing was settled or credited`);
}
