import { useState } from 'preact/hooks';
import type { Hex } from 'viem';
import type { Offer } from '../api.ts';
import { usd } from '../format.ts';
import { rejectionText, topUp, type TopupResult, type TopupState } from '../topup.ts';
import { problemText, switchChain, walletErrorText, type Eip1193 } from '../wallet.ts';
import { TxLink } from './TxLink.tsx';

interface Props {
  provider: Eip1193;
  address: Hex;
  chainId: number;
  offers: Offer[];
  minUsd: number;
  maxUsd: number;
  explorers: Map<number, string | null>;
  chainName: (id: number) => string;
  onCredited: () => void;
}

const STATE_TEXT: Record<TopupState['phase'], string> = {
  approving: 'Approve Permit2 in your wallet (one transaction, once per token)…',
  signing: 'Sign the payment in your wallet…',
  settling: 'Settling on chain…',
  pending: 'Sent. Waiting for the chain to confirm; it will be credited then. Do not pay again.',
  credited: 'Credited.',
};

export function TopupPanel({ provider, address, chainId, offers, minUsd, maxUsd, explorers, chainName, onCredited }: Props) {
  const [amount, setAmount] = useState('5');
  const [offerIndex, setOfferIndex] = useState(0);
  const [state, setState] = useState<TopupState | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [retry, setRetry] = useState<null | (() => Promise<TopupResult>)>(null);
  const [busy, setBusy] = useState(false);
  const offer = offers[offerIndex];

  if (!offer)
    return (
      <section class="card" aria-labelledby="topup-title">
        <h2 id="topup-title">Top up</h2>
        <p class="notice">This gateway accepts no payments yet.</p>
      </section>
    );
  const wrongChain = chainId !== offer.chain_id;

  const finish = (result: TopupResult) => {
    setRetry(null);
    if (result.kind === 'credited' || result.kind === 'pending') onCredited();
    if (result.kind === 'rejected') setError(rejectionText(result.reason, offer.name));
    if (result.kind === 'unavailable') {
      setError(
        'The chain or the payment service did not answer, so nothing was settled or credited. Try again in a minute: the same signed payment is sent again, so you cannot pay twice.',
      );
      setRetry(() => result.retry);
    }
  };
  const run = async (work: () => Promise<TopupResult>) => {
    setBusy(true);
    setError(null);
    try {
      finish(await work());
    } catch (err) {
      setState(null);
      setError(problemText(err));
    } finally {
      setBusy(false);
    }
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const value = Number(amount);
    if (!Number.isFinite(value) || value < minUsd || value > maxUsd) {
      setError(`Enter an amount from $${minUsd} to $${maxUsd}.`);
      return;
    }
    setState(null);
    void run(() => topUp(provider, address, value, offer, setState));
  };

  return (
    <section class="card" aria-labelledby="topup-title">
      <h2 id="topup-title">Top up</h2>
      <form onSubmit={submit}>
        <label for="topup-amount">Amount in USD</label>
        <input
          id="topup-amount"
          type="number"
          inputMode="decimal"
          min={minUsd}
          max={maxUsd}
          step="0.01"
          value={amount}
          onInput={(e) => setAmount((e.target as HTMLInputElement).value)}
          required
        />
        <fieldset>
          <legend>Pay with</legend>
          {offers.map((o, i) => (
            <label class="choice" key={`${o.network}-${o.asset}`}>
              <input type="radio" name="offer" checked={i === offerIndex} onChange={() => setOfferIndex(i)} />
              <span>
                {o.symbol} on {chainName(o.chain_id)}{' '}
                <small>({o.transfer_method === 'permit2' ? 'Permit2: one approval, then a signature' : 'a signature, no transaction'})</small>
              </span>
            </label>
          ))}
        </fieldset>
        {wrongChain ? (
          <p class="notice" role="alert">
            Your wallet is on {chainName(chainId)}; {offer.symbol} is paid on {chainName(offer.chain_id)}.{' '}
            <button type="button" onClick={() => switchChain(provider, offer.chain_id).catch((err) => setError(walletErrorText(err)))}>
              Switch to {chainName(offer.chain_id)}
            </button>
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={busy || wrongChain}>
          Top up ${amount || '0'}
        </button>
      </form>
      <div aria-live="polite" class="status" data-testid="topup-status">
        {state ? (
          <p data-phase={state.phase}>
            {state.phase === 'credited' ? `Credited ${usd(state.creditedUsdc)}. New balance ${usd(state.balanceUsdc)}.` : STATE_TEXT[state.phase]}{' '}
            {'transaction' in state && state.transaction ? (
              <>
                Transaction <TxLink hash={state.transaction} chainId={offer.chain_id} explorers={explorers} />
              </>
            ) : null}
          </p>
        ) : null}
        {error ? (
          <p class="error" role="alert">
            {error}
          </p>
        ) : null}
        {retry ? (
          <button type="button" disabled={busy} onClick={() => void run(retry)}>
            Try again
          </button>
        ) : null}
      </div>
    </section>
  );
}
