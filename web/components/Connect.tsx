import type { WalletChoice } from '../wallet.ts';

export function Connect({
  wallets,
  demo,
  busy,
  onPick,
}: {
  wallets: WalletChoice[];
  demo: WalletChoice | null;
  busy: boolean;
  onPick: (w: WalletChoice) => void;
}) {
  const all = demo ? [...wallets, demo] : wallets;
  return (
    <section class="card" aria-labelledby="connect-title">
      <h2 id="connect-title">Connect a wallet</h2>
      <p>
        Top up your Tollgate balance with stablecoins, create API keys and watch what they spend. You sign in once; nothing is paid without a signature you see
        in your wallet.
      </p>
      {wallets.length === 0 ? <p class="notice">No browser wallet was found. Install MetaMask, Rabby or Coinbase Wallet, then reload this page.</p> : null}
      {all.length === 0 ? null : (
        <ul class="wallets">
          {all.map((w) => (
            <li key={w.id}>
              <button type="button" disabled={busy} onClick={() => onPick(w)}>
                {w.icon ? <img src={w.icon} alt="" width={24} height={24} /> : null}
                <span>Connect {w.name}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      {demo ? (
        <p class="hint">
          The demo wallet is the throw-away key of <code>tollgate demo</code>, holding test USDC on its local chain.
        </p>
      ) : null}
    </section>
  );
}
