/** Types of scripts/money-writers.mjs, for the test that runs it. */
export interface MoneyWrite {
  file: string;
  line: number;
  table: string;
  what: string;
}
export declare const MONEY_TABLES: string[];
export declare const ALLOWED: string[];
export declare function moneyWritesIn(file: string, text: string): MoneyWrite[];
export declare function isAllowed(file: string): boolean;
export declare function findMoneyWriters(root?: string): MoneyWrite[];
