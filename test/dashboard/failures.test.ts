import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { noChromium } from '../support/browser.ts';
import { connectAndSignIn, startDashboardHarness, type DashboardHarness } from '../support/dashboard-harness.ts';

/**
 * What goes wrong between a person, their wallet and the gateway, shown in words on the page, and
 * never a credit that did not happen (or one that happens twice).
 */
describe('the dashboard when things go wrong', { skip: noChromium }, () => {
  let d: DashboardHarness;
  before(async () => {
    d = await startDashboardHarness('sqlite');
  });
  after(() => d?.stop());

  const topUpButton = (page: Page, usd: string) => page.getByRole('button', { name: `Top up $${usd}` });
  async function startTopUp(page: Page, usd: string) {
    await page.getByLabel('Amount in USD').fill(usd);
    await topUpButton(page, usd).click();
  }
  const status = (page: Page) => page.getByTestId('topup-status');
  const creditedPayments = async (payer: string) =>
    (await d.h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', payer.toLowerCase()).where('status', '=', 'credited').execute())
      .length;

  test('the wallet rejects the sign-in and the payment signature: said in words, nothing paid, and it can be done again', async () => {
    const payer = await d.h.payer(10n);
    const { page, wallet, problems } = await d.open(payer);
    wallet.rejectNext.add('personal_sign');
    await page.getByRole('button', { name: 'Connect Test Wallet' }).click();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByTestId('notice').filter({ hasText: 'You declined the request in your wallet' }).waitFor();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByRole('heading', { name: 'Top up' }).waitFor();

    wallet.rejectNext.add('eth_signTypedData_v4');
    await startTopUp(page, '2');
    await status(page).getByText('You declined the request in your wallet. Nothing was signed or paid.').waitFor();
    assert.equal(await d.h.balance(payer.address), 0);
    await topUpButton(page, '2').click();
    await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
    assert.equal(await d.h.balance(payer.address), 2_000_000);
    assert.deepEqual(problems, []);
    await d.h.gw.assertLedger();
    await page.close();
  });

  test('a wallet on the wrong chain is offered the switch, and cannot pay before it', async () => {
    const payer = await d.h.payer(10n);
    const { page, wallet } = await d.open(payer, { startChainId: 1 });
    await page.getByRole('button', { name: 'Connect Test Wallet' }).click();
    await page.getByText('your wallet is on Ethereum').waitFor();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByRole('heading', { name: 'Top up' }).waitFor();
    assert.equal(await page.getByTestId('chain').innerText(), 'Ethereum');
    await page.getByRole('alert').filter({ hasText: 'Your wallet is on Ethereum; USDC is paid on Base Sepolia.' }).waitFor();
    assert.ok(await topUpButton(page, '5').isDisabled(), 'no payment is signed on the wrong chain');

    await page.getByRole('button', { name: 'Switch to Base Sepolia' }).click();
    await page.getByTestId('chain').filter({ hasText: 'Base Sepolia' }).waitFor();
    assert.equal(wallet.chainId, 84532);
    await topUpButton(page, '5').click();
    await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
    assert.equal(await d.h.balance(payer.address), 5_000_000);
    await d.h.gw.assertLedger();
    await page.close();
  });

  test('a payer without the tokens is told so, and nothing is credited', async () => {
    const payer = await d.h.payer(0n);
    const { page } = await d.open(payer);
    await connectAndSignIn(page);
    await startTopUp(page, '5');
    await status(page).getByText('Your wallet does not hold enough USD Coin for this top-up. Nothing was credited.').waitFor({ timeout: 60_000 });
    assert.equal(await d.h.balance(payer.address), 0);
    assert.equal(await creditedPayments(payer.address), 0);
    await d.h.gw.assertLedger();
    await page.close();
  });

  test('the chain RPC down: "try again", nothing credited; the retry resends the same payment and credits it once', async () => {
    const payer = await d.h.payer(10n);
    const { page, wallet } = await d.open(payer);
    await connectAndSignIn(page);
    d.rpc.up = false;
    try {
      await startTopUp(page, '4');
      await status(page)
        .getByText(/did not answer, so nothing was settled or credited\. Try again in a minute/)
        .waitFor({ timeout: 60_000 });
      assert.equal(await d.h.balance(payer.address), 0);
      assert.equal(await creditedPayments(payer.address), 0);
    } finally {
      d.rpc.up = true;
    }
    const signatures = wallet.asked.filter((m) => m === 'eth_signTypedData_v4').length;
    await status(page).getByRole('button', { name: 'Try again' }).click();
    await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
    assert.equal(wallet.asked.filter((m) => m === 'eth_signTypedData_v4').length, signatures, 'the retry sent the payment already signed');
    assert.equal(await d.h.balance(payer.address), 4_000_000);
    assert.equal(await creditedPayments(payer.address), 1);
    await d.h.gw.assertLedger();
    await page.close();
  });

  test('an expired session sends the person back to sign in', async () => {
    const payer = await d.h.payer(1n);
    const { page } = await d.open(payer);
    await connectAndSignIn(page);
    await d.h.gw.services.storage.db
      .updateTable('dashboard_sessions')
      .set({ expires_at: Date.now() - 1 })
      .where('wallet', '=', payer.address.toLowerCase())
      .execute();
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByTestId('notice').filter({ hasText: 'Your session has ended' }).waitFor();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByRole('heading', { name: 'Top up' }).waitFor();
    await page.close();
  });
});
