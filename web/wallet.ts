import { privateKeyToAccount } from 'viem/accounts';
import type { Hex } from 'viem';

/** An EIP-1193 provider: what every browser wallet (and the test and demo wallets) exposes. */
export interface Eip1193 {
  request(args: { method: string; params?: unknown[] | Record<string, unknown> }): Promise<unknown>;
  on?(event: string, listener: (...args: any[]) => void): void;
  removeListener?(event: string, listener: (...args: any[]) => void): void;
}

export interface WalletChoice {
  id: string;
  name: string;
  icon: string | null;
  provider: Eip1193;
}

/**
 * Finds injected wallets: EIP-6963 announcements (several wallets side by side, each named), and
 * window.ethereum as the fallback for wallets that predate it. Calls `found` for each new one.
 */
export function discoverWallets(found: (w: WalletChoice) => void): () => void {
  const seen = new Set<string>();
  const onAnnounce = (event: Event) => {
    const detail = (event as CustomEvent).detail as { info?: { uuid?: string; name?: string; icon?: string; rdns?: string }; provider?: Eip1193 } | undefined;
    if (!detail?.provider || typeof detail.provider.request !== 'function') return;
    const id = detail.info?.rdns || detail.info?.uuid || `wallet-${seen.size}`;
    if (seen.has(id)) return;
    seen.add(id);
    // Only data: icons are shown (the CSP allows nothing else), and only as an <img> source.
    const icon = typeof detail.info?.icon === 'string' && detail.info.icon.startsWith('data:image/') ? detail.info.icon : null;
    found({ id, name: String(detail.info?.name ?? 'Browser wallet').slice(0, 60), icon, provider: detail.provider });
  };
  window.addEventListener('eip6963:announceProvider', onAnnounce);
  window.dispatchEvent(new Event('eip6963:requestProvider'));
  const legacy = setTimeout(() => {
    const injected = (window as unknown as { ethereum?: Eip1193 }).ethereum;
    if (seen.size === 0 && injected && typeof injected.request === 'function') {
      seen.add('window.ethereum');
      found({ id: 'window.ethereum', name: 'Browser wallet', icon: null, provider: injected });
    }
  }, 300);
  return () => {
    clearTimeout(legacy);
    window.removeEventListener('eip6963:announceProvider', onAnnounce);
  };
}

/** A wallet error in words a person can act on. */
export function walletErrorText(err: unknown): string {
  const e = err as { code?: number; message?: string } | undefined;
  if (e?.code === 4001) return 'You declined the request in your wallet. Nothing was signed or paid.';
  if (e?.code === 4902) return 'Your wallet does not know this chain yet. Add it in the wallet, then try again.';
  if (e?.code === 4100) return 'Your wallet has not authorised this page. Connect again.';
  if (e?.code === -32002) return 'Your wallet already has a request waiting. Open the wallet and answer it.';
  const text = typeof e?.message === 'string' ? e.message : String(err);
  if (/insufficient funds/i.test(text)) return 'Your wallet does not hold enough of the chain’s coin to pay for gas.';
  return `The wallet reported an error: ${text.slice(0, 200)}`;
}

/** Any failure of a wallet or gateway step, in words: wallet codes translated, messages kept. */
export function problemText(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown }; message?: unknown; name?: string } | undefined;
  if (typeof e?.code === 'number') return walletErrorText(err);
  if (typeof e?.cause?.code === 'number') return walletErrorText(e.cause);
  return typeof e?.message === 'string' ? e.message : walletErrorText(err);
}

export async function chainIdOf(provider: Eip1193): Promise<number> {
  return Number(await provider.request({ method: 'eth_chainId' }));
}

const hex = (n: number) => `0x${n.toString(16)}`;

export function switchChain(provider: Eip1193, chainId: number): Promise<unknown> {
  return provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: hex(chainId) }] });
}

/** Waits for a transaction the wallet sent, reading through the wallet (no RPC URL in the page). */
export async function waitForReceipt(provider: Eip1193, hash: string, timeoutMs = 120_000): Promise<{ status: string }> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const receipt = (await provider.request({ method: 'eth_getTransactionReceipt', params: [hash] })) as { status: string } | null;
    if (receipt) return receipt;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error('the transaction was not confirmed in time; check it in your wallet');
}

/**
 * `tollgate demo`'s throw-away wallet as an EIP-1193 provider: it signs in the page with the key
 * the demo gateway hands out (a key of the local chain, worthless anywhere else). It only signs;
 * the demo pays with USDC (EIP-3009), which needs no transaction from the payer.
 */
export function demoWalletProvider(privateKey: Hex, chainId: number): Eip1193 {
  const account = privateKeyToAccount(privateKey);
  return {
    async request({ method, params }) {
      const p = (params ?? []) as unknown[];
      switch (method) {
        case 'eth_requestAccounts':
        case 'eth_accounts':
          return [account.address];
        case 'eth_chainId':
          return hex(chainId);
        case 'wallet_switchEthereumChain':
          if (Number((p[0] as { chainId: string }).chainId) !== chainId) throw { code: 4902, message: 'the demo wallet only knows the demo chain' };
          return null;
        case 'personal_sign':
          return account.signMessage({ message: { raw: p[0] as Hex } });
        case 'eth_signTypedData_v4': {
          const typed = JSON.parse(p[1] as string);
          delete typed.types.EIP712Domain;
          return account.signTypedData(typed);
        }
        default:
          throw { code: 4200, message: `the demo wallet does not support ${method}; pay with USDC` };
      }
    },
  };
}
