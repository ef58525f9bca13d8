import { explorerLink } from '../format.ts';

/** A transaction hash, linked to the explorer when the operator configured one for its chain. */
export function TxLink({ hash, chainId, explorers }: { hash: string; chainId: number; explorers: Map<number, string | null> }) {
  const href = explorerLink(explorers, chainId, hash);
  const text = `${hash.slice(0, 10)}…${hash.slice(-8)}`;
  return href ? (
    <a class="mono" href={href} target="_blank" rel="noopener noreferrer" title={hash}>
      {text}
    </a>
  ) : (
    <span class="mono" title={hash}>
      {text}
    </span>
  );
}
