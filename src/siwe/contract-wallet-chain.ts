/**
 * The identity rule for contract wallets: an account is an address, and a contract wallet's
 * signature proves control of that address only on ONE chain, the contract-wallet chain. The same
 * address can have another controller on another chain (a CREATE deployment, a factory whose address
 * does not commit to the owner, the Wintermute/Optimism Safe), so trusting ERC-1271 on every chain
 * would let whoever owns the address on the weakest chain own the account. Keys (ECDSA, and EIP-7702
 * accounts, which are keys) control their address on every chain and are accepted on any chain.
 *
 * The chain is `siwe.contractWalletChainId`. When it is not set it defaults to the only chain of
 * `siwe.chainIds` that has an RPC in `chains`; with several such chains the choice is the operator's
 * (picking one by list order would silently decide who owns existing accounts), so it is required.
 * With none, contract wallets can neither sign in nor pay.
 */
export type ContractWalletChain = { ok: true; chainId: number | null } | { ok: false; problem: string };

export function resolveContractWalletChain(chainIds: number[], rpcChains: Record<string, unknown>, explicit: number | undefined): ContractWalletChain {
  const withRpc = chainIds.filter((id) => rpcChains[String(id)] !== undefined);
  if (explicit !== undefined) {
    if (!chainIds.includes(explicit)) {
      return {
        ok: false,
        problem: `siwe.contractWalletChainId: ${explicit} is not in siwe.chainIds (${chainIds.join(', ')}); add it there or pick one of them`,
      };
    }
    if (!withRpc.includes(explicit)) {
      return {
        ok: false,
        problem: `siwe.contractWalletChainId: chain ${explicit} needs chains."${explicit}".rpcUrl, which Tollgate uses to check contract-wallet signatures`,
      };
    }
    return { ok: true, chainId: explicit };
  }
  if (withRpc.length > 1) {
    return {
      ok: false,
      problem:
        `siwe.contractWalletChainId: required because siwe.chainIds has an RPC for several chains (${withRpc.join(', ')}); ` +
        "set it to the chain where your users' smart-contract wallets live: a contract wallet signs in and pays only there",
    };
  }
  return { ok: true, chainId: withRpc[0] ?? null };
}
