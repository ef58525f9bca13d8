import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page, Response } from 'playwright-core';
import { noChromium } from '../support/browser.ts';
import { connectAndSignIn, startDashboardHarness, type DashboardHarness } from '../support/dashboard-harness.ts';
import { call } from '../support/gateway.ts';
import { signInProof } from '../support/siwe.ts';
import type { FundedAccount } from '../../src/devchain/deploy.ts';

/**
 * "Sign out everywhere" (DELETE /v1/auth/sessions with the page's own session): the owner of a
 * wallet ends a session they no longer hold (a tab left open elsewhere, a token seen on a shared
 * screen) from the page. Attackers: the holder of that other session, whose next call must be 401;
 * and nobody else's session may end with it. A failure says in words that the sessions may still
 * be open and what to do.
 */
describe('the dashboard signs out everywhere', { skip: noChromium }, () => {
  let d: DashboardHarness;
  before(async () => {
    d = await startDashboardHarness('sqlite');
  });
  after(() => d?.stop());

  const everywhere = (page: Page) => page.getByRole('button', { name: 'Sign out everywhere' });
  const signInButton = (page: Page) => page.getByRole('button', { name: 'Sign in with your wallet' });
  /** Presses Refresh and answers the status of the wallet-scoped calls it made. */
  async function refreshStatuses(page: Page): Promise<number[]> {
    const seen: Response[] = [];
    const onResponse = (r: Response) => {
      if (/\/v1\/(usage|auth\/keys|topups)/.test(r.url())) seen.push(r);
    };
    page.on('response', onResponse);
    await page.getByRole('button', { name: 'Refresh' }).click();
    // Refresh makes four calls (usage, keys, daily usage, top-ups).
    for (let i = 0; i < 100 && seen.length < 4; i++) await page.waitForTimeout(50);
    page.off('response', onResponse);
    return seen.map((r) => r.status());
  }
  /** A session opened by a program, the way test/sessions does: a SIWE proof for this gateway. */
  async function apiSession(account: FundedAccount): Promise<string> {
    const info = (await call(d.h.gw.url, 'GET', '/v1/auth/siwe')).body;
    const proof = await signInProof(account, { domain: info.domain, uri: info.uri, chainId: info.chain_ids[0], sessionMinutes: 30 });
    const res = await call(d.h.gw.url, 'POST', '/v1/auth/session', proof);
    assert.equal(res.status, 201, res.text);
    return res.body.token;
  }
  const keysStatus = async (token: string) => (await call(d.h.gw.url, 'GET', '/v1/auth/keys', undefined, { authorization: `Bearer ${token}` })).status;

  test("pressed in one tab, it ends the wallet's every session: the other tab's next call is 401 and it shows signed out; another wallet keeps its own", async () => {
    const owner = await d.h.payer(1n);
    const stranger = await d.h.payer(1n);
    const here = await d.open(owner);
    const there = await d.open(owner);
    const elsewhere = await d.open(stranger);
    for (const p of [here, there, elsewhere]) await connectAndSignIn(p.page);
    const script = await apiSession(owner);
    const strangersScript = await apiSession(stranger);
    assert.equal(await keysStatus(script), 200);

    // A real button beside Sign out, in the header.
    const button = here.page.getByTestId('header-actions').getByRole('button', { name: 'Sign out everywhere' });
    assert.equal(await button.evaluate((el) => el.tagName), 'BUTTON');
    await button.click();
    await signInButton(here.page).waitFor();
    assert.match(
      await here.page.getByTestId('signed-out-everywhere').innerText(),
      /Signed out everywhere: 3 sessions of this wallet ended, this one included\./,
    );
    assert.equal(await everywhere(here.page).count(), 0, 'signed out: the button is gone with the session');

    // The other tab still shows the wallet's data until its next call, which is refused.
    assert.ok((await refreshStatuses(there.page)).every((s) => s === 401));
    await there.page.getByTestId('notice').filter({ hasText: 'Your session has ended' }).waitFor();
    await signInButton(there.page).waitFor();
    assert.equal(await there.page.getByRole('heading', { name: 'Top up' }).count(), 0);
    assert.equal(await keysStatus(script), 401, "the program's session of the same wallet ended too");

    // Another wallet's sessions, in the browser and out of it, are untouched.
    assert.deepEqual(await refreshStatuses(elsewhere.page), [200, 200, 200, 200]);
    assert.equal(await elsewhere.page.getByTestId('notice').count(), 0);
    assert.ok(await everywhere(elsewhere.page).isVisible());
    assert.equal(await keysStatus(strangersScript), 200);

    for (const p of [here, there, elsewhere]) assert.deepEqual(p.problems, [], 'no script errors or CSP violations');
    await d.h.gw.assertLedger();
    for (const p of [here, there, elsewhere]) await p.page.close();
  });

  test('a session already ended elsewhere: the page says no other session was ended and how to end them, and shows signed out', async () => {
    const owner = await d.h.payer(1n);
    const here = await d.open(owner);
    const there = await d.open(owner);
    await connectAndSignIn(here.page);
    await connectAndSignIn(there.page);
    await everywhere(there.page).click();
    await signInButton(there.page).waitFor();

    await everywhere(here.page).click();
    await here.page
      .getByTestId('notice')
      .filter({ hasText: 'This session had already ended, so it could not end any other. Sign in again, then press Sign out everywhere.' })
      .waitFor();
    await signInButton(here.page).waitFor();
    // Signing in again (the wallet is still connected) and pressing it works.
    await signInButton(here.page).click();
    await here.page.getByRole('heading', { name: 'Top up' }).waitFor();
    await everywhere(here.page).click();
    await here.page.getByTestId('signed-out-everywhere').filter({ hasText: '1 session of this wallet ended' }).waitFor();
    assert.equal(await here.page.getByTestId('notice').count(), 0);
    await d.h.gw.assertLedger();
    await here.page.close();
    await there.page.close();
  });

  test('the gateway unreachable, or answering 503: said in words, the page stays signed in, and pressing again ends the sessions', async () => {
    const owner = await d.h.payer(1n);
    const here = await d.open(owner);
    await connectAndSignIn(here.page);
    const script = await apiSession(owner);

    await here.page.route('**/v1/auth/sessions', (route) => route.abort('internetdisconnected'));
    await everywhere(here.page).click();
    await here.page
      .getByTestId('notice')
      .filter({ hasText: 'The gateway could not be reached, so your sessions may still be open. Check your connection and press Sign out everywhere again.' })
      .waitFor();
    await here.page.unroute('**/v1/auth/sessions');
    assert.ok(await here.page.getByRole('heading', { name: 'Top up' }).isVisible(), 'still signed in: the session was not ended');
    assert.equal(await keysStatus(script), 200);

    await here.page.route('**/v1/auth/sessions', (route) =>
      route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'UNAVAILABLE', message: 'the database did not answer' }) }),
    );
    await everywhere(here.page).click();
    await here.page
      .getByTestId('notice')
      .filter({ hasText: 'The gateway could not end the sessions (it answered 503), so they may still be open. Press Sign out everywhere again in a minute.' })
      .waitFor();
    await here.page.unroute('**/v1/auth/sessions');
    assert.ok(await here.page.getByRole('heading', { name: 'Top up' }).isVisible());

    // By keyboard, as every control of the page: focus it and press Enter.
    await everywhere(here.page).focus();
    await here.page.keyboard.press('Enter');
    await here.page.getByTestId('signed-out-everywhere').filter({ hasText: '2 sessions of this wallet ended' }).waitFor();
    assert.equal(await here.page.getByTestId('notice').count(), 0, 'the earlier failure is no longer shown');
    assert.equal(await keysStatus(script), 401);
    await d.h.gw.assertLedger();
    await here.page.close();
  });
});
