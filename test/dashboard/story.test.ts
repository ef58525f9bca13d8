import { tmpdir } from 'node:os';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { Page } from 'playwright-core';
import { USD } from '../support/topup-harness.ts';
import { noChromium } from '../support/browser.ts';
import { connectAndSignIn, EXPLORER, startDashboardHarness, type DashboardHarness } from '../support/dashboard-harness.ts';
import { ACTIONS } from '../../src/siwe/actions.ts';

/** The statement line of a SIWE message (the words the wallet shows above the fields). */
const statementOf = (message: string) => message.split('\n')[3];

/**
 * The dashboard's story in a real browser, from the page alone: connect a wallet, sign in once, top up
 * 5 USDC, approve Permit2 and top up 3 USDT, create a key (a second signature, for that alone), use it (from the test, like a program
 * would), watch the spend and the chart move, revoke the key; then the ledger against the chain.
 * Screenshots of each screen at desktop and phone width are taken on every run (the page must render
 * at both widths); they replace the README's pictures in docs/screenshots/ only with
 * TOLLGATE_UPDATE_SCREENSHOTS=1, so a test run does not rewrite tracked files.
 */
const SHOTS =
  process.env.TOLLGATE_UPDATE_SCREENSHOTS === '1' ? join(import.meta.dirname, '..', '..', 'docs', 'screenshots') : join(tmpdir(), 'tollgate-screenshots');

async function shot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true, animations: 'disabled', caret: 'hide', scale: 'css' });
}

async function topUp(page: Page, usd: string, token: RegExp) {
  await page.getByLabel('Amount in USD').fill(usd);
  await page.getByRole('radio', { name: token }).check();
  await page.getByRole('button', { name: `Top up $${usd}` }).click();
  await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
}

/** No horizontal scrolling: the page is no wider than the viewport. */
async function assertNoOverflow(page: Page, width: number) {
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(scroll <= width, `the page is ${scroll}px wide at a ${width}px viewport`);
}

