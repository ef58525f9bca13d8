import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { buildDashboard, dashboardIsStale } from '../../scripts/build-dashboard.mjs';

/** Debian's chromium package; CI installs it (.ci/run). Playwright's own download is not used. */
export const CHROMIUM = '/usr/bin/chromium';

/** A reason to skip the browser tests (the only one: no chromium), or false. */
export const noChromium: string | false = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests`;

let built: Promise<unknown> | undefined;

/** Builds dist/web when it is missing or older than web/ (until `npm run build` does it). */
export function ensureDashboardBuilt(): Promise<unknown> {
  built ??= dashboardIsStale() ? buildDashboard({ quiet: true }) : Promise.resolve();
  return built;
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Headless chromium with a fresh profile, nothing fetched from the network but what a page asks. */
export async function launchBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 860 },
  });
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
