import { chainName } from '../src/chain/known-chains.ts';

/** Micro-USDC (integers) as dollars, exactly: never through a float for the digits shown. */
export function usd(micro: number): string {
  const sign = micro < 0 ? '-' : '';
  const abs = Math.abs(Math.trunc(micro));
  const dollars = Math.floor(abs / 1_000_000).toLocaleString('en-US');
  const cents = String(abs % 1_000_000)
    .padStart(6, '0')
    .replace(/0{1,4}$/, '');
  return `${sign}$${dollars}.${cents.length < 2 ? cents.padEnd(2, '0') : cents}`;
}

export const shortAddress = (a: string) => `${a.slice(0, 6)}…${a.slice(-4)}`;

export const shortDate = (iso: string | null) => (iso ? new Date(iso).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' }) : '—');

/** A transaction's page on the chain's explorer (chains.<id>.explorerUrl), or null when none is configured. */
export function explorerLink(explorers: Map<number, string | null>, chainId: number, hash: string): string | null {
  const base = explorers.get(chainId);
  return base ? `${base.replace(/\/$/, '')}/tx/${hash}` : null;
}

export const chainOf = (network: string) => Number(network.split(':')[1]);

/** A chain's name for people: the gateway's name for it, else the known chains' (the wallet may be on any chain). */
export function chainNamer(chains: { id: number; name: string }[]): (id: number) => string {
  const named = new Map(chains.map((c) => [c.id, c.name]));
  return (id) => chainName(id, named.get(id));
}

/** The symbol of the token a top-up paid with (USDC), from the offer it matched, else its short address. */
export function tokenOf(offers: { network: string; asset: string; symbol: string }[], network: string, asset: string): string {
  const offer = offers.find((o) => o.network === network && o.asset.toLowerCase() === asset.toLowerCase());
  return offer?.symbol ?? `${asset.slice(0, 8)}…`;
}
