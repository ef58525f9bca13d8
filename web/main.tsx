import { render } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import type { Hex } from 'viem';
import { ApiFailure, expectOk, type DailyRow, type DashboardConfig, type KeyRow, type Topup, type Usage } from './api.ts';
import { Connect } from './components/Connect.tsx';
import { KeysPanel } from './components/KeysPanel.tsx';
import { SpendingPanel } from './components/SpendingPanel.tsx';
import { TopupPanel } from './components/TopupPanel.tsx';
import { chainNamer, shortAddress } from './format.ts';
import { signProof } from './proof.ts';
import { signIn, signOut, signOutEverywhere, signOutEverywhereProblem, type Session } from './session.ts';
import { chainIdOf, demoWalletProvider, discoverWallets, problemText, switchChain, type WalletChoice } from './wallet.ts';
import 'uplot/dist/uPlot.min.css';
import './style.css';

interface Connected {
  wallet: WalletChoice;
  address: Hex;
  chainId: number;
}

interface Data {
  usage: Usage | null;
  keys: KeyRow[];
  daily: DailyRow[];
  topups: Topup[];
}

const EMPTY: Data = { usage: null, keys: [], daily: [], topups: [] };

function App() {
  const [config, setConfig] = useState<DashboardConfig | null>(null);
  const [models, setModels] = useState<string[]>([]);
  const [wallets, setWallets] = useState<WalletChoice[]>([]);
  const [connected, setConnected] = useState<Connected | null>(null);
  const [session, setSession] = useState<Session | null>(null);
  const [data, setData] = useState<Data>(EMPTY);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  /** How many sessions "Sign out everywhere" ended, shown on the sign-in card it leads to. */
  const [endedEverywhere, setEndedEverywhere] = useState<number | null>(null);

  useEffect(() => {
    expectOk<DashboardConfig>('GET', '/v1/dashboard/config').then(setConfig, (err) => setNotice(problemText(err)));
    expectOk<{ data: { id: string }[] }>('GET', '/v1/models').then(
      (m) => setModels(m.data.map((x) => x.id)),
      () => undefined,
    );
    return discoverWallets((w) => setWallets((all) => [...all, w]));
  }, []);

  const explorers = useMemo(() => new Map((config?.chains ?? []).map((c) => [c.id, c.explorer_url])), [config]);
  const chainName = useMemo(() => chainNamer(config?.chains ?? []), [config]);
  const demo = useMemo<WalletChoice | null>(() => {
    const d = config?.demo_wallet;
    const chain = config?.offers[0]?.chain_id ?? config?.chains[0]?.id;
    return d && chain ? { id: 'demo', name: 'the demo wallet', icon: null, provider: demoWalletProvider(d.private_key, chain) } : null;
  }, [config]);

  // The wallet may switch account or chain at any time: follow it, and drop a session of another account.
  useEffect(() => {
    const provider = connected?.wallet.provider;
    if (!provider?.on) return;
    const onChain = (id: string) => setConnected((c) => (c ? { ...c, chainId: Number(id) } : c));
    const onAccounts = (accounts: string[]) => {
      setConnected((c) => (c && accounts[0] ? { ...c, address: accounts[0] as Hex } : null));
      setSession(null);
      setData(EMPTY);
      setEndedEverywhere(null);
    };
    provider.on('chainChanged', onChain);
    provider.on('accountsChanged', onAccounts);
    return () => {
      provider.removeListener?.('chainChanged', onChain);
      provider.removeListener?.('accountsChanged', onAccounts);
    };
  }, [connected?.wallet]);

  const sessionEnded = useCallback((err: unknown) => {
    if (err instanceof ApiFailure && err.status === 401) {
      setSession(null);
      setData(EMPTY);
      setNotice('Your session has ended (sessions last a short while, and signing out ends them). Sign in again to continue.');
      return true;
    }
    return false;
  }, []);

  const refresh = useCallback(async () => {
    if (!session) return;
    const w = session.wallet;
    const opts = { session: session.token };
    try {
      const [usage, keys, daily, topups] = await Promise.all([
        expectOk<Usage>('GET', `/v1/usage/${w}`, opts),
        expectOk<{ data: KeyRow[] }>('GET', '/v1/auth/keys', opts),
        expectOk<{ data: DailyRow[] }>('GET', `/v1/usage/${w}/daily?days=30`, opts),
        expectOk<{ topups: Topup[] }>('GET', `/v1/topups/${w}`, opts),
      ]);
      setData({ usage, keys: keys.data, daily: daily.data, topups: topups.topups });
    } catch (err) {
      if (!sessionEnded(err)) setNotice(problemText(err));
    }
  }, [session, sessionEnded]);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  // A top-up the gateway answered 202 for is credited by its reconciler later: follow it until then.
  const pending = data.topups.some((t) => t.status === 'pending');
  useEffect(() => {
    if (!pending) return;
    const timer = setTimeout(() => void refresh(), 3000);
    return () => clearTimeout(timer);
  }, [pending, data, refresh]);

  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setNotice(null);
    try {
      await work();
    } catch (err) {
      setNotice(problemText(err));
    } finally {
      setBusy(false);
    }
  };
  const connect = (wallet: WalletChoice) =>
    act(async () => {
      const accounts = (await wallet.provider.request({ method: 'eth_requestAccounts' })) as string[];
      if (!accounts[0]) throw new Error('The wallet shared no account. Unlock it and try again.');
      setConnected({ wallet, address: accounts[0] as Hex, chainId: await chainIdOf(wallet.provider) });
    });
  const doSignIn = () =>
    act(async () => {
      if (!connected || !config) return;
      setSession(await signIn(connected.wallet.provider, connected.address, connected.chainId));
      setEndedEverywhere(null);
    });
  const doSignOut = () => {
    if (session) void signOut(session);
    setSession(null);
    setData(EMPTY);
  };
  // Unlike Sign out, the page leaves the signed-in state only once the gateway confirms (or says this
  // session was already over): a failure keeps the session, so pressing again can still end the others.
  const doSignOutEverywhere = async () => {
    if (!session) return;
    setBusy(true);
    setNotice(null);
    try {
      setEndedEverywhere(await signOutEverywhere(session));
      setSession(null);
      setData(EMPTY);
    } catch (err) {
      setNotice(signOutEverywhereProblem(err));
      if (err instanceof ApiFailure && err.status === 401) {
        setSession(null);
        setData(EMPTY);
      }
    } finally {
      setBusy(false);
    }
  };

  const payChains = [...new Set((config?.offers ?? []).map((o) => o.chain_id))];
  const onPayChain = connected ? payChains.includes(connected.chainId) : false;

  return (
    <>
      <header class="top">
        <h1>Tollgate</h1>
        {connected ? (
          <div class="who">
            <span data-testid="account" title={connected.address} class="mono">
              {shortAddress(connected.address)}
            </span>
            <span data-testid="chain" title={`chain id ${connected.chainId}`}>
              {chainName(connected.chainId)}
            </span>
          </div>
        ) : null}
        {connected && session ? (
          <div class="actions" data-testid="header-actions">
            <button type="button" onClick={() => void refresh()}>
              Refresh
            </button>
            <button type="button" onClick={doSignOut}>
              Sign out
            </button>
            <button type="button" class="wraps" disabled={busy} onClick={() => void doSignOutEverywhere()}>
              Sign out everywhere
            </button>
          </div>
        ) : null}
      </header>
      <main id="main" tabIndex={-1}>
        {notice ? (
          <p class="error" role="alert" data-testid="notice">
            {notice}
          </p>
        ) : null}
        {!connected ? <Connect wallets={wallets} demo={demo} busy={busy} onPick={connect} /> : null}
        {connected && !session ? (
          <section class="card" aria-labelledby="signin-title">
            <h2 id="signin-title">Sign in</h2>
            {endedEverywhere !== null ? (
              <p class="notice" role="status" data-testid="signed-out-everywhere">
                Signed out everywhere: {endedEverywhere} {endedEverywhere === 1 ? 'session' : 'sessions'} of this wallet ended, this one included. Every other
                tab or program that used one must sign in again.
              </p>
            ) : null}
            <p>
              One signature opens a session for {config?.session_minutes ?? 30} minutes, so the page does not ask for one per click. It moves no money, and it
              cannot create a key or loosen one: those ask your wallet again.
            </p>
            {payChains.length && !onPayChain ? (
              <p class="notice">
                Top-ups here are paid on {payChains.map(chainName).join(' or ')}; your wallet is on {chainName(connected.chainId)}.{' '}
                <button type="button" onClick={() => act(() => switchChain(connected.wallet.provider, payChains[0]!).then(() => undefined))}>
                  Switch to {chainName(payChains[0]!)}
                </button>
              </p>
            ) : null}
            <button type="button" class="primary" disabled={busy || !config} onClick={doSignIn}>
              Sign in with your wallet
            </button>
          </section>
        ) : null}
        {connected && session && config ? (
          <div class="grid">
            <TopupPanel
              provider={connected.wallet.provider}
              address={connected.address}
              chainId={connected.chainId}
              offers={config.offers}
              minUsd={config.min_usd}
              maxUsd={config.max_usd}
              explorers={explorers}
              chainName={chainName}
              onCredited={() => void refresh()}
            />
            <SpendingPanel
              usage={data.usage}
              daily={data.daily}
              keys={data.keys}
              topups={data.topups}
              offers={config.offers}
              explorers={explorers}
              chainName={chainName}
            />
            <KeysPanel
              session={session.token}
              keys={data.keys}
              usage={data.usage}
              baseUrl={config.public_url}
              models={models}
              signFor={(action) => signProof(connected.wallet.provider, connected.address, connected.chainId, action)}
              onChange={() => void refresh()}
              onFailure={sessionEnded}
            />
          </div>
        ) : null}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
