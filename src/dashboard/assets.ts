import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The dashboard page, built ahead of time by scripts/build-dashboard.mjs into dist/web/ (beside dist/dashboard/, which is this module compiled) and
 * read once at start-up: served from memory, nothing is fetched from a CDN, and no request can
 * name a file outside the bundle (only the names found here are served).
 */
export const DASHBOARD_DIST = fileURLToPath(new URL('../../dist/web/', import.meta.url));

export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** The built files by name (index.html, app.js, …), or null when the bundle was never built. */
export function loadDashboardAssets(dir = DASHBOARD_DIST): Map<string, Asset> | null {
  if (!existsSync(join(dir, 'index.html'))) return null;
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (!type) continue;
    const body = readFileSync(join(dir, name));
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  return assets;
}

/**
 * A strict Content-Security-Policy: scripts and styles only from this origin (no inline script,
 * no CDN), requests only to this gateway (the wallet extension does its own chain calls), images
 * from here or data: URIs (EIP-6963 wallet icons), and the page may not be framed (clickjacking a
 * page that asks for signatures).
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
