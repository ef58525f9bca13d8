import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_CSP, loadDashboardAssets, type Asset } from '../../dashboard/assets.ts';
import type { Services } from '../../services.ts';
import { notFound } from '../../refusal.ts';
import { chainName, tokenSymbol } from '../../chain/known-chains.ts';

/**
 * The throw-away wallet of `tollgate demo`, offered in the page so a person can try the dashboard
 * without configuring a wallet for the local chain. Only the demo passes it (it is not a config
 * key, so no configuration file can turn it on for a real gateway).
 */
export interface DemoWallet {
  address: string;
  privateKey: string;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Tollgate</title>
<p>The dashboard was not built. Run <code>node scripts/build-dashboard.mjs</code> (or <code>npm run build</code>) and restart the gateway.
The API is served as usual: see <a href="/openapi.json">/openapi.json</a> and <a href="/llms.txt">/llms.txt</a>.</p>`;

/** GET / (the page), GET /dashboard/:file (its assets) and GET /v1/dashboard/config. */
export function dashboardRoutes(app: FastifyInstance, services: Services, demoWallet?: DemoWallet): void {
  const assets = loadDashboardAssets();
  if (!assets) services.logger.warn('the dashboard bundle is missing (dist/web); / explains how to build it');
  const { config } = services;
  const pageConfig = {
    public_url: config.server.publicUrl,
    session_minutes: config.dashboard.sessionMinutes,
    chains: Object.entries(config.chains).map(([id, c]) => ({ id: Number(id), name: chainName(Number(id), c.name), explorer_url: c.explorerUrl ?? null })),
    // What the 402 offers would say, known before the first click: the page shows the tokens and
    // chains it can pay with, and offers to switch the wallet to one of them.
    offers: services.topup
      ? config.topup.offers.map((o) => ({
          chain_id: Number(o.network.split(':')[1]),
          network: o.network,
          asset: o.asset,
          transfer_method: o.transferMethod,
          name: o.name,
          decimals: o.decimals,
          symbol: tokenSymbol(o.name),
        }))
      : [],
    min_usd: config.topup.minUsd,
    max_usd: config.topup.maxUsd,
    demo_wallet: demoWallet ? { address: demoWallet.address, private_key: demoWallet.privateKey } : null,
  };

  app.get('/', async (request, reply) => {
    const page = assets?.get('index.html');
    if (!page) return secured(reply).type('text/html; charset=utf-8').send(NOT_BUILT);
    return sendAsset(request.headers['if-none-match'], reply, page);
  });
  app.get<{ Params: { file: string } }>('/dashboard/:file', async (request, reply) => {
    const asset = request.params.file === 'index.html' ? undefined : assets?.get(request.params.file);
    if (!asset) throw notFound(`no dashboard file ${request.params.file.slice(0, 60)}`);
    return sendAsset(request.headers['if-none-match'], reply, asset);
  });
  app.get('/v1/dashboard/config', async () => pageConfig);
}

function sendAsset(ifNoneMatch: string | undefined, reply: FastifyReply, asset: Asset) {
  // Revalidated on every load (the files keep their names across builds), answered 304 when unchanged.
  secured(reply).header('etag', asset.etag).header('cache-control', 'no-cache');
  if (ifNoneMatch === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).send(asset.body);
}

function secured(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', DASHBOARD_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY');
}
