import type { Kysely } from 'kysely';

/**
 * Routing (src/routing/): a model may be served by any of its deployments, so each usage row says
 * which one served (`provider/upstreamName`), for the operator's cost and revenue per deployment.
 * Null on rows written before, and on requests no deployment served. Not money itself: the ledger
 * writes it beside the row's figures (src/ledger/effects/usage-row.ts).
 */
export function usageDeployment() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('request_usage').addColumn('deployment', 'text').execute();
    },
  };
}
