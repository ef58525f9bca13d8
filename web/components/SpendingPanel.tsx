import { useMemo, useState } from 'preact/hooks';
import type { DailyRow, KeyRow, Offer, Topup, Usage } from '../api.ts';
import { chainOf, shortDate, tokenOf, usd } from '../format.ts';
import { Chart, type ChartSeries } from './Chart.tsx';
import { TableWrap } from './TableWrap.tsx';
import { TxLink } from './TxLink.tsx';

const DAY_S = 86_400;

/** Balance, the last 30 days per key (spend or tokens), and the top-up history. */
interface Props {
  usage: Usage | null;
  daily: DailyRow[];
  keys: KeyRow[];
  topups: Topup[];
  offers: Offer[];
  explorers: Map<number, string | null>;
  chainName: (id: number) => string;
}

export function SpendingPanel({ usage, daily, keys, topups, offers, explorers, chainName }: Props) {
  const [measure, setMeasure] = useState<'spend' | 'tokens'>('spend');
  const { days, series, legend, totalSpend, totalRequests } = useMemo(() => chartData(daily, keys, measure), [daily, keys, measure]);
  const unit = useMemo(() => (measure === 'spend' ? (v: number) => usd(Math.round(v * 1e6)) : (v: number) => v.toLocaleString('en-US')), [measure]);
  return (
    <>
      <section class="card" aria-labelledby="balance-title">
        <h2 id="balance-title">Balance</h2>
        <dl class="figures">
          <div>
            <dt>Balance</dt>
            <dd data-testid="balance">{usage ? usd(usage.balance_usdc) : '—'}</dd>
          </div>
          <div>
            <dt>Locked by running requests</dt>
            <dd>{usage ? usd(usage.locked_usdc) : '—'}</dd>
          </div>
          <div>
            <dt>Available</dt>
            <dd data-testid="available">{usage ? usd(usage.available_usdc) : '—'}</dd>
          </div>
        </dl>
      </section>
      <section class="card wide" aria-labelledby="spend-title">
        <div class="row wrap between">
          <h2 id="spend-title">Last 30 days</h2>
          <div role="radiogroup" aria-label="What the chart shows" class="row">
            <label class="choice">
              <input type="radio" name="measure" checked={measure === 'spend'} onChange={() => setMeasure('spend')} /> Spend
            </label>
            <label class="choice">
              <input type="radio" name="measure" checked={measure === 'tokens'} onChange={() => setMeasure('tokens')} /> Tokens
            </label>
          </div>
        </div>
        <p data-testid="spend-summary">
          {usd(totalSpend)} spent over {totalRequests} {totalRequests === 1 ? 'request' : 'requests'}.
        </p>
        {series.length ? (
          <Chart days={days} series={series} legend={legend} unit={unit} />
        ) : (
          <p class="hint">No requests in the last 30 days. Create a key and make a request: it shows up here.</p>
        )}
      </section>
      <section class="card wide" aria-labelledby="history-title">
        <h2 id="history-title">Top-ups</h2>
        {topups.length === 0 ? (
          <p>No top-ups yet.</p>
        ) : (
          <TableWrap label="Your top-ups">
            <table class="stack">
              <thead>
                <tr>
                  <th>Date</th>
                  <th>Amount</th>
                  <th>Token</th>
                  <th>Chain</th>
                  <th>Status</th>
                  <th>Transaction</th>
                </tr>
              </thead>
              <tbody>
                {topups.map((t) => (
                  <tr key={t.id}>
                    <td data-label="Date">{shortDate(t.created_at)}</td>
                    <td data-label="Amount">{usd(t.amount_usdc)}</td>
                    <td data-label="Token" data-testid="topup-token" title={`${t.asset} (${t.transfer_method === 'permit2' ? 'Permit2' : 'EIP-3009'})`}>
                      {tokenOf(offers, t.network, t.asset)}
                    </td>
                    <td data-label="Chain" data-testid="topup-chain">
                      {chainName(chainOf(t.network))}
                    </td>
                    <td data-label="Status">{t.status}</td>
                    <td data-label="Transaction">{t.transaction ? <TxLink hash={t.transaction} chainId={chainOf(t.network)} explorers={explorers} /> : '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
      </section>
    </>
  );
}

/** 30 UTC days ending today, one series per key that spent in them; days without requests are 0. */
function chartData(daily: DailyRow[], keys: KeyRow[], measure: 'spend' | 'tokens') {
  const today = Math.floor(Date.now() / 1000 / DAY_S);
  const days = Array.from({ length: 30 }, (_, i) => (today - 29 + i) * DAY_S);
  const index = new Map(days.map((d, i) => [new Date(d * 1000).toISOString().slice(0, 10), i]));
  const labels = new Map(keys.map((k) => [k.id, k.label || `key …${k.last4}`]));
  const byKey = new Map<number, number[]>();
  let totalSpend = 0;
  let totalRequests = 0;
  for (const row of daily) {
    const i = index.get(row.date);
    if (i === undefined) continue;
    const values = byKey.get(row.api_key_id) ?? byKey.set(row.api_key_id, new Array(30).fill(0)).get(row.api_key_id)!;
    values[i] = values[i]! + (measure === 'spend' ? row.charged_usdc / 1e6 : row.prompt_tokens + row.completion_tokens);
    totalSpend += row.charged_usdc;
    totalRequests += row.requests;
  }
  const series: ChartSeries[] = [...byKey].map(([id, values]) => ({ label: labels.get(id) ?? `key #${id}`, values }));
  // Every key is named under the chart, the ones with no requests in these 30 days too (they draw no line).
  const idle = keys.filter((k) => !byKey.has(k.id)).map((k) => ({ label: labels.get(k.id)!, total: 0 }));
  const legend = [...series.map((s) => ({ label: s.label, total: s.values.reduce((a, b) => a + b, 0) })), ...idle];
  return { days, series, legend, totalSpend, totalRequests };
}
