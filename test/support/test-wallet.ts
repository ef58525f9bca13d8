import type { Page } from 'playwright-core';
import { createWalletClient, hexToString, http, type Hex, type PrivateKeyAccount } from 'viem';
import type { Anvil } from '../../src/devchain/anvil.ts';
import type { DevChain } from '../../src/devchain/deploy.ts';

/**
 * A browser wallet for tests: an EIP-1193 provider injected into the page and announced through
 * EIP-6963, like MetaMask or Rabby, backed by an anvil account. Signatures are made in Node with
 * viem (through page.exposeFunction), transactions are signed there and sent to anvil, reads are
 * forwarded to anvil. The test steers it: reject the next request of a kind (the user clicking
 * "Reject"), or start on another chain.
 */
export interface TestWallet {
  address: Hex;
  chainId: number;
  /** Methods the user rejects (EIP-1193 error 4001) the next time each is asked for. */
  rejectNext: Set<string>;
  /** Every method the page asked for, in order. */
  asked: string[];
  /** The text of every personal_sign message the wallet showed (and signed), in order. */
  signedTexts: string[];
}

const ICON =
  'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22 viewBox=%220 0 24 24%22%3E%3Ccircle cx=%2212%22 cy=%2212%22 r=%2210%22 fill=%22%23059669%22/%3E%3C/svg%3E';

export async function injectTestWallet(
  page: Page,
  opts: { account: PrivateKeyAccount; anvil: Anvil; chain: DevChain; startChainId?: number; name?: string },
): Promise<TestWallet> {
  const { account, anvil, chain } = opts;
  const wallet: TestWallet = { address: account.address, chainId: opts.startChainId ?? anvil.chainId, rejectNext: new Set(), asked: [], signedTexts: [] };
  const client = createWalletClient({ account, chain: chain.chain, transport: http(anvil.rpcUrl) });
  const known = new Set([anvil.chainId, 1, 8453]);

  await page.exposeFunction('__tollgateTestWallet', async (method: string, paramsJson: string): Promise<string> => {
    wallet.asked.push(method);
    const params = JSON.parse(paramsJson ?? '[]') as any[];
    try {
      if (wallet.rejectNext.delete(method)) return JSON.stringify({ error: { code: 4001, message: 'User rejected the request.' } });
      return JSON.stringify({ result: await answer(method, params) });
    } catch (err) {
      return JSON.stringify({
        error: {
          code: typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -32603,
          message: (err as Error).message.split('\n')[0],
        },
      });
    }
  });

  async function answer(method: string, params: any[]): Promise<unknown> {
    switch (method) {
      case 'eth_requestAccounts':
      case 'eth_accounts':
        return [account.address];
      case 'eth_chainId':
        return `0x${wallet.chainId.toString(16)}`;
      case 'wallet_switchEthereumChain': {
        const target = Number(params[0]?.chainId);
        if (!known.has(target)) throw Object.assign(new Error('Unrecognized chain'), { code: 4902 });
        wallet.chainId = target;
        return null;
      }
      case 'personal_sign':
        wallet.signedTexts.push(hexToString(params[0] as Hex));
        return account.signMessage({ message: { raw: params[0] as Hex } });
      case 'eth_signTypedData_v4': {
        const typed = JSON.parse(params[1]);
        delete typed.types.EIP712Domain;
        if (Number(typed.domain?.chainId) !== wallet.chainId)
          throw new Error(`the typed data is for chain ${typed.domain?.chainId}, the wallet is on ${wallet.chainId}`);
        return account.signTypedData(typed);
      }
      case 'eth_sendTransaction': {
        const tx = params[0] as { to: Hex; data?: Hex; value?: Hex };
        if (wallet.chainId !== anvil.chainId) throw new Error('the wallet is not on the dev chain');
        return client.sendTransaction({ to: tx.to, data: tx.data, value: tx.value ? BigInt(tx.value) : undefined });
      }
      default:
        return anvil.rpc(method, params);
    }
  }

  // The page side: a provider object whose calls go to Node, announced the EIP-6963 way. A string,
  // not a function: tsx's transform would add helper calls the page does not have.
  await page.addInitScript(`(() => {
    const listeners = {};
    const emit = (event, arg) => (listeners[event] || []).forEach((l) => l(arg));
    const provider = {
      async request({ method, params }) {
        const reply = JSON.parse(await window.__tollgateTestWallet(method, JSON.stringify(params || [])));
        if (reply.error) throw reply.error;
        if (method === 'wallet_switchEthereumChain') emit('chainChanged', params[0].chainId);
        return reply.result;
      },
      on(event, l) { (listeners[event] = listeners[event] || []).push(l); },
      removeListener(event, l) { listeners[event] = (listeners[event] || []).filter((x) => x !== l); },
    };
    const info = Object.freeze({ uuid: '5e1d6a3c-0000-4000-8000-000000000001', name: ${JSON.stringify(opts.name ?? 'Test Wallet')}, icon: ${JSON.stringify(ICON)}, rdns: 'dev.tollgate.testwallet' });
    const announce = () => window.dispatchEvent(new CustomEvent('eip6963:announceProvider', { detail: Object.freeze({ info, provider }) }));
    window.addEventListener('eip6963:requestProvider', announce);
    announce();
  })();`);
  return wallet;
}
