import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import { getAddress, stringToHex } from 'viem';
import { expectOk, type SiweAction, type SiweInfo } from './api.ts';
import type { Eip1193 } from './wallet.ts';

export interface SiweProof {
  message: string;
  signature: string;
}

/**
 * One SIWE proof for one action, signed with personal_sign: a message for this gateway (domain,
 * uri and chain from GET /v1/auth/siwe) whose statement is the gateway's sentence for the action,
 * so the wallet shows in words what the signature allows, and the gateway accepts it for that alone.
 */
export async function signProof(provider: Eip1193, address: string, walletChainId: number, action: SiweAction): Promise<SiweProof> {
  const info = await expectOk<SiweInfo>('GET', '/v1/auth/siwe');
  const chainId = info.chain_ids.includes(walletChainId) ? walletChainId : info.chain_ids[0]!;
  const message = createSiweMessage({
    domain: info.domain,
    address: getAddress(address),
    statement: info.statements[action],
    uri: info.uri,
    version: '1',
    chainId,
    nonce: generateSiweNonce(),
    issuedAt: new Date(),
  });
  const signature = (await provider.request({ method: 'personal_sign', params: [stringToHex(message), address] })) as string;
  return { message, signature };
}
