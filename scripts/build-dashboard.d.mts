/** Types of scripts/build-dashboard.mjs, for the TypeScript that imports it (the demo, test support). */
export declare const WEB: string;
export declare const OUT: string;
export declare const BUDGET_BYTES: number;
export declare function buildDashboard(opts?: { quiet?: boolean }): Promise<{ sizes: Record<string, number>; total: number }>;
export declare function dashboardIsStale(): boolean;
