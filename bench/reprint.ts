/*
 * Prints the report of a results file again, with the target lines of this checkout (a target
 * added since the run prints from what the run measured, or "–" where it did not measure it):
 * node --import tsx bench/reprint.ts bench/results/latest.json
 */
import { readFileSync } from 'node:fs';
import { reportText, type Report } from './report.ts';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node --import tsx bench/reprint.ts RESULTS.json\n');
  process.exit(2);
}
process.stdout.write(reportText(JSON.parse(readFileSync(file, 'utf8')) as Report));