describe('the dashboard in a browser', { skip: noChromium }, () => {
  let d: DashboardHarness;
  before(async () => {
    d = await startDashboardHarness('sqlite');
  });
  after(() => d?.stop());

  test('connect, sign in, top up 5 USDC and 3 USDT (Permit2), create a key, spend, watch the chart, revoke; ledger = chain', async () => {
    const payer = await d.h.payer(100n);
    const { page, wallet, problems } = await d.open(payer);
    await page.getByRole('button', { name: 'Connect Test Wallet' }).waitFor();
    await shot(page, 'connect-desktop');

    await connectAndSignIn(page);
    assert.equal(await page.getByTestId('account').getAttribute('title'), payer.address);
    assert.ok(wallet.asked.includes('personal_sign'));

    await topUp(page, '5', /USDC/);
    assert.match(await page.getByTestId('topup-status').innerText(), /Credited \$5\.00\. New balance \$5\.00\./);
    const link = await page.getByTestId('topup-status').getByRole('link').getAttribute('href');
    assert.match(link!, new RegExp(`^${EXPLORER}/tx/0x[0-9a-f]{64}$`));
    assert.ok(!wallet.asked.includes('eth_sendTransaction'), 'USDC needs no transaction from the payer');

    await topUp(page, '3', /USDT/);
    assert.match(await page.getByTestId('topup-status').innerText(), /Credited \$3\.00\. New balance \$8\.00\./);
    assert.equal(wallet.asked.filter((m) => m === 'eth_sendTransaction').length, 1, 'one Permit2 approval');
    await page.getByTestId('balance').filter({ hasText: '$8.00' }).waitFor();
    await shot(page, 'topped-up-desktop');

    // Creating a key asks the wallet again, for that action alone, and the page says why: a key can spend the balance.
    assert.match(await page.getByTestId('create-key-why').innerText(), /second signature, because a key can spend your balance/);
    assert.deepEqual(wallet.signedTexts.map(statementOf), [ACTIONS['sign-in'].statement(30)], 'the sign-in says what a session may do');
    await page.getByLabel('Label').fill('story');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByTestId('new-key').innerText();
    assert.match(key, /^sk-[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(wallet.signedTexts.map(statementOf), [ACTIONS['sign-in'].statement(30), "Create an API key that can spend this wallet's balance."]);
    const snippet = await page.locator('.snippets pre').innerText();
    assert.ok(snippet.includes(`${d.h.gw.url}/v1/chat/completions`) && snippet.includes(key) && snippet.includes('fake/chat-small'), snippet);
    await shot(page, 'new-key-desktop');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    assert.equal(await page.getByTestId('new-key').count(), 0, 'the secret is shown once');

    const answer = await new OpenAI({ baseURL: `${d.h.gw.url}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({
      model: 'fake/chat-small',
      messages: [{ role: 'user', content: 'hello from the story' }],
    });
    assert.ok(answer.choices[0]?.message.content);

    await page.getByRole('button', { name: 'Refresh' }).click();
    const usage = await d.h.gw.services.storage.db.selectFrom('request_usage').select('charged_usdc').executeTakeFirstOrThrow();
    const charged = Number(usage.charged_usdc);
    assert.ok(charged > 0);
    await page.getByTestId('spend-summary').filter({ hasText: 'over 1 request.' }).waitFor();
    // The chart is drawn a frame after the summary it shares a render with: wait for it, then count.
    await page.locator('.chart canvas').first().waitFor();
    assert.equal(await page.locator('.chart canvas').count(), 1, 'the chart is drawn once');
    assert.match(await page.getByTestId('chart-legend').innerText(), /story: \$0\.0\d+/);
    const row = page.locator('tr[data-key-id]', { hasText: 'story' });
    assert.match(await row.innerText(), /\t1\t/);
    await page.getByRole('radio', { name: 'Tokens' }).check();
    await page.locator('.chart canvas').waitFor();
    await page.getByRole('radio', { name: 'Spend' }).check();
    await shot(page, 'spending-desktop');

    await page.getByRole('button', { name: 'Revoke story' }).click();
    await page.getByRole('button', { name: 'Yes, revoke' }).click();
    await row.filter({ hasText: 'revoked' }).waitFor();
    const after = await fetch(`${d.h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(after.status, 401);

    // On-chain received = credited = balance + charges.
    const received = (await d.h.chain.balanceOf(d.h.chain.usdc, d.h.payTo.address)) + (await d.h.chain.balanceOf(d.h.chain.usdt, d.h.payTo.address));
    assert.equal(received, 8n * USD);
    const balance = await d.h.balance(payer.address);
    assert.equal(balance + charged, 8_000_000);
    await d.h.gw.assertLedger();
    assert.deepEqual(problems, [], 'no script errors or CSP violations');
    await page.close();
  });

  test('at 360 px wide nothing overflows sideways, and every screen is captured at phone width', async () => {
    const payer = await d.h.payer(10n);
    const { page, problems } = await d.open(payer, { width: 360, height: 740 });
    await page.getByRole('button', { name: 'Connect Test Wallet' }).waitFor();
    await assertNoOverflow(page, 360);
    await shot(page, 'connect-phone');
    await connectAndSignIn(page);
    await assertNoOverflow(page, 360);
    await topUp(page, '2', /USDC/);
    await assertNoOverflow(page, 360);
    await shot(page, 'topped-up-phone');
    await page.getByLabel('Label').fill('a rather long label for a phone screen');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByTestId('new-key').waitFor();
    await assertNoOverflow(page, 360);
    await shot(page, 'new-key-phone');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await assertNoOverflow(page, 360);
    await shot(page, 'spending-phone');
    assert.deepEqual(problems, []);
    await d.h.gw.assertLedger();
    await page.close();
  });

  test('everything can be reached and used with the keyboard alone', async () => {
    const payer = await d.h.payer(10n);
    const { page } = await d.open(payer);
    const connect = page.getByRole('button', { name: 'Connect Test Wallet' });
    await connect.waitFor();
    // Tab to a control, then press Enter: what a keyboard user does.
    const press = async (target: ReturnType<Page['getByRole']>) => {
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        if (await target.evaluate((el) => el === document.activeElement)) return page.keyboard.press('Enter');
      }
      assert.fail(`${await target.innerText()} cannot be reached with Tab`);
    };
    await press(connect);
    await press(page.getByRole('button', { name: 'Sign in with your wallet' }));
    await page.getByRole('heading', { name: 'Top up' }).waitFor();

    // Every control of the signed-in page is in the Tab order.
    const controls = await page.locator('button:visible, input:visible, select:visible, a[href]:visible, [tabindex="0"]:visible').count();
    const reached = new Set<string>();
    await page.evaluate(() => {
      let n = 0;
      for (const el of document.querySelectorAll('button, input, select, a[href], [tabindex="0"]')) el.setAttribute('data-kb', String(n++));
    });
    for (let i = 0; i < controls * 2 + 5; i++) {
      await page.keyboard.press('Tab');
      const id = await page.evaluate(() => document.activeElement?.getAttribute('data-kb'));
      if (id) reached.add(id);
    }
    // Radio groups are one Tab stop each (arrows move inside), as in every browser.
    const radios = await page.locator('input[type=radio]:visible').count();
    const radioGroups = await page.evaluate(() => new Set([...document.querySelectorAll('input[type=radio]')].map((r) => (r as HTMLInputElement).name)).size);
    assert.ok(reached.size >= controls - radios + radioGroups, `reached ${reached.size} of ${controls} controls`);

    // And a top-up by keyboard: type the amount, Enter submits the form.
    await page.getByLabel('Amount in USD').focus();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('1');
    await page.keyboard.press('Enter');
    await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
    await d.h.gw.assertLedger();
    await page.close();
  });
});
