import { useState } from 'preact/hooks';
import { expectOk, type KeyRow, type SiweAction, type Usage } from '../api.ts';
import { shortDate, usd } from '../format.ts';
import type { SiweProof } from '../proof.ts';
import { problemText } from '../wallet.ts';
import { CopyButton, Snippets } from './Snippets.tsx';
import { TableWrap } from './TableWrap.tsx';

interface Props {
  session: string;
  keys: KeyRow[];
  usage: Usage | null;
  baseUrl: string;
  models: string[];
  /** Asks the wallet for a proof of one action (creating a key: the session cannot). */
  signFor: (action: SiweAction) => Promise<SiweProof>;
  onChange: () => void;
  onFailure: (err: unknown) => void;
}

/**
 * Create (secret shown once, with snippets), list with per-key usage, revoke after a confirmation.
 * Creating asks the wallet for a signature of its own: a key can spend the balance, so the session
 * may not make one, and a stolen tab cannot either.
 */
export function KeysPanel({ session, keys, usage, baseUrl, models, signFor, onChange, onFailure }: Props) {
  const [label, setLabel] = useState('');
  const [codeKind, setCodeKind] = useState<'none' | 'redeem_code' | 'ref_code'>('none');
  const [code, setCode] = useState('');
  const [created, setCreated] = useState<{ key: string; label: string; credit?: number } | null>(null);
  const [confirming, setConfirming] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const perKey = new Map((usage?.keys ?? []).map((k) => [k.api_key_id, k]));

  // `withSession`: the call rode on the session, so a 401 means it ended; a proof's 401 does not.
  const act = async (work: () => Promise<void>, withSession = true) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (err) {
      setError(problemText(err));
      if (withSession) onFailure(err);
    } finally {
      setBusy(false);
    }
  };
  const create = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      const body: Record<string, string> = { label: label.trim(), ...(await signFor('create-key')) };
      if (codeKind !== 'none' && code.trim()) body[codeKind] = code.trim();
      const res = await expectOk<{ key: string; label: string; redeemed_credit_usdc?: number }>('POST', '/v1/auth/keys', { body });
      setCreated({ key: res.key, label: res.label, credit: res.redeemed_credit_usdc });
      setLabel('');
      setCode('');
      onChange();
    }, false);
  };
  const revoke = (id: number) =>
    void act(async () => {
      await expectOk('DELETE', `/v1/auth/keys/${id}`, { session });
      setConfirming(null);
      onChange();
    });

  return (
    <section class="card wide" aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      <form onSubmit={create} class="row wrap">
        <label class="grow">
          Label <input value={label} maxLength={100} onInput={(e) => setLabel((e.target as HTMLInputElement).value)} placeholder="e.g. laptop" />
        </label>
        <label>
          Have a code?{' '}
          <select value={codeKind} aria-describedby="code-why" onChange={(e) => setCodeKind((e.target as HTMLSelectElement).value as typeof codeKind)}>
            <option value="none">No code</option>
            <option value="redeem_code">Redeem code</option>
            <option value="ref_code">Referral code</option>
          </select>
        </label>
        {codeKind !== 'none' ? (
          <label class="grow">
            {codeKind === 'redeem_code' ? 'Redeem code' : 'Referral code'}{' '}
            <input value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} required />
          </label>
        ) : null}
        <button type="submit" class="primary" disabled={busy}>
          Create key
        </button>
      </form>
      <p class="hint" id="code-why">
        Optional: a redeem code from the gateway's operator adds its value to your balance; a referral code records who sent you here.
      </p>
      <p class="hint" data-testid="create-key-why">
        Creating a key asks your wallet for a second signature, because a key can spend your balance and your sign-in cannot.
      </p>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
      {created ? (
        // biome-ignore lint/a11y/useSemanticElements: a labelled region; swapping the element is a dashboard change, not a lint fix
        <div class="secret" role="region" aria-label="Your new API key">
          <p>
            <strong>Copy your key now: it is shown only once.</strong>
            {created.credit ? ` The code added ${usd(created.credit)} to your balance.` : ''}
          </p>
          <div class="row">
            <code class="mono key" data-testid="new-key">
              {created.key}
            </code>
            <CopyButton text={created.key} label="Copy the API key" />
          </div>
          <Snippets baseUrl={baseUrl} secret={created.key} models={models} />
          <button type="button" onClick={() => setCreated(null)}>
            I have saved it
          </button>
        </div>
      ) : null}
      {keys.length === 0 ? (
        <p>No keys yet.</p>
      ) : (
        <TableWrap label="Your API keys">
          <table class="stack">
            <thead>
              <tr>
                <th>Label</th>
                <th>Key</th>
                <th>Created</th>
                <th>Last used</th>
                <th>Requests</th>
                <th>Spent</th>
                <th>Status</th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => {
                const u = perKey.get(k.id);
                return (
                  <tr key={k.id} data-key-id={k.id}>
                    <td data-label="Label" class="label">
                      {k.label || <em>no label</em>}
                    </td>
                    <td data-label="Key" class="mono">
                      …{k.last4}
                    </td>
                    <td data-label="Created">{shortDate(k.created_at)}</td>
                    <td data-label="Last used">{shortDate(k.last_used_at)}</td>
                    <td data-label="Requests">{u?.request_count ?? 0}</td>
                    <td data-label="Spent">{usd(u?.total_charged_usdc ?? 0)}</td>
                    <td data-label="Status">
                      {k.revoked_at ? (
                        `revoked ${shortDate(k.revoked_at)}`
                      ) : confirming === k.id ? (
                        // biome-ignore lint/a11y/useSemanticElements: an inline group of two buttons in a table cell; a fieldset is a block with a border
                        <span class="confirm" role="group" aria-label={`Confirm revoking ${k.label || 'this key'}`}>
                          Revoke for good?{' '}
                          <button type="button" class="danger" disabled={busy} onClick={() => revoke(k.id)}>
                            Yes, revoke
                          </button>{' '}
                          <button type="button" onClick={() => setConfirming(null)}>
                            Cancel
                          </button>
                        </span>
                      ) : (
                        <button type="button" onClick={() => setConfirming(k.id)} aria-label={`Revoke ${k.label || `key …${k.last4}`}`}>
                          Revoke
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}
