import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { DEMO_MODEL, startDemoStack, Teardown, type DemoStack } from '../../src/demo/stack.ts';
import { launchBrowser, noChromium, type Browser } from '../support/browser.ts';

/**
 * `tollgate demo` offers its throw-away wallet in the page, so a person with no wallet configured
 * for the local chain can top up, create a key and watch the chart move from the page alone.
 */
describe('the demo wallet', { skip: noChromium }, () => {
  const teardown = new Teardown();
  let stack: DemoStack;
  let browser: Browser;
  before(async () => {
    stack = await startDemoStack(() => ({ ok: () => undefined }), teardown);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await teardown.run();
  });

  test('tops up, creates a key and shows its spending, with no wallet installed', async () => {
    const page = await browser.context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(`${stack.gateway.url}/`);
    await page.getByText('No browser wallet was found').waitFor();
    await page.getByRole('button', { name: 'Connect the demo wallet' }).click();
    assert.equal(await page.getByTestId('account').getAttribute('title'), stack.wallet.address);
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    await page.getByLabel('Amount in USD').fill('2');
    await page.getByRole('button', { name: 'Top up $2' }).click();
    await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });

    await page.getByLabel('Label').fill('demo');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByTestId('new-key').innerText();
    await new OpenAI({ baseURL: `${stack.gateway.url}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({
      model: DEMO_MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByTestId('spend-summary').filter({ hasText: 'over 1 request.' }).waitFor();
    // The chart is drawn in an effect after the summary's render: wait for it, then count.
    await page.locator('.chart canvas').first().waitFor();
    assert.equal(await page.locator('.chart canvas').count(), 1);
    assert.deepEqual(problems, []);
    assert.deepEqual((await checkLedger(stack.gateway.services.storage.db)).problems, []);
  });
});
