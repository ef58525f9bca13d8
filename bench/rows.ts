/** What a Tollgate row of the report ran on; every target line names it. */
export interface RowCondition {
  engine: 'SQLite' | 'PostgreSQL';
  wallets: number;
  instances: number;
}

const wallets = (n: number) => `${n.toLocaleString('en-US')} wallet${n === 1 ? '' : 's'}`;

/**
 * A row's name in the report, from its condition. One wallet on one instance keeps the name it had
 * before these rows existed ("Tollgate SQLite"), so that older results still line up.
 */
export function rowName(c: RowCondition): string {
  if (c.wallets === 1 && c.instances === 1) return `Tollgate ${c.engine}`;
  return `Tollgate ${c.engine}${c.instances > 1 ? ` ×${c.instances}` : ''}, ${wallets(c.wallets)}`;
}

/** The condition as a target line prints it: "PostgreSQL · 100 wallets · 1 instance". */
export function describeCondition(c: RowCondition): string {
  return `${c.engine} · ${wallets(c.wallets)} · ${c.instances} instance${c.instances === 1 ? '' : 's'}`;
}
