import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { noChromium } from '../support/browser.ts';
import { startDashboardHarness, type DashboardHarness } from '../support/dashboard-harness.ts';

const WIDTHS = [1280, 768, 360] as const;

/**
 * What the page must hold at every width, measured in the browser: nothing sticks out of its card
 * (what lies inside a scrolling box is judged by that box), every cell of every table is in view or
 * its table scrolls with the cue under it, and the header keeps its buttons together.
 */
function layoutProblems(): string[] {
  const problems: string[] = [];
  const name = (el: Element) =>
    `<${el.tagName.toLowerCase()}${el.getAttribute('class') ? ` class="${el.getAttribute('class')}"` : ''}>${(el.textContent ?? '').trim().slice(0, 30)}`;
  const clippedWithin = (el: Element, card: Element) => {
    for (let p = el.parentElement; p && p !== card; p = p.parentElement) if (getComputedStyle(p).overflowX !== 'visible') return true;
    return false;
  };
  for (const card of document.querySelectorAll('.card')) {
    const box = card.getBoundingClientRect();
    for (const el of card.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if ((r.width === 0 && r.height === 0) || clippedWithin(el, card)) continue;
      if (r.right > box.right + 0.5 || r.left < box.left - 0.5)
        problems.push(`${name(el)} spans x ${r.left}-${r.right}, outside its card (${box.left}-${box.right})`);
    }
  }
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    const w = wrap.getBoundingClientRect();
    const scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
    const cue = wrap.nextElementSibling;
    const cued = !!cue?.matches('.scroll-cue') && cue.getBoundingClientRect().height > 0;
    if (scrolls && !cued) problems.push(`${wrap.getAttribute('aria-label')} scrolls sideways with no cue under it`);
    if (scrolls) continue;
    for (const cell of wrap.querySelectorAll('tbody td')) {
      const r = cell.getBoundingClientRect();
      if (r.right > w.right + 0.5 || r.left < w.left - 0.5)
        problems.push(`${wrap.getAttribute('aria-label')}: ${name(cell)} is cut off (x ${r.left}-${r.right} in ${w.left}-${w.right})`);
    }
  }
  const actions = [...document.querySelectorAll('header.top .actions button')].map((b) => b.getBoundingClientRect().top);
  if (new Set(actions.map(Math.round)).size > 1) problems.push(`the header's buttons are on ${new Set(actions.map(Math.round)).size} lines`);
  if (document.documentElement.scrollWidth > window.innerWidth) problems.push(`the page is ${document.documentElement.scrollWidth}px wide`);
  return problems;
}

/**
 * Painted pixels in the first two columns of the chart's canvas. uPlot draws the y axis's labels
 * there, right-aligned against the plot: a label wider than the axis starts left of the canvas and
 * is cut, so its ink reaches the edge; one that fits leaves a margin.
 */
function inkAtLeftEdge(canvas: HTMLCanvasElement): number {
  const pixels = canvas.getContext('2d')?.getImageData(0, 0, 2, canvas.height).data ?? [];
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) painted++;
  return painted;
}

/**
 * The signed-in page with two top-ups (USDC and USDT), two keys, one of which spent, and a new
 * key's secret and snippets open, checked at 1280, 768 and 360 px. The pictures go to the temp folder.
 */
describe('the dashboard layout at 1280, 768 and 360 px', { skip: noChromium }, () => {
  let d: DashboardHarness;
  let page: Page;
  before(async () => {
    d = await startDashboardHarness('sqlite');
    const payer = await d.h.payer(20n);
    ({ page } = await d.open(payer));
    await page.getByRole('button', { name: 'Connect Test Wallet' }).click();
    await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
    for (const [usd, token] of [
      ['5', /USDC/],
      ['3', /USDT/],
    ] as const) {
      await page.getByLabel('Amount in USD').fill(usd);
      await page.getByRole('radio', { name: token }).check();
      await page.getByRole('button', { name: `Top up $${usd}` }).click();
      await page.locator('[data-phase="credited"]').waitFor({ timeout: 60_000 });
    }
    for (const label of ['laptop', 'a rather long label for a phone screen']) {
      await page.getByLabel('Label').fill(label);
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = await page.getByTestId('new-key').innerText();
      if (label === 'laptop') {
        await page.getByRole('button', { name: 'I have saved it' }).click();
        const res = await fetch(`${d.h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }] }),
        });
        assert.equal(res.status, 200);
      }
    }
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByTestId('spend-summary').filter({ hasText: 'over 1 request.' }).waitFor();
  });
  after(async () => {
    await d?.h.gw.assertLedger();
    await d?.stop();
  });

  for (const width of WIDTHS) {
    test(`${width} px: nothing wider than its card, every table column reachable, the y axis's labels whole, chain and token named`, async () => {
      await page.setViewportSize({ width, height: 900 });
      // Two frames: the resize observers measure, then the page renders what they found.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const dir = join(tmpdir(), 'tollgate-screenshots');
      mkdirSync(dir, { recursive: true });
      await page.screenshot({ path: join(dir, `layout-${width}.png`), fullPage: true, animations: 'disabled', caret: 'hide', scale: 'css' });

      // tsx names the checker's inner functions with a helper of its own, which the page lacks.
      await page.evaluate('globalThis.__name = (fn) => fn');
      assert.deepEqual(await page.evaluate(layoutProblems), []);
      assert.equal(await page.getByTestId('chain').innerText(), 'Base Sepolia');
      assert.deepEqual((await page.getByTestId('topup-token').allInnerTexts()).map((t) => t.trim()).sort(), ['USDC', 'USDT']);
      assert.deepEqual(new Set((await page.getByTestId('topup-chain').allInnerTexts()).map((t) => t.trim())), new Set(['Base Sepolia']));
      assert.ok(await page.getByRole('radio', { name: /^USDC on Base Sepolia/ }).isVisible());
      // The legend names every key with its total, not the value under a cursor that is not there.
      const legend = await page.getByTestId('chart-legend').innerText();
      assert.match(legend, /laptop: \$0\.0\d+/);
      assert.match(legend, /a rather long label for a phone screen: no requests/);
      assert.doesNotMatch(legend, /Time|--|—/);
      assert.equal(await page.locator('.chart canvas').evaluate(inkAtLeftEdge), 0, "a y-axis label is cut at the chart's left edge");
      // The new key's curl command is whole, not cut at the edge of its box.
      const snippet = page.locator('.snippets pre');
      assert.ok(await snippet.evaluate((el) => el.scrollWidth <= el.clientWidth), 'the snippet fits its box');
      assert.ok(await page.getByLabel('Have a code?').isVisible());
      assert.match(await page.locator('#code-why').innerText(), /redeem code[\s\S]*adds its value to your balance[\s\S]*referral code/);
    });
  }
});
