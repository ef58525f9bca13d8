import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { noChromium } from '../support/browser.ts';
import { startDashboardHarness, type DashboardHarness } from '../support/dashboard-harness.ts';

/**
 * With topup.x402v1Body on, the 402 body is x402 v1 (USDC only, v1 network names): the dashboard
 * reads its offer from the PAYMENT-REQUIRED header (always v2), so USDC and USDT (Permit2) top-ups
 * still work from the page; ledger = chain afterwards.
 */
async function topUp(page: Page, usd: string, token: RegExp) {
  await page.getByLabel('Amount in USD').fill(usd);
  await page.getByRole('radio', { name: token }).check();
  await page.getByRole('button', { name: `Top up $${usd}` }).click();
  await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
}

describe('the dashboard with the x402 v1 402 body on', { skip: noChromium }, () => {
  let d: DashboardHarness;
  before(async () => {
    d = await startDashboardHarness('sqlite', { topup: { x402v1Body: true } });
  });
  after(async () => {
    await d?.h.gw.assertLedger();
    await d?.stop();
  });

  test('tops up USDC and USDT (Permit2) from the v2 header while the body is v1', async () => {
    const body = (await d.h.post({ amount: 2 })).body;
    assert.equal(body.x402Version, 1, 'the body is v1 on this gateway');
    const payer = await d.h.payer(20n);
    const { page, problems } = await d.open(payer);
    await page.getByRole('button', { name: 'Connect Test Wallet' }).click();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByRole('heading', { name: 'Top up' }).waitFor();
    await topUp(page, '2', /USDC/);
    await topUp(page, '3', /USDT/);
    assert.match(await page.getByTestId('topup-status').innerText(), /Credited \$3\.00\. New balance \$5\.00\./);
    assert.equal(await d.h.balance(payer.address), 5_000_000);
    assert.deepEqual(problems, []);
    await d.h.gw.assertLedger();
  });
});
